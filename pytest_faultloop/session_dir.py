"""The seed's session directory: ``fault_injection/<YYYYMMDD_HHMMSS>/`` with the tracking TSV,
one directory per experiment holding ``result.json``, the report and a progress log."""

from __future__ import annotations

import errno
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from filelock import FileLock

from pytest_faultloop.errors import ConfigError, SessionUnwritable
from pytest_faultloop.layout import MISSING_RESULT, ExperimentLayout
from pytest_faultloop.models import (
    Attempt,
    Experiment,
    ExperimentResult,
    Job,
    JobState,
    UnreadableResult,
    read_result_file,
)

TSV_NAME = "experiments.tsv"
TSV_HEADER = "JOB_ID\tFAULT_TYPE\tRANK\tITER\tNODES\tEXPERIMENT_DIR\tTRIAL\n"
"""The seed's six columns, then the trial (1 unless the experiment is repeated)."""
REPORT_NAME = "experiments_report.md"
EVENTS_NAME = "events.log"
MIN_FREE_BYTES = 64 << 20
"""Free space the session's filesystem must have before a job starts: a job that runs out of
space leaves a damaged run (truncated logs, no dumps, no exit status) that is no evidence."""


def sessions_root(base_experiments_dir: Path) -> Path:
    return base_experiments_dir / "fault_injection"


def create_session(base_experiments_dir: Path) -> Path:
    """A new, empty session directory named by the current time (suffixed when taken)."""
    root = sessions_root(base_experiments_dir)
    stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
    try:
        root.mkdir(parents=True, exist_ok=True)
        for attempt in range(1000):
            path = root / (stamp if attempt == 0 else f"{stamp}_{attempt}")
            try:
                path.mkdir()
            except FileExistsError:
                continue
            return path
    except OSError as exc:
        raise ConfigError(unwritable_base(base_experiments_dir, exc)) from None
    raise ConfigError(f"{root}: cannot find a free session directory name for {stamp}")


def unwritable_base(base_experiments_dir: Path, exc: OSError) -> str:
    """The one-line error for a base directory the run cannot write in."""
    return (
        f"BASE_EXPERIMENTS_DIR={base_experiments_dir}: cannot write "
        f"{sessions_root(base_experiments_dir)} ({exc.strerror or exc}); point "
        "BASE_EXPERIMENTS_DIR (--faultloop-base-dir) at a writable directory"
    )


