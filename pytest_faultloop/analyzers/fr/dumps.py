"""Find and read PyTorch flight-recorder dumps (pickle or JSON, versions 2.x, NCCL and gloo).

Each dump is reduced in one pass to what the analysis needs (:mod:`.summary`): per process
group (matched by name: ``pg_id`` is a per-process counter) the highest collective entered and
completed, the entry at that point, and the first collective the rank is still waiting in. The
decoded dump is dropped as soon as it is summarised.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import sys
from collections import Counter
from io import BufferedReader
from pathlib import Path
from typing import Any

from pytest_faultloop.analyzers.fr.interning import Interner
from pytest_faultloop.analyzers.fr.safe_pickle import load_plain
from pytest_faultloop.analyzers.fr.summary import FrontEntry, GroupProgress, RankDump
from pytest_faultloop.store.stored_files import LinkRefused, open_nofollow

MAX_DUMP_BYTES = 1 << 30
_RANK_IN_NAME = re.compile(r"(\d+)(?:\.[A-Za-z]+)?$")


class BadDump(ValueError):
    """A dump file that cannot be used; the message says why."""


def rank_in_name(name: str) -> int | None:
    """The rank a dump's file name gives: the number at its end (``_dump_3``,
    ``_dump_gpu-node-017_3``, ``nccl_trace_rank_3.json``)."""
    match = _RANK_IN_NAME.search(name)
    return int(match.group(1)) if match else None


def dump_files(path: Path, pattern: str) -> tuple[list[Path], str | None]:
    """The dump files ``path`` names (a directory searched with ``pattern``, or a file prefix),
    and why it names none when it is neither (``None`` for a directory, even an empty one)."""
    if path.is_dir():
        return sorted(p for p in path.glob(pattern) if p.is_file()), None
    if path.parent.is_dir():
        files = sorted(p for p in path.parent.glob(f"{glob_escape(path.name)}*") if p.is_file())
        return files, None if files else f"{path}: no such directory or dump prefix"
    return [], f"{path}: no such directory"


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def read_dump(file: Path, rank: int, interner: Interner) -> RankDump:
    """The summary of one dump; its memberships come from (and go into) ``interner``. A
    symbolic link is no dump: it is refused, not followed."""
    try:
        fd = open_nofollow(file)
    except LinkRefused:
        raise BadDump(LinkRefused.WHY) from None
    with os.fdopen(fd, "rb") as stream:
        size = os.fstat(fd).st_size
        if size > MAX_DUMP_BYTES:
            raise BadDump(f"{size} bytes is larger than the {MAX_DUMP_BYTES} bytes accepted")
        raw = _decode(stream)
    if not isinstance(raw, dict) or not isinstance(raw.get("entries"), list):
        raise BadDump("not a flight-recorder dump (no 'entries' list)")
    version = str(raw.get("version", ""))
    if not version.startswith("2."):
        raise BadDump(f"unsupported dump version {version!r} (2.x expected)")
    if not raw["entries"]:
        raise BadDump("no entries: the dump does not say where the rank stopped")
    return _summarise(raw, rank, file, interner)


def _decode(stream: BufferedReader) -> object:
    head = stream.peek(64)[:64].lstrip()
    if not head:
        raise BadDump("empty file")
    if head[:1] == b"{":
        try:
            return json.load(stream)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BadDump(f"corrupt JSON dump: {exc}") from None
    try:
        return load_plain(stream)
    except pickle.UnpicklingError as exc:
        refused = str(exc).startswith("refused")
        raise BadDump(str(exc) if refused else f"truncated or corrupt pickle: {exc}") from None
    except (
        EOFError,
        ValueError,
        IndexError,
        TypeError,
        OverflowError,
        MemoryError,
    ) as exc:
        raise BadDump(f"truncated or corrupt pickle: {type(exc).__name__}: {exc}") from None


def _summarise(raw: dict[str, Any], rank: int, file: Path, interner: Interner) -> RankDump:
    """Walk the entries newest first and stop once older ones cannot change the answer.

    Collectives of a group complete in order, so below a group's newest completed entry
    everything of that group completed too. The walk ends when every group named in
    ``pg_status`` was met and every group met has a completed entry; without ``pg_status``
    (or with groups lost to wraparound) it reads every entry.
    """
    entries = raw["entries"]
    status = raw.get("pg_status")
    unseen_ids = {str(k) for k in status} if isinstance(status, dict) else {None}
    groups: dict[str, GroupProgress] = {}
    unsettled: set[str] = set()
    waiting_in: tuple[str, int] | None = None
    newest: tuple[str, int] | None = None
    malformed: list[int] = []
    for index in range(len(entries) - 1, -1, -1):
        entry = entries[index]
        try:
            name, desc = entry["process_group"][:2]
            seq = entry["collective_seq_id"]
            if type(seq) is not int:
                seq = int(seq)
        except (KeyError, TypeError, ValueError):
            malformed.append(index)
            continue
        if entry.get("is_p2p"):
            continue
        newest = newest or (name, seq)
        progress = groups.get(name)
        if progress is None:
            progress = groups[name] = GroupProgress(
                str(desc), _front_entry(entry, seq), seq, pg_id=entry.get("pg_id")
            )
            unseen_ids.discard(str(progress.pg_id))
            unsettled.add(name)
        if entry.get("retired") is True or entry.get("state") == "completed":
            progress.completed = max(progress.completed, seq)
            unsettled.discard(name)
            if not unsettled and not unseen_ids:
                break
        else:
            waiting_in = (name, seq)
    _merge_status(status, groups)
    notes = []
    if malformed:
        notes.append(f"{len(malformed)} malformed entries skipped (first: entry {min(malformed)})")
    first = entries[0] if entries else None
    return RankDump(
        rank,
        file,
        groups,
        interner.config(raw.get("pg_config")),
        waiting_in,
        newest,
        wrapped=isinstance(first, dict) and bool(first.get("record_id")),
        notes=notes,
    )


def _merge_status(status: object, groups: dict[str, GroupProgress]) -> None:
    """``pg_status`` counters survive ring wraparound: keyed by this process's ``pg_id``."""
    if not isinstance(status, dict):
        return
    by_id = {str(p.pg_id): p for p in groups.values() if p.pg_id is not None}
    for pg_id, counters in status.items():
        progress = by_id.get(str(pg_id))
        if progress is None or not isinstance(counters, dict):
            continue
        try:
            enqueued = int(counters.get("last_enqueued_collective", -1))
            completed = int(counters.get("last_completed_collective", -1))
        except (TypeError, ValueError):
            continue
        progress.entered = max(progress.entered, enqueued)
        progress.completed = max(progress.completed, completed)


