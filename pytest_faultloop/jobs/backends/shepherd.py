"""One node's shepherd for the local backend: ``python -m pytest_faultloop.jobs.backends.shepherd
EXIT_FILE COMMAND...`` runs the node's launcher as its child, and when the launcher ends writes
its exit status to ``EXIT_FILE`` (atomically; negative: the signal that ended it) and exits with
it (``128 + N`` for signal N, as a shell reports it). A pytest run that was killed, or left its jobs running (``--faultloop-keep-jobs``), can
then adopt the job later and still learn how each node ended, as Slurm would report it.

Signals reach the launcher from the backend through the process group they share; the shepherd
itself ignores SIGTERM, SIGINT and SIGHUP so that it outlives its launcher and records it.
Standard library only: it starts in a few milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys


def record(path: str, status: int) -> None:
    """Write ``os.waitstatus_to_exitcode`` of the launcher to ``path`` atomically; when it
    cannot (a full disk), say so on stderr and leave no partial file: an adopting run then
    reports the node's end as unknown."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as out:
            out.write(f"{status}\n")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        print(f"shepherd: cannot record exit status {status} in {path}: {exc}", file=sys.stderr)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(
            "usage: python -m pytest_faultloop.jobs.backends.shepherd EXIT_FILE COMMAND...",
            file=sys.stderr,
        )
        return 2
    exit_file, command = argv[0], argv[1:]
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    try:
        child = subprocess.Popen(command, preexec_fn=_default_signals)  # noqa: PLW1509
    except OSError as exc:
        print(f"shepherd: cannot start {command[0]}: {exc}", file=sys.stderr)
        record(exit_file, 127)
        return 127
    code = child.wait()
    record(exit_file, code)
    return code if code >= 0 else 128 - code  # the shell's form; the record keeps the signal


def _default_signals() -> None:
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
