"""Experiments as Python tests: the session-scoped ``faultloop`` fixture, the ``faultloop``
marker feeding the ``faultloop_result`` fixture, and results that assert like pool items.

Experiments asked for here go through the run's runner: the same BATCH_SIZE slots as pool items
(across xdist workers too), the same session directory and report, and the run-once rule (the
same entry on the same settings runs one job per pytest run, whoever asks first).
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from pydantic import PrivateAttr, ValidationError

from pytest_faultloop.engine.job_specs import (
    effective_fault_delay,
    effective_script,
    effective_time,
)
from pytest_faultloop.inputs.pool import PoolRules, check_rules, parse_entry
from pytest_faultloop.inputs.settings import SETTINGS, Settings
from pytest_faultloop.models import Experiment, ExperimentResult, Overrides, PoolEntry
from pytest_faultloop.models.errors import ConfigError, FaultloopError
from pytest_faultloop.models.setting_types import time_limit_seconds
from pytest_faultloop.plugin.activation import run_state
from pytest_faultloop.plugin.items import DimensionFailed, ExperimentBroken, section_text
from pytest_faultloop.plugin.keys import CURRENT_ITEM_KEY, RUN_KEY
from pytest_faultloop.plugin.preflight import check_job_knobs, usage_errors
from pytest_faultloop.plugin.state import Faultloop
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES, dimension_named
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE, PassRule

MARKER = "faultloop"
MARKER_HELP = (
    "faultloop(ENTRY, ..., workload=, gpus_per_node=, fault_delay=, time=, sbatch_script=, "
    "env=): the experiment the faultloop_result fixture runs; several entries parametrise the "
    "test (ids are the entries)"
)
PER_EXPERIMENT = (*(s.field for s in SETTINGS if s.per_experiment), "env")
"""The settings a Python test may choose per experiment (the rows marked so, and the job's
extra environment); the others apply to the whole run."""


class AssertableResult(ExperimentResult):
    """An experiment's result with the run's pass rule: asserts like a pool item."""

    _rule: PassRule = PrivateAttr(default=DEFAULT_RULE)

    @classmethod
    def of(cls, result: ExperimentResult, rule: PassRule) -> AssertableResult:
        made = cls.model_validate(result.model_dump())
        made._rule = rule
        return made

    def value(self, dimension: str) -> str:
        """The verdict's value for ``dimension``; ExperimentBroken when there is no verdict."""
        dimension_named(dimension)  # KeyError naming the known ones
        if self.broken is not None or self.verdict is None:
            raise ExperimentBroken(
                f"{self.experiment.key}: {self.broken or 'judge_failed'}: "
                f"{self.reason or 'no verdict'}"
            )
        return self.verdict.value(dimension)

    def passes(self, dimension: str) -> bool | None:
        """Whether the dimension passes under the run's rule; None when it does not apply."""
        return self._rule.passes(dimension, self.value(dimension))

    def assert_dimension(self, dimension: str) -> None:
        """Fail with the judge's notes, as the pool item would; skip when the dimension does
        not apply (``N/A``); error when the experiment has no valid run to score."""
        __tracebackhide__ = True
        passed = self.passes(dimension)
        if passed is None:
            pytest.skip(f"{dimension} is N/A: no expectation for {self.experiment.key}")
        if not passed:
            raise DimensionFailed(self._rule.failure_message(self, dimension))

    def assert_all(self) -> None:
        """Every dimension that applies passes; the failure lists each one that does not."""
        __tracebackhide__ = True
        failed = [
            self._rule.failure_message(self, d) for d in DIMENSION_NAMES if self.passes(d) is False
        ]
        if failed:
            raise DimensionFailed("\n".join(failed))


