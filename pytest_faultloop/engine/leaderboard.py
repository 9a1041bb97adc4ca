"""Several attribution configurations on the same stored artifacts: each re-analyzes and
re-judges a session's experiments (live runs or replayed cases), and one table compares them —
pass rate with its 95 % interval per dimension, and an exact McNemar p-value against the first
configuration, paired by experiment.

The Nth configuration takes the Nth ``--log-analyzer``, ``--fr-analyzer`` and ``--judge`` (the
last one given, or the default, where fewer were given). A session whose jobs ran on several
workloads gets a second table: configuration × workload, the rates clustered by experiment as
the report's, with each workload's median job time.
"""

from __future__ import annotations

import tempfile
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_faultloop.analyzers.kinds import CommandLog
from pytest_faultloop.engine.builtin import BuiltinStages
from pytest_faultloop.engine.pipeline import Pipeline
from pytest_faultloop.inputs.perturb.copies import not_applicable, perturbed_artifacts
from pytest_faultloop.inputs.perturb.perturbation import Composition, NotApplicable
from pytest_faultloop.inputs.settings import Settings, replaced
from pytest_faultloop.models import Artifacts, Decision, Experiment, ExperimentResult, Verdict
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.report.aggregate import by_workload
from pytest_faultloop.report.decision_errors import DecisionErrors
from pytest_faultloop.report.mdtable import table
from pytest_faultloop.report.robustness import cell_change
from pytest_faultloop.report.stats import mcnemar_exact, rate_text
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES
from pytest_faultloop.scoring.pass_rule import PassRule
from pytest_faultloop.store.artifacts import stored_artifacts
from pytest_faultloop.store.results import load_results


@dataclass(frozen=True)
class Configuration:
    log_analyzer: str = "builtin"
    fr_analyzer: str = "builtin"
    judge: str = "deterministic"

    @property
    def name(self) -> str:
        parts = [self.log_analyzer]
        if self.fr_analyzer != "builtin":
            parts.append(f"fr={self.fr_analyzer}")
        if self.judge != "deterministic":
            parts.append(f"judge={self.judge}")
        prefix = CommandLog.name
        return " ".join(p if not p.startswith(prefix) else prefix + "…" + p[-24:] for p in parts)


def configurations(
    log: Sequence[str], fr: Sequence[str], judge: Sequence[str]
) -> list[Configuration]:
    """The Nth of each option forms the Nth configuration (the last repeats, or the default)."""
    count = max(len(log), len(fr), len(judge), 1)

    def pick(values: Sequence[str], index: int, default: str) -> str:
        return values[min(index, len(values) - 1)] if values else default

    return [
        Configuration(
            pick(log, i, "builtin"), pick(fr, i, "builtin"), pick(judge, i, "deterministic")
        )
        for i in range(count)
    ]


@dataclass(frozen=True)
class Scored:
    """One configuration's verdicts, by experiment key (None: it could not score that one)."""

    configuration: Configuration
    verdicts: dict[str, Verdict | None]
    results: dict[str, ExperimentResult] = field(default_factory=dict)
    """The experiments as written (no perturbed copy), re-scored by this configuration, each
    with the job that ran it (the job times)."""


def score_session(
    session: Path,
    configs: Sequence[Configuration],
    base: Settings | None = None,
    perturbations: Sequence[Composition] = (),
) -> list[Scored]:
    """Re-analyze and re-judge every stored experiment with artifacts, as the session holds
    them (:func:`stored_artifacts`: LinkRefused before any analysis for a symbolic link), once
    per configuration, and each perturbed copy of it (``KEY[NAME]``) that applies."""
    results = [
        r.model_copy(update={"artifacts": stored_artifacts(r, session)})
        for r in load_results(session)
        if r.artifacts is not None and r.experiment.perturbation is None
    ]
    if not results:
        raise ConfigError(
            f"{session}: no stored experiment with artifacts to re-analyze "
            "(give a session directory whose result.json files hold artifacts)"
        )
    with tempfile.TemporaryDirectory(prefix="faultloop-leaderboard-") as scratch:
        inputs = [(r.experiment, r.artifacts) for r in results if r.artifacts is not None]
        inputs += _perturbed_inputs(results, perturbations, Path(scratch))
        scored = []
        for config in configs:
            settings = replaced(
                base or Settings(),
                log_analyzer=config.log_analyzer,
                fr_analyzer=config.fr_analyzer,
                judge=config.judge,
            )
            pipeline = Pipeline(BuiltinStages(settings, threading.Event()))
            rescored = {e.key: pipeline.on_artifacts(e, a) for e, a in inputs}
            verdicts = {key: result.verdict for key, result in rescored.items()}
            plain = {
                r.experiment.key: rescored[r.experiment.key].model_copy(update={"job": r.job})
                for r in results
            }
            scored.append(Scored(config, verdicts, plain))
    return scored


def _perturbed_inputs(
    results: Sequence[ExperimentResult], perturbations: Sequence[Composition], scratch: Path
) -> list[tuple[Experiment, Artifacts]]:
    """Each result's artifacts under each perturbation that applies (written once, read by
    every configuration)."""
    inputs = []
    for index, result in enumerate(results):
        experiment, artifacts = result.experiment, result.artifacts
        assert artifacts is not None
        for composition in perturbations:
            if not_applicable(composition, experiment, artifacts.fr_dir):
                continue
            into = scratch / f"{index}" / composition.name
            try:
                copy = perturbed_artifacts(artifacts, composition, into, experiment)
            except NotApplicable:
                continue
            inputs.append((experiment.perturbed(composition.name), copy))
    return inputs


