"""What every user's runs on one host share: ``<tempdir>/pytest-faultloop/`` (the port leases,
the local backend's job-id counter), usable by all of them as the temp directory itself is.

Its directories are sticky and world-writable (1777, whatever the umask): every user creates
entries, only their owner removes them. Its files are opened without ``O_CREAT`` first and
created with ``O_EXCL`` only where absent: under ``fs.protected_regular`` an ``O_CREAT`` open of
another user's file in such a directory is refused whatever its mode. There is no private
fallback for a directory another user left closed: leases are host-wide so that two users' jobs
never take one port; the run stops with one line naming the directory and the fix instead.
"""

from __future__ import annotations

import os
import pwd
import stat
import tempfile
from pathlib import Path

SHARED_MODE = 0o1777
HOST_DIRECTORY = "pytest-faultloop"


def host_directory(*names: str) -> Path:
    """``<tempdir>/pytest-faultloop[/NAME...]``, each level shared; PermissionError (one line
    naming the directory and the fix) where another user left one closed to this user."""
    path = Path(tempfile.gettempdir())
    for name in (HOST_DIRECTORY, *names):
        path = _shared_directory(path / name)
    return path


def open_shared(path: Path, flags: int, mode: int) -> int:
    """A descriptor of ``path`` opened with ``flags`` (``O_RDONLY`` or ``O_RDWR``; a link is
    refused), created with exactly ``mode`` when absent; PermissionError (one line naming the
    file and the fix) where another user's file is closed to this user."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            pass
        except PermissionError:
            info = os.lstat(path)
            raise PermissionError(_closed(path, info, f"chmod {mode:o} {path}")) from None
        else:
            info = os.fstat(fd)
            if info.st_uid == os.geteuid() and stat.S_IMODE(info.st_mode) != mode:
                os.fchmod(fd, mode)  # one an older version made: opened up by its owner
            return fd
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, mode)
        except FileExistsError:
            continue  # another process made it meanwhile: open that one
        os.fchmod(fd, mode)  # the umask does not decide who may use it
        return fd


def _shared_directory(path: Path) -> Path:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        _make_shared(path)
        info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise PermissionError(
            f"{path}: not a directory (runs on this host share it for their port leases); remove it"
        )
    if stat.S_IMODE(info.st_mode) != SHARED_MODE:
        if info.st_uid == os.geteuid():
            os.chmod(path, SHARED_MODE)  # one an older version made: opened up by its owner
        elif not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(_closed(path, info, f"chmod 1777 {path}"))
    return path


def _make_shared(path: Path) -> None:
    """Make ``path`` a shared directory in one step: made aside, opened up, renamed into place
    (no other process sees it with the umask's mode); another process's, made meanwhile, is
    kept."""
    aside = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    os.chmod(aside, SHARED_MODE)
    try:
        aside.rename(path)
    except OSError:
        aside.rmdir()
        if not os.path.lexists(path):
            raise


def _closed(path: Path, info: os.stat_result, fix: str) -> str:
    try:
        owner = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        owner = f"uid {info.st_uid}"
    ask = owner if owner == "root" else f"{owner} (or root)"
    return (
        f"{path}: owned by {owner} with mode {stat.S_IMODE(info.st_mode):04o} (left by an older "
        f"pytest-faultloop), closed to other users' runs on this host; ask {ask} to run "
        f"'{fix}', or to remove it"
    )
