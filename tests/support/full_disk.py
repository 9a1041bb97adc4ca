"""A small filesystem of its own for a test's base directory (a tmpfs, so root only), that
the test can fill up: the real ENOSPC ("No space left on device"), not an imitation."""

from __future__ import annotations

import errno
import os
import subprocess
from pathlib import Path

import pytest

FILLER = ".filler"


def small_filesystem(path: Path, size_mb: int = 64) -> None:
    """Mount a ``size_mb`` tmpfs on ``path``; skip the test where this machine cannot."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")


def fill(path: Path) -> None:
    """Write into ``path`` until its filesystem has no space left."""
    fd = os.open(path / FILLER, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        for size in (1 << 20, 4096, 1):
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    finally:
        os.close(fd)


def release(path: Path) -> None:
    """Unmount what ``small_filesystem`` mounted (its contents go with it)."""
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)
