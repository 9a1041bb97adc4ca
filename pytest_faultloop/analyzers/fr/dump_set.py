"""Read a whole dump set: every file summarised, in worker processes where cores allow.

Decoding (unpickling) is nearly all of the cost and each file is independent, so files go to
``jobs`` processes in small batches; each batch comes back as small summaries and is merged in
file order, so the answer is the same for any number of jobs. Only one decoded dump per
process is alive at a time: a set of any size streams through.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from pytest_faultloop.analyzers.fr.dumps import BadDump, dump_files, rank_in_name, read_dump
from pytest_faultloop.analyzers.fr.interning import Interner
from pytest_faultloop.analyzers.fr.summary import DumpSet, RankDump

FILES_PER_JOB = 32
"""With the default number of jobs, each process gets at least this many files: below that,
starting a process costs more than it saves (a test run's 4 to 32 dumps stay in-process)."""
MAX_BATCH = 16
"""Files per batch sent to a worker: large enough to share its memberships, small enough
to keep every worker busy to the end."""

Outcome = RankDump | str
"""A file's summary, or why it cannot be used."""


def load_dumps(path: Path, pattern: str = "_dump_*", jobs: int | None = None) -> DumpSet:
    """Every dump under ``path`` (a directory searched with ``pattern``, or a file prefix),
    decoded by ``jobs`` processes (None: one per core for a large set, else in-process)."""
    files, problem = dump_files(Path(path), pattern)
    if problem:
        return DumpSet({}, [problem])
    ranked = [(file, rank) for file in files if (rank := rank_in_name(file.name)) is not None]
    workers = default_jobs(len(ranked)) if jobs is None else jobs
    if workers < 1:
        raise ValueError(f"jobs must be at least 1, not {workers}")
    with _collector_paused():
        return _merged(files, _decoded(ranked, workers))


def default_jobs(files: int) -> int:
    """One process per usable core, each with at least :data:`FILES_PER_JOB` files."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, files // FILES_PER_JOB))


def _decoded(files: list[tuple[Path, int]], jobs: int) -> Iterator[Outcome]:
    """Each file's outcome, in file order; from ``jobs`` processes when more than one."""
    if jobs == 1 or len(files) < 2:
        yield from _read_batch(files, Interner())
        return
    size = max(1, min(MAX_BATCH, len(files) // (jobs * 4)))
    batches = [files[i : i + size] for i in range(0, len(files), size)]
    interner = Interner()
    context = multiprocessing.get_context(_start_method())
    with ProcessPoolExecutor(min(jobs, len(batches)), mp_context=context) as pool:
        for outcomes in pool.map(_worker_batch, batches):
            interner.adopt(o for o in outcomes if isinstance(o, RankDump))
            yield from outcomes


def _start_method() -> str | None:
    """fork where it is safe (no other thread could hold a lock the child inherits): workers
    start at once with nothing to import; else a fresh interpreter (the plugin runs jobs in
    threads)."""
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return "fork"
    return "forkserver" if "forkserver" in methods else None


def _worker_batch(files: list[tuple[Path, int]]) -> list[Outcome]:
    """In a worker: one batch, with memberships shared within it (sent back once each)."""
    with _collector_paused():
        return list(_read_batch(files, Interner()))


def _read_batch(files: Iterable[tuple[Path, int]], interner: Interner) -> Iterator[Outcome]:
    for file, rank in files:
        try:
            yield read_dump(file, rank, interner)
        except BadDump as exc:
            yield str(exc)
        except OSError as exc:
            yield f"cannot read: {exc.strerror or exc}"


def _merged(files: list[Path], outcomes: Iterator[Outcome]) -> DumpSet:
    """The set as reading the files one by one, in order, gives it; ``outcomes``: those of
    the files with a rank in their name, in the same order (merged as they arrive)."""
    dumps: dict[int, RankDump] = {}
    unreadable: list[str] = []
    unknown: set[int] = set()
    for file in files:
        rank = rank_in_name(file.name)
        if rank is None:
            unreadable.append(f"{file}: no rank number at the end of the file name")
            continue
        outcome = next(outcomes)
        if rank in dumps:
            unreadable.append(
                f"{file}: duplicate dump for rank {rank} (kept {dumps[rank].path.name})"
            )
            continue
        if isinstance(outcome, str):
            unreadable.append(f"{file}: {outcome}")
            unknown.add(rank)
        else:
            dumps[rank] = outcome
    for dump in dumps.values():
        unreadable.extend(f"{dump.path}: {note}" for note in dump.notes)
    return DumpSet(dumps, unreadable, unknown - set(dumps))


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Unpickling builds millions of small dicts that the cyclic garbage collector would
    rescan again and again (torch's own FR loader pauses it too); none of them form cycles."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
