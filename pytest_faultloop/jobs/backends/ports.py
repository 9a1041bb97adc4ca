"""Rendezvous ports leased host-wide, so concurrent jobs (and pytest processes) never share one.

Probing for a free port and closing the probe is a guess: until the job's rank 0 binds it, any
other socket may take it, and on a busy machine gloo's own connections take ephemeral ports all
the time. A lease instead picks a port outside the kernel's ephemeral range (nothing is handed it
implicitly), checks it can be bound, and holds an exclusive lock on
``<tempdir>/pytest-faultloop/ports/<port>.lock`` until the job has ended; every process leasing
on this host, whoever runs it, honours those locks (:mod:`.host_files`: the directory is shared
like the temp directory, a lock file is readable by all, and ``flock`` locks a read-only
descriptor).
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
from pathlib import Path

from pytest_faultloop.jobs.backends.host_files import host_directory, open_shared

LEASE_RANGE = range(20000, 25000)
"""Ports the local backend leases from (the Slurm job script derives its own from 25000 up)."""
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


class PortLease:
    """One leased port; :meth:`release` (or process exit) gives it back."""

    def __init__(self, port: int, lock_fd: int | None) -> None:
        """``lock_fd`` None: a port some earlier process leased (an adopted job's)."""
        self.port = port
        self._lock_fd: int | None = lock_fd

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the lock
            self._lock_fd = None


def lease_port(directory: Path | None = None) -> PortLease:
    """A port on 127.0.0.1 that nothing listens on and no other job on this host holds;
    PermissionError (one line) where the lease directory is closed to this user."""
    directory = directory or lease_directory()
    ephemeral = _ephemeral_range()
    candidates = [p for p in LEASE_RANGE if p not in ephemeral]
    start = random.randrange(len(candidates))
    for port in candidates[start:] + candidates[:start]:
        try:
            fd = open_shared(directory / f"{port}.lock", os.O_RDONLY, 0o444)
        except OSError:  # another user's lock file closed to this one (or a link): not ours
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        if _bindable(port):
            return PortLease(port, fd)
        os.close(fd)
    raise OSError(
        f"no free port in {LEASE_RANGE.start}-{LEASE_RANGE.stop - 1} outside the ephemeral "
        f"range {ephemeral.start}-{ephemeral.stop - 1}: too many jobs on this host"
    )


def lease_directory() -> Path:
    """``<tempdir>/pytest-faultloop/ports``, shared by every user's runs on this host."""
    return host_directory("ports")


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ephemeral_range() -> range:
    try:
        low, high = map(int, EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    return range(low, high + 1)
