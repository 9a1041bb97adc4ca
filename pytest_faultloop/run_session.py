"""Where one pytest run writes, opened once the run's processes agree on a session: the
session directory (the seed's files, shared with later runs) and the run's ledger (its
markers in the run directory and the TSV rows), built together, in that order."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_faultloop.ledger import RunLedger
from pytest_faultloop.report.markdown import report_header
from pytest_faultloop.session_dir import SessionDir

RUN_SESSION_KEY = pytest.StashKey["RunSession"]()
"""The run's session in this process, set when it opens (before any job runs)."""


@dataclass(frozen=True)
class RunSession:
    directory: SessionDir
    ledger: RunLedger

    @classmethod
    def open(cls, path: Path, run_dir: Path, stop: threading.Event) -> RunSession:
        """The session at ``path`` for the run whose directory is ``run_dir``; a write that
        fails sets ``stop`` (nothing more could be recorded)."""
        directory = SessionDir(path, report_header(), run_dir.name, stop.set)
        return cls(directory, RunLedger(run_dir, directory))