def find_session(base_experiments_dir: Path, given: str) -> Path:
    """``last`` -> the newest session under the base directory; else the directory given."""
    if given == "last":
        root = sessions_root(base_experiments_dir)
        candidates = (
            sorted(
                (p for p in root.glob("[0-9]*_[0-9]*") if (p / TSV_NAME).is_file()),
                key=lambda p: p.name,
            )
            if root.is_dir()
            else []
        )
        if not candidates:
            raise ConfigError(
                f"--faultloop-session last: no session with an {TSV_NAME} under {root}; "
                "run once without --faultloop-session first"
            )
        return candidates[-1]
    path = Path(given).expanduser()
    if not (path / TSV_NAME).is_file():
        raise ConfigError(
            f"--faultloop-session {given}: {path} is not a session directory "
            f"(no {TSV_NAME}); give a directory under .../fault_injection/ or 'last'"
        )
    return path


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` in one step, with the mode a plain write would give it
    (0666 less the umask: teammates on a shared cluster can read what the run wrote)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def current_umask() -> int:
    """The process's umask, read without changing it (``/proc/self/status`` on Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # elsewhere: read by setting it, and put it back at once
    os.umask(mask)
    return mask


def tsv_problems(session: Path) -> list[str]:
    """What is wrong with the TSV as stored (a row cut short, a missing header): it is
    kept as it is, and said."""
    tsv = session / TSV_NAME
    try:
        text = tsv.read_text(errors="replace")
    except FileNotFoundError:
        return [f"{tsv}: missing"]
    lines = text.splitlines()
    header = lines[0].split("\t") if lines else []
    if header[:6] != TSV_HEADER.split("\t")[:6]:
        return [f"{tsv}: line 1 is not the header ({TSV_HEADER.strip()!r})"]
    rows = [(number, row.split("\t")) for number, row in enumerate(lines[1:], start=2) if row]
    return [
        f"{tsv}: line {number} has {len(cells)} columns, the header {len(header)}"
        for number, cells in rows
        if len(cells) != len(header)
    ]


class SessionDir:
    """One session directory shared by every process of the run (xdist workers included).

    A write that fails raises SessionUnwritable after calling ``on_unwritable`` (the run's
    stop: nothing more could be recorded); what was written before stays as it is.
    """

    def __init__(
        self,
        path: Path,
        report_header: str,
        run: str = "",
        on_unwritable: Callable[[], None] = lambda: None,
    ) -> None:
        self.path = path
        self.run = run
        """The pytest run writing through this object (its progress lines carry it)."""
        self._on_unwritable = on_unwritable
        self._lock = FileLock(str(path / ".session.lock"))
        with self._writing(), self._lock:
            tsv = path / TSV_NAME
            if not tsv.exists():
                tsv.write_text(TSV_HEADER)
            report = path / REPORT_NAME
            if not report.exists():
                report.write_text(report_header)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            self._on_unwritable()
            where = Path(exc.filename) if exc.filename else None
            if where is not None and where.is_relative_to(self.path):
                where = where.relative_to(self.path)
            why = f"{where}: {exc.strerror}" if where is not None else exc.strerror or str(exc)
            raise SessionUnwritable(
                f"cannot write the session directory {self.path} ({why}); "
                "the run stops, what it recorded is kept: make the directory writable (or free "
                f"space), then continue with --faultloop-session {self.path}"
            ) from None

    def experiment_dir(self, experiment: Experiment) -> Path:
        return self.path / experiment.dirname

    def prepare(self, experiment: Experiment) -> Path:
        with self._writing():
            return ExperimentLayout(self.experiment_dir(experiment)).create()

    def prepare_job(self, experiment: Experiment) -> Path:
        """The experiment's directory, laid out for a job; the run stops (SessionUnwritable)
        when the session's filesystem is nearly full."""
        with self._writing():
            stat = os.statvfs(self.path)
            free = stat.f_bavail * stat.f_frsize
            if free < MIN_FREE_BYTES:
                raise OSError(
                    errno.ENOSPC,
                    f"{free >> 20} MB free on its filesystem, under the "
                    f"{MIN_FREE_BYTES >> 20} MB a job needs",
                )
        return self.prepare(experiment)

    def set_aside(self, experiment: Experiment, job: Job) -> Path:
        """Move an earlier attempt's files to ``attempts/<JOB_ID>/`` inside the experiment
        directory (kept, never mixed with the next attempt's; a second set-aside of the same
        job id gets its own directory) and lay the directory out anew. An experiment directory
        that is a symbolic link is moved there as the link it is: nothing is written through
        it."""
        layout = ExperimentLayout(self.experiment_dir(experiment))
        with self._writing():
            if layout.root.is_symlink():
                link = layout.root.rename(layout.root.with_name(f".{layout.root.name}.link"))
                layout.root.mkdir()
                moving = {link: layout.root.name}
            else:
                moving = {p: p.name for p in layout.root.iterdir() if p != layout.attempts}
            target = layout.attempts / job.job_id
            suffix = 1
            while target.exists():
                suffix += 1
                target = layout.attempts / f"{job.job_id}.{suffix}"
            target.mkdir(parents=True)
            for path, name in moving.items():
                path.rename(target / name)
        self.prepare_job(experiment)  # for the next attempt's job
        return target

    def set_aside_unreadable(self, experiment: Experiment, unreadable: UnreadableResult) -> Attempt:
        """Keep everything the earlier job left, whose ``result.json`` cannot be read, under
        ``attempts/<JOB_ID>/`` (the job id from its TSV row; ``unreadable-<time>`` when the
        session has none), before the experiment runs again."""
        directory = self.experiment_dir(experiment)
        job_id = self._last_job_id(directory) or time.strftime("unreadable-%Y%m%d-%H%M%S")
        reason = f"its stored result was unreadable ({unreadable.path.name}: {unreadable.why})"
        job = Job(
            job_id=job_id,
            backend="unknown",
            state=JobState.UNKNOWN,
            reason=reason,
            experiment_dir=directory,
        )
        moved = self.set_aside(experiment, job)
        return Attempt(job=job, reason=reason, kind="unreadable_result", moved_to=moved)

    def _last_job_id(self, directory: Path) -> str | None:
        """The job id of the session's last TSV row for ``directory``."""
        with self._writing():
            lines = (self.path / TSV_NAME).read_text().splitlines()[1:]
        ids = [
            c[0]
            for c in (line.split("\t") for line in lines)
            if len(c) > 5 and c[5] == str(directory)
        ]
        return ids[-1] if ids else None

    def record_submission(self, job: Job, experiment: Experiment) -> bool:
        """Append the job's TSV row unless it has one (False then), under the session lock,
        flushed (without the trial column in a session begun before it existed); RANK is the
        exported FAULT_RANK. The run's ledger is its one caller."""
        fault, nodes, rank, iteration = experiment.columns
        if experiment.entry is not None:
            rank = experiment.entry.rank_text
        cells = [job.job_id, fault, rank, iteration, nodes, str(job.experiment_dir)]
        with self._writing(), self._lock:
            tsv = self.path / TSV_NAME
            lines = tsv.read_text().splitlines()
            if any(line.split("\t", 1)[0] == job.job_id for line in lines[1:]):
                return False
            if lines and lines[0].endswith("\tTRIAL"):
                cells.append(str(experiment.trial or 1))
            row = "\t".join(cells) + "\n"
            if lines and not tsv.read_bytes().endswith(b"\n"):
                row = "\n" + row  # a row cut short stays as it was, the new one on its own line
            with tsv.open("a") as handle:
                handle.write(row)
                handle.flush()
                os.fsync(handle.fileno())
        return True

    def write_result(self, result: ExperimentResult) -> None:
        directory = self.experiment_dir(result.experiment)
        with self._writing():
            directory.mkdir(parents=True, exist_ok=True)
            write_atomic(ExperimentLayout(directory).result, result.model_dump_json(indent=2))

    def read_result(self, experiment: Experiment) -> ExperimentResult | None:
        """The experiment's stored result, None when it has none; raises UnreadableResult
        when one is stored but cannot be used, or is missing beside the files a job left
        (those files are then still all there)."""
        layout = ExperimentLayout(self.experiment_dir(experiment))
        try:
            return read_result_file(layout.result)
        except FileNotFoundError:
            if layout.root.is_dir() and layout.holds_job_files():
                raise UnreadableResult(layout.result, MISSING_RESULT) from None
            return None

    def append_report_row(self, row: str) -> None:
        with self._writing(), self._lock, (self.path / REPORT_NAME).open("a") as handle:
            handle.write(row if row.endswith("\n") else row + "\n")

    def event(self, line: str) -> None:
        """One progress line of this run; the controller prints them as they arrive."""
        stamp = time.strftime("%H:%M:%S")
        with self._writing(), self._lock, (self.path / EVENTS_NAME).open("a") as handle:
            handle.write(json.dumps({"t": stamp, "run": self.run, "line": line}) + "\n")
