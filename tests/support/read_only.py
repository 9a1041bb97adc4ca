"""Make a directory tree read-only for a test, also as root (where permission bits stop no
write): a read-only bind mount as root, the write bits removed otherwise."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


def _as_root() -> bool:
    return os.geteuid() == 0


def prepare(path: Path) -> None:
    """Make ``path`` freezable later (as root: bind-mount it on itself); skip the test where
    this machine cannot."""
    path.mkdir(parents=True, exist_ok=True)
    if not _as_root():
        return
    done = subprocess.run(
        ["mount", "--bind", str(path), str(path)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount a directory here: {done.stderr.strip()}")


def freeze(path: Path) -> None:
    """No more writes anywhere under ``path`` (after ``prepare``)."""
    if _as_root():
        subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], check=True)
        return
    for root, dirs, files in os.walk(path):
        for name in files:
            Path(root, name).chmod(0o444)
        for name in dirs:
            Path(root, name).chmod(0o555)
    path.chmod(0o555)


def thaw(path: Path) -> None:
    """Undo ``prepare`` and ``freeze``."""
    if _as_root():
        done = subprocess.run(["umount", str(path)], capture_output=True, check=False)
        if done.returncode != 0:  # still busy: detach it now, so no later test finds it mounted
            subprocess.run(["umount", "--lazy", str(path)], capture_output=True, check=False)
        return
    path.chmod(0o755)
    for root, dirs, files in os.walk(path):
        for name in dirs:
            Path(root, name).chmod(0o755)
        for name in files:
            Path(root, name).chmod(0o644)
