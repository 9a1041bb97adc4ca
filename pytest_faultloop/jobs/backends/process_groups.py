"""The local backend's launchers and their process groups.

Each node's launcher runs under a shepherd (:mod:`pytest_faultloop.jobs.backends.shepherd`) that
leads its own session, so the shepherd's PID is its group's id. PIDs wrap within a pool run, so
a group id is signalled only while its shepherd is still unreaped: an exited shepherd is watched
through a pidfd and stays a zombie (holding its PID and group id) until its group is empty; it
is reaped last, under the lock every signal is sent under. A shepherd adopted from an earlier
run is not our child (init reaps it): its group is signalled only while its pidfd says it runs.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from pytest_faultloop.jobs.backends.local_record import NodeRecord, read_exit, start_ticks
from pytest_faultloop.jobs.backends.ports import PortLease
from pytest_faultloop.models import Job, JobState
from pytest_faultloop.models.job import exit_code_text

SHEPHERD = "pytest_faultloop.jobs.backends.shepherd"


@dataclass
class Launcher:
    """One node's launcher under its shepherd, which leads its own session: the shepherd's PID
    is the group's id. ``process`` is None for a launcher adopted from an earlier run."""

    pid: int
    pidfd: int | None
    """Readable once the shepherd has exited, without reaping it; None: it had already ended."""
    exit_file: Path
    """Where the shepherd records how the launcher ended."""
    process: subprocess.Popen[bytes] | None = None

    @classmethod
    def start(
        cls,
        argv: list[str],
        exit_file: Path,
        env: dict[str, str],
        out: IO[bytes],
        err: IO[bytes],
        cwd: Path,
    ) -> Launcher:
        process = subprocess.Popen(
            [argv[0], "-m", SHEPHERD, str(exit_file), *argv],  # the launcher's Python
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            return cls(process.pid, os.pidfd_open(process.pid), exit_file, process)
        except OSError:
            process.kill()
            process.wait()
            raise

    @classmethod
    def adopt(cls, node: NodeRecord) -> Launcher:
        """The recorded shepherd, watched through a pidfd while it is the recorded process."""
        if start_ticks(node.pid) != node.start_ticks:
            return cls(node.pid, None, node.exit_file)
        try:
            pidfd = os.pidfd_open(node.pid)
        except OSError:
            return cls(node.pid, None, node.exit_file)
        if start_ticks(node.pid) != node.start_ticks:  # ended, and the pid was reused, meanwhile
            os.close(pidfd)
            return cls(node.pid, None, node.exit_file)
        return cls(node.pid, pidfd, node.exit_file)

    @property
    def adopted(self) -> bool:
        return self.process is None

    def wait_exited(self, timeout: float | None) -> bool:
        """Whether the shepherd has exited (within ``timeout`` s); a child stays unreaped."""
        if self.pidfd is None:
            return True
        ready, _, _ = select.select([self.pidfd], [], [], timeout)
        return bool(ready)

    def returncode(self) -> int | None:
        """How the launcher ended: its shepherd's record, else the shepherd's own status; None
        for an adopted shepherd that left no record (killed, or it could not write one)."""
        recorded = read_exit(self.exit_file)
        if recorded is not None:
            return recorded
        if self.process is not None and self.process.returncode is not None:
            return self.process.returncode
        return None


@dataclass
class RunningJob:
    job: Job
    launchers: list[Launcher]
    port: PortLease
    """The rendezvous port, held until the job has ended."""
    deadline: float
    """``time.monotonic()`` past which the job times out."""
    streams: list[IO[bytes]]
    stop_reason: JobState | None = None
    """TIMEOUT or CANCELLED once the backend decided to end the job."""
    finished: threading.Event = field(default_factory=threading.Event)
    terminating: threading.Lock = field(default_factory=threading.Lock)
    owning: threading.Lock = field(default_factory=threading.Lock)
    """Held to signal the groups or to reap their leaders: a group id is ours until reaped."""
    reaped: bool = False

    def end_state(self) -> dict[str, object]:
        """The ended job's state, exit code, reason and end time, in the backends' shared
        vocabulary (``models.job``)."""
        end: dict[str, object] = {"ended_at": time.time()}
        if self.stop_reason is not None:
            return end | {"state": self.stop_reason, "exit_code": exit_code_text(-signal.SIGTERM)}
        codes = [launcher.returncode() for launcher in self.launchers]
        if None in codes:
            unknown = [str(node) for node, code in enumerate(codes) if code is None]
            reason = f"node {', '.join(unknown)} ended without a recorded exit status"
            return end | {"state": JobState.UNKNOWN, "reason": reason}
        failed = [code for code in codes if code]
        if not failed:
            return end | {"state": JobState.COMPLETED, "exit_code": exit_code_text(0)}
        return end | {
            "state": JobState.FAILED,
            "exit_code": exit_code_text(failed[0]),
            "reason": f"{len(failed)} of {len(self.launchers)} node launcher(s) failed",
        }

    def close_streams(self) -> None:
        """Close the job's log streams; a full disk may refuse their last flush, and the job
        ends all the same."""
        for stream in self.streams:
            with contextlib.suppress(OSError):
                stream.close()

    def signal_groups(self, signum: int) -> None:
        with self.owning:
            if not self.reaped:
                for launcher in self.launchers:
                    if not launcher.adopted or not launcher.wait_exited(0):
                        _signal_group(launcher.pid, signum)

    def groups_alive(self) -> bool:
        """Whether any process of the job's groups still runs (never asked after reaping)."""
        with self.owning:
            return not self.reaped and any(
                _group_alive(launcher.pid) for launcher in self.launchers
            )

    def reap(self) -> None:
        with self.owning:
            for launcher in self.launchers:
                if launcher.process is not None:
                    launcher.process.wait()
                if launcher.pidfd is not None:
                    os.close(launcher.pidfd)
            self.reaped = True


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (zombies waiting for a reaper do not)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
