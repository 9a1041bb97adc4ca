"""Finding the sessions a test's runs wrote under their base directory."""

from __future__ import annotations

from pathlib import Path

from pytest_faultloop.store.session_dir import sessions_root


def sessions(base: Path) -> list[Path]:
    """The session directories under ``base`` (BASE_EXPERIMENTS_DIR), oldest first."""
    return sorted(p for p in sessions_root(base).glob("2*") if p.is_dir())


def only_session(base: Path) -> Path:
    """The one session the test's run wrote under ``base``; fails naming what is there."""
    found = sessions(base)
    assert len(found) == 1, f"expected one session under {sessions_root(base)}, found {found}"
    return found[0]
