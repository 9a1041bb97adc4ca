"""How far the two judges of a hybrid run agree: raw agreement over all labels, and Cohen's κ
per dimension with its 95 % interval (agreement beyond what chance would give)."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.report.stats import cohen_kappa
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES


def agreement_lines(results: Sequence[ExperimentResult]) -> list[str]:
    """The summary lines; none when no hybrid judge ran."""
    pairs: dict[str, list[tuple[str, str]]] = {d: [] for d in DIMENSION_NAMES}
    for result in results:
        extra = result.verdict.extra if result.verdict else {}
        for dimension in DIMENSION_NAMES:
            rules, llm = extra.get(f"deterministic.{dimension}"), extra.get(f"llm.{dimension}")
            if rules is not None and llm is not None:
                pairs[dimension].append((rules, llm))
    labelled = sum(len(p) for p in pairs.values())
    if not labelled:
        return []
    agreed = sum(a == b for p in pairs.values() for a, b in p)
    lines = [
        f"judges agreed on {agreed} of {labelled} labels ({100 * agreed // labelled}%); "
        "Cohen's kappa per dimension (95 % interval):"
    ]
    for dimension, labels in pairs.items():
        if labels:
            kappa = cohen_kappa(labels)
            lines.append(
                f"  {dimension}: kappa {kappa.value:.2f} ({kappa.low:.2f} to {kappa.high:.2f}), "
                f"n={kappa.n}"
            )
    return lines
