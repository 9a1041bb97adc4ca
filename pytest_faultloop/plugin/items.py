"""Collection: experiments directory -> pool files -> one collector per experiment -> five items;
a case directory (``case.toml``) -> five items of a replayed experiment.

Node ids read ``experiments/gpu.pool::GPU_SLEEP:1:5:2::rank_primary`` and
``experiments/corpus/public/pt113128_ecc_rank12::rank_primary``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import pytest

from pytest_faultloop.analyzers.log.text_forms import attribution_text
from pytest_faultloop.engine.run_session import RunSession, SessionChoice
from pytest_faultloop.engine.runner import Runner
from pytest_faultloop.inputs.cases import CASE_FILE
from pytest_faultloop.inputs.pool import POOL_SUFFIX, PoolSelection
from pytest_faultloop.inputs.run_config import RunConfiguration
from pytest_faultloop.models import Experiment, ExperimentResult
from pytest_faultloop.models.errors import FaultloopError
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES, dimension_named
from pytest_faultloop.scoring.judges.named import issues_line
from pytest_faultloop.scoring.pass_rule import PassRule
from pytest_faultloop.store.ledger import worker_crashes


class ExperimentBroken(FaultloopError):
    """The experiment produced no valid run to score: its items ERROR with this reason."""


class DimensionFailed(AssertionError):
    """The attribution got this dimension wrong."""


class Scoring(Protocol):
    """What the items ask of the run that scores them (``state.Faultloop``)."""

    @property
    def configuration(self) -> RunConfiguration: ...

    @property
    def sessions(self) -> SessionChoice: ...

    @property
    def session(self) -> RunSession: ...

    @property
    def runner(self) -> Runner: ...


class Collecting(Protocol):
    """What the collectors ask of the run's collection (``collection.RunCollection``), and
    the run its items report to (set once the run is built, before anything is collected)."""

    run: Scoring | None

    @property
    def selection(self) -> PoolSelection: ...

    def unreadable_stored(self) -> list[str]: ...

    def case_experiment(self, directory: Path) -> Experiment: ...

    def perturbations_for(self, experiment: Experiment) -> list[str]: ...


class _OfTheRun:
    """A node of the run's collection: the collection is handed down from parent to child
    (the run's hooks create the top ones), never looked up."""

    def __init__(self, *, collection: Collecting, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.collection = collection


class _CleanErrors:
    """Collectors whose own errors (a bad pool, an unknown pool name) read as one message."""

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, FaultloopError):
            return str(excinfo.value)
        # a collector's own repr_failure takes no style (pytest 9): passing one raised TypeError
        return super().repr_failure(excinfo)  # type: ignore[misc]


class ExperimentsDir(_CleanErrors, _OfTheRun, pytest.Directory):
    """A directory of ``*.pool`` files: yields the selected pools, in the order selected, then
    its other entries as pytest's own directory collector would (through the public collection
    hooks; pytest's ``Dir`` is final)."""

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        pools = self.collection.selection.files(self.path)
        for name, path in pools:
            yield PoolFile.from_parent(self, path=path, pool_name=name, collection=self.collection)
        for line in self.collection.unreadable_stored():
            yield UnreadableStoredResult.from_parent(self, name=_result_dir(line), why=line)
        chosen = {p for _, p in pools}
        for path in sorted(self.path.glob(f"*{POOL_SUFFIX}")):
            if path not in chosen and self.session.isinitpath(path):
                yield PoolFile.from_parent(
                    self, path=path, pool_name=path.stem, collection=self.collection
                )
        for entry in sorted(os.scandir(self.path), key=lambda e: e.name):
            path = Path(entry.path)
            if entry.is_dir():
                if not self._wanted(path) or self._ignored(path, with_parents=True):
                    continue  # a corpus below the pools replays only when asked for
                child = self.ihook.pytest_collect_directory(path=path, parent=self)
                if child is not None:
                    yield child
            elif entry.is_file() and path.suffix != POOL_SUFFIX and not self._ignored(path):
                yield from self.ihook.pytest_collect_file(file_path=path, parent=self)

    def _ignored(self, path: Path, *, with_parents: bool = False) -> bool:
        """What pytest's directory collector skips: ``pytest_ignore_collect`` (``--ignore``,
        ``norecursedirs``, a conftest's) unless the path was given on the command line."""
        if self.session.isinitpath(path, with_parents=with_parents):
            return False
        return bool(self.ihook.pytest_ignore_collect(collection_path=path, config=self.config))

    def _wanted(self, path: Path) -> bool:
        asked = self.session.isinitpath(path, with_parents=True)
        return asked or not any(path.rglob(CASE_FILE))


def _result_dir(line: str) -> str:
    """The experiment directory's name in an unreadable result's ``path: reason`` line."""
    return Path(line.split(": ", 1)[0]).parent.name


class UnreadableStoredResult(pytest.Item):
    """A re-analysis meets a stored ``result.json`` it cannot read: the experiment cannot be
    re-scored, and its item ERRORs naming the file and why (never a silent drop)."""

    def __init__(self, *, why: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.why = why

    def setup(self) -> None:
        raise ExperimentBroken(
            f"{self.why}: this experiment cannot be re-scored; its files are kept as they "
            "are (continuing the session without --faultloop-reanalyze sets them aside under "
            "attempts/ and runs it again)"
        )

    def runtest(self) -> None:
        """Never reached: setup always raises."""

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        return str(excinfo.value)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.name} (unreadable result.json)"


class CaseDir(_CleanErrors, _OfTheRun, pytest.Directory):
    """A stored case: one replayed experiment, five items, no job."""

    def perturbed_siblings(self) -> list[ExperimentCollector]:
        """The case under each chosen perturbation that applies to it, to be collected beside
        it: ``case[NAME]``, at the case's path (so a path argument selects them too), but not a
        directory node (pytest keeps one of those per path)."""
        assert self.parent is not None
        experiment = self.collection.case_experiment(self.path)
        return [
            ExperimentCollector.from_parent(
                self.parent,
                name=f"{self.name}[{name}]",
                path=self.path,
                nodeid=f"{self.nodeid}[{name}]",
                experiment=experiment.perturbed(name),
                collection=self.collection,
            )
            for name in self.collection.perturbations_for(experiment)
        ]

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        experiment = self.collection.case_experiment(self.path)
        for dimension in DIMENSION_NAMES:
            yield DimensionItem.from_parent(
                self,
                name=dimension,
                dimension=dimension,
                experiment=experiment,
                collection=self.collection,
            )


class PoolFile(_CleanErrors, _OfTheRun, pytest.File):
    def __init__(self, *, pool_name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pool_name = pool_name

    def collect(self) -> Iterator[ExperimentCollector]:
        collection = self.collection
        for experiment in collection.selection.experiments(self.pool_name, self.path):
            yield ExperimentCollector.from_parent(
                self, name=experiment.key, experiment=experiment, collection=collection
            )
            for name in collection.perturbations_for(experiment):
                perturbed = experiment.perturbed(name)
                yield ExperimentCollector.from_parent(
                    self, name=perturbed.key, experiment=perturbed, collection=collection
                )


class ExperimentCollector(_OfTheRun, pytest.Collector):
    def __init__(self, *, experiment: Experiment, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.experiment = experiment

    def collect(self) -> Iterator[DimensionItem]:
        for dimension in DIMENSION_NAMES:
            yield DimensionItem.from_parent(
                self,
                name=dimension,
                dimension=dimension,
                experiment=self.experiment,
                collection=self.collection,
            )


class DimensionItem(_OfTheRun, pytest.Item):
    """One scoring dimension of one experiment: pass, fail, skip (N/A) or error (broken run)."""

    def __init__(self, *, dimension: str, experiment: Experiment, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dimension = dimension
        self.experiment = experiment
        self.result: ExperimentResult | None = None
        """The (first scored) run's result: what the item shows."""
        self.trial_results: list[ExperimentResult] = []
        """Every run's result (one unless the experiment has trials)."""
        self.faultloop_info: dict[str, str] = {}
        """Plain data about the verdict, copied onto the reports (survives xdist)."""
        self.rule: PassRule | None = None
        fault, nodes, rank, iteration = experiment.columns
        self.user_properties.extend(
            [
                ("fault_type", fault),
                ("rank", rank),
                ("iter", iteration),
                ("nodes", nodes),
                ("dimension", dimension),
            ]
        )
        if experiment.perturbation is not None:
            self.user_properties.append(("perturbation", experiment.perturbation))

    def setup(self) -> None:
        run = self.collection.run
        assert run is not None  # given when the run was built
        self.rule = run.configuration.pass_rule
        self.trial_results = run.runner.results(self.experiment.runs())
        scored = [r for r in self.trial_results if r.broken is None and r.verdict is not None]
        self.result = scored[0] if scored else self.trial_results[0]
        self.attach_verdict(run.session.directory.experiment_dir(self.result.experiment))
        if not scored:
            crashes = worker_crashes(
                run.sessions.run_dir, self.parent.nodeid if self.parent else ""
            )
            raise ExperimentBroken(
                f"{self.result.experiment.key}: {self.result.broken}: {self.result.reason}"
                + (
                    f" (and every other of {len(self.trial_results)} trials)"
                    if len(self.trial_results) > 1
                    else ""
                )
                + "".join(f"; before this run of it, {note}" for note in crashes)
            )

    def runtest(self) -> None:
        assert self.result is not None and self.result.verdict is not None and self.rule
        if len(self.trial_results) > 1:
            outcome = self.rule.over_trials(self.trial_results, self.dimension)
            if outcome.passed is None:
                pytest.skip(f"{self.dimension} is N/A in every trial of {self.experiment.key}")
            if not outcome.passed:
                raise DimensionFailed(outcome.message)
            return
        value = self.result.verdict.value(self.dimension)
        passed = self.rule.passes(self.dimension, value)
        if passed is None:
            pytest.skip(f"{self.dimension} is {value}: no expectation for {self.experiment.key}")
        if not passed:
            raise DimensionFailed(self.rule.failure_message(self.result, self.dimension))

    def attach_verdict(self, experiment_dir: Path) -> None:
        """Attach the verdict: properties (JUnit), a report section, plain data for reports."""
        result = self.result
        assert result is not None
        verdict = result.verdict if result.broken is None else None
        value = verdict.value(self.dimension) if verdict else "N/A"
        notes = verdict.notes if verdict else f"{result.broken}: {result.reason}"
        job_id = result.job.job_id if result.job else ""
        self.user_properties.extend([("value", value), ("job_id", job_id), ("notes", notes)])
        self.faultloop_info = {
            "key": self.experiment.key,
            "perturbation": self.experiment.perturbation or "",
            "dimension": self.dimension,
            "value": value,
            "job_id": job_id,
            "notes": notes,
            "broken": result.broken or "",
            "experiment_dir": str(experiment_dir),
        }
        section = section_text(result, self.dimension, value, [self.dimension])
        self.add_report_section("call", "faultloop", section)

    def attach(self, report: pytest.TestReport) -> None:
        """Copy the verdict's plain data onto the setup-error or call report."""
        if (
            self.faultloop_info
            and report.when != "teardown"
            and not (report.when == "setup" and report.passed)
        ):
            report.faultloop = dict(self.faultloop_info, outcome=report.outcome)  # type: ignore[attr-defined]

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, (DimensionFailed, FaultloopError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.experiment.key} {self.dimension}"


def regroup(items: list[pytest.Item]) -> None:
    """Keep each experiment's items together (at its first item's place), in dimension order."""
    groups: dict[str, list[pytest.Item]] = {}
    order: list[str | int] = []
    for index, item in enumerate(items):
        if isinstance(item, DimensionItem) and item.parent is not None:
            key = item.parent.nodeid
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append(item)
        else:
            order.append(index)
    rank = {d: i for i, d in enumerate(DIMENSION_NAMES)}
    regrouped: list[pytest.Item] = []
    for slot in order:
        if isinstance(slot, int):
            regrouped.append(items[slot])
        else:
            regrouped.extend(sorted(groups[slot], key=lambda i: rank[i.dimension]))  # type: ignore[attr-defined]
    items[:] = regrouped


def section_text(
    result: ExperimentResult, heading: str, value: str, dimensions: Sequence[str]
) -> str:
    """The report section: ``heading: value``, what was named beside what was expected for
    ``dimensions``, then what the analyzers and the judge said, in a few lines."""
    lines = [f"{heading}: {value}"]
    if result.broken is None:
        lines += [dimension_named(d).named_line(result) for d in dimensions]
    if result.job is not None:
        lines.append(
            f"job {result.job.job_id}: {result.job.state.value}"
            + (f" (exit {result.job.exit_code})" if result.job.exit_code else "")
        )
    if result.broken is not None:
        lines.append(f"{result.broken}: {result.reason}")
    if result.log_analysis is not None:
        log = result.log_analysis
        lines.append(f"log analyzer ({log.analyzer}): {log.decision_text}")
        lines.append(f"  {issues_line(log)}" if log.primary or log.secondary else "")
        if log.attribution_text.strip() not in ("", attribution_text(log.primary, log.secondary)):
            lines.append(f"  {log.attribution_text.strip()}")
    if result.fr_analysis is not None:
        fr = result.fr_analysis
        lines.append(
            f"FR analyzer ({fr.analyzer}): suspects {fr.suspects or 'none'}, "
            f"{fr.dumps_read} dump(s) read"
            + (f", {len(fr.unreadable)} unusable (no evidence)" if fr.unreadable else "")
        )
        lines += [f"  unusable: {_short(problem)}" for problem in fr.unreadable]
    if result.verdict is not None:
        lines.append(f"judge ({result.verdict.judge}): {result.verdict.notes}")
    return "\n".join(line for line in lines if line)


def _short(problem: str) -> str:
    """``/long/path/_dump_3: reason`` as ``_dump_3: reason``."""
    path, _, reason = problem.partition(": ")
    return f"{Path(path).name}: {reason}" if reason else problem
