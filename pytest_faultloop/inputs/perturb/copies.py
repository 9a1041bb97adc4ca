"""Perturbed copies: a log, a dump directory or a whole artifact tree rewritten by a
composition, beside the original (which is never touched)."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from pytest_faultloop.inputs.cases import CASE_FILE, LOG_SUFFIXES, load_case
from pytest_faultloop.inputs.perturb.fr_rewrites import dump_subject, rank_files
from pytest_faultloop.inputs.perturb.perturbation import Composition, NotApplicable
from pytest_faultloop.models import Artifacts, Experiment
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.models.layout import CHECKPOINTS, ExperimentLayout
from pytest_faultloop.scoring.truth import truth_of
from pytest_faultloop.store.artifacts import read_marker, read_rank_markers, refuse_linked
from pytest_faultloop.store.stored_files import copy_file, copy_tree, open_nofollow, refuse_links_in

_BLOCK = 1 << 20


def _lines(stream: BinaryIO) -> Iterator[bytes]:
    """A binary stream's lines without their ``\\n``, read in blocks."""
    head = b""
    while block := stream.read(_BLOCK):
        *whole, head = (head + block).split(b"\n")
        yield from whole
    if head:
        yield head


def perturb_log(source: Path, target: Path, composition: Composition) -> Path:
    """Write ``source`` rewritten line by line to ``target`` (returned), with the source's
    permission bits (a private log's copy stays private); LinkRefused for a link."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)  # an earlier copy, read-only or a link, is replaced
    with os.fdopen(open_nofollow(source), "rb") as read, target.open("xb") as write:
        os.fchmod(write.fileno(), stat.S_IMODE(os.fstat(read.fileno()).st_mode))
        for line in composition.rewrite_lines(_lines(read)):
            write.write(line + b"\n")
    return target


def perturb_dumps(
    source: Path,
    target: Path,
    composition: Composition,
    culprits: tuple[int, ...] | None,
    gpus_per_node: int,
) -> Path:
    """Copy the dump directory ``source`` to ``target`` and apply the composition's FR
    rewrites there; raises NotApplicable when one of them cannot apply, LinkRefused when
    ``source`` is or holds a link."""
    if target.exists():
        shutil.rmtree(target)
    if source.is_dir():
        copy_tree(source, target)
    else:
        target.mkdir(parents=True)
    for part in composition.fr_parts:
        subject = dump_subject(target, culprits, gpus_per_node)
        if why := Composition((part,)).not_applicable(subject if subject.dump_ranks else None):
            raise NotApplicable(why)
        part.rewrite(target, subject)
    return target


def fr_culprits(experiment: Experiment) -> tuple[int, ...] | None:
    """The ranks an FR rewrite must not take for innocent: the experiment's FR culprits."""
    culprits = truth_of(experiment, None).fr_culprit
    return tuple(culprits) if culprits is not None else None


def marker_culprits(experiment_dir: Path, gpus_per_node: int) -> tuple[int, ...] | None:
    """The culprits the fault markers of an experiment directory name, as the truth counts
    them: each injected rank, every rank of a lost node, none for a control run; None without a
    marker. Raises ConfigError when a marker's rank is not on its node under ``gpus_per_node``
    (the FR rewrites place ranks on nodes by it)."""
    layout = ExperimentLayout(experiment_dir)
    first = read_marker(experiment_dir)
    markers = [(layout.marker, first)] if first is not None else []
    markers += [(layout.rank_marker(m.rank), m) for m in read_rank_markers(experiment_dir)]
    if not markers:
        return None
    culprits: set[int] = set()
    for path, marker in markers:
        if marker.rank // gpus_per_node != marker.node:
            raise ConfigError(
                f"{path}: rank {marker.rank} ran on node {marker.node}, not on node "
                f"{marker.rank // gpus_per_node} as --gpus-per-node {gpus_per_node} places it; "
                "pass the job's --gpus-per-node"
            )
        if marker.fault is FaultType.NODE_KILL:
            first_rank = marker.node * gpus_per_node
            culprits.update(range(first_rank, first_rank + gpus_per_node))
        elif not marker.fault.is_control:
            culprits.add(marker.rank)
    return tuple(sorted(culprits))


def not_applicable(composition: Composition, experiment: Experiment, dumps: Path) -> str | None:
    """Why the composition cannot rewrite the experiment's artifacts (None: it can)."""
    subject = dump_subject(dumps, fr_culprits(experiment), experiment.gpus_per_node)
    return composition.not_applicable(subject if subject.dump_ranks else None)


