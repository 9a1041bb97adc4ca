"""pytest-xdist: the controller hands the run directory to every worker, hands each worker
whole experiments, prints the session's progress lines whichever worker writes them, and ends a
run whose experiments only workers ran (Python tests asking for the ``faultloop`` fixture)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from pytest_faultloop.items import RUN_KEY
from pytest_faultloop.preflight import usage_errors
from pytest_faultloop.progress import ProgressPrinter, start_progress
from pytest_faultloop.rundir import RUNDIR_KEY, WORKERINPUT_KEY, recorded_session, run_dir
from pytest_faultloop.session_dir import EVENTS_NAME
from pytest_faultloop.state import run_state


class XdistHooks:
    """Registered on the controller when xdist is active."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.progress: ProgressPrinter | None = None

    def pytest_configure_node(self, node: Any) -> None:
        rundir = run_dir(self.config)
        state = self.config.stash.get(RUN_KEY, None)
        if state is not None:
            with usage_errors():
                state.start()  # pools: the controller chooses the session first
        node.workerinput[WORKERINPUT_KEY] = str(rundir)
        if self.progress is None:
            self.progress = start_progress(self.config, lambda: _events(rundir), rundir.name)

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """``-n N`` alone means ``--dist load`` (xdist tells no explicit one apart): its chunks
        split an experiment's items across workers, which then wait for the same job, one job
        in flight. A run of pools or cases is distributed as ``loadscope`` does, an experiment's
        items (its scope) to one worker: N workers follow N experiments. Other modes are as
        chosen; None leaves the choice to xdist."""
        if config.getvalue("dist") == "load" and RUN_KEY in config.stash:
            return LoadScopeScheduling(config, log)
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        if self.progress is not None:
            self.progress.close()
            self.progress = None
        rundir = self.config.stash.get(RUNDIR_KEY, None)
        no_state = RUN_KEY not in self.config.stash
        if no_state and rundir is not None and recorded_session(rundir) is not None:
            run_state(self.config).finish()  # registered now: too late for this hook call


def _events(rundir: Path) -> Path | None:
    session = recorded_session(rundir)
    return session / EVENTS_NAME if session is not None else None
