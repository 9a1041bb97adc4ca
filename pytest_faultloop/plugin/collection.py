"""What the run collects: the pool selection, stored cases and their perturbed copies, and the
experiments in start order — a plugin object carrying the collection hooks. The collectors it
creates (``items.py``) are handed it, and hand it down to their children."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pytest_faultloop.engine.reanalysis import check_requested
from pytest_faultloop.engine.run_session import SessionChoice
from pytest_faultloop.inputs.cases import CASE_FILE, CaseError, load_case
from pytest_faultloop.inputs.perturb.copies import not_applicable
from pytest_faultloop.inputs.pool import PoolRules, PoolSelection, display_path
from pytest_faultloop.inputs.run_config import RunConfiguration
from pytest_faultloop.models import Experiment
from pytest_faultloop.models.errors import ConfigError, PoolError
from pytest_faultloop.models.layout import CHECKPOINTS
from pytest_faultloop.plugin.items import CaseDir, DimensionItem, ExperimentsDir, Scoring, regroup
from pytest_faultloop.plugin.options import invocation
from pytest_faultloop.store.ledger import record_selection


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


class RunCollection:
    """One per process. ``experiments`` and ``order`` are set when collection finishes."""

    def __init__(
        self, config: pytest.Config, configuration: RunConfiguration, sessions: SessionChoice
    ) -> None:
        self.config = config
        self.configuration = configuration
        self.sessions = sessions
        settings = configuration.settings
        workload = configuration.workload
        rules = PoolRules(
            settings.gpus_per_node,
            workload.min_nodes,
            workload.name,
            workload.refusal,
            lambda name: configuration.chosen_workload(name, f"an entry's @workload={name}"),
        )
        self.selection = PoolSelection(
            invocation(config),
            settings,
            configuration.sources,
            rules,
            self.priority_of,
            self._stored,
            configuration.pool_dir,
        )
        self.experiments: list[Experiment] = []
        """Every selected run (trials apart, perturbed copies included), in start order."""
        self.order: list[str] = []
        """The keys of the selected runs that run a job (no perturbed copy), in start order."""
        self.run: Scoring | None = None
        """The run the items report to (``state.Faultloop``), given once it is built."""
        self._perturbed = PerturbedTally()
        self._priorities: dict[str, int] = {}
        self._cases: dict[Path, Experiment] = {}

    def _stored(self) -> dict[str, list[Experiment]] | None:
        """A re-analysis of the session's own experiments: pool -> stored experiments; None
        when the run is no such re-analysis (pools named on the command line select)."""
        if not self.configuration.settings.reanalyze or self.selection.named:
            return None
        return self.sessions.stored()

    def unreadable_stored(self) -> list[str]:
        """A re-analysis of the session's own experiments: its ``result.json`` files that
        cannot be read (``path: reason``), each collected as an item that ERRORs."""
        return self.sessions.unreadable() if self._stored() is not None else []

    def describe(self) -> tuple[str, str]:
        """The header's pool names and experiment count (and the unreadable stored results)."""
        pools, count = self.selection.describe()
        if unreadable := self.unreadable_stored():
            count += f"; {len(unreadable)} unreadable result.json (each an ERROR item)"
        return pools, count

    def check_pool_files(self) -> None:
        """Refuse a pool given by a path that pytest will not collect (ConfigError)."""
        for path in self.selection.pool_files_outside():
            raise ConfigError(
                f"--faultloop-pool {path}: pytest collects only below its arguments "
                f"({' '.join(self.config.args)}); give the pool file as an argument instead: "
                f"pytest {path}"
            )

    def check_reanalysis(self) -> None:
        """Refuse a session with nothing stored, or explicitly named pools that list
        experiments the session never ran."""
        if not self.configuration.settings.reanalyze:
            return
        if not self.selection.named:
            self.sessions.stored()  # a session with nothing stored stops start-up
            return
        try:
            requested, named = self.selection.requested_keys()
        except PoolError:
            return  # collection reports the bad pool itself
        path = self.sessions.path
        check_requested(requested, self.sessions.stored(), path, f"pool {named}")

    def case_experiment(self, directory: Path) -> Experiment:
        """The replayed experiment of a case directory (loaded once; ids unique in the run)."""
        if directory not in self._cases:
            shown = display_path(self.config.rootpath, directory / CASE_FILE)
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
                    f"{display_path(self.config.rootpath, clash)}"
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
            dumps = self.sessions.path / experiment.runs()[0].dirname / CHECKPOINTS
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

    # -- hooks --------------------------------------------------------------------------------

    def pytest_collect_directory(
        self, path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        if (path / CASE_FILE).is_file():
            return CaseDir.from_parent(parent, path=path, collection=self)
        if any(path.glob("*.pool")):
            return ExperimentsDir.from_parent(parent, path=path, collection=self)
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
        self.experiments = [run for e in ordered for run in e.runs()]
        copies = [e for e in ordered if e.perturbation is not None]
        self._perturbed.copies = len(copies)
        self._perturbed.experiments = len({e.unperturbed.key for e in copies})
        # perturbed copies run no job: the slots count and number only real experiments
        self.order = [e.key for e in self.experiments if e.perturbation is None]
        if items:  # what the run's summary rates count (-k, --lf select single cells)
            cells: dict[str, list[str]] = {}
            for item in items:
                cells.setdefault(item.experiment.base_key, []).append(item.dimension)
            record_selection(self.sessions.run_dir, cells)

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
