"""Flight-recorder rewrites: what collecting dumps from a real job does to the dump set.

Dumps go missing (a node-local disk not collected, a writer killed mid-write), arrive truncated
or empty, hold objects a safe loader refuses, or are named after the host that wrote them. None
of this changes which rank caused the failure; a rewrite that would leave the dump set unable to
tell the culprit from an innocent rank does not apply to it (``applies`` says why). The rank it
hits is chosen from the file names and the known culprits only (:attr:`Subject.bystander`).
"""

from __future__ import annotations

import json
import os
import pickle
import re
from collections import OrderedDict
from pathlib import Path

from pytest_faultloop.analyzers.fr.dumps import rank_in_name
from pytest_faultloop.analyzers.fr.safe_pickle import load_plain
from pytest_faultloop.inputs.perturb.perturbation import FrPerturbation, NotApplicable, Subject
from pytest_faultloop.store.stored_files import open_nofollow, read_bytes

DUMP_HOST = "gpu-node-{node:03d}"
"""The host name ``fr-hostnames`` writes into a rank's dump file name (its node's)."""
_PICKLE_PROTOCOL = 2
"""torch's flight recorder pickles dumps with protocol 2."""


def rank_files(directory: Path) -> dict[int, Path]:
    """The dump files of a directory by rank (the number that ends each name)."""
    files: dict[int, Path] = {}
    for path in sorted(directory.iterdir()):
        if path.is_file() and (rank := rank_in_name(path.name)) is not None:
            files.setdefault(rank, path)
    return files


def dump_subject(directory: Path, culprits: tuple[int, ...] | None, gpus_per_node: int) -> Subject:
    ranks = frozenset(rank_files(directory)) if directory.is_dir() else frozenset()
    return Subject(ranks, culprits, gpus_per_node)


def _bystander_file(directory: Path, subject: Subject) -> Path:
    return rank_files(directory)[subject.bystander]


def _needs_a_bystander(subject: Subject) -> str | None:
    if subject.culprits is None:
        return "the culprit is unknown, so no rank is known to be innocent"
    try:
        subject.bystander  # noqa: B018 - raises when there is none
    except NotApplicable as exc:
        return str(exc)
    return None


def _culprits_dumped(subject: Subject) -> str | None:
    """A second rank without a dump beside a culprit without one leaves two ranks that no dump
    can tell apart: the rewrite applies only where every culprit left its dump."""
    if why := _needs_a_bystander(subject):
        return why
    undumped = sorted(set(subject.culprits or ()) - subject.dump_ranks)
    if undumped:
        return f"culprit rank(s) {undumped} left no dump: a second missing dump is ambiguous"
    return None


def _a_culprit_dumped(subject: Subject) -> str | None:
    if subject.culprits is None:
        return "the culprit is unknown"
    if not set(subject.culprits) & subject.dump_ranks:
        return "no culprit left a dump"
    return None


def _always(subject: Subject) -> str | None:
    return None


def _missing(directory: Path, subject: Subject) -> None:
    _bystander_file(directory, subject).unlink()


def _truncate(path: Path) -> None:
    data = read_bytes(path)
    path.write_bytes(data[: len(data) // 2])


def _truncated(directory: Path, subject: Subject) -> None:
    _truncate(_bystander_file(directory, subject))


def _culprit_truncated(directory: Path, subject: Subject) -> None:
    files = rank_files(directory)
    first = min(set(subject.culprits or ()) & set(files))
    _truncate(files[first])


def _load(path: Path) -> tuple[dict[str, object], bool]:
    """A dump's content and whether it is JSON, read as plain data (the safe loader); raises
    NotApplicable when the file is not a readable dump."""
    try:
        with os.fdopen(open_nofollow(path), "rb") as stream:
            if stream.peek(1)[:1] == b"{":
                return json.load(stream), True
            content = load_plain(stream)
    except (pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise NotApplicable(f"{path.name} cannot be read: {exc}") from None
    if not isinstance(content, dict):
        raise NotApplicable(f"{path.name} is not a flight-recorder dump")
    return content, False


def _emptied(directory: Path, subject: Subject) -> None:
    path = _bystander_file(directory, subject)
    content, is_json = _load(path)
    content["entries"] = []
    if is_json:
        path.write_text(json.dumps(content))
    else:
        path.write_bytes(pickle.dumps(content, protocol=_PICKLE_PROTOCOL))


def _unsafe(directory: Path, subject: Subject) -> None:
    path = _bystander_file(directory, subject)
    content, _ = _load(path)
    path.write_bytes(pickle.dumps(OrderedDict(content), protocol=_PICKLE_PROTOCOL))


_RANK_AT_END = re.compile(r"\d+(?=(?:\.[A-Za-z]+)?$)")


def _hostnames(directory: Path, subject: Subject) -> None:
    for rank, path in rank_files(directory).items():
        number = _RANK_AT_END.search(path.name)
        assert number is not None  # rank_files found it
        host = DUMP_HOST.format(node=rank // subject.gpus_per_node)
        head, tail = path.name[: number.start()], path.name[number.start() :]
        path.rename(path.with_name(f"{head}{host}_{tail}"))


FR_PERTURBATIONS: tuple[FrPerturbation, ...] = (
    FrPerturbation(
        "fr-missing",
        "one rank's dump never collected (a node-local disk not gathered, a writer killed "
        "before it wrote): the highest rank off the culprits' nodes loses its dump",
        "an innocent rank's dump is gone; every other dump is as written",
        _missing,
        _culprits_dumped,
        "bystander",
    ),
    FrPerturbation(
        "fr-truncated",
        "one innocent rank's dump cut to half its bytes (a writer killed mid-write, a full disk)",
        "an innocent rank's dump becomes unreadable; the others are as written",
        _truncated,
        _needs_a_bystander,
        "bystander",
    ),
    FrPerturbation(
        "fr-empty",
        "one innocent rank's dump with no entries (written before its first collective, or "
        "with TORCH_FR_BUFFER_SIZE=0): the dump says nothing about where the rank stopped",
        "an innocent rank's dump loses its entries; the others are as written",
        _emptied,
        _needs_a_bystander,
        "bystander",
    ),
    FrPerturbation(
        "fr-unsafe",
        "one innocent rank's dump pickled with a dict subclass (collections.OrderedDict): "
        "loading it imports a class, which a safe loader refuses (torch's own loader accepts it)",
        "the same content in a container that must not be trusted; the others are as written",
        _unsafe,
        _needs_a_bystander,
        "bystander",
    ),
    FrPerturbation(
        "fr-culprit-truncated",
        "the first culprit's own dump cut to half its bytes (the failing process dies while "
        "it writes): its peers' dumps must show it missing",
        "the culprit is the same; its own record of where it stopped is gone",
        _culprit_truncated,
        _a_culprit_dumped,
        "culprit",
    ),
    FrPerturbation(
        "fr-hostnames",
        "dump files named after the host and rank that wrote them ('<prefix><host>_<rank>', "
        "as per-host dump paths give them); the prefix a user passes (_dump_*) still matches",
        "only file names change: each file still ends in its rank",
        _hostnames,
        _always,
        "nothing",
    ),
)