def leaderboard_table(scored: Sequence[Scored], rule: PassRule) -> list[str]:
    """configuration × dimension: ``k/n (rate%, low–high)``, and McNemar p against the first;
    with perturbed copies, a robustness column: the cells they lost (and gained) against the
    same configuration's verdicts on the artifacts as written."""
    first = scored[0]
    robust = any(_is_perturbed(key) for entry in scored for key in entry.verdicts)
    rows = []
    for entry in scored:
        plain = [v for k, v in entry.verdicts.items() if not _is_perturbed(k)]
        cells = [entry.configuration.name, str(sum(v is not None for v in plain))]
        for dimension in DIMENSION_NAMES:
            outcomes = _outcomes(entry, dimension, rule)
            k, n = sum(outcomes.values()), len(outcomes)
            cell = rate_text(k, n)
            if entry is not first and n:
                cell += f"; p={_paired_p(first, entry, dimension, rule):.3g}"
            cells.append(cell)
        if robust:
            cells.append(_robustness(entry, rule))
        rows.append(tuple(cells))
    return table(
        ("configuration", "scored", *DIMENSION_NAMES, *(["robustness"] if robust else [])), rows
    )


def workload_table(scored: Sequence[Scored], rule: PassRule) -> list[str]:
    """configuration × workload: each dimension's ``k/n (rate%, low–high)`` (clustered by
    experiment where trials repeat, as in the report) and the workload's median job time;
    [] when the session ran on one workload."""
    rows = []
    for entry in scored:
        for workload, rates in by_workload(list(entry.results.values()), rule).items():
            group = rates.rates
            rows.append(
                (
                    entry.configuration.name,
                    workload,
                    f"{group.scored}/{group.experiments}",
                    *(str(group.rates[d]) for d in DIMENSION_NAMES),
                    rates.median_job,
                )
            )
    if not rows:
        return []
    return table(("configuration", "workload", "scored", *DIMENSION_NAMES, "median job s"), rows)


def decision_table(scored: Sequence[Scored]) -> list[str]:
    """configuration × expected decision: what each configuration decided (the confusion
    matrix), and its right decisions, false STOPs and false RESTARTs with their intervals."""
    rows = []
    for entry in scored:
        errors = DecisionErrors.of(list(entry.results.values()))
        expected = [d for d in Decision if any(e is d for e, _ in errors.matrix)]
        for at, wanted in enumerate(expected):
            rates = (errors.as_expected, errors.false_stop, errors.false_restart)
            rows.append(
                (
                    entry.configuration.name if at == 0 else "",
                    wanted.value,
                    *(errors.matrix[wanted, said] for said in Decision),
                    *(str(rate) if at == 0 else "" for rate in rates),
                )
            )
    heads = ("configuration", "expected \\ decided", *(d.value for d in Decision))
    return table((*heads, "as expected", "false STOP", "false RESTART"), rows) if rows else []


def stability_table(runs: Sequence[Sequence[Scored]], limit: int = 10) -> list[str]:
    """Each configuration's restart decisions over the same artifacts analyzed again (``runs``:
    one ``score_session`` per repeat): the cases whose decision flipped, of all, with the
    Wilson interval, and the first ``limit`` of them with their share of analyses that left
    the case's most common decision. A deterministic analyzer must show 0."""
    rows = []
    for at, entry in enumerate(runs[0]):
        said: dict[str, list[str]] = {}
        for run in runs:
            for key, result in run[at].results.items():
                decision = result.log_analysis.decision.value if result.log_analysis else "—"
                said.setdefault(key, []).append(decision)
        flipped = {key: d for key, d in said.items() if len(set(d)) > 1}
        cases = [
            f"{key} {sum(x != Counter(d).most_common(1)[0][0] for x in d)}/{len(d)} "
            f"({', '.join(d)})"
            for key, d in list(flipped.items())[:limit]
        ]
        more = f"; {len(flipped) - limit} more" if len(flipped) > limit else ""
        rows.append(
            (
                entry.configuration.name,
                len(runs),
                rate_text(len(flipped), len(said)),
                "; ".join(cases) + more or "none",
            )
        )
    return table(
        ("configuration", "analyses", "cases flipped", "flipped cases (left the majority)"), rows
    )


def _is_perturbed(key: str) -> bool:
    return key.endswith("]")


def _robustness(entry: Scored, rule: PassRule) -> str:
    """``lost L of N cells (gained G)``: perturbed copies against their unperturbed verdicts."""
    lost = gained = compared = 0
    for key, after in entry.verdicts.items():
        if not _is_perturbed(key):
            continue
        before = entry.verdicts.get(key[: key.rindex("[")])
        if before is None:
            continue
        for dimension in DIMENSION_NAMES:
            change = cell_change(rule, dimension, before, after)
            compared += change is not None
            lost += change == "lost"
            gained += change == "gained"
    return f"lost {lost} of {compared} cells" + (f" (gained {gained})" if gained else "")


def _outcomes(entry: Scored, dimension: str, rule: PassRule) -> dict[str, bool]:
    outcomes = {}
    for key, verdict in entry.verdicts.items():
        if verdict is not None and not _is_perturbed(key):
            passed = rule.passes(dimension, verdict.value(dimension))
            if passed is not None:
                outcomes[key] = passed
    return outcomes


def _paired_p(first: Scored, other: Scored, dimension: str, rule: PassRule) -> float:
    """Exact McNemar over the experiments both configurations scored."""
    a, b = _outcomes(first, dimension, rule), _outcomes(other, dimension, rule)
    shared = a.keys() & b.keys()
    improved = sum(not a[k] and b[k] for k in shared)
    regressed = sum(a[k] and not b[k] for k in shared)
    return mcnemar_exact(regressed, improved)
