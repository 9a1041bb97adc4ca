"""Collection: experiments directory -> pool files -> one collector per experiment -> five items;
a case directory (``case.toml``) -> five items of a replayed experiment.

Node ids read ``experiments/gpu.pool::GPU_SLEEP:1:5:2::rank_primary`` and
``experiments/corpus/public/pt113128_ecc_rank12::rank_primary``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_faultloop.cases import CASE_FILE
from pytest_faultloop.errors import FaultloopError
from pytest_faultloop.models import DIMENSIONS, Experiment, ExperimentResult
from pytest_faultloop.pool import POOL_SUFFIX, PooledEntry

if TYPE_CHECKING:
    from pytest_faultloop.state import Faultloop

POOL_OVERRIDE_NAME = "POOL"
"""The node name of the pool given by the POOL environment variable."""


class ExperimentBroken(FaultloopError):
    """The experiment produced no valid run to score: its items ERROR with this reason."""


class DimensionFailed(AssertionError):
    """The attribution got this dimension wrong."""


def _state(node: pytest.Item | pytest.Collector) -> Faultloop:
    from pytest_faultloop.state import FAULTLOOP_KEY

    return node.config.stash[FAULTLOOP_KEY]


class _CleanErrors:
    """Collectors whose own errors (a bad pool, an unknown pool name) read as one message."""

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
        if isinstance(excinfo.value, FaultloopError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)  # type: ignore[misc]


class ExperimentsDir(_CleanErrors, pytest.Dir):
    """A directory of ``*.pool`` files: yields the selected pools, in the order selected."""

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        state = _state(self)
        pools = state.selected_pool_files(self.path)
        for name, path in pools:
            yield PoolFile.from_parent(self, path=path, pool_name=name)
        chosen = {p for _, p in pools}
        for path in sorted(self.path.glob(f"*{POOL_SUFFIX}")):
            if path not in chosen and self.session.isinitpath(path):
                yield PoolFile.from_parent(self, path=path, pool_name=path.stem)
        for child in super().collect():
            if isinstance(child, PoolFile):
                continue
            if isinstance(child, pytest.Directory) and not self._wanted(child.path):
                continue  # a corpus below the pools replays only when asked for
            yield child

    def _wanted(self, path: Path) -> bool:
        asked = self.session.isinitpath(path, with_parents=True)
        return asked or not any(path.rglob(CASE_FILE))


class CaseDir(_CleanErrors, pytest.Directory):
    """A stored case: one replayed experiment, five items, no job."""

    def collect(self) -> Iterable[pytest.Item | pytest.Collector]:
        experiment = _state(self).case_experiment(self.path)
        for dimension in DIMENSIONS:
            yield DimensionItem.from_parent(self, name=dimension, dimension=dimension,
                                            experiment=experiment)


class PoolFile(_CleanErrors, pytest.File):
    def __init__(self, *, pool_name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pool_name = pool_name

    def collect(self) -> Iterator[ExperimentCollector]:
        for experiment in _state(self).experiments_of(self.pool_name, self.path):
            yield ExperimentCollector.from_parent(self, name=experiment.key, experiment=experiment)


class ExperimentCollector(pytest.Collector):
    def __init__(self, *, experiment: Experiment, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.experiment = experiment

    def collect(self) -> Iterator[DimensionItem]:
        for dimension in DIMENSIONS:
            yield DimensionItem.from_parent(self, name=dimension, dimension=dimension,
                                            experiment=self.experiment)


class DimensionItem(pytest.Item):
    """One scoring dimension of one experiment: pass, fail, skip (N/A) or error (broken run)."""

    def __init__(self, *, dimension: str, experiment: Experiment, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dimension = dimension
        self.experiment = experiment
        self.result: ExperimentResult | None = None
        self.faultloop_info: dict[str, str] = {}
        """Plain data about the verdict, copied onto the reports (survives xdist)."""
        fault, nodes, rank, iteration = experiment.row
        self.user_properties.extend([
            ("fault_type", fault), ("rank", rank), ("iter", iteration), ("nodes", nodes),
            ("dimension", dimension),
        ])

    def setup(self) -> None:
        state = _state(self)
        self.result = state.runner.result(self.experiment)
        state.describe(self)
        if self.result.broken is not None:
            raise ExperimentBroken(f"{self.experiment.key}: {self.result.broken}: {self.result.reason}")

    def runtest(self) -> None:
        assert self.result is not None and self.result.verdict is not None
        state = _state(self)
        value = self.result.verdict.value(self.dimension)
        passed = state.passes(self.dimension, value)
        if passed is None:
            pytest.skip(f"{self.dimension} is {value}: no expectation for {self.experiment.key}")
        if not passed:
            raise DimensionFailed(state.pass_rule.failure_message(self.result, self.dimension))

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
    rank = {d: i for i, d in enumerate(DIMENSIONS)}
    regrouped: list[pytest.Item] = []
    for slot in order:
        if isinstance(slot, int):
            regrouped.append(items[slot])
        else:
            regrouped.extend(sorted(groups[slot], key=lambda i: rank[i.dimension]))  # type: ignore[attr-defined]
    items[:] = regrouped


def entry_to_experiment(pooled: PooledEntry, *, workload: str, gpus_per_node: int, pool: str,
                        priority: int) -> Experiment:
    return Experiment(entry=pooled.entry, workload=workload, gpus_per_node=gpus_per_node,
                      pool=pool, source=pooled.source, line=pooled.line, priority=priority)