class FaultloopFixture:
    """What the ``faultloop`` fixture gives a test: the run's scheduler, backend and session."""

    def __init__(self, state: Faultloop) -> None:
        self._state = state
        state.start()

    @property
    def settings(self) -> Settings:
        return self._state.configuration.settings

    @property
    def session_path(self) -> Path:
        return self._state.session.directory.path

    @property
    def pass_rule(self) -> PassRule:
        return self._state.configuration.pass_rule

    def run(
        self,
        entry: str | PoolEntry,
        workload: str | None = None,
        gpus_per_node: int | None = None,
        **settings: Any,
    ) -> AssertableResult:
        """Run ``FAULT_TYPE:RANK:ITER:NODES`` (in a scheduler slot), analyze, judge and record
        it; settings (``fault_delay``, ``time``, ``sbatch_script``, ``env``) apply to this
        experiment only. The same entry on the same settings runs once per pytest run."""
        __tracebackhide__ = True
        experiment = self.experiment(entry, workload, gpus_per_node, **settings)
        result = self._state.runner.in_background(experiment)
        return self._noted(result)

    def replay(self, case_dir: str | os.PathLike[str]) -> AssertableResult:
        """Replay a stored case (a directory with ``case.toml``) through the analyzers and
        judge; no job."""
        __tracebackhide__ = True
        path = Path(case_dir)
        if not path.is_absolute():
            path = Path(self._state.config.invocation_params.dir) / path
        experiment = self._state.collection.case_experiment(path.resolve())
        return self._noted(self._state.runner.result(experiment))

    def experiment(
        self,
        entry: str | PoolEntry,
        workload: str | None = None,
        gpus_per_node: int | None = None,
        **settings: Any,
    ) -> Experiment:
        """The experiment ``run`` would run (its ``key`` names it in the session); raises
        ConfigError naming a bad entry or setting."""
        state = self._state
        call = (
            f"faultloop.run({str(entry)!r})"
            if not isinstance(entry, PoolEntry)
            else (f"faultloop.run({entry.key!r})")
        )
        unknown = sorted(set(settings) - set(PER_EXPERIMENT))
        if unknown:
            raise ConfigError(
                f"{call}: {unknown[0]!r} is not a per-experiment setting (those are "
                f"{', '.join(PER_EXPERIMENT)}); set the others for the whole run (command "
                "line, environment or ini)"
            )
        chosen = state.configuration.chosen_workload(
            workload or state.configuration.settings.workload,
            f"{call[:-1]}, workload=...)"
            if workload
            else state.configuration.sources.get("workload"),
        )
        gpus = (
            state.configuration.settings.gpus_per_node if gpus_per_node is None else gpus_per_node
        )
        if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 1:
            raise ConfigError(f"{call}: gpus_per_node={gpus!r}: expected a positive integer")
        try:
            parsed = entry if isinstance(entry, PoolEntry) else parse_entry(str(entry))
            check_rules(parsed, PoolRules(gpus, chosen.min_nodes, chosen.name, chosen.refusal))
        except ValueError as exc:
            raise ConfigError(f"{call}: {exc}") from None
        overrides = self._overrides(
            call,
            chosen.name if chosen.name != state.configuration.workload.name else None,
            gpus if gpus != state.configuration.settings.gpus_per_node else None,
            settings,
        )
        test = _current_test(state.config)
        key = parsed.key + (f"@{overrides.label}" if overrides is not None else "")
        return Experiment(
            entry=parsed,
            workload=chosen.name,
            gpus_per_node=gpus,
            pool=test.nodeid.split("::", 1)[0] if test else "python",
            source=test.nodeid if test else "faultloop fixture",
            line=(test.location[1] or 0) + 1 if test else 0,
            priority=state.collection.priority_of(key),
            overrides=overrides,
            test=test.nodeid if test else None,
        )

    def _overrides(
        self, call: str, workload: str | None, gpus: int | None, settings: dict[str, Any]
    ) -> Overrides | None:
        """The chosen settings that differ from what the run would use (``workload`` and
        ``gpus`` are given only when they differ)."""
        state = self._state
        try:
            chosen = Overrides.model_validate(settings)
        except ValidationError as exc:
            err = exc.errors()[0]
            name = ".".join(str(p) for p in err["loc"])
            message = str(err["msg"]).removeprefix("Value error, ")
            raise ConfigError(
                f"{call}: {name}={settings.get(str(err['loc'][0]))!r}: {message}"
            ) from None
        if chosen.sbatch_script is not None and not chosen.sbatch_script.is_absolute():
            chosen = chosen.model_copy(
                update={"sbatch_script": state.config.rootpath / chosen.sbatch_script}
            )
        if chosen.sbatch_script is not None and not chosen.sbatch_script.is_file():
            raise ConfigError(f"{call}: sbatch_script={str(chosen.sbatch_script)!r} does not exist")
        check_job_knobs(state.config, chosen.env, f"{call[:-1]}, env=...)")
        workload_def = (
            state.configuration.workloads[workload]
            if workload is not None
            else state.configuration.workload
        )
        default = Overrides()
        differs: dict[str, Any] = {}
        if workload is not None:
            differs["workload"] = workload
        if gpus is not None:
            differs["gpus_per_node"] = gpus
        if chosen.fault_delay is not None and chosen.fault_delay != effective_fault_delay(
            state.configuration.settings, workload_def, default
        ):
            differs["fault_delay"] = chosen.fault_delay
        if chosen.time is not None and time_limit_seconds(chosen.time) != time_limit_seconds(
            effective_time(state.configuration.settings, workload_def, default)
        ):
            differs["time"] = chosen.time
        if chosen.sbatch_script is not None and chosen.sbatch_script.resolve() != (
            effective_script(state.configuration.settings, workload_def, default).resolve()
        ):
            differs["sbatch_script"] = chosen.sbatch_script
        if chosen.env:
            differs["env"] = {str(k): str(v) for k, v in chosen.env.items()}
        return Overrides(**differs) if differs else None

    def _noted(self, result: ExperimentResult) -> AssertableResult:
        """The result, also noted on the running test: a report section and a property."""
        test = _current_test(self._state.config)
        if test is not None:
            test.add_report_section(
                "call",
                f"faultloop {result.experiment.key}",
                result_text(result, self._state.configuration.pass_rule),
            )
            test.user_properties.append((f"faultloop {result.experiment.key}", _values(result)))
        return AssertableResult.of(result, self._state.configuration.pass_rule)


