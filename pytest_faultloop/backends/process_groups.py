"""The local backend's launchers and their process groups.

Each launcher leads its own session, so its PID is its group's id. PIDs wrap within a pool run,
so a group id is signalled only while its launcher is still unreaped: an exited launcher is
watched through a pidfd and stays a zombie (holding its PID and group id) until its group is
empty; it is reaped last, under the lock every signal is sent under.
"""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from pytest_faultloop.backends.ports import PortLease
from pytest_faultloop.models import Job, JobState


@dataclass
class Launcher:
    """One node's launcher; it leads its own session, so its PID is its group's id."""

    process: subprocess.Popen[bytes]
    pidfd: int
    """Readable once the launcher has exited, without reaping it."""

    @classmethod
    def start(
        cls, argv: list[str], env: dict[str, str], out: IO[bytes], err: IO[bytes], cwd: Path
    ) -> Launcher:
        process = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            return cls(process, os.pidfd_open(process.pid))
        except OSError:
            process.kill()
            process.wait()
            raise

    def wait_exited(self, timeout: float | None) -> bool:
        """Whether the launcher has exited (within ``timeout`` s); it stays unreaped."""
        ready, _, _ = select.select([self.pidfd], [], [], timeout)
        return bool(ready)


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

    def signal_groups(self, signum: int) -> None:
        with self.owning:
            if not self.reaped:
                for launcher in self.launchers:
                    _signal_group(launcher.process.pid, signum)

    def groups_alive(self) -> bool:
        """Whether any process of the job's groups still runs (never asked after reaping)."""
        with self.owning:
            return not self.reaped and any(
                _group_alive(launcher.process.pid) for launcher in self.launchers
            )

    def reap(self) -> None:
        with self.owning:
            for launcher in self.launchers:
                launcher.process.wait()
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
