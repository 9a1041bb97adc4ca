"""Who writes a session: runs that add results share it, a re-analysis has it alone.

A run that adds results (a new session, a continued one) holds a shared claim on the session
for as long as it runs, and a re-analysis an exclusive one: two continues may run side by side
(each experiment has its own lock), but a re-analysis beside any other writer would score the
session with two analyzers at once. The claim is an ``flock`` on ``.session.claim`` in the
session directory, so the kernel drops it with the process that held it — a killed run leaves
no stale claim to clean up. Each holder also leaves a note (``.claim-<host>-<pid>.json``)
so a refusal can say who holds the session, and so that the processes of one run (the xdist
workers of a re-analysis) recognise their own run's exclusive claim.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from pytest_faultloop.models.errors import FaultloopError
from pytest_faultloop.store.processes import alive

CLAIM_FILE = ".session.claim"
NOTE_PREFIX = ".claim-"

Purpose = Literal["run", "re-analysis"]


class SessionInUse(FaultloopError):
    """Another run holds the session in a way that excludes this one."""


class ClaimNote(BaseModel):
    """What a holder says about itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run: str
    purpose: Purpose
    host: str
    pid: int
    since: datetime

    def describe(self) -> str:
        when = self.since.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        return f"a {self.purpose} (pid {self.pid} on {self.host}, since {when})"


class SessionClaim:
    """This process's claim on one session; :meth:`release` gives it back (so does exit)."""

    def __init__(self, session: Path, note: ClaimNote, fd: int | None) -> None:
        self.session = session
        self.note = note
        self._fd = fd
        """None: the claim is the run's own exclusive one, held by another of its processes."""

    @property
    def exclusive(self) -> bool:
        return self.note.purpose == "re-analysis"

    def release(self) -> None:
        if self._fd is None:
            return
        with contextlib.suppress(OSError):  # a session gone read-only keeps a stale note
            _note_path(self.session, self.note.host, self.note.pid).unlink(missing_ok=True)
        os.close(self._fd)  # closing drops the flock
        self._fd = None


def claim_session(session: Path, run: str, purpose: Purpose) -> SessionClaim:
    """Claim ``session`` for ``run``: shared for a ``run``, exclusive for a ``re-analysis``.

    Raises SessionInUse naming the holders when another run's claim excludes this one; a
    process of the same run passes (its controller already holds the run's claim).
    OSError when the session directory cannot be written.
    """
    note = ClaimNote(
        run=run,
        purpose=purpose,
        host=socket.gethostname(),
        pid=os.getpid(),
        since=datetime.now(UTC),
    )
    fd = os.open(session / CLAIM_FILE, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o666)
    # read-only: flock needs no write access, and a descriptor open for writing would keep the
    # session's filesystem from being remounted read-only while the run holds it;
    # O_CLOEXEC: a job left running (--faultloop-keep-jobs) must not keep the claim alive
    mode = fcntl.LOCK_EX if purpose == "re-analysis" else fcntl.LOCK_SH
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holders = current_holders(session)
        if holders and all(h.run == run for h in holders):
            return SessionClaim(session, note, None)
        raise SessionInUse(_refusal(session, purpose, holders)) from None
    for stale in _stale_notes(session, purpose):
        stale.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # the note only explains a refusal; the flock is the claim
        _note_path(session, note.host, note.pid).write_text(note.model_dump_json())
    return SessionClaim(session, note, fd)


def current_holders(session: Path) -> list[ClaimNote]:
    """The notes of the session's holders; on this host, only those whose process lives."""
    found = []
    here = socket.gethostname()
    for path in sorted(session.glob(f"{NOTE_PREFIX}*.json")):
        try:
            note = ClaimNote.model_validate_json(path.read_bytes())
        except (OSError, ValidationError):
            continue
        if note.host == here and not alive(note.pid):
            with contextlib.suppress(OSError):
                path.unlink()  # its process died without releasing: the kernel already did
            continue
        found.append(note)
    return found


def _stale_notes(session: Path, purpose: Purpose) -> list[Path]:
    """Notes that cannot be true now that this process holds its claim (their process died on
    another host): every other one beside an exclusive claim, a re-analysis' beside a shared
    one."""
    stale = []
    for path in session.glob(f"{NOTE_PREFIX}*.json"):
        try:
            note = ClaimNote.model_validate_json(path.read_bytes())
        except (OSError, ValidationError):
            stale.append(path)
            continue
        if purpose == "re-analysis" or note.purpose == "re-analysis":
            stale.append(path)
    return stale


def _refusal(session: Path, purpose: Purpose, holders: list[ClaimNote]) -> str:
    who = "; ".join(h.describe() for h in holders) or "another run"
    if purpose == "re-analysis":
        why = "a re-analysis needs the session alone (it re-scores every stored result)"
    else:
        why = "a re-analysis has it alone until it ends"
    return f"session {session} is in use by {who}: {why}; run again once that run has ended"


def _note_path(session: Path, host: str, pid: int) -> Path:
    return session / f"{NOTE_PREFIX}{host}-{pid}.json"
