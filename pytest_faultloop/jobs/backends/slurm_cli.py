"""Slurm's command-line tools: run them with retries of transient errors, parse their plain text.

Only the stable plain-text interfaces are used (``sbatch --parsable``, ``scontrol show job -o``,
``sacct -n -P``): in Slurm 22.05 ``squeue --json`` ignores filters, ``scontrol`` has no JSON
and ``sacct --json`` misreports exit codes.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pytest_faultloop.models import JobState
from pytest_faultloop.models.errors import FaultloopError

TRANSIENT_ERRORS: tuple[str, ...] = (
    "Socket timed out",
    "Resource temporarily unavailable",
    "Unable to contact slurm controller",
    "Connection refused",
    "Connection reset by peer",
    "Zero Bytes were transmitted or received",
    "Transport endpoint is not connected",
    "Communication connection failure",
    "backup controller in standby mode",
    "Slurmctld is restarting",
    "timed out after",
)
"""Substrings of error messages that mean "try again": the controller is busy or restarting."""

AMBIGUOUS_SUBMIT_ERRORS: tuple[str, ...] = (
    "Socket timed out",
    "Zero Bytes were transmitted or received",
    "Connection reset by peer",
    "timed out after",
)
"""Transient sbatch errors after which the job may exist anyway (the reply, not the request,
was lost): look for it before submitting again."""

T = TypeVar("T")

INVALID_JOB_ID = "Invalid job id specified"
ACCOUNTING_DISABLED = "accounting storage is disabled"

_STATE_ALIASES: dict[str, JobState] = {
    "CONFIGURING": JobState.PENDING,
    "REQUEUED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "SPECIAL_EXIT": JobState.PENDING,
    "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "REVOKED": JobState.CANCELLED,
}
"""Slurm states that are not :class:`JobState` members, mapped to what they mean for a run:
still waiting, still holding its nodes, or gone."""


class SlurmCommandError(FaultloopError):
    """A Slurm command failed; ``message`` is the tool's own error text."""

    def __init__(self, command: Sequence[str], returncode: int, message: str) -> None:
        self.command = list(command)
        self.returncode = returncode
        self.message = message
        super().__init__(f"{' '.join(self.command[:2])} failed (exit {returncode}): {message}")

    @property
    def transient(self) -> bool:
        return any(pattern in self.message for pattern in TRANSIENT_ERRORS)

    @property
    def ambiguous_submit(self) -> bool:
        return any(pattern in self.message for pattern in AMBIGUOUS_SUBMIT_ERRORS)


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff for transient errors: ``first_delay_s`` doubling up to ``max_delay_s``, giving up
    once ``deadline_s`` have passed since the first attempt (long enough for a slurmctld restart).
    """

    deadline_s: float = 180.0
    first_delay_s: float = 0.5
    max_delay_s: float = 5.0
    command_timeout_s: float = 60.0

    def delays(self) -> list[float]:
        """The sleeps between attempts, in order, within the deadline."""
        delays: list[float] = []
        delay, total = self.first_delay_s, 0.0
        while total + delay <= self.deadline_s:
            delays.append(delay)
            total += delay
            delay = min(delay * 2, self.max_delay_s)
        return delays


@dataclass(frozen=True)
class JobRecord:
    """What Slurm reports about one job, from whichever source still knew it."""

    state: JobState
    raw_state: str
    """Slurm's own words, e.g. ``CANCELLED by 0``."""
    exit_code: str | None
    reason: str | None
    started_at: float | None
    ended_at: float | None
    source: str
    """``scontrol``, ``sacct`` or ``sacct -c`` (the job-completion file)."""


# --- parsers -------------------------------------------------------------------------------


def parse_state(text: str) -> JobState:
    """Slurm's state word to a :class:`JobState`, by prefix: ``CANCELLED by 0`` and
    ``CANCELLED+`` are CANCELLED; an unknown word is UNKNOWN."""
    word = re.match(r"[A-Z_]*", text.strip().upper())
    name = word.group(0) if word else ""
    if name in JobState.__members__:
        return JobState(name)
    return _STATE_ALIASES.get(name, JobState.UNKNOWN)


