"""Who joined the process group: initialization lines as PyTorch's store-based barrier,
TCPStore, Lightning and NCCL print them (their format strings filled in), and a real dev case."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_log
from pytest_faultloop.models import Decision, LogAnalysis
from pytest_faultloop.models.faults import Nature

CORPUS = Path(__file__).resolve().parents[1] / "experiments" / "corpus" / "public"

# distributed_c10d.py _store_based_barrier, PyTorch 1.8-2.0 (worker_count) and 2.1+
WAITING = (
    "INFO:torch.distributed.distributed_c10d:Waiting in store based barrier to initialize "
    "process group for rank: {rank}, key: store_based_barrier_key:1 (world_size={world}, "
    "worker_count={joined}, timeout=0:30:00)\n"
)
TIMED_OUT_21 = (
    "torch.distributed.DistStoreError: Timed out initializing process group in store based "
    "barrier on rank {rank}, for key: store_based_barrier_key:0 (world_size={world}, "
    "num_workers_joined={joined}, timeout=0:30:00 error=Socket Timeout)\n"
)
COMPLETED = (
    "INFO:torch.distributed.distributed_c10d:Rank {rank}: Completed store-based barrier for "
    "key:store_based_barrier_key:1 with {world} nodes.\n"
)
# lightning/fabric/utilities/distributed.py, Lightning 1.6-2.6
BANNER = "Initializing distributed: GLOBAL_RANK: {rank}, MEMBER: {member}/{world}\n"


def analyse(text: str, tmp_path: Path) -> LogAnalysis:
    log = tmp_path / "train.log"
    log.write_text(text)
    return analyze_log(log)


def lead(analysis: LogAnalysis) -> tuple[int | None, Nature]:
    assert analysis.primary, analysis.explanation
    return analysis.primary[0].rank, analysis.primary[0].nature


def test_a_real_log_ending_at_the_barrier_names_the_rank_that_never_came(
    tmp_path: Path,
) -> None:
    """pl4420 (dev): seven ranks wait with worker_count=7 of world_size=8; rank 4 never logs."""
    case = CORPUS / "pl4420_storebarrier_rank4_absent"
    assert tomllib.loads((case / "case.toml").read_text())["split"] == "dev"
    analysis = analyze_log(case / "logs" / "train.log")
    assert analysis.rule == "membership"
    assert lead(analysis) == (4, Nature.HANG)
    assert analysis.decision is Decision.RESTART


def test_ranks_timing_out_at_the_barrier_name_the_absent_ones(tmp_path: Path) -> None:
    text = "".join(TIMED_OUT_21.format(rank=r, world=4, joined=3) for r in (0, 1, 3))
    analysis = analyse(text, tmp_path)
    assert [i.rank for i in analysis.primary] == [2]
    assert analysis.primary[0].nature is Nature.HANG


def test_more_processes_than_the_world_is_a_launch_that_cannot_form_its_group(
    tmp_path: Path,
) -> None:
    """A stale file store or a second job on the same port: the count overshoots the world."""
    text = "".join(TIMED_OUT_21.format(rank=r, world=6, joined=12) for r in range(6))
    analysis = analyse(text, tmp_path)
    assert lead(analysis) == (None, Nature.HANG)
    assert analysis.cause == "launch_config" and analysis.decision is Decision.STOP


def test_a_rank_claimed_twice_where_initialization_stops(tmp_path: Path) -> None:
    """Every process sure it is rank 0 (srun starting torchrun once per GPU, say)."""
    text = "".join(BANNER.format(rank=0, member=1, world=2) for _ in range(2))
    analysis = analyse(text, tmp_path)
    assert lead(analysis) == (None, Nature.HANG)
    assert "rank 0 claimed by more than one process" in analysis.explanation
    assert analysis.cause == "launch_config"


def test_banners_carry_no_count_so_a_missing_one_names_no_rank(tmp_path: Path) -> None:
    """One node's log, or rank 0's, shows only some members: initialization hung, no culprit."""
    text = "".join(BANNER.format(rank=r, member=r + 1, world=4) for r in (0, 1, 3))
    analysis = analyse(text, tmp_path)
    assert lead(analysis) == (None, Nature.HANG)
    assert analysis.cause == "hang"


def test_a_rank_that_arrived_is_never_the_one_blamed_for_a_stalled_start(
    tmp_path: Path,
) -> None:
    """A log that ends on rank 0's wait (a master pod's log): rank 0 is there."""
    text = WAITING.format(rank=0, world=8, joined=7)
    assert lead(analyse(text, tmp_path)) == (None, Nature.HANG)


def test_ranks_that_logged_after_initialization_are_not_absent(tmp_path: Path) -> None:
    """A slow start (waiting lines without rank 4), training, then a collective hang whose
    log ends on the agent's rendezvous: the hang's silent rank, not initialization's."""
    waits = "".join(WAITING.format(rank=r, world=8, joined=7) for r in (0, 1, 2, 3, 5, 6, 7))
    steps = "".join(f"[rank{r}]: epoch 0 step 100 loss 2.3\n" for r in range(8))
    timeouts = "".join(
        f"[rank{r}]:[E ProcessGroupNCCL.cpp:821] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for "
        "600012 milliseconds before timing out.\n"
        for r in range(7)
    )
    agent = (
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group\n"
    )
    analysis = analyse(waits + steps + timeouts + agent, tmp_path)
    assert analysis.rule == "hang"
    assert [i.rank for i in analysis.primary] == [7]


def test_a_second_run_with_another_world_size_is_a_new_membership(tmp_path: Path) -> None:
    run = "INFO:root:step 100 loss 2.31\n"
    text = (
        WAITING.format(rank=0, world=8, joined=7) + run + WAITING.format(rank=0, world=4, joined=3)
    )
    assert not analyse(text + run, tmp_path).primary