def perturbed_artifacts(
    artifacts: Artifacts, composition: Composition, into: Path, experiment: Experiment
) -> Artifacts:
    """The artifacts an analyzer reads (the log, the dumps), rewritten under ``into``; the
    fault markers are the original's (they are the truth, never analyzer input). LinkRefused
    when one of them is read through a link (:func:`refuse_linked`), before anything is
    written."""
    refuse_linked(artifacts)
    log = artifacts.log
    if log is not None and composition.log_parts:
        log = perturb_log(log, into / "logs" / log.name, composition)
    fr_dir = artifacts.fr_dir
    if composition.fr_parts:
        fr_dir = perturb_dumps(
            fr_dir,
            into / CHECKPOINTS,
            composition,
            fr_culprits(experiment),
            experiment.gpus_per_node,
        )
    return artifacts.model_copy(update={"experiment_dir": into, "log": log, "fr_dir": fr_dir})


def perturb_tree(
    source: Path,
    target: Path,
    composition: Composition,
    culprits: tuple[int, ...] | None,
    gpus_per_node: int,
) -> list[Path]:
    """A perturbed copy of a log file or of a directory (a case, a corpus, an experiment
    directory): logs (``*.log``, ``*.out``, ``*.err``, ``*.txt``) rewritten line by line,
    ``checkpoints/`` directories by the FR rewrites, everything else copied. Returns the
    files rewritten."""
    if source.is_file():
        return [perturb_log(source, target, composition)]
    written: list[Path] = []
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.iterdir()):
        destination = target / path.name
        if path.is_dir() and path.name == CHECKPOINTS and composition.fr_parts:
            written.append(perturb_dumps(path, destination, composition, culprits, gpus_per_node))
        elif path.is_dir():
            written += perturb_tree(path, destination, composition, culprits, gpus_per_node)
        elif path.suffix in LOG_SUFFIXES and composition.log_parts:
            written.append(perturb_log(path, destination, composition))
        else:
            copy_file(path, destination)
    return written


@dataclass
class Copy:
    """What a perturbed copy wrote, and the cases of a corpus it could not apply to (why)."""

    written: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def perturbed_copy(
    source: Path,
    target: Path,
    composition: Composition,
    culprits: tuple[int, ...] | None,
    gpus_per_node: int,
) -> Copy:
    """What ``python -m pytest_faultloop perturb`` writes: a case (its truth from its
    ``case.toml``) or each case of a corpus, a dump directory, or any other tree (the given
    ``culprits``, else those its fault markers name: an experiment directory's, or for its
    ``checkpoints/`` the experiment's). Raises NotApplicable when the composition cannot apply
    (to a corpus: to none of its cases), LinkRefused when ``source`` is or holds a symbolic
    link (before anything is written)."""
    refuse_links_in(source)
    if (source / CASE_FILE).is_file():
        experiment = load_case(source, source.parent.name, default_gpus_per_node=gpus_per_node)
        assert experiment.case is not None
        if why := not_applicable(composition, experiment, experiment.case.dumps):
            raise NotApplicable(f"{source}: {why}")
        written = perturb_tree(
            source, target, composition, fr_culprits(experiment), experiment.gpus_per_node
        )
        return Copy(written)
    if source.is_dir() and (
        cases := sorted(p for p in source.iterdir() if (p / CASE_FILE).is_file())
    ):
        copy = Copy()
        for case in cases:
            try:
                part = perturbed_copy(case, target / case.name, composition, None, gpus_per_node)
            except NotApplicable as exc:
                copy.skipped.append(str(exc))
                continue
            copy.written += part.written
        if not copy.written:
            raise NotApplicable(f"{source}: {composition.name} applies to none of its cases")
        return copy
    if composition.fr_parts and not (
        source.is_dir() and (rank_files(source) or (source / CHECKPOINTS).is_dir())
    ):
        raise NotApplicable(f"{source}: {composition.name} rewrites dumps: no dump directory here")
    if culprits is None and composition.fr_parts:
        experiment_dir = source.parent if source.name == CHECKPOINTS else source
        culprits = marker_culprits(experiment_dir, gpus_per_node)
    if source.is_dir() and rank_files(source) and not any(p.is_dir() for p in source.iterdir()):
        return Copy([perturb_dumps(source, target, composition, culprits, gpus_per_node)])
    return Copy(perturb_tree(source, target, composition, culprits, gpus_per_node))
