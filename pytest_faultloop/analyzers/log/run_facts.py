"""Facts about the run as a whole: world size, NCCL init ranks, training done, checkpoints."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pytest_faultloop.analyzers.log.line_memo import by_line

_WORLD_SIZE = re.compile(
    r"(?i:world[_ ]size)\W{1,4}(\d+)|\bnranks (\d+)|world_sizes=\[(\d+)"
    r"|\b(?:mpirun|mpiexec|horovodrun)\b[^\n]*?\s-(?:np|n)\s+(\d+)"
)
_NCCL_RANK = re.compile(r"\brank (\d+) nranks (\d+)")
_NCCL_INIT_STEP = re.compile(
    r"\bcomm 0x[0-9a-fA-F]+ rank (?P<rank>\d+) nranks (?P<nranks>\d+)\b"
    r"(?:.*? commId (?P<id>0x[0-9a-fA-F]+))?.*?- Init (?P<step>START|COMPLETE)\b"
)
"""NCCL's communicator init lines (init.cc): ``comm %p rank %d nranks %d cudaDev %d ... -
Init COMPLETE`` since 2.4 (``busId`` 2.7+), ``commId 0x%llx`` from 2.18, a ``- Init START``
twin from 2.18.3, the calling function in front from 2.21 (``ncclCommInitRank``,
``ncclCommSplit``: its ``parent %p ... key %d- Init START`` carries no commId from 2.24)."""
TRAINING_DONE = re.compile(
    r"after training is done"  # Megatron-LM training.py: print_datetime
    r"|worker group successfully finished"  # torch/distributed/elastic/agent/server/api.py
    r"|done training in \d"  # fairseq_cli/train.py: main, after the last epoch
)
"""A tool's own word that training finished: failures printed after it are teardown, and
those before it did not stop training (they were caught: fairseq recovers from an OOM). (The HF
Trainer's "Training completed" and Lightning's "`Trainer.fit` stopped" end only the fit:
evaluation, test and saving come after them, and fail for real.)"""
FIT_DONE = re.compile(
    r"Training completed\. Do not forget to share"  # transformers trainer.py: _inner_training_loop
    r"|`Trainer\.fit` stopped: "  # lightning/pytorch/loops/fit_loop.py: done (max_epochs, max_steps)
)
"""A trainer's word that its fit loop finished: failures before it did not stop training (a
rank that died was restarted), while evaluation, test and saving after it still fail for real."""
WORK_DONE = re.compile(
    r"(?i:\btraining (?:is )?(?:complete|completed|finished|done)\b"
    r"|\b(?:finished|done|completed) training\b)"
)
"""A script's own word that its training ended (``training complete``, ``Finished training``):
no tool's, so it decides nothing alone; it only says that what a rank prints when the store's
host exits after it (``c10d.store_gone``) is teardown, as every survivor prints it then."""
PROCESS_OK = re.compile(r"Process \d+ exits successfully\.")
"""DeepSpeed's launcher (deepspeed/launcher/launch.py): a worker process exited 0."""
_EPOCH = re.compile(r"(?i)\bepoch\s*\d+")
"""A line that names an epoch speaks of that epoch's end, not the run's."""


def work_done(content: str) -> bool:
    """The script's word that the whole run's training ended (``WORK_DONE``, no epoch's)."""
    return bool(WORK_DONE.search(content)) and not _EPOCH.search(content)


CHECKPOINT_SAVED = re.compile(r"(?i)saved checkpoint|checkpoint saved")


_RANK_WORD = re.compile(r"(?i)\brank\W{1,3}(\d+)\b")
_PID_WORD = re.compile(r"(?i)\bpid\W{1,3}(\d+)\b")
"""A line naming a process's rank and its pid (a training script's start-up print, ``[rank 2]
pid=41233``, ``Rank 2 (PID 41233)``): the only tie between a rank and a process a stack dump
(py-spy's ``Process 41233:``, gdb's ``process 41233``) names by its pid alone."""


def process_rank(content: str) -> tuple[int, int] | None:
    """(pid, rank) of a line that names one process's pid and one rank (``local_rank`` is no
    rank: ``\b`` does not start a word after ``_``)."""
    ranks, pids = _RANK_WORD.findall(content), _PID_WORD.findall(content)
    return (int(pids[0]), int(ranks[0])) if len(ranks) == len(pids) == 1 else None