def test_an_absent_rank_its_launcher_reports_exited_failed_by_an_error_exit(
    tmp_path: Path,
) -> None:
    """torchrun's Root Cause for rank 2 (exitcode 1), then the others' barrier timeouts."""
    table = (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
        "============================================================\n"
        "train.py FAILED\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        "  time      : 2024-01-01_12:00:00\n"
        "  host      : node-0\n"
        "  rank      : 2 (local_rank: 2)\n"
        "  exitcode  : 1 (pid: 4242)\n"
        "  error_file: <N/A>\n"
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
        "============================================================\n"
    )
    timeouts = "".join(TIMED_OUT_21.format(rank=r, world=4, joined=3) for r in (0, 1, 3))
    analysis = analyse(timeouts + table, tmp_path)
    assert lead(analysis) == (2, Nature.EXCEPTION)


def test_ncclS_bootstrap_root_seeing_a_rank_twice(tmp_path: Path) -> None:
    """NCCL bootstrap.cc, 2.3.7-2.30 (WARN)."""
    text = (
        "node1:29880:30398 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        "node1:29880:30410 [0] bootstrap.cc:283 NCCL WARN Bootstrap Root : rank 1 of 4 ranks "
        "has already checked in\n"
    )
    analysis = analyse(text, tmp_path)
    assert lead(analysis) == (None, Nature.HANG)
    assert analysis.cause == "launch_config"


@pytest.mark.parametrize(
    "formed",
    [
        "".join(COMPLETED.format(rank=r, world=2) for r in range(2)),
        "---\ndistributed_backend=nccl\nAll distributed processes registered. "
        "Starting with 2 processes\n---\n",
    ],
)
def test_a_group_that_formed_is_no_failure(formed: str, tmp_path: Path) -> None:
    """Waiting lines while the members arrive (printed every 10 s) are no hang once the group
    formed, even where the log ends soon after."""
    waits = WAITING.format(rank=0, world=2, joined=1) + BANNER.format(rank=0, member=1, world=2)
    analysis = analyse(waits + BANNER.format(rank=1, member=2, world=2) + formed, tmp_path)
    assert not analysis.primary, analysis.explanation


def test_two_runs_in_one_log_claim_each_rank_twice_without_failing(tmp_path: Path) -> None:
    run = "".join(BANNER.format(rank=r, member=r + 1, world=2) for r in range(2))
    text = run + "Epoch 0: 100%|##########| 10/10 [00:01<00:00, loss=0.1]\n"
    assert not analyse(text + text, tmp_path).primary


def test_lines_of_a_rank_from_before_the_barrier_do_not_make_it_present(
    tmp_path: Path,
) -> None:
    """srun labels put every rank's start-up warning in the log; rank 4 never waits."""
    warnings = "".join(
        f"{r}: UserWarning: Failed to load image Python extension\n" for r in range(8)
    )
    waits = "".join(
        f"{r}: " + WAITING.format(rank=r, world=8, joined=7) for r in (0, 1, 2, 3, 5, 6, 7)
    )
    assert lead(analyse(warnings + waits, tmp_path)) == (4, Nature.HANG)


def test_a_falling_store_count_is_a_new_runs_barrier(tmp_path: Path) -> None:
    first = "".join(WAITING.format(rank=r, world=8, joined=7) for r in (0, 1, 2, 3, 5, 6, 7))
    training = "".join(f"INFO:root:step {i} loss 2.3\n" for i in range(50))
    analysis = analyse(first + training + WAITING.format(rank=0, world=8, joined=3), tmp_path)
    assert lead(analysis) == (None, Nature.HANG)  # rank 4 trained in the first run


@pytest.mark.parametrize(
    ("world", "training_lines", "second_run"),
    [(8, 250, 4), (4, 20, 2)],  # a requeue long after; a relaunch a few lines on
)
def test_a_run_that_claims_every_rank_again_duplicates_none(
    world: int, training_lines: int, second_run: int, tmp_path: Path
) -> None:
    """Once every rank has claimed, a new claim is a new run's, which stops at its start."""
    first = "".join(BANNER.format(rank=r, member=r + 1, world=world) for r in range(world))
    training = "".join(f"Epoch 0: step {i} loss=0.1\n" for i in range(training_lines))
    second = "".join(BANNER.format(rank=r, member=r + 1, world=world) for r in range(second_run))
    analysis = analyse(first + training + second, tmp_path)
    assert analysis.cause == "hang" and lead(analysis) == (None, Nature.HANG)


def test_an_old_nccl_duplicate_warning_does_not_outlive_a_group_that_trained(
    tmp_path: Path,
) -> None:
    init = "".join(
        f"node1:{100 + r}:{200 + r} [{r}] NCCL INFO comm 0x55d0 rank {r} nranks 4 cudaDev {r} "
        "busId 1b000 - Init COMPLETE\n"
        for r in range(4)
    )
    timeouts = "".join(
        f"[rank{r}]:[E ProcessGroupNCCL.cpp:821] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, Timeout(ms)=600000) ran for "
        "600012 milliseconds before timing out.\n"
        for r in range(3)
    )
    text = (
        "node1:100:300 [0] bootstrap.cc:283 NCCL WARN Bootstrap Root : rank 1 of 4 ranks has "
        "already checked in\n" + init + "[rank0]: epoch 0 step 1 loss 2.3\n" + timeouts
    )
    analysis = analyse(text, tmp_path)
    assert analysis.cause == "hang"
    assert [i.rank for i in analysis.primary] == [3]
