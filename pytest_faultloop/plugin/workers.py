"""pytest-xdist: the controller hands the run directory to every worker, hands each worker
whole experiments, runs again the item of a worker that went down, prints the session's
progress lines whichever worker writes them, and ends a run whose experiments only workers ran
(Python tests asking for the ``faultloop`` fixture)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from xdist.dsession import get_default_max_worker_restart
from xdist.scheduler import LoadScopeScheduling

from pytest_faultloop.plugin.activation import run_state
from pytest_faultloop.plugin.keys import (
    RUN_KEY,
    RUNDIR_KEY,
    WORKER_CRASH,
    WORKERINPUT_KEY,
    is_crash_rerun,
)
from pytest_faultloop.plugin.preflight import usage_errors
from pytest_faultloop.plugin.progress import ProgressPrinter, start_progress
from pytest_faultloop.plugin.run_dir import run_dir
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES
from pytest_faultloop.store.ledger import record_worker_crash
from pytest_faultloop.store.rundir import recorded_session
from pytest_faultloop.store.session_dir import EVENTS_NAME


class XdistHooks:
    """Registered on the controller when xdist is active."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.progress: ProgressPrinter | None = None
        self.workers_down = 0
        """Workers that went down (xdist counts them against --max-worker-restart)."""
        self.stopping = False
        """A worker went down interrupted: the run is stopping."""
        self.crashed_worker: dict[str, Any] = {}
        """Node id of an item that runs again -> the worker that went down running it."""

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

    def pytest_testnodedown(self, node: Any, error: object | None) -> None:
        if error is not None:
            self.workers_down += 1
            self.stopping = self.stopping or error == "keyboard-interrupt"

    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        """A worker went down (killed, out of memory) while running an experiment's item. The
        experiment's job goes on without it: the item runs again on another worker, which
        re-attaches to the job or takes its stored result, and xdist's "crashed" report of it
        becomes a rerun that no report counts, so every item is reported once, as scored.
        Where it cannot run again, the report is an ERROR naming the crash (never a FAILED
        attribution)."""
        if RUN_KEY not in self.config.stash or crashitem.rpartition("::")[2] not in DIMENSION_NAMES:
            return  # a test of its own: xdist's report stands
        crash = f"xdist worker {report.node.gateway.id} went down while running {crashitem}"
        why_not = self._why_not_again(crashitem, sched)
        if why_not is None:
            report.outcome = "rerun"  # type: ignore[assignment] # xdist's way: see its hookspec
            setattr(report, WORKER_CRASH, crash)
            self.crashed_worker[crashitem] = report.node
            record_worker_crash(run_dir(self.config), crashitem.rpartition("::")[0], crash)
            self._say(
                f"faultloop: {crash}: it runs again on another worker, which follows its "
                "experiment's job"
            )
            return
        report.when = "setup"  # an error: the attribution was never scored
        report.longrepr = (
            f"{crash}; it cannot run again in this run ({why_not}): nothing was scored; its "
            "job may still run: continue the session (--faultloop-session last) to collect it"
        )

    def _why_not_again(self, crashitem: str, sched: Any) -> str | None:
        """Why xdist will not run the item again (None: it will)."""
        if self.stopping:
            return "the run is stopping"
        limit = get_default_max_worker_restart(self.config)
        if limit is not None and self.workers_down > limit:
            return f"no worker restarts left: --max-worker-restart {limit}"
        if isinstance(sched, LoadScopeScheduling):
            return None  # it queued the unfinished items of the worker's scopes again
        try:
            sched.mark_test_pending(crashitem)
        except NotImplementedError:
            return f"--dist {self.config.getvalue('dist')} runs no item again"
        return None

    def _say(self, line: str) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is not None:
            terminal.write_line(line)

    def pytest_report_teststatus(self, report: pytest.TestReport) -> tuple[str, str, str] | None:
        """The crash report of an item that runs again: no outcome, nothing shown."""
        return ("", "", "") if is_crash_rerun(report) else None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """JUnit keys an item's reports by the worker that sent them (its way through xdist's
        interleaving): the reports of an item run again carry the worker that went down, so
        they fill the testcase its crash report opened, not a second one (``-v`` prints that
        worker's id beside them)."""
        crashed = self.crashed_worker.get(report.nodeid)
        if crashed is not None:
            report.node = crashed  # type: ignore[attr-defined]

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
