"""Facts about the run as a whole (world size, NCCL's init lines, a pid beside a rank, training
done, checkpoints): every line that states one is searched for it, and no other line is."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_log
from pytest_faultloop.analyzers.log import run_facts

STATING = [
    "torch.distributed: world_size=8 rank=3",
    "WORLD SIZE: 16",
    "comm 0x55d5 rank 3 nranks 8 cudaDev 3 busId 4000 - Init COMPLETE",
    "mpirun -np 4 python train.py",
    "horovodrun -np 8 python train.py",
    "[rank 2] pid=41233",
    "Rank 2 (PID 41233)",
    "[after training is done] datetime: 2026-11-29 10:00:00",
    "worker group successfully finished. Waiting 300 seconds for other agents",
    "Training completed. Do not forget to share your model on huggingface.co/models =)",
    "`Trainer.fit` stopped: `max_epochs=3` reached.",
    "Process 41233 exits successfully.",
    "Finished training",
    "Saved checkpoint to /ckpt/iter_100",
    "[rank 2] pıd=41233",  # a dotless i: matched as i by the ignore-case patterns
]


@pytest.mark.parametrize("line", STATING)
def test_a_line_stating_a_fact_holds_a_fact_word(line: str) -> None:
    facts = (
        run_facts.world_size(line),
        run_facts.nccl_init_rank(line),
        run_facts.process_rank(line),
        run_facts.TRAINING_DONE.search(line),
        run_facts.FIT_DONE.search(line),
        run_facts.PROCESS_OK.search(line),
        run_facts.work_done(line) or None,
        run_facts.CHECKPOINT_SAVED.search(line),
    )
    assert any(fact is not None for fact in facts), line
    assert run_facts.may_state_facts(line)


class _CountedSearch:
    """A fact's pattern that counts the searches made with it (search, findall, finditer)."""

    searches = 0

    def __init__(self, compiled: re.Pattern[str]) -> None:
        self.compiled = compiled

    def __getattr__(self, name: str) -> Callable[..., object]:
        method: Callable[..., object] = getattr(self.compiled, name)

        def counted(*args: object) -> object:
            _CountedSearch.searches += 1
            return method(*args)

        return counted


def test_a_line_without_a_fact_word_is_not_searched_for_the_facts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 44, item 16: every line read (for its own keyword) was searched for each fact
    about the run, ten patterns a line."""
    for name in ("_WORLD_SIZE", "_NCCL_RANK", "_NCCL_INIT_STEP", "_RANK_WORD", "_PID_WORD"):
        monkeypatch.setattr(run_facts, name, _CountedSearch(getattr(run_facts, name)))
    for name in ("TRAINING_DONE", "FIT_DONE", "PROCESS_OK", "WORK_DONE", "CHECKPOINT_SAVED"):
        monkeypatch.setattr(run_facts, name, _CountedSearch(getattr(run_facts, name)))
    log = tmp_path / "train.log"
    log.write_text("[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n")
    _CountedSearch.searches = 0
    assert [i.rank for i in analyze_log(log).primary] == [1]
    assert _CountedSearch.searches == 0


@pytest.mark.parametrize(
    "line",
    [
        "node0:1:2 [0] NCCL INFO comm 0x5 rank 3 nranks 8 cudaDev 3 busId 3000 - Init COMPLETE",
        "Training complete, saved checkpoint to /ckpt (world_size 8)",
        "Trainıng complete — saved checkpoint to /ckpt (world_size 8)",  # not ASCII
        "[Rank 2] PID 41233 starting",
    ],
)
def test_stated_searches_each_fact_where_its_words_allow(line: str) -> None:
    """Each fact searched only where the line holds its word: what it states is unchanged."""
    assert run_facts.stated(line) == run_facts.Stated(
        run_facts.world_size(line),
        run_facts.nccl_init_rank(line),
        run_facts.nccl_init_step(line),
        run_facts.process_rank(line),
        bool(run_facts.TRAINING_DONE.search(line)),
        bool(run_facts.FIT_DONE.search(line)),
        bool(run_facts.PROCESS_OK.search(line)),
        run_facts.work_done(line),
        bool(run_facts.CHECKPOINT_SAVED.search(line)),
    )


@pytest.mark.parametrize(
    ("line", "place"),
    [
        ("Waiting in store based barrier (world_size=8, worker_count=8)", 32),
        ("comm 0x5 rank 3 nranks 8 - Init COMPLETE", 16),
        ("no word here", 0),
        ("wörld_size=8 nranks 8", 0),  # not ASCII: searched from the start
    ],
)
def test_first_place_of_a_word(line: str, place: int) -> None:
    assert run_facts.first_place(line, ("world", "nranks")) == place


def test_a_search_from_the_first_place_still_reads_what_is_before() -> None:
    """``\\b`` before ``nranks`` is read from the character before the place."""
    assert run_facts.world_size("xnranks 8") is None
    assert run_facts.world_size("mpirun -np 4 python train.py --world_size 8") == 8
