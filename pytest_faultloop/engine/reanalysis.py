"""What a re-analysis scores: exactly the experiments a session has stored, nothing else.

``--faultloop-reanalyze`` re-runs analyzers and judge on a session's artifacts. Its experiments
come from the session's ``result.json`` files (those with a job), grouped by the pool that listed
them, so node ids match the original run's and ``-k``/``--lf`` narrow as usual (experiments a
Python test asked for are re-scored when that test runs again). Naming pools
explicitly is allowed only when the session holds every experiment they list; otherwise the run
is refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pytest_faultloop.models import Experiment
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.store.results import load_results


def stored_experiments(
    session_dir: Path, unreadable: list[str] | None = None
) -> dict[str, list[Experiment]]:
    """Pool name -> the session's experiments with a stored job, in priority order; each
    ``result.json`` that cannot be read is a ``path: reason`` line in ``unreadable``."""
    found: list[str] = []
    by_pool: dict[str, list[Experiment]] = {}
    seen: set[str] = set()
    for result in load_results(session_dir, unreadable=found):
        experiment = result.experiment
        if (
            result.job is None
            or experiment.test is not None
            or experiment.perturbation is not None  # derived: --faultloop-perturb makes it
            or experiment.base_key in seen
        ):
            continue
        seen.add(experiment.base_key)  # a repeated experiment's trials re-score together
        by_pool.setdefault(experiment.pool, []).append(
            experiment.model_copy(update={"trial": None})
        )
    if not by_pool:
        also = f"; {len(found)} result.json unreadable: {found[0]}" if found else ""
        raise ConfigError(
            f"--faultloop-reanalyze: session {session_dir} holds no experiment with a stored "
            f"job (no result.json with a job{also}); run the pool first"
        )
    if unreadable is not None:
        unreadable.extend(found)
    return by_pool


def check_requested(
    requested: Iterable[str], stored: dict[str, list[Experiment]], session_dir: Path, named: str
) -> None:
    """Refuse explicitly named pools that list experiments the session does not hold."""
    held = {e.key for experiments in stored.values() for e in experiments}
    missing = sorted(set(requested) - held)
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise ConfigError(
            f"--faultloop-reanalyze: {named} lists {len(missing)} experiment(s) that session "
            f"{session_dir} never ran ({shown}); drop the pool selection to re-score the "
            f"session's own {len(held)} experiment(s), or select with -k"
        )