_FACT_WORDS = (
    "world",
    "nranks",
    "mpirun",
    "mpiexec",
    "horovodrun",
    "pid",
    "training",
    "successfully finished",
    "exits successfully",
    "checkpoint",
    "trainer.fit",
)
"""A word each fact here needs (any case): where a line holds none, it states none."""
_ANY_FACT_WORD = re.compile("|".join(map(re.escape, _FACT_WORDS)), re.IGNORECASE)
_ALL_FACT_WORDS = frozenset(_FACT_WORDS)
_WORLD_WORDS = frozenset({"world", "nranks", "mpirun", "mpiexec", "horovodrun"})


def may_state_facts(content: str) -> bool:
    """Whether a line holds a word some fact here needs (else none of their patterns can
    match it: a line read for another reason need not be searched for each of them)."""
    return bool(fact_words(content))


def fact_words(content: str) -> frozenset[str]:
    """The words of ``_FACT_WORDS`` a line holds (any case): a fact's pattern can match only
    where the line holds its word. Letters that only ignore-case patterns match as ASCII ones
    (a dotless ``ı`` matches ``i``) are left to the same engine: a line that is not ASCII holds
    every word where it holds one."""
    if not content.isascii():
        return _ALL_FACT_WORDS if _ANY_FACT_WORD.search(content) else frozenset()
    lowered = content.lower()
    return frozenset(word for word in _FACT_WORDS if word in lowered)


def world_size(content: str) -> int | None:
    start = first_place(content, _WORLD_WORDS)
    sizes = [int(g) for m in _WORLD_SIZE.finditer(content, start) for g in m.groups() if g]
    return max(sizes) if sizes else None


def first_place(content: str, words: Iterable[str]) -> int:
    """Where the first of ``words`` (lower case; any case in the line) starts in an ASCII
    line: a pattern whose every match starts with one of them is searched from there (its
    ``\b`` and lookbehinds still read the text before; a search costs per place tried). 0
    for other lines (letters that are not ASCII may match ASCII ones ignoring case)."""
    if not content.isascii():
        return 0
    lowered = content.lower()
    return min((at for word in words if (at := lowered.find(word)) >= 0), default=0)


def nccl_init_rank(content: str) -> tuple[int, int] | None:
    """NCCL's communicator init line (``comm 0x.. rank R nranks N ... Init COMPLETE``,
    NCCL 2.5-2.30): the process's rank in a communicator of N ranks."""
    match = _NCCL_RANK.search(content)
    return (int(match.group(1)), int(match.group(2))) if match else None


def nccl_init_step(content: str) -> tuple[str, int, int, bool] | None:
    """An NCCL communicator's init line: (the communicator: its commId, else its size where
    the version prints none; the rank in it; its size; whether the init completed)."""
    match = _NCCL_INIT_STEP.search(content)
    if match is None:
        return None
    nranks = int(match["nranks"])
    comm = match["id"] or f"nranks {nranks}"
    return comm, int(match["rank"]), nranks, match["step"] == "COMPLETE"


@dataclass(frozen=True, slots=True)
class Stated:
    """Every fact here one line states."""

    world_size: int | None
    nccl_init_rank: tuple[int, int] | None
    nccl_init_step: tuple[str, int, int, bool] | None
    process_rank: tuple[int, int] | None
    training_done: bool
    fit_done: bool
    process_ok: bool
    work_done: bool
    checkpoint_saved: bool


@by_line
def stated(content: str) -> Stated | None:
    """What a line states of the run (None: it holds no word a fact needs); read once per
    distinct line."""
    held = fact_words(content)
    if not held:
        return None
    # each pattern is searched only where the line holds a word it needs
    nccl = "nranks" in held
    training = "training" in held
    return Stated(
        world_size(content) if held & _WORLD_WORDS else None,
        nccl_init_rank(content) if nccl else None,
        nccl_init_step(content) if nccl else None,
        process_rank(content) if "pid" in held else None,
        (training or "successfully finished" in held) and bool(TRAINING_DONE.search(content)),
        (training or "trainer.fit" in held) and bool(FIT_DONE.search(content)),
        "exits successfully" in held and bool(PROCESS_OK.search(content)),
        training and work_done(content),
        "checkpoint" in held and bool(CHECKPOINT_SAVED.search(content)),
    )
