"""The run in one pytest process (``Faultloop``): the runner and the hooks that run
experiments and end the run. Built by ``activation.activate``."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import pytest

from pytest_faultloop.engine.job_specs import effective_script
from pytest_faultloop.engine.pipeline import Pipeline
from pytest_faultloop.engine.run_session import RunSession, SessionChoice, recorded_reanalysis
from pytest_faultloop.engine.runner import Runner
from pytest_faultloop.engine.slots import SlotLimiter
from pytest_faultloop.inputs.run_config import RunConfiguration
from pytest_faultloop.models import ExperimentResult, Overrides
from pytest_faultloop.plugin.collection import RunCollection
from pytest_faultloop.plugin.preflight import (
    check_workloads,
    job_scripts,
    preflight,
    script_chooser,
    usage_errors,
)
from pytest_faultloop.plugin.progress import ProgressPrinter, start_progress
from pytest_faultloop.plugin.stage_hooks import HookCalls, builtin_stages, stage_labels_line
from pytest_faultloop.report.markdown import render_rows
from pytest_faultloop.report.summary import RunSummary
from pytest_faultloop.store.ledger import done_keys, selected_cells, started_keys
from pytest_faultloop.store.rundir import recorded_session
from pytest_faultloop.store.session_dir import EVENTS_NAME


class Faultloop:
    """One per process: runs the collected experiments (``start()`` opens the session first,
    an explicit step) and ends the run (history, summary)."""

    def __init__(
        self,
        config: pytest.Config,
        configuration: RunConfiguration,
        sessions: SessionChoice,
        collection: RunCollection,
    ) -> None:
        self.config = config
        self.configuration = configuration
        self.sessions = sessions
        self.collection = collection
        self.stop = sessions.stop
        self.is_worker = hasattr(config, "workerinput")
        self.summary = RunSummary(
            configuration.pass_rule,
            configuration.settings.base_experiments_dir,
            configuration.settings.compare,
            configuration.settings.max_false_stop,
        )
        self._progress: ProgressPrinter | None = None

    def start(self) -> RunSession:
        """Open the session the run's processes agree on (idempotent); a single process also
        prints its progress (an xdist controller's is printed by the xdist hooks)."""
        opening = not self.sessions.is_open
        session = self.sessions.open()
        if opening and not self.is_worker and not self.is_controller:
            self._progress = start_progress(
                self.config,
                lambda: session.directory.path / EVENTS_NAME,
                self.sessions.run_dir.name,
            )
        return session

    @property
    def session(self) -> RunSession:
        return self.sessions.opened

    @cached_property
    def runner(self) -> Runner:
        """Built once the run's experiments are collected (the slots' start order)."""
        session = self.start()
        settings = self.configuration.settings
        builtin = builtin_stages(self.config)  # installed when the run was built
        pipeline = Pipeline(HookCalls(self.config, builtin), session)
        slots = SlotLimiter(
            session.ledger, settings.batch_size, settings.schedule, self.collection.order, self.stop
        )
        return Runner(
            settings, self.configuration.workloads, session, slots, pipeline, self._on_result
        )

    def _on_result(self, result: ExperimentResult) -> None:
        if result.experiment.perturbation is None:  # perturbed copies: the Robustness section
            for row in render_rows(result.experiment.priority + 1, result):
                self.session.directory.append_report_row(row)
        self.config.hook.pytest_faultloop_experiment_finished(config=self.config, result=result)

    @property
    def is_controller(self) -> bool:
        return not self.is_worker and self.config.getoption("dist", "no") != "no"

    # -- hooks --------------------------------------------------------------------------------

    def pytest_report_header(self) -> list[str]:
        s = self.configuration.settings
        pools, count = self.collection.describe()
        return [
            f"faultloop: backend={s.backend} workload={self.configuration.workload.name} pools={pools} "
            f"({count}) gpus_per_node={s.gpus_per_node} batch_size={s.batch_size} "
            + (f"launcher={launcher} " if (launcher := self.configuration.launcher) else "")
            + f"schedule={s.schedule}",
            f"faultloop: {stage_labels_line(self.config)} fr_scope={s.fr_scope}"
            + (" reanalyze" if s.reanalyze else "")
            + (f" session={s.session}" if s.session else "")
            + (f" perturb={s.perturb}" if s.perturb else ""),
        ]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Single process: queue every selected experiment now, so slots stay busy while
        earlier items are reported (xdist workers run experiments as their items come)."""
        failed = session.testsfailed and not self.config.option.continue_on_collection_errors
        experiments = self.collection.experiments
        if self.config.option.collectonly or failed or not experiments:
            return
        with usage_errors():
            if not self.is_worker:
                scripts = job_scripts(
                    self.configuration.settings, self.configuration.workloads, experiments
                )
                preflight(self.config, self.configuration.settings, scripts)
                check_workloads(
                    self.configuration.settings, self.configuration.workloads, experiments
                )
            self.start()
        if not self.is_worker and not self.is_controller:
            self.runner.prefetch(experiments)

    def pytest_sessionstart(self) -> None:
        """An xdist controller collects nothing: it checks what the named pools' jobs need."""
        named = self.collection.selection.named
        if self.is_controller and named and not self.config.option.collectonly:
            settings, workload = self.configuration.settings, self.configuration.workload
            script = effective_script(settings, workload, Overrides())
            with usage_errors():
                chosen_by = script_chooser(settings, workload.name, Overrides())
                preflight(self.config, settings, {script: chosen_by})
                selection = self.collection.selection
                pooled = [e for n, p in selection.selected() for e in selection.experiments(n, p)]
                check_workloads(settings, self.configuration.workloads, pooled)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.finish()
        failure = None if self.is_worker else self.summary.gate_failure()
        if failure is not None and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # the CI gate, not a test's

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        if self.is_worker:
            return
        for line in self.summary.lines(verbose=self.config.get_verbosity() > 0):
            terminalreporter.write_line(line)
        if (failure := self.summary.gate_failure()) is not None:
            terminalreporter.write_line(
                f"faultloop: FAILED the gate --faultloop-max-false-stop: {failure}", red=True
            )
        if exitstatus == pytest.ExitCode.INTERRUPTED and self.summary.session is not None:
            terminalreporter.write_line(
                self.summary.resume_hint(bool(self.configuration.settings.session))
            )

    def pytest_unconfigure(self) -> None:
        self.stop_background()

    # -- end of run ---------------------------------------------------------------------------

    def finish(self) -> None:
        """Stop background work; on the controller (or single process), re-render the report
        and record the history of the experiments this run produced (in any process)."""
        self.stop_background()
        run_dir = self.sessions.run_dir
        session = recorded_session(run_dir)
        if self.is_worker or session is None:
            return
        done, started = done_keys(run_dir), started_keys(run_dir)
        if done or started:
            self.summary.record(
                session,
                done,
                len(started - done),
                recorded_reanalysis(run_dir),
                selected_cells(run_dir),
            )

    def stop_background(self) -> None:
        self.stop.set()
        if "runner" in self.__dict__:
            self.runner.join(timeout=120)
        if self._progress is not None:
            self._progress.close()
            self._progress = None