def result_text(result: ExperimentResult, rule: PassRule) -> str:
    """Every dimension's value, what was named where one fails under ``rule``, and what the
    analyzers and judge said, in a few lines."""
    verdict = result.verdict
    failing = [d for d in DIMENSION_NAMES if verdict and rule.passes(d, verdict.value(d)) is False]
    return section_text(result, "verdict", _values(result), failing)


def _values(result: ExperimentResult) -> str:
    if result.broken is not None or result.verdict is None:
        return f"{result.broken or 'judge_failed'}: {result.reason}"
    verdict = result.verdict
    return " ".join(f"{d}={verdict.value(d)}" for d in DIMENSION_NAMES)


def _current_test(config: pytest.Config) -> pytest.Item | None:
    return config.stash.get(CURRENT_ITEM_KEY, None)


# -- fixtures and marker (exposed by the plugin module) -------------------------------------------


@pytest.fixture(scope="session")
def faultloop(request: pytest.FixtureRequest) -> FaultloopFixture:
    """Run and replay experiments from Python tests, on the run's scheduler and session."""
    try:
        return FaultloopFixture(run_state(request.config))
    except FaultloopError as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)  # outside the handler: the message once, unchained


@pytest.fixture
def faultloop_result(
    request: pytest.FixtureRequest, faultloop: FaultloopFixture
) -> AssertableResult:
    """The result of the experiment named by the test's ``@pytest.mark.faultloop(ENTRY)`` (or
    by indirect parametrisation); a run with nothing to score errors the test."""
    __tracebackhide__ = True
    entry, settings = _marked_experiment(request)
    result = faultloop.run(entry, **settings)
    if result.broken is not None:
        raise ExperimentBroken(f"{result.experiment.key}: {result.broken}: {result.reason}")
    return result


def _marked_experiment(request: pytest.FixtureRequest) -> tuple[Any, dict[str, Any]]:
    marker = request.node.get_closest_marker(MARKER)
    settings = dict(marker.kwargs) if marker is not None else {}
    param = getattr(request, "param", None)
    if param is not None:
        return param, settings
    if marker is None or len(marker.args) != 1:
        raise ConfigError(
            f"{request.node.nodeid}: faultloop_result needs the experiment: mark the test "
            "@pytest.mark.faultloop('FAULT_TYPE:RANK:ITER:NODES', ...) or parametrise "
            "faultloop_result indirectly with entries"
        )
    return marker.args[0], settings


class PythonTestHooks:
    """The marker's parametrisation and the running test (where results are noted)."""

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """``@pytest.mark.faultloop(E1, E2, ...)`` on a test using ``faultloop_result``: one
        test per entry, its id the entry."""
        if "faultloop_result" not in metafunc.fixturenames:
            return
        marker = metafunc.definition.get_closest_marker(MARKER)
        if marker is None or len(marker.args) < 2:
            return
        if any(
            "faultloop_result" in _argnames(m)
            for m in metafunc.definition.iter_markers("parametrize")
        ):
            return  # the test parametrises faultloop_result itself
        entries = list(marker.args)
        ids = [e.key if isinstance(e, PoolEntry) else str(e) for e in entries]
        metafunc.parametrize("faultloop_result", entries, indirect=True, ids=ids)

    def pytest_report_collectionfinish(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> list[str]:
        """A run whose experiments are only Python tests' (no pool or case collected) is
        created once a collected test asks for it, so its header names the backend and the
        analyzers as a pool run's does."""
        asks = ("faultloop", "faultloop_result")
        if RUN_KEY in config.stash or not any(
            name in asks for item in items for name in getattr(item, "fixturenames", ())
        ):
            return []
        with usage_errors():
            return run_state(config).pytest_report_header()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        item.config.stash[CURRENT_ITEM_KEY] = item
        try:
            return (yield)
        finally:
            del item.config.stash[CURRENT_ITEM_KEY]


def _argnames(marker: pytest.Mark) -> list[str]:
    names = marker.args[0] if marker.args else marker.kwargs.get("argnames", "")
    if isinstance(names, str):
        return [n.strip() for n in names.split(",")]
    return list(names)
