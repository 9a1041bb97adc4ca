"""Freezing a session: each stored experiment becomes a case that replays without a job.

``python -m pytest_faultloop freeze SESSION_DIR --into DIR [--only FAILED|ALL]`` writes
``DIR/<experiment dir name>/`` with ``case.toml`` (``[injected]`` truth from the pool entry, the
job's shape in ``[job]``, the session and job id as ``source``), the log the analyzers read,
the flight-recorder dumps and the fault markers (``fault_injection*.json``); a fault on
several ranks keeps its rank list as a string (``rank = "12+14@3"``). Replaying the frozen cases with the same
analyzers and judge gives the verdicts the live run gave: this turns expensive GPU-cluster runs
into a CPU regression suite for analyzers.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pytest_faultloop.inputs.cases import CASE_FILE
from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.layout import CHECKPOINTS, ExperimentLayout
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE, PassRule, scored_verdict
from pytest_faultloop.store.artifacts import stored_artifacts
from pytest_faultloop.store.results import load_results
from pytest_faultloop.store.stored_files import copy_file, refuse_links

Selection = Literal["ALL", "FAILED"]


@dataclass
class FreezeOutcome:
    """What a freeze wrote (case directories) and what it skipped, and why."""

    written: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def freeze_session(
    session_dir: Path, into: Path, only: Selection = "ALL", rule: PassRule = DEFAULT_RULE
) -> FreezeOutcome:
    """Write one case per stored experiment of ``session_dir`` (``FAILED``: only those with a
    failing dimension or a failed analysis/judge); invalid runs cannot be frozen. Nothing is
    written when a case's directory exists or a file to copy is a symbolic link (LinkRefused):
    a corpus is meant to be committed, a link would carry what it points to into it."""
    unreadable: list[str] = []
    results = load_results(session_dir, unreadable=unreadable)
    if not results and not unreadable:
        raise ConfigError(
            f"{session_dir}: no result.json files: not a session directory "
            "(give .../fault_injection/<YYYYMMDD_HHMMSS>)"
        )
    frozen = FreezeOutcome(skipped=[f"unreadable: {u}" for u in unreadable])
    chosen: list[tuple[ExperimentResult, list[tuple[Path, Path]], Path]] = []
    for result in results:
        why = _not_freezable(result)
        if why is None and only == "FAILED" and not _failed(result, rule):
            why = "passed every dimension"
        if why is not None:
            frozen.skipped.append(f"{result.experiment.key}: {why}")
            continue
        target = into / result.experiment.dirname
        if target.exists():
            raise ConfigError(f"{target} exists: freeze into an empty or new directory")
        chosen.append((result, _case_files(result, session_dir), target))
    for result, files, target in chosen:
        _write_case(result, files, session_dir, target)
        frozen.written.append(target)
    return frozen


def _not_freezable(result: ExperimentResult) -> str | None:
    if result.experiment.perturbation is not None:
        return "a perturbed copy (freeze its experiment; --faultloop-perturb remakes it)"
    if result.experiment.case is not None:
        return "already a replayed case (copy its directory instead)"
    if result.job is None or result.artifacts is None or result.artifacts.log is None:
        return "no job log stored"
    if not result.run_valid:
        return f"invalid run ({result.reason})"
    return None


def _failed(result: ExperimentResult, rule: PassRule) -> bool:
    verdict = scored_verdict(result)
    if verdict is None:
        return True
    return any(rule.passes(d, verdict.value(d)) is False for d in DIMENSION_NAMES)


def _case_files(result: ExperimentResult, session_dir: Path) -> list[tuple[Path, Path]]:
    """What the result's case holds: (stored file, its path in the case) for the log, the
    dumps and the markers, as the session holds them (:func:`stored_artifacts`); LinkRefused
    when one of them, or a directory on the way, is a symbolic link."""
    artifacts = stored_artifacts(result, session_dir)
    assert artifacts.log is not None
    layout = ExperimentLayout(artifacts.experiment_dir)
    dumps = sorted(p for p in artifacts.fr_dir.glob("*") if p.is_file())
    markers = [p for p in [layout.marker, *layout.rank_markers()] if os.path.lexists(p)]
    for marker in markers:
        refuse_links(marker, layout.root)
    return [
        (artifacts.log, Path("logs") / artifacts.log.name),
        *[(dump, Path(CHECKPOINTS) / dump.name) for dump in dumps],
        *[(marker, Path(marker.name)) for marker in markers],
    ]


def _write_case(
    result: ExperimentResult, files: list[tuple[Path, Path]], session_dir: Path, target: Path
) -> None:
    experiment, job = result.experiment, result.job
    assert job is not None
    entry = experiment.live
    for source, relative in files:
        (target / relative).parent.mkdir(parents=True, exist_ok=True)
        copy_file(source, target / relative)
    said = result.verdict.notes if result.verdict else f"{result.broken}: {result.reason}"
    lines = [
        f"id = {_quote(experiment.dirname)}",
        f"source = {_quote(f'session {session_dir}, job {job.job_id} ({job.backend})')}",
        f"notes = {_quote(f'frozen from a live run of {experiment.workload}; then: {said}')}",
        "",
        "[job]",
        f"world_size = {experiment.world_size}",
        f"gpus_per_node = {experiment.gpus_per_node}",
        "",
        "[injected]",
        f"fault_type = {_quote(entry.fault.value)}",
        f"rank = {_quote(entry.rank_text) if entry.targets else entry.rank}",
        f"iter = {entry.iter}",
        f"nodes = {entry.nodes}",
    ]
    (target / CASE_FILE).write_text("\n".join(lines) + "\n")


def _quote(text: str) -> str:
    """A TOML basic string (JSON's escapes are valid TOML)."""
    return json.dumps(text, ensure_ascii=False)
