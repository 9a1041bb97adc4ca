"""Where one pytest run writes. The run's processes agree on one session directory (given,
found with ``last``, or created by the first process that needs one); each process then opens
it once: it claims the session (shared for a run, alone for a re-analysis), then builds the
session directory (the seed's files, shared with later runs) and the run's ledger (its markers
in the run directory and the TSV rows), in that order."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pytest_faultloop.engine.reanalysis import stored_experiments
from pytest_faultloop.inputs.settings import Settings
from pytest_faultloop.models import Experiment
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.report.markdown import report_header
from pytest_faultloop.store.ledger import RunLedger
from pytest_faultloop.store.revisions import Reanalysis, SessionRevisions
from pytest_faultloop.store.rundir import agreed, agreed_session, recorded
from pytest_faultloop.store.session_claim import Purpose, SessionClaim, claim_session
from pytest_faultloop.store.session_dir import (
    SessionDir,
    create_session,
    find_session,
    session_unwritable,
)


@dataclass(frozen=True)
class RunSession:
    directory: SessionDir
    ledger: RunLedger
    reanalysis: Reanalysis | None = None
    """A re-analysis: the revision it re-scores and the one it writes (one for the run)."""

    @classmethod
    def open(
        cls,
        path: Path,
        run_dir: Path,
        stop: threading.Event,
        reanalysis: Reanalysis | None = None,
    ) -> RunSession:
        """The session at ``path`` for the run whose directory is ``run_dir`` (a re-analysis
        writes its results aside until it publishes them); a write that fails sets ``stop``
        (nothing more could be recorded)."""
        aside = SessionRevisions(path).staging(reanalysis) if reanalysis else None
        directory = SessionDir(path, report_header(), run_dir.name, stop.set, aside)
        return cls(directory, RunLedger(run_dir, directory), reanalysis)


class SessionChoice:
    """The session this run's processes agree on: its path (chosen once, nothing written
    yet), what a re-analysis finds stored there, and the session once this process opened
    it (``open()``: an explicit step, taken before the first experiment runs).

    ``run_dir`` gives the run's directory (created on first use); ``add_cleanup`` is given
    what must run when the run ends (the release of this process's claim)."""

    def __init__(
        self,
        run_dir: Callable[[], Path],
        settings: Settings,
        stop: threading.Event,
        add_cleanup: Callable[[Callable[[], None]], None],
    ) -> None:
        self._run_dir = run_dir
        self.add_cleanup = add_cleanup
        self.settings = settings
        self.stop = stop
        self._path: Path | None = None
        self._stored: dict[str, list[Experiment]] | None = None
        self._unreadable: list[str] = []
        self._opened: RunSession | None = None

    @property
    def run_dir(self) -> Path:
        return self._run_dir()

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = agreed_session(self.run_dir, self._choose)
        return self._path

    def _choose(self) -> Path:
        if self.settings.session:
            return find_session(self.settings.base_experiments_dir, self.settings.session)
        if self.settings.reanalyze:
            raise ConfigError(
                "--faultloop-reanalyze needs a session to re-analyze: add "
                "--faultloop-session last (or a session directory)"
            )
        return create_session(self.settings.base_experiments_dir)

    def stored(self) -> dict[str, list[Experiment]]:
        """Pool -> the session's stored experiments (read once; raises ConfigError when it
        holds none)."""
        if self._stored is None:
            self._stored = stored_experiments(self.path, self._unreadable)
        return self._stored

    def unreadable(self) -> list[str]:
        """The session's ``result.json`` files that cannot be read (``path: reason``)."""
        self.stored()
        return self._unreadable

    @property
    def is_open(self) -> bool:
        return self._opened is not None

    def open(self) -> RunSession:
        """The session opened in this process (opened on the first call, after claiming it:
        SessionInUse when another run's claim excludes this one)."""
        if self._opened is None:
            self._claim()
            reanalysis = None
            if self.settings.reanalyze:
                reanalysis = agreed_reanalysis(self.run_dir, self.path)
            self._opened = RunSession.open(self.path, self.run_dir, self.stop, reanalysis)
            for note in agreed_notes(self.run_dir):
                self._opened.directory.event(f"  {note}")
        return self._opened

    def _claim(self) -> SessionClaim:
        """This process's claim on the session, held until the run ends."""
        purpose: Purpose = "re-analysis" if self.settings.reanalyze else "run"
        try:
            claim = claim_session(self.path, self.run_dir.name, purpose)
        except OSError as exc:
            raise session_unwritable(self.path, exc) from None
        self.add_cleanup(claim.release)
        return claim

    @property
    def opened(self) -> RunSession:
        if self._opened is None:
            raise RuntimeError("the faultloop session is used before it is opened")
        return self._opened


def agreed_reanalysis(run_dir: Path, session: Path) -> Reanalysis:
    """The run's revisions, begun by the first of its processes to open the session (what it
    found left by a killed re-analysis: :func:`agreed_notes`)."""

    def begin() -> str:
        reanalysis, notes = SessionRevisions(session).begin_reanalysis()
        (run_dir / _NOTES).write_text("".join(f"{note}\n" for note in notes))
        return reanalysis.encoded()

    return Reanalysis.decoded(agreed(run_dir, _REANALYSIS, begin))


def agreed_notes(run_dir: Path) -> list[str]:
    """What beginning the run's re-analysis found (told once, by the process that began it:
    the file is taken as it is read)."""
    path = run_dir / _NOTES
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    path.unlink(missing_ok=True)
    return text.splitlines()


def recorded_reanalysis(run_dir: Path) -> Reanalysis | None:
    """The run's re-analysis revisions, once a process has begun them."""
    text = recorded(run_dir, _REANALYSIS)
    return None if text is None else Reanalysis.decoded(text)


_REANALYSIS = "reanalysis"
_NOTES = "reanalysis.notes"
