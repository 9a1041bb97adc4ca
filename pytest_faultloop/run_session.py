"""Where one pytest run writes. The run's processes agree on one session directory (given,
found with ``last``, or created by the first process that needs one); each process then opens
it once: the session directory (the seed's files, shared with later runs) and the run's ledger
(its markers in the run directory and the TSV rows), built together, in that order."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from pytest_faultloop.errors import ConfigError
from pytest_faultloop.ledger import RunLedger
from pytest_faultloop.models import Experiment
from pytest_faultloop.reanalysis import stored_experiments
from pytest_faultloop.report.markdown import report_header
from pytest_faultloop.revisions import Reanalysis, SessionRevisions
from pytest_faultloop.rundir import agreed, agreed_session, recorded, run_dir
from pytest_faultloop.session_dir import SessionDir, create_session, find_session
from pytest_faultloop.settings import Settings

RUN_SESSION_KEY = pytest.StashKey["RunSession"]()
"""The run's session in this process, set when it opens (before any job runs)."""


@dataclass(frozen=True)
class RunSession:
    directory: SessionDir
    ledger: RunLedger
    reanalysis: Reanalysis | None = None
    """A re-analysis: the revision it re-scores and the one it writes (one for the run)."""

    @classmethod
    def open(cls, path: Path, run_dir: Path, stop: threading.Event) -> RunSession:
        """The session at ``path`` for the run whose directory is ``run_dir``; a write that
        fails sets ``stop`` (nothing more could be recorded)."""
        directory = SessionDir(path, report_header(), run_dir.name, stop.set)
        return cls(directory, RunLedger(run_dir, directory))


class SessionChoice:
    """The session this run's processes agree on: its path (chosen once, nothing written
    yet), what a re-analysis finds stored there, and the session once this process opened
    it (``open()``: an explicit step, taken before the first experiment runs)."""

    def __init__(self, config: pytest.Config, settings: Settings, stop: threading.Event) -> None:
        self.config = config
        self.settings = settings
        self.stop = stop
        self._path: Path | None = None
        self._stored: dict[str, list[Experiment]] | None = None
        self._unreadable: list[str] = []
        self._opened: RunSession | None = None

    @property
    def run_dir(self) -> Path:
        return run_dir(self.config)

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
        """The session opened in this process (opened on the first call)."""
        if self._opened is None:
            opened = RunSession.open(self.path, self.run_dir, self.stop)
            if self.settings.reanalyze:
                opened = replace(opened, reanalysis=agreed_reanalysis(self.run_dir, self.path))
            self._opened = opened
            self.config.stash[RUN_SESSION_KEY] = self._opened
        return self._opened

    @property
    def opened(self) -> RunSession:
        if self._opened is None:
            raise RuntimeError("the faultloop session is used before it is opened")
        return self._opened


def agreed_reanalysis(run_dir: Path, session: Path) -> Reanalysis:
    """The run's revisions, begun by the first of its processes to open the session."""
    begin = SessionRevisions(session).begin_reanalysis
    return Reanalysis.decoded(agreed(run_dir, _REANALYSIS, lambda: begin().encoded()))


def recorded_reanalysis(run_dir: Path) -> Reanalysis | None:
    """The run's re-analysis revisions, once a process has begun them."""
    text = recorded(run_dir, _REANALYSIS)
    return None if text is None else Reanalysis.decoded(text)


_REANALYSIS = "reanalysis"
