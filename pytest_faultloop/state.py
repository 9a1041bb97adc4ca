"""The run in one pytest process: settings, workloads, the pool selection, the session, the
slots and the runner — a plugin object in ``config.stash`` carrying its own hooks (like pytest's
``LFPlugin``). It exists once the run collects pools or cases, or a Python test asks for it."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

from pytest_faultloop.builtin import install_builtin_stages, stage_labels_line
from pytest_faultloop.cases import CASE_FILE, CaseError, load_case
from pytest_faultloop.errors import ConfigError, PoolError
from pytest_faultloop.items import RUN_KEY, CaseDir, DimensionItem, ExperimentsDir, regroup
from pytest_faultloop.layout import CHECKPOINTS
from pytest_faultloop.ledger import done_keys, started_keys
from pytest_faultloop.models import Experiment, ExperimentResult
from pytest_faultloop.perturb.copies import not_applicable
from pytest_faultloop.pipeline import Pipeline
from pytest_faultloop.pool import PoolRules, PoolSelection, display_path
from pytest_faultloop.preflight import job_scripts, preflight, usage_errors
from pytest_faultloop.progress import ProgressPrinter, start_progress
from pytest_faultloop.reanalysis import check_requested, stored_experiments
from pytest_faultloop.report.markdown import render_rows
from pytest_faultloop.report.summary import RunSummary
from pytest_faultloop.run_config import RunConfiguration
from pytest_faultloop.run_session import RUN_SESSION_KEY, RunSession
from pytest_faultloop.rundir import agreed_session, recorded_session, run_dir
from pytest_faultloop.runner import Runner
from pytest_faultloop.session_dir import EVENTS_NAME, create_session, find_session
from pytest_faultloop.signals import interrupt_on_stop_signals
from pytest_faultloop.slots import SlotLimiter
from pytest_faultloop.stage_calls import HookCalls


@dataclass
class PerturbedTally:
    """What collection made of ``--faultloop-perturb`` (told after "collected N items")."""

    experiments: int = 0
    """Selected experiments with perturbed copies beside them."""
    copies: int = 0
    """Selected perturbed copies."""
    live: int = 0
    """Live experiments collected, not perturbed."""
    not_applicable: Counter[str] = field(default_factory=Counter)
    """Perturbation -> experiments collected that it could not apply to."""


class Faultloop:
    """One per process. ``start()`` chooses (or joins) the run's session: an explicit step,
    taken before the first experiment runs."""

    def __init__(self, config: pytest.Config, configuration: RunConfiguration) -> None:
        self.config = config
        self.configuration = configuration
        self.stop = threading.Event()
        self.order: list[str] = []
        """Experiment keys of this run in start (pool) order; set after collection."""
        self.is_worker = hasattr(config, "workerinput")
        self.summary = RunSummary(
            self.configuration.pass_rule,
            self.configuration.settings.base_experiments_dir,
            self.configuration.settings.compare,
        )
        rules = PoolRules(
            self.configuration.settings.gpus_per_node,
            self.configuration.workload.min_nodes,
            self.configuration.workload.name,
        )
        self.selection = PoolSelection(
            config,
            self.configuration.settings,
            self.configuration.sources,
            rules,
            self.priority_of,
            self._stored,
        )
        self._perturbed = PerturbedTally()
        self._priorities: dict[str, int] = {}
        self._cases: dict[Path, Experiment] = {}
        self._experiments: list[Experiment] = []
        self._session: RunSession | None = None
        self._stored_experiments: dict[str, list[Experiment]] | None = None
        self._agreed: Path | None = None
        self._progress: ProgressPrinter | None = None

    @classmethod
    def create(cls, config: pytest.Config, pool_dir: Path, *, check: bool = True) -> Faultloop:
        """The run's state; ``check``: a given session is resolved now (a bad one, or a
        re-analysis of experiments it never ran, stops start-up before anything is written).
        Raises ConfigError."""
        state = cls(config, RunConfiguration.load(config, pool_dir))
        if (
            check
            and not state.is_worker
            and (state.configuration.settings.session or state.configuration.settings.reanalyze)
        ):
            state.check_reanalysis()
            state.start()
        return state

    # -- what the run selects -----------------------------------------------------------------

    def _stored(self) -> dict[str, list[Experiment]] | None:
        """A re-analysis of the session's own experiments: pool -> stored experiments (read
        once); None when the run is no such re-analysis."""
        if not self.configuration.settings.reanalyze or self.selection.named:
            return None
        if self._stored_experiments is None:
            self._stored_experiments = stored_experiments(self._session_path())
        return self._stored_experiments

    def check_reanalysis(self) -> None:
        """Refuse a session with nothing stored, or explicitly named pools that list
        experiments the session never ran."""
        if not self.configuration.settings.reanalyze:
            return
        if not self.selection.named:
            self._stored()  # a session with nothing stored stops start-up
            return
        try:
            requested, named = self.selection.requested_keys(self.configuration.pool_dir)
        except PoolError:
            return  # collection reports the bad pool itself
        session = self._session_path()
        check_requested(requested, stored_experiments(session), session, f"pool {named}")

    def case_experiment(self, directory: Path) -> Experiment:
        """The replayed experiment of a case directory (loaded once; ids unique in the run)."""
        if directory not in self._cases:
            shown = display_path(self.config, directory / CASE_FILE)
            experiment = load_case(
                directory,
                directory.parent.name,
                default_gpus_per_node=self.configuration.settings.gpus_per_node,
                priority=self.priority_of(str(directory)),
                display=shown,
            ).model_copy(update={"trials": self.configuration.settings.trials})
            clash = next((d for d, e in self._cases.items() if e.key == experiment.key), None)
            if clash is not None:
                raise CaseError(
                    f"{shown}: case id {experiment.key!r} is already used by "
                    f"{display_path(self.config, clash)}"
                )
            self._cases[directory] = experiment
        return self._cases[directory]

    def perturbations_for(self, experiment: Experiment) -> list[str]:
        """The chosen perturbations that apply to a replayed case or, in a re-analysis, to a
        stored experiment (live experiments are not perturbed: their jobs have not run)."""
        if not self.configuration.perturbations:
            return []
        if experiment.case is None and not self.configuration.settings.reanalyze:
            self._perturbed.live += 1
            return []
        if experiment.case is not None:
            dumps = experiment.case.dumps
        else:
            dumps = self._session_path() / experiment.runs()[0].dirname / CHECKPOINTS
        applying = []
        for composition in self.configuration.perturbations:
            if not_applicable(composition, experiment, dumps):
                self._perturbed.not_applicable[composition.name] += 1
            else:
                applying.append(composition.name)
        return applying

    def priority_of(self, key: str) -> int:
        """Start-order position of an experiment (pool order, then first asked)."""
        return self._priorities.setdefault(key, len(self._priorities))

    # -- session, slots, runner ---------------------------------------------------------------

    @property
    def lockdir(self) -> Path:
        return run_dir(self.config)

    def _session_path(self) -> Path:
        """The session directory the run's processes agree on (chosen once, nothing started)."""
        if self._agreed is None:
            self._agreed = agreed_session(self.lockdir, self._choose_session)
        return self._agreed

    def _choose_session(self) -> Path:
        if self.configuration.settings.session:
            return find_session(
                self.configuration.settings.base_experiments_dir,
                self.configuration.settings.session,
            )
        if self.configuration.settings.reanalyze:
            raise ConfigError(
                "--faultloop-reanalyze needs a session to re-analyze: add "
                "--faultloop-session last (or a session directory)"
            )
        return create_session(self.configuration.settings.base_experiments_dir)

    def start(self) -> RunSession:
        """Open the session the run's processes agree on — given, found (``last``), or
        created by the first process that needs one (idempotent); a single process also
        prints its progress (an xdist controller's is printed by the xdist hooks)."""
        if self._session is None:
            path = self._session_path()
            self._session = RunSession.open(path, self.lockdir, self.stop)
            self.config.stash[RUN_SESSION_KEY] = self._session
            if not self.is_worker and not self.is_controller:
                self._progress = start_progress(
                    self.config, lambda: path / EVENTS_NAME, self.lockdir.name
                )
        return self._session

    @property
    def session(self) -> RunSession:
        if self._session is None:
            raise RuntimeError("the faultloop session is used before Faultloop.start()")
        return self._session

    @cached_property
    def runner(self) -> Runner:
        """Built once the run's experiments are collected (the slots' start order)."""
        session = self.start()
        settings = self.configuration.settings
        builtin = install_builtin_stages(self.config, settings, self.stop)
        pipeline = Pipeline(HookCalls(self.config, builtin), session)
        slots = SlotLimiter(
            session.ledger, settings.batch_size, settings.schedule, self.order, self.stop
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
        pools, count = self.selection.describe(self.configuration.pool_dir)
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

    def pytest_report_collectionfinish(self) -> list[str]:
        """What the perturbations made of the collected experiments (xdist: each worker's)."""
        tally = self._perturbed
        if not self.configuration.perturbations or not (
            tally.experiments or tally.live or tally.not_applicable
        ):
            return []
        lines = [
            f"faultloop: {tally.copies} perturbed cop{'y' if tally.copies == 1 else 'ies'} of "
            f"{tally.experiments} experiment(s) under {len(self.configuration.perturbations)} perturbation(s), "
            "each collected beside the unperturbed one (NAME[PERTURBATION])"
        ]
        if tally.not_applicable:
            listed = ", ".join(f"{n} ({k})" for n, k in sorted(tally.not_applicable.items()))
            lines.append(f"faultloop: not applicable (experiments): {listed}")
        if tally.live:
            lines.append(
                f"faultloop: {tally.live} live experiment(s) not perturbed (their jobs run "
                "first): re-analyse the session with --faultloop-reanalyze --faultloop-perturb"
            )
        return lines

    def pytest_collect_directory(
        self, path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        if (path / CASE_FILE).is_file():
            return CaseDir.from_parent(parent, path=path)
        if any(path.glob("*.pool")):
            return ExperimentsDir.from_parent(parent, path=path)
        return None

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(
        self, collector: pytest.Collector
    ) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
        """Each collected case is followed by its perturbed copies (siblings: ``case[ts]``)."""
        report = yield
        if self.configuration.perturbations and report.passed:
            result: list[pytest.Item | pytest.Collector] = []
            for node in report.result:
                result.append(node)
                if isinstance(node, CaseDir) and node.parent is collector:  # not the session's
                    with contextlib.suppress(CaseError):  # the case reports it itself
                        result.extend(node.perturbed_siblings())
            report.result = result
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        regroup(session.items)
        items = [i for i in session.items if isinstance(i, DimensionItem)]
        experiments = {i.experiment.key: i.experiment for i in items}
        ordered = sorted(experiments.values(), key=lambda e: e.priority)
        self._experiments = [run for e in ordered for run in e.runs()]
        copies = [e for e in ordered if e.perturbation is not None]
        self._perturbed.copies = len(copies)
        self._perturbed.experiments = len({e.unperturbed.key for e in copies})
        # perturbed copies run no job: the slots count and number only real experiments
        self.order[:] = [e.key for e in self._experiments if e.perturbation is None]

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Single process: queue every selected experiment now, so slots stay busy while
        earlier items are reported (xdist workers run experiments as their items come)."""
        failed = session.testsfailed and not self.config.option.continue_on_collection_errors
        if self.config.option.collectonly or failed or not self._experiments:
            return
        with usage_errors():
            if not self.is_worker:
                scripts = job_scripts(
                    self.configuration.settings, self.configuration.workloads, self._experiments
                )
                preflight(self.config, self.configuration.settings, scripts)
            self.start()
        if not self.is_worker and not self.is_controller:
            self.runner.prefetch(self._experiments)

    def pytest_sessionstart(self) -> None:
        """An xdist controller collects nothing: it checks what the named pools' jobs need."""
        if self.is_controller and self.selection.named and not self.config.option.collectonly:
            with usage_errors():
                preflight(
                    self.config,
                    self.configuration.settings,
                    {self.configuration.workload.script: self.configuration.workload.name},
                )

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        self.finish()

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        if self.is_worker:
            return
        for line in self.summary.lines(verbose=self.config.get_verbosity() > 0):
            terminalreporter.write_line(line)
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
        session = recorded_session(self.lockdir)
        if self.is_worker or session is None:
            return
        done, started = done_keys(self.lockdir), started_keys(self.lockdir)
        if done or started:
            self.summary.record(session, done, len(started - done))

    def stop_background(self) -> None:
        self.stop.set()
        if "runner" in self.__dict__:
            self.runner.join(timeout=120)
        if self._progress is not None:
            self._progress.close()
            self._progress = None


def activate(config: pytest.Config, pool_dir: Path, *, check: bool = True) -> Faultloop:
    """Create the run's state in this process and register it, the built-in stages and the
    pytest-html hooks (raises ConfigError)."""
    state = Faultloop.create(config, pool_dir, check=check)
    install_builtin_stages(config, state.configuration.settings, state.stop)
    config.stash[RUN_KEY] = state
    config.pluginmanager.register(state, "faultloop-state")
    if config.pluginmanager.hasplugin("html"):
        from pytest_faultloop.report.html_plugin import HtmlHooks

        config.pluginmanager.register(HtmlHooks(state), "faultloop-html")
    interrupt_on_stop_signals(config)
    return state


def run_state(config: pytest.Config) -> Faultloop:
    """The run's state, created on first use when no pool or case was collected (a Python
    test asked for the ``faultloop`` fixture, or the controller finishes such a run)."""
    state = config.stash.get(RUN_KEY, None)
    if state is None:
        state = activate(config, project_dir(config), check=False)
    return state


def project_dir(config: pytest.Config) -> Path:
    """Where a run without pools looks for ``workloads.toml``: ``experiments/`` under the
    root directory when it has one, else the root directory."""
    experiments = config.rootpath / "experiments"
    return experiments if experiments.is_dir() else config.rootpath
