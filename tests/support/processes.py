"""Finding a job's leftover processes through /proc (no orphan may survive a job)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path


def live_processes_with_env(name: str, value: str) -> list[int]:
    """Pids of live (not zombie) processes whose environment has ``name=value``."""
    needle = f"{name}={value}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (
                needle in (proc / "environ").read_bytes().split(b"\0")
                and (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            ):
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


@contextlib.contextmanager
def reaped(process: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """The process, ended however the test ends: SIGTERM first (a pytest run then cancels its
    jobs), SIGKILL if it is still there after two minutes; its pipes closed."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def foreground_sigint() -> None:
    """For ``preexec_fn``: the child takes SIGINT as a foreground process does, even when the
    test suite itself was started in the background (where a shell leaves SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def events_with(base: Path, proc: subprocess.Popen[str], text: str, count: int = 1) -> Path | None:
    """The events.log of the session under ``base`` (its own record, not the piped output)
    once it holds ``text`` ``count`` times; None when the run ended, or five minutes passed,
    first."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        found = list((base / "fault_injection").glob("2*/events.log"))
        if found and found[0].read_text().count(text) >= count:
            return found[0]
        time.sleep(0.2)
    return None
