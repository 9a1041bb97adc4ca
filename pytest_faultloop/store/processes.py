"""Whether a process of this host still runs: what a lock's or claim's note left by a process
says only while that process lives."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether ``pid`` runs on this host (another user's process counts: it cannot be
    signalled, but it lives)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
