"""Reading and copying stored files as themselves: a symbolic link is refused, never followed.

A session, a frozen corpus or a perturbed copy is meant to be shared (committed, copied to a
teammate): a link inside one that points at a private file (``result.json -> ~/.ssh/id_rsa``)
would carry that file's bytes along, with the permissions of the copy. Every read of a stored
file and every copy of one goes through here; the copy keeps the permission bits of the file
it copies, so a 0600 result stays 0600 wherever it is kept.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from pytest_faultloop.models.errors import FaultloopError


class LinkRefused(FaultloopError):
    """A stored file (or a directory on the way to one) is a symbolic link."""

    WHY = (
        "a symbolic link; stored files are read only as themselves (replace the link with a "
        "copy of what it points to, or remove it)"
    )

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(f"{path}: {self.WHY}")


def refuse_links(path: Path, root: Path) -> None:
    """LinkRefused for the first of ``root``, the directories below it on the way to ``path``
    and ``path`` itself that is a symbolic link (``path`` alone when it is not under
    ``root``); what is above ``root`` (a base directory, a corpus the user named) may be
    reached through links."""
    current = root if path.is_relative_to(root) else path
    for part in ("", *path.relative_to(current).parts):
        current = current / part
        if current.is_symlink():
            raise LinkRefused(current)


def refuse_links_in(tree: Path) -> None:
    """LinkRefused for ``tree`` or the first thing below it that is a symbolic link."""
    if tree.is_symlink():
        raise LinkRefused(tree)
    for directory, dirnames, filenames in os.walk(tree):
        for name in sorted(dirnames + filenames):
            if os.path.islink(os.path.join(directory, name)):
                raise LinkRefused(Path(directory) / name)


def open_nofollow(path: Path) -> int:
    """A read-only descriptor of ``path``; LinkRefused when ``path`` itself is a link, OSError
    as ``os.open`` raises it otherwise."""
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise LinkRefused(Path(path)) from None
        raise


def read_bytes(path: Path) -> bytes:
    """The bytes of the stored file ``path`` (LinkRefused for a link)."""
    fd = open_nofollow(path)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def copy_file(source: Path, target: Path) -> None:
    """Copy the stored file ``source`` to ``target`` (created or replaced), with the source's
    permission bits and times; LinkRefused for a link."""
    fd = open_nofollow(source)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise FaultloopError(
                f"{source}: not a regular file; stored files are plain files (remove it)"
            )
        mode = stat.S_IMODE(info.st_mode)
        target.unlink(missing_ok=True)  # a link left at the target is replaced, not written through
        out_fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(out_fd, "wb") as out:
            while chunk := handle.read(1 << 20):
                out.write(chunk)
            os.fchmod(out.fileno(), mode)
        os.utime(target, ns=(info.st_atime_ns, info.st_mtime_ns))


def copy_tree(source: Path, target: Path) -> None:
    """Copy the stored directory ``source`` to ``target`` (which must not exist), each file as
    :func:`copy_file` copies it; LinkRefused at the first link inside, before anything is
    written."""
    refuse_links_in(source)
    for directory, _, filenames in os.walk(source):
        into = target / Path(directory).relative_to(source)
        into.mkdir(parents=True, exist_ok=False)
        os.chmod(into, stat.S_IMODE(os.stat(directory).st_mode) | stat.S_IWUSR | stat.S_IXUSR)
        for name in filenames:
            copy_file(Path(directory) / name, into / name)