def parse_time(text: str) -> float | None:
    """Slurm's local ``YYYY-MM-DDTHH:MM:SS`` to epoch seconds; None for ``Unknown``, ``None``
    or an empty field."""
    try:
        return time.mktime(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def parse_job_id(sbatch_stdout: str) -> str:
    """``sbatch --parsable`` prints ``JOBID`` or ``JOBID;CLUSTER``."""
    line = sbatch_stdout.strip().splitlines()[-1] if sbatch_stdout.strip() else ""
    job_id = line.split(";")[0].strip()
    if not job_id.isdigit():
        raise SlurmCommandError(["sbatch", "--parsable"], 0, f"unexpected output {sbatch_stdout!r}")
    return job_id


def parse_scontrol_job(text: str, job_id: str) -> JobRecord | None:
    """The record of ``job_id`` in ``scontrol show job -o`` output (one line per job)."""
    for line in text.splitlines():
        fields = _scontrol_fields(line)
        if fields.get("JobId") != job_id:
            continue
        raw_state = fields.get("JobState", "")
        reason = fields.get("Reason")
        return JobRecord(
            state=parse_state(raw_state),
            raw_state=raw_state,
            exit_code=fields.get("ExitCode"),
            reason=None if reason in (None, "None") else reason,
            started_at=parse_time(fields.get("StartTime", "")),
            ended_at=parse_time(fields.get("EndTime", "")),
            source="scontrol",
        )
    return None


def parse_sacct_rows(text: str, job_id: str, source: str) -> JobRecord | None:
    """The allocation row of ``job_id`` in ``sacct -n -P -o JobID,State,ExitCode,Start,End``
    output; the last one when the id repeats (a cluster whose job ids started over)."""
    record = None
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 5 or parts[0] != job_id:
            continue
        record = JobRecord(
            state=parse_state(parts[1]),
            raw_state=parts[1],
            exit_code=parts[2] or None,
            reason=None,
            started_at=parse_time(parts[3]),
            ended_at=parse_time(parts[4]),
            source=source,
        )
    return record


def _scontrol_fields(line: str) -> dict[str, str]:
    """``Key=Value`` pairs of a one-line scontrol record (values never contain spaces, except
    in free-text fields that come after the ones read here)."""
    fields: dict[str, str] = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep and key not in fields:
            fields[key] = value
    return fields


# --- commands ------------------------------------------------------------------------------

SACCT_FIELDS = "JobID,State,ExitCode,Start,End"


class SlurmCli:
    """Runs Slurm commands; transient failures are retried per ``retry``. Thread-safe."""

    def __init__(self, retry: RetryPolicy = RetryPolicy()) -> None:
        self.retry = retry

    def run(self, args: Sequence[str], env: Mapping[str, str] | None = None) -> str:
        """Stdout of the command; raises :class:`SlurmCommandError` for a permanent failure or
        once transient ones outlast the retry deadline."""
        return self._retrying(lambda: self.run_once(args, env))

    def run_once(self, args: Sequence[str], env: Mapping[str, str] | None = None) -> str:
        """One attempt, no retries."""
        try:
            done = subprocess.run(
                list(args),
                capture_output=True,
                text=True,
                timeout=self.retry.command_timeout_s,
                env=None if env is None else {**os.environ, **env},
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SlurmCommandError(
                args, -1, f"timed out after {self.retry.command_timeout_s:.0f} s"
            ) from None
        except FileNotFoundError:
            raise SlurmCommandError(
                args, 127, f"{args[0]} not found on PATH: install slurm-client"
            ) from None
        if done.returncode != 0:
            message = done.stderr.strip() or done.stdout.strip() or "no error message"
            raise SlurmCommandError(args, done.returncode, _strip_prefixes(message))
        return done.stdout

    def sbatch(self, args: Sequence[str], env: Mapping[str, str], comment: str) -> str:
        """Submit with ``sbatch --parsable --comment=COMMENT ARGS``; returns the job id.

        ``comment`` must be unique to this submission: after an error that may have lost only
        the reply, the job is looked up by it before submitting again, so a job never runs twice.
        """
        command = ["sbatch", "--parsable", f"--comment={comment}", *args]

        def submitted_anyway(error: SlurmCommandError) -> str | None:
            return self.job_with_comment(comment) if error.ambiguous_submit else None

        return self._retrying(
            lambda: parse_job_id(self.run_once(command, env)), recover=submitted_anyway
        )

    def job_with_comment(self, comment: str) -> str | None:
        """The id of one of our jobs slurmctld knows (active or recently ended) with this
        comment."""
        out = self.run(["squeue", "--me", "-h", "-t", "all", "-o", "%i|%k"])
        for line in out.splitlines():
            job_id, _, job_comment = line.partition("|")
            if job_comment == comment:
                return job_id.strip()
        return None

    def scancel(self, job_id: str) -> None:
        """Ask slurmctld to cancel the job (a no-op for a job that already ended)."""
        self.run(["scancel", job_id])

    def ping(self) -> str | None:
        """None when slurmctld answers, else ``scontrol ping``'s own words."""
        try:
            self.run_once(["scontrol", "ping"])
        except SlurmCommandError as error:
            return error.message.splitlines()[0] if error.message else str(error)
        return None

    def scontrol_job(self, job_id: str) -> JobRecord | None:
        """From slurmctld's memory: active jobs and jobs ended within MinJobAge."""
        try:
            out = self.run(["scontrol", "show", "job", "-o", job_id])
        except SlurmCommandError as error:
            if INVALID_JOB_ID in error.message:
                return None
            raise
        return parse_scontrol_job(out, job_id)

    def sacct_job(self, job_id: str) -> JobRecord | None:
        """From the accounting database; None when the cluster keeps no accounting."""
        args = ["sacct", "-n", "-P", "-X", "-o", SACCT_FIELDS, "-j", job_id]
        try:
            out = self.run(args)
        except SlurmCommandError as error:
            if ACCOUNTING_DISABLED in error.message:
                return None
            raise
        return parse_sacct_rows(out, job_id, "sacct")

    def completion_job(self, job_id: str) -> JobRecord | None:
        """From the job-completion file (``JobCompType=jobcomp/filetxt``): ended jobs only;
        None when the cluster keeps no such file (sacct -c then fails)."""
        try:
            out = self.run(["sacct", "-c", "-n", "-P", "-o", SACCT_FIELDS, "-j", job_id])
        except SlurmCommandError as error:
            if error.transient:
                raise
            return None
        return parse_sacct_rows(out, job_id, "sacct -c")

    def _retrying(
        self,
        attempt: Callable[[], T],
        recover: Callable[[SlurmCommandError], T | None] | None = None,
    ) -> T:
        """``attempt()`` until it succeeds, fails permanently or the retry deadline passes;
        before each retry ``recover(error)`` may supply the result instead."""
        delays = iter(self.retry.delays())
        while True:
            try:
                return attempt()
            except SlurmCommandError as error:
                delay = next(delays, None) if error.transient else None
                if delay is None:
                    raise
                if recover is not None and (result := recover(error)) is not None:
                    return result
                time.sleep(delay)


def _strip_prefixes(message: str) -> str:
    """``sbatch: error: Batch job submission failed: X`` -> the lines without ``sbatch: error:``."""
    lines = [re.sub(r"^\w+: error: ", "", line) for line in message.splitlines()]
    return "; ".join(line for line in lines if line)