def _front_entry(entry: dict[str, Any], seq: int) -> FrontEntry:
    """The few fields of a group's newest entry that the analysis reads; the rest is dropped
    (stack frames and sizes would otherwise stay alive for every rank and group)."""
    state = entry.get("state")
    try:
        created = int(entry.get("time_created_ns") or 0)
    except (TypeError, ValueError):
        created = 0
    return FrontEntry(
        seq if entry["collective_seq_id"] == seq else None,
        str(entry.get("profiling_name", "")),
        _most_common(entry.get("input_dtypes")),
        state if isinstance(state, str) else None,
        created,
        _sizes_text(entry.get("input_sizes")),
    )


MAX_SIZES_TEXT = 160
"""Longer size lists (a coalesced collective of many tensors) keep their start and a digest."""


def _sizes_text(sizes: object) -> str:
    """``input_sizes`` as one short text, shared by every rank that entered the same shapes
    (interned: one string for the whole set)."""
    if sizes is None:
        return ""
    text = str(sizes)
    if len(text) > MAX_SIZES_TEXT:
        digest = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
        text = f"{text[: MAX_SIZES_TEXT - 20]}… #{digest}"
    return sys.intern(text)


def _most_common(values: object) -> str:
    if isinstance(values, list) and values:
        counts = Counter(str(v) for v in values)
        return counts.most_common(1)[0][0]
    return ""
