"""The log analyzer on real tools' output: verbatim excerpts from the public corpus.

Each log below is a case of ``experiments/corpus/public/`` (copied verbatim from the public
thread its ``case.toml`` names as ``source``). One test per format or culprit-vs-collateral
pattern; the corpus replay scores them all, these pin down what each rule must read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_fr, analyze_log
from pytest_faultloop.models import Decision, LogAnalysis
from pytest_faultloop.models.faults import Nature

CORPUS = Path(__file__).resolve().parents[1] / "experiments" / "corpus" / "public"


def analyse(case: str) -> LogAnalysis:
    (log,) = sorted((CORPUS / case / "logs").iterdir())
    return analyze_log(log)


def analysed(tmp_path: Path, text: str) -> LogAnalysis:
    """The analysis of a log holding ``text``."""
    log = tmp_path / "job.log"
    log.write_text(text)
    return analyze_log(log)


def lead(analysis: LogAnalysis) -> tuple[int | None, Nature]:
    assert analysis.primary, analysis.explanation
    return analysis.primary[0].rank, analysis.primary[0].nature


@pytest.mark.parametrize(
    ("case", "rank", "nature"),
    [
        # torchrun's "failed (exitcode: -9) local_rank: 3 (pid: …)" without its failure table
        ("cai3514_sigkill_rank3", 3, Nature.CRASH),
        ("egovlp21_sigkill_rank3", 3, Nature.CRASH),
        # the same line wrapped by the terminal, exit code 1 (an exception in the worker)
        ("pt88251_exit1_rank5", 5, Nature.EXCEPTION),
        # mpirun: "process rank 7 with PID 0 on node HOSTNAME exited on signal 9 (Killed)"
        ("hvd469_mpirun_rank7_sigkill", 7, Nature.CRASH),
        # srun: "task 0: Out Of Memory" after slurmstepd's oom-kill notice
        ("knet30_srun_cgroup_oom", 0, Nature.CRASH),
    ],
)
def test_launcher_reports_of_how_a_rank_ended(case: str, rank: int, nature: Nature) -> None:
    analysis = analyse(case)
    assert lead(analysis) == (rank, nature)
    assert analysis.decision is Decision.STOP


def test_a_rankless_crash_takes_the_rank_the_launcher_reports() -> None:
    """ "Fatal Python error" carries no rank; torchrun's -6 report for local_rank 3 does."""
    assert lead(analyse("ms4353_sigabrt_rank3")) == (3, Nature.CRASH)


@pytest.mark.parametrize(
    ("case", "rank"),
    [
        ("hvd1442_stall_rank6", 6),  # Horovod "Stalled ranks:" list (mpirun --tag-output)
        ("hvd215_stall_rank16", 16),  # "[ready ranks: …]": the one rank not ready
        ("hvd530_bcast_rank2", 2),
        ("pt152623_desync_rank7", 7),  # PyTorch desync report
    ],
)
def test_a_rank_its_peers_wait_for_is_the_culprit_of_a_hang(case: str, rank: int) -> None:
    analysis = analyse(case)
    assert lead(analysis) == (rank, Nature.HANG)
    assert analysis.decision is Decision.RESTART


def test_an_unprefixed_gpu_error_takes_the_rank_its_watchdog_names() -> None:
    """``CUDA error: uncorrectable ECC error`` bare, then ``[Rank 1] NCCL watchdog thread
    terminated with exception: CUDA error: uncorrectable ECC error``: a hardware cause."""
    analysis = analyse("kohya1434_ecc_rank1")
    assert lead(analysis) == (1, Nature.GPU_ERROR)
    assert (analysis.cause, analysis.decision) == ("gpu_hardware", Decision.RESTART)


def test_a_software_gpu_error_stops() -> None:
    analysis = analyse("qlorapipe51_ima_rank1")  # an illegal memory access
    assert lead(analysis) == (1, Nature.GPU_ERROR)
    assert (analysis.cause, analysis.decision) == ("gpu_error", Decision.STOP)


@pytest.mark.parametrize(
    "case", ["nccl1405_ib_vendor129", "nccl1698_ib_status12", "ncclt166_socket_abort"]
)
def test_interconnect_errors_are_network_and_restart(case: str) -> None:
    analysis = analyse(case)
    assert lead(analysis)[1] is Nature.NETWORK
    assert analysis.decision is Decision.RESTART


@pytest.mark.parametrize("case", ["submitit1701_slurm_preempt_requeue", "pl20542_slurm_timelimit"])
def test_scheduler_ends_are_requeued(case: str) -> None:
    analysis = analyse(case)
    assert lead(analysis) == (None, Nature.SCHEDULER)
    assert analysis.decision is Decision.RESTART


def test_deepspeeds_return_code_names_no_rank() -> None:
    """DeepSpeed's launcher prints the last command it started: its --local_rank is no culprit."""
    assert lead(analyse("anomalygpt43_ds_launcher_sigkill")) == (None, Nature.CRASH)


@pytest.mark.parametrize("case", ["hvd3752_horovodrun_clean", "nccltests182_mpirun_clean"])
def test_clean_runs_stay_clean(case: str) -> None:
    analysis = analyse(case)
    assert analysis.primary == [] and analysis.decision is Decision.CONTINUE


def test_every_answer_says_its_rule_confidence_and_evidence_lines() -> None:
    analysis = analyse("cai3514_sigkill_rank3")
    data = analysis.model_dump(mode="json")
    assert {"cause", "confidence", "rule", "evidence"} <= set(data)
    assert data["rule"] == "signal_or_job" and 0 < data["confidence"] <= 1
    assert data["evidence"] and all(isinstance(e["line"], int) for e in data["evidence"])


def test_the_fallback_names_an_error_line_no_rule_knows(tmp_path: Path) -> None:
    """Synthetic: a glog error line in no known format still names its rank, as a guess."""
    analysis = analysed(
        tmp_path,
        "I1201 10:00:00.000 12 train.py:10] step 100\n"
        "E1201 10:00:01.000 12 train.py:99] rank 5 lost its data loader worker\n",
    )
    assert lead(analysis)[0] == 5
    assert analysis.rule == "fallback" and analysis.confidence is not None
    assert analysis.confidence < 0.5 and "best guess" in analysis.explanation


def test_fr_json_reports_reasons_and_unknown_ranks(tmp_path: Path) -> None:
    data = analyze_fr(tmp_path).model_dump(mode="json")
    assert {"suspects", "reasons", "unknown", "unreadable"} <= set(data)


# Synthetic logs in real formats, for rank maps no corpus case holds.

RENDEZVOUS = """\
INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for workers. Result:
  restart_count=0
  master_addr=node0
  master_port=29500
  group_rank=1
  group_world_size=2
  local_ranks=[0, 1, 2, 3]
  role_ranks=[4, 5, 6, 7]
  global_ranks=[4, 5, 6, 7]
  role_world_sizes=[8, 8, 8, 8]
  global_world_sizes=[8, 8, 8, 8]
"""
FAILED_LOCAL_2 = (
    "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 2 "
    "(pid: 4242) of binary: /usr/bin/python3\n"
)


def test_a_local_rank_maps_to_the_global_one_through_the_rendezvous_result(tmp_path: Path) -> None:
    assert lead(analysed(tmp_path, RENDEZVOUS + FAILED_LOCAL_2)) == (6, Nature.CRASH)


def test_a_local_rank_maps_through_node_rank_times_ranks_per_node(tmp_path: Path) -> None:
    assert lead(
        analysed(
            tmp_path,
            "+ torchrun --nnodes=2 --node_rank=1 --nproc_per_node=8 train.py\n" + FAILED_LOCAL_2,
        )
    ) == (10, Nature.CRASH)


def agent_part(group_rank: int, ranks: range, body: str, restart_count: int = 0) -> str:
    """One torchrun agent's start as launcher/api.py and agent/server/api.py print it
    (``Starting elastic_operator``, the rendezvous result, ``Starting worker group``)."""
    return (
        "INFO:torch.distributed.launcher.api:Starting elastic_operator with launch configs:\n"
        "  nproc_per_node   : 4\n" + agent_restart(group_rank, ranks, body, restart_count)
    )


def agent_restart(group_rank: int, ranks: range, body: str, restart_count: int) -> str:
    """A worker group's rendezvous and start (an agent's first, or after a restart)."""
    return (
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing worker group\n"
        "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous complete for "
        f"workers. Result:\n  restart_count={restart_count}\n  group_rank={group_rank}\n"
        f"  group_world_size=2\n  local_ranks=[0, 1, 2, 3]\n  global_ranks={list(ranks)}\n"
        "  global_world_sizes=[8, 8, 8, 8]\n"
        "INFO:torch.distributed.elastic.agent.server.api:[default] Starting worker group\n" + body
    )


def segfault(rank: int) -> str:
    return f"[rank{rank}]:Fatal Python error: Segmentation fault\n"


def timeouts(ranks: range) -> str:
    return "".join(
        f"[rank{r}]:[E ProcessGroupNCCL.cpp:1182] [Rank {r}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=183, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600040 milliseconds before timing out.\n"
        for r in ranks
    )


def test_per_node_logs_one_after_the_other_are_one_cycle(tmp_path: Path) -> None:
    """Each node's agent starts anew, but a group rank and worker ranks no agent before it
    held, with no restart announced, are another node's: node0's segfault stays in view."""
    analysis = analysed(
        tmp_path,
        agent_part(0, range(4), segfault(2) + timeouts(range(2)))
        + agent_part(1, range(4, 8), timeouts(range(4, 8))),
    )
    assert lead(analysis) == (2, Nature.CRASH)
    assert analysis.decision is Decision.STOP


@pytest.mark.parametrize(
    "announcement",
    [
        "[default] Worker group FAILED. 2/3 attempts left; will restart worker group",
        "[default] Detected 1 new nodes from group_rank=1; will restart worker group",
    ],
)
def test_an_announced_restart_is_a_new_cycle_whatever_place_it_gets(
    tmp_path: Path, announcement: str
) -> None:
    """agent/server/api.py's _invoke_run announces each restart; the new rendezvous may give
    the node another group rank and ranks: still the same agent's next cycle."""
    assert lead(
        analysed(
            tmp_path,
            agent_part(1, range(4, 8), segfault(5))
            + f"INFO:torch.distributed.elastic.agent.server.api:{announcement}\n"
            + agent_restart(0, range(4), segfault(1), restart_count=1),
        )
    ) == (1, Nature.CRASH)


def test_a_requeued_agent_in_the_same_place_is_a_new_cycle(tmp_path: Path) -> None:
    assert lead(
        analysed(
            tmp_path,
            agent_part(1, range(4, 8), segfault(5)) + agent_part(1, range(4, 8), segfault(6)),
        )
    ) == (6, Nature.CRASH)


def nccl_init(label: int, rank: int, nranks: int) -> str:
    """NCCL's init line (init.cc, 2.21: ``ncclCommInitRank comm %p rank %d nranks %d cudaDev
    %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE``) under ``srun --label``."""
    return (
        f"{label}: node1:{4600 + rank}:{4640 + rank} [{rank % 4}] NCCL INFO ncclCommInitRank "
        f"comm 0x55d5a0e50 rank {rank} nranks {nranks} cudaDev {rank % 4} nvmlDev {rank % 4} "
        "busId 1b000 commId 0x89739f751af3a52d - Init COMPLETE\n"
    )


def test_an_srun_label_beside_the_same_nccl_rank_is_that_rank(tmp_path: Path) -> None:
    """srun started one task per rank: each task's NCCL init line in the world's communicator
    gives its label as its rank, so srun's ``task 5: Segmentation fault`` is rank 5's (a
    sub-group's rank beside another label says nothing)."""
    analysis = analysed(
        tmp_path,
        "".join(nccl_init(r, r, 8) + nccl_init(r, r % 2, 2) for r in range(4, 8))
        + "5: Fatal Python error: Segmentation fault\n"
        "srun: error: node1: task 5: Segmentation fault (core dumped)\n",
    )
    assert lead(analysis) == (5, Nature.CRASH)
    assert analysis.decision is Decision.STOP


def test_an_srun_label_beside_another_nccl_rank_is_the_nodes_task(tmp_path: Path) -> None:
    """torchrun under ``srun --label``: label 1 is node1's task, its workers NCCL's ranks 4-7."""
    log = tmp_path / "node1.log"
    log.write_text(
        "".join(nccl_init(1, r, 8) for r in range(4, 8))
        + "1: Fatal Python error: Segmentation fault\n"
    )
    assert lead(analyze_log(log))[0] is None


def progress(ranks: range) -> str:
    return "".join(f"[rank{r}]: iteration 182/20000 | lm loss 2.31\n" for r in ranks)


def test_a_local_rank_the_logs_ranks_do_not_hold_stays_unmapped(tmp_path: Path) -> None:
    """Without a rendezvous map, torchrun's ``failed (exitcode: -6) local_rank: 0`` is rank 0
    only where the log could hold rank 0: this node's prefixes show ranks 4-7."""
    log = tmp_path / "node1.log"
    log.write_text(
        progress(range(4, 8))
        + "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) "
        "local_rank: 0 (pid: 5600) of binary: /usr/bin/python3\n"
    )
    assert 0 not in {issue.rank for issue in analyze_log(log).primary}


def test_a_local_rank_the_logs_ranks_hold_is_that_rank(tmp_path: Path) -> None:
    assert lead(analysed(tmp_path, progress(range(4)) + FAILED_LOCAL_2)) == (2, Nature.CRASH)


@pytest.mark.parametrize(
    ("log_text", "rank"),
    [
        # torchrun's agent lost its store's host (Utils.hpp recvBytes, c10d_rendezvous_backend)
        (
            "torch.distributed.DistNetworkError: failed to recv, got 0 bytes\n\n"
            "The above exception was the direct cause of the following exception:\n\n"
            "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection "
            "to the C10d store has failed. See inner exception for details.\n",
            None,
        ),
        # ProcessGroupNCCL's ncclUniqueId fetch from rank 0 through the store, at init
        (
            "".join(
                f"[rank{r}]: torch.distributed.DistBackendError: [{r}] is setting up NCCL "
                "communicator and retrieving ncclUniqueId from [0] via c10d key-value store by "
                "key '0', but store->get('0') got error: failed to recv, got 0 bytes\n"
                for r in range(4, 8)
            ),
            0,
        ),
        # NCCL 2.14 socket.cc:456 after its ECONNREFUSED retries, then PyTorch 2.0's wrapper
        (
            "node1:5601:5632 [1] misc/socket.cc:456 NCCL WARN Net : Connect to "
            "10.0.0.1<43211> failed : Connection refused\n"
            "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
            "1275, remote process exited or there was a network error, NCCL version 2.14.3\n"
            "ncclRemoteError: A call failed possibly due to a network error or a remote process "
            "exiting prematurely.\nLast error:\n"
            "Net : Connect to 10.0.0.1<43211> failed : Connection refused\n"
            "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) "
            "local_rank: 1 (pid: 5601) of binary: /usr/bin/python3\n",
            None,
        ),
    ],
)
def test_a_lost_store_host_or_refused_connect_is_the_network(
    tmp_path: Path, log_text: str, rank: int | None
) -> None:
    """The store's host closed the connection, or no process listens at a peer's address:
    the network (a node gone), restartable, not the reporter's exception."""
    analysis = analysed(tmp_path, log_text)
    assert lead(analysis) == (rank, Nature.NETWORK)
    assert analysis.decision is Decision.RESTART


def test_a_horovod_stall_entry_without_its_header_still_names_the_rank() -> None:
    assert lead(analyse("hvd2107_stall_rank3")) == (3, Nature.HANG)


# Open MPI's non-zero-exit report (orterun help text [orterun:non-zero-exit]), verbatim from
# https://github.com/AlizeeChen11/azurehpc-health-checks/blob/main/customTests/debugging-test-failure.md
MPIRUN_FIRST_PROCESS = """\
--------------------------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[56171,1],6]
  Exit code:    3
"""


def test_mpiruns_first_process_to_exit_non_zero_is_named_by_its_vpid(tmp_path: Path) -> None:
    analysis = analysed(tmp_path, MPIRUN_FIRST_PROCESS)
    assert lead(analysis) == (6, Nature.EXCEPTION)
    assert analysis.evidence[0].line == 6  # the report's header


def test_a_daemon_mpirun_lost_is_a_lost_node_not_a_rank(tmp_path: Path) -> None:
    """Source string: [orterun:proc-comm-failed] names a daemon ([[job,0],vpid]) where it
    names a rank ([[job,1],vpid]); an ``Exit code:`` after it is no report's."""
    analysis = analysed(
        tmp_path,
        "A critical communication path was lost to:\n\n"
        "  My name:      [[8410,0],0]\n  Process name: [[8410,0],1]\n  Node:         node02\n"
        "  Exit code:    1\n",
    )
    assert [(i.rank, i.nature) for i in analysis.primary] == [(None, Nature.CRASH)]
    assert analysis.cause == "node_lost" and analysis.decision is Decision.RESTART


def test_mpiruns_report_cut_before_its_exit_code_stays_in_its_own_restart_cycle(
    tmp_path: Path,
) -> None:
    """Cut before ``Exit code:``, the report belongs to the cycle that printed it: a restart
    whose cycle is clean reads as no failure."""
    log = tmp_path / "job.log"
    log.write_text(
        "\n".join(MPIRUN_FIRST_PROCESS.splitlines()[5:9])
        + "\nINFO:torch.distributed.elastic.agent.server.api:[default] Starting worker group\n"
        + "step 100 loss 1.0\n"
    )
    assert not analyze_log(log).primary


# Python's own traceback formats in clean logs: a stack printed on purpose
# (logging's stack_info, CPython Lib/logging/__init__.py "Stack (most recent call last):")
STACK_INFO_THEN_TRAINING = """\
WARNING:root:checkpoint dir is slow
Stack (most recent call last):
  File "/opt/train.py", line 96, in main
    save(state)
step 100 loss 1.0
step 200 loss 0.9
"""


def test_a_stack_the_log_goes_on_after_is_no_failure(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(STACK_INFO_THEN_TRAINING)
    assert not analyze_log(log).primary


def test_a_log_cut_inside_a_traceback_is_a_failure_and_a_ranked_error_line_leads(
    tmp_path: Path,
) -> None:
    cut = tmp_path / "cut.log"
    cut.write_text(STACK_INFO_THEN_TRAINING.replace("Stack", "Traceback").split("step")[0])
    analysis = analyze_log(cut)
    assert analysis.rule == "fallback" and "traceback the log ends inside" in analysis.explanation
    ranked = tmp_path / "ranked.log"
    ranked.write_text(
        "E1201 10:00:01.000 12 train.py:99] rank 3 lost its data loader worker\n" + cut.read_text()
    )
    assert lead(analyze_log(ranked))[0] == 3


# A traceback as CPython 3.11+ prints it (Lib/traceback.py: frames, source lines, caret lines),
# its exception line filled in below.
FRAMES = """\
step 100 loss 1.0
[rank2]: Traceback (most recent call last):
[rank2]:   File "/opt/train.py", line 96, in main
[rank2]:     batch = next(loader)
[rank2]:             ^^^^^^^^^^^^
"""


@pytest.mark.parametrize(
    ("exception", "detail"),
    [
        # concurrent/futures/process.py (BrokenProcessPool's message, 3.8-3.13)
        (
            "concurrent.futures.process.BrokenProcessPool: A process in the process pool was "
            "terminated abruptly while the future was running or pending.",
            "BrokenProcessPool: A process",
        ),
        # subprocess.py (TimeoutExpired.__str__)
        (
            "subprocess.TimeoutExpired: Command '['nvidia-smi']' timed out after 30 seconds",
            "TimeoutExpired: Command",
        ),
        ("StopIteration", "StopIteration"),  # a builtin, printed without its module
        # ray/exceptions.py: RayTaskError.as_instanceof_cause names the class after its cause
        (
            "ray.exceptions.RayTaskError(RuntimeError): ray::_RayTrainWorker__execute() "
            "(pid=4321, ip=10.0.0.2)",
            "RayTaskError(RuntimeError): ray::",
        ),
    ],
)
def test_a_tracebacks_exception_line_is_read_whatever_its_type(
    exception: str, detail: str, tmp_path: Path
) -> None:
    analysis = analysed(tmp_path, FRAMES + f"[rank2]: {exception}\n")
    assert lead(analysis) == (2, Nature.EXCEPTION)
    assert analysis.primary[0].summary.startswith(detail)


def test_another_process_line_inside_a_traceback_is_not_its_exception(tmp_path: Path) -> None:
    """Ranks print at once: a line of another process between a frame and its source line is
    not the exception (only a module-qualified type or a builtin reads as one)."""
    log = tmp_path / "job.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "/opt/train.py", line 96, in main\n'
        "Epoch: 3\n"
        "    batch = next(loader)\n"
        "RuntimeError: DataLoader worker (pid 77) exited unexpectedly\n"
    )
    assert analyze_log(log).primary[0].summary.startswith("RuntimeError: DataLoader")


def test_a_log_cut_after_a_frames_caret_line_ends_inside_the_traceback(tmp_path: Path) -> None:
    analysis = analysed(tmp_path, FRAMES.replace("[rank2]: ", ""))
    assert analysis.rule == "fallback" and lead(analysis) == (None, Nature.EXCEPTION)


def test_an_exception_python_ignored_is_no_failure(tmp_path: Path) -> None:
    """Python/errors.c (the default unraisablehook): "Exception ignored in: %R", then the
    traceback; the process goes on."""
    log = tmp_path / "job.log"
    log.write_text(
        "step 100 loss 1.0\n"
        "Exception ignored in: <function _MultiProcessingDataLoaderIter.__del__ at 0x7f3c>\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", line 1477, '
        "in __del__\n"
        "    self._shutdown_workers()\n"
        "AttributeError: '_MultiProcessingDataLoaderIter' object has no attribute "
        "'_workers_done_event'\n"
        "step 200 loss 0.9\n"
    )
    assert not analyze_log(log).primary
    failing = tmp_path / "failing.log"
    failing.write_text(log.read_text() + "RuntimeError: CUDA error: an illegal memory access\n")
    assert lead(analyze_log(failing)) == (None, Nature.GPU_ERROR)


def test_a_keyboard_interrupt_without_a_rank_is_the_jobs_signal(tmp_path: Path) -> None:
    analysis = analysed(tmp_path, FRAMES.replace("[rank2]: ", "") + "KeyboardInterrupt\n")
    assert lead(analysis) == (None, Nature.SIGNAL) and "SIGINT" in analysis.primary[0].summary


def test_open_mpi_1_2s_job_rank_wording_names_the_rank(tmp_path: Path) -> None:
    """Source string: Open MPI 1.2 help-orterun.txt [orterun:proc-aborted], the node quoted."""
    assert lead(
        analysed(
            tmp_path,
            'mpirun noticed that job rank 2 with PID 4321 on node "n01" exited on signal 9.\n',
        )
    ) == (2, Nature.CRASH)


# PyTorch's NCCL check ending with NCCL's own "Last error:", verbatim from
# https://github.com/hkproj/pytorch-transformer-distributed/issues/1 (fixed by the reporter with
# NCCL_SOCKET_IFNAME: a network cause)
NCCL_SYSTEM_ERROR = (
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:1333, unhandled system error (run with NCCL_DEBUG=INFO for details), "
    "NCCL version 2.18.6",
    "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "
    "device error. ",
    "Last error:",
    "socketStartConnect: Connect to 192.168.19.14<52822> failed : No route to host",
    "[2024-03-18 17:38:50,208] torch.distributed.elastic.multiprocessing.api: [ERROR] failed",
)


@pytest.mark.parametrize("prefix", ["", "[rank1]: "])
def test_an_nccl_system_error_is_the_cause_its_last_error_names(
    prefix: str, tmp_path: Path
) -> None:
    analysis = analysed(tmp_path, "".join(prefix + line + "\n" for line in NCCL_SYSTEM_ERROR))
    assert lead(analysis) == (1 if prefix else None, Nature.NETWORK)
    assert analysis.decision is Decision.RESTART


RAY_TRAIN_START = """\
(RayTrainWorker pid=23062, ip=10.2.0.5) Setting up process group for: env:// [rank=0, world_size=2]
(TorchTrainer pid=23004, ip=10.2.0.5) Started distributed worker processes:
(TorchTrainer pid=23004, ip=10.2.0.5) - (node_id=470dfc78, ip=10.2.0.5, pid=23062) world_rank=0, local_rank=0, node_rank=0
(TorchTrainer pid=23004, ip=10.2.0.5) - (node_id=d93746e8, ip=10.2.0.6, pid=24444) world_rank=1, local_rank=0, node_rank=1
"""


def test_a_ray_train_workers_lines_carry_the_rank_its_start_up_gave_its_pid(
    tmp_path: Path,
) -> None:
    """Source strings: ray/train/torch/config.py's ``Setting up process group for: ...
    [rank=R, world_size=W]`` and backend_executor.py's worker list; the worker's own lines
    name only its pid (``(RayTrainWorker pid=24444, ip=...)``)."""
    analysis = analysed(
        tmp_path,
        RAY_TRAIN_START
        + "(RayTrainWorker pid=24444, ip=10.2.0.6) Traceback (most recent call last):\n"
        + '(RayTrainWorker pid=24444, ip=10.2.0.6)   File "train.py", line 10, in train_func\n'
        + "(RayTrainWorker pid=24444, ip=10.2.0.6) RuntimeError: CUDA error: an illegal memory "
        "access was encountered\n",
    )
    assert lead(analysis) == (1, Nature.GPU_ERROR)
    assert analysis.primary[0].node == "10.2.0.6"


NCCL_INIT = (
    "NCCL INFO comm 0x{comm} rank {rank} nranks {size} cudaDev 3 busId 3d000 - Init COMPLETE"
)
IB_WARN = (
    "transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer 10.0.0.7<41284> with "
    "error 12, opcode 129, len 0, vendor err 129 (Recv)"
)


@pytest.mark.parametrize(
    ("inits", "rank"),
    [
        # the world's rank; a sub-communicator's smaller rank does not replace it; another
        # host reusing the pid is told apart by its host
        ([("gpu-node-2", 11, 16), ("gpu-node-2", 1, 2), ("gpu-node-3", 15, 16)], 11),
        # only 8-rank communicators for this process in a 32-rank world: no world rank
        ([("node-a", 0, 32), ("gpu-node-2", 5, 8)], None),
    ],
)
def test_an_nccl_warning_carries_the_rank_its_process_holds_in_the_world(
    inits: list[tuple[str, int, int]], rank: int | None, tmp_path: Path
) -> None:
    """NCCL's own prefix ``host:pid:tid [dev]`` names a process, its ``comm %p rank %d nranks
    %d cudaDev %d busId %lx - Init COMPLETE`` (init.cc, 2.9-2.15) a rank in a communicator: the
    world's only in the largest one the log shows."""
    assert lead(
        analysed(
            tmp_path,
            "".join(
                f"{host}:12345:12400 [3] " + NCCL_INIT.format(comm=i, rank=r, size=size) + "\n"
                for i, (host, r, size) in enumerate(inits)
            )
            + f"gpu-node-2:12345:12410 [3] {IB_WARN}\n",
        )
    ) == (rank, Nature.NETWORK)


def test_a_ray_workers_nccl_warning_keeps_the_workers_rank(tmp_path: Path) -> None:
    """Ray's prefix names the worker by its IP, NCCL's own by its host name: the pid joins them."""
    assert lead(
        analysed(
            tmp_path,
            RAY_TRAIN_START + "(RayTrainWorker pid=24444, ip=10.2.0.6) gpu-node-6:24444:24500 [0] "
            "transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer 10.2.0.5<41284> "
            "with error 12, opcode 129, len 0, vendor err 129 (Recv)\n",
        )
    ) == (1, Nature.NETWORK)


def test_a_restarted_ray_worker_group_is_a_new_restart_cycle(tmp_path: Path) -> None:
    """A second ``Started distributed worker processes:`` list gives its ranks to new pids."""
    analysis = analysed(
        tmp_path,
        RAY_TRAIN_START
        + "(RayTrainWorker pid=24444, ip=10.2.0.6) RuntimeError: CUDA error: an illegal memory "
        "access was encountered\n"
        "(TorchTrainer pid=23004, ip=10.2.0.5) Started distributed worker processes:\n"
        "(TorchTrainer pid=23004, ip=10.2.0.5) - (node_id=d93746e8, ip=10.2.0.6, pid=25001) "
        "world_rank=1, local_rank=0, node_rank=1\n"
        "(TorchTrainer pid=23004, ip=10.2.0.5) - (node_id=470dfc78, ip=10.2.0.5, pid=25002) "
        "world_rank=0, local_rank=0, node_rank=0\n"
        "(RayTrainWorker pid=25002, ip=10.2.0.5) torch.cuda.OutOfMemoryError: CUDA out of memory."
        " Tried to allocate 2.00 GiB\n",
    )
    assert [(i.rank, i.nature) for i in analysis.primary] == [(0, Nature.EXCEPTION)]


def test_srun_labels_that_agree_with_the_rank_prefixes_are_ranks(tmp_path: Path) -> None:
    """srun --label (src/srun/launch.c: "%s: %s %s: Exited with exit code %d") beside
    PyTorch 2.2+'s ``[rankN]:``: where every line carrying both has them equal, srun started
    one task per rank, so an unprefixed ``5:`` line and ``task 5`` are rank 5's. Label 0
    beside ``[rank0]:`` alone proves nothing: under torchrun node 0's task prints rank 0."""
    warning = (
        "{r}: [rank{r}]:[W1014 12:00:01.000 ProcessGroupNCCL.cpp:1250] Warning: process group "
        "has NOT been destroyed\n"
    )
    failing = (
        "1: Traceback (most recent call last):\n"
        '1:   File "/workspace/train.py", line 141, in train_step\n'
        "1: ValueError: bad batch\n"
    )
    only_zero = tmp_path / "zero.log"
    only_zero.write_text(warning.format(r=0) + failing)
    assert lead(analyze_log(only_zero))[0] is None
    log = tmp_path / "job.log"
    log.write_text(
        warning.format(r=0) + warning.format(r=3) + "5: Traceback (most recent call last):\n"
        '5:   File "/workspace/train.py", line 141, in train_step\n'
        '5:     raise ValueError("bad batch")\n'
        "5: ValueError: bad batch\n"
        "srun: error: node1: task 5: Exited with exit code 1\n"
        "slurmstepd: error: *** STEP 4242.0 ON node0 CANCELLED AT 2024-10-14T12:00:06 DUE TO "
        "TASK FAILURE ***\n"
        "srun: error: node0: tasks 0-3: Terminated\n"
    )
    analysis = analyze_log(log)
    assert lead(analysis) == (5, Nature.EXCEPTION)
    # under torchrun srun's label is the node's task: a label that differs from the prefix
    torchrun = tmp_path / "torchrun.log"
    torchrun.write_text(
        "1: [rank5]:[W1014 12:00:01.000 ProcessGroupNCCL.cpp:1250] Warning: not destroyed\n"
        "srun: error: node1: task 1: Exited with exit code 1\n"
    )
    assert lead(analyze_log(torchrun))[0] != 1


def test_a_task_failures_step_cancellation_is_no_scheduler_end(tmp_path: Path) -> None:
    """slurmstepd's ``DUE TO TASK FAILURE`` (req.c, SIG_TERM_KILL) follows a task's failure:
    the failure is the cause, not the scheduler; ``DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR
    DETAILS`` is the scheduler's end, on its node."""
    log = tmp_path / "job.log"
    log.write_text(
        "slurmstepd: error: *** STEP 4242.0 ON node0 CANCELLED AT 2024-10-14T12:00:06 DUE TO "
        "TASK FAILURE ***\n"
        "[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    assert lead(analyze_log(log)) == (3, Nature.GPU_ERROR)
    node = tmp_path / "node.log"
    node.write_text(
        "slurmstepd: error: *** JOB 4242 ON node03 CANCELLED AT 2024-01-01T00:00:00 DUE TO "
        "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***\n"
    )
    analysis = analyze_log(node)
    assert lead(analysis) == (None, Nature.SCHEDULER) and analysis.primary[0].node == "node03"
    assert analysis.decision is Decision.RESTART


DUMP_SIGNAL = (
    "[rank{r}]:[E1014 12:10:05.178 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) "
    "Rank {r}] Received a dump signal due to a collective timeout from  rank 2 and we will try "
    "our best to dump the debug info. Last enqueued NCCL work: {enq}, last completed NCCL "
    "work: 20584.This is most likely caused by incorrect usages of collectives\n"
)
TIMED_OUT = (
    "[rank{r}]:[E1014 12:10:05.162 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=20585, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600000 milliseconds before timing out.\n"
)


def test_the_rank_behind_in_its_dump_signal_counters_is_the_hangs_culprit(
    tmp_path: Path,
) -> None:
    """PyTorch 2.4+ (ProcessGroupNCCL.cpp getNCCLWatchdogTimeoutErrorMsg): every rank answers
    another's dump signal with its own counters; the one that never enqueued the collective
    its peers time out in is the culprit, though it printed the same kind of line."""
    log = tmp_path / "job.log"
    lines = [TIMED_OUT.format(r=r) for r in (0, 1, 2, 3)]
    lines += [DUMP_SIGNAL.format(r=r, enq=20584 if r == 3 else 20585) for r in (0, 1, 2, 3)]
    lines[3] = ""  # the culprit never timed out itself: it never reached the collective
    log.write_text("".join(lines))
    assert lead(analyze_log(log)) == (3, Nature.HANG)


RAY_WORKERS = "".join(
    f"(TorchTrainer pid=47169, ip=10.0.0.2) - (node_id=abc, ip=10.0.0.{2 + r // 4}, "
    f"pid={47310 + r}) world_rank={r}, local_rank={r % 4}, node_rank={r // 4}\n"
    for r in range(8)
)


def test_ray_names_the_worker_that_raised_by_its_pid(tmp_path: Path) -> None:
    """ray/exceptions.py: the driver's RayTaskError wraps the worker's, whose message starts
    with the worker's ``(pid=..., ip=...``; Ray Train's worker list maps the pid to a rank."""
    log = tmp_path / "job.log"
    log.write_text(
        RAY_WORKERS + "Traceback (most recent call last):\n"
        '  File "ray/air/execution/_internal/event_manager.py", line 110, in resolve_future\n'
        "    result = ray.get(future)\n"
        "ray.exceptions.RayTaskError(ValueError): ray::_Inner.train() (pid=47169, "
        "ip=10.0.0.2, actor_id=5f2a, repr=TorchTrainer)\n"
        '  File "ray/train/_internal/utils.py", line 57, in check_for_failure\n'
        "    ray.get(object_ref)\n"
        "ray.exceptions.RayTaskError(ValueError): ray::_RayTrainWorker__execute.get_next() "
        "(pid=47315, ip=10.0.0.3, actor_id=9c1d, repr=<RayTrainWorker object at 0x7f>)\n"
        "ValueError: bad batch\n"
    )
    assert lead(analyze_log(log)) == (5, Nature.EXCEPTION)
    died = tmp_path / "died.log"
    died.write_text(
        RAY_WORKERS + "(raylet) A worker died or was killed while executing a task by an "
        "unexpected system error. To troubleshoot the problem, check the logs for the dead "
        "worker. RayTask ID: ffff Worker ID: 1efd Node ID: 0d73 Worker IP address: 10.0.0.3 "
        "Worker port: 10003 Worker PID: 47316 Worker exit type: SYSTEM_ERROR Worker exit "
        "detail: Worker unexpectedly exits with a connection error code 2.\n"
    )
    assert lead(analyze_log(died)) == (6, Nature.CRASH)


def test_the_stores_connect_retry_warning_is_no_failure(tmp_path: Path) -> None:
    """socket.cpp warns on each failed connect attempt and retries ("(errno: N - ...)", on
    Windows "(system error: N - ...)"); the error is "... to any network address of" or the
    timeout. A log that ends while retrying hangs at initialization."""
    retry = (
        "[W socket.cpp:663] [c10d] The client socket has failed to connect to "
        "[localhost]:29500 (errno: 99 - Cannot assign requested address).\n"
    )
    clean = tmp_path / "clean.log"
    clean.write_text("step 0\n" + retry + "step 1 loss 2.0\n")
    assert not analyze_log(clean).primary
    ended = tmp_path / "ended.log"
    ended.write_text(retry)
    assert analyze_log(ended).rule == "stalled_init"


@pytest.mark.parametrize(
    ("line", "nature"),
    [
        # bash jobs.c: the status padded to 27 columns, then "(core dumped)" and the command
        ("train.sh: line 5: 41234 Aborted                 (core dumped) python t.py", "crash"),
        ("train.sh: line 5: 41234 Aborted                 python t.py", "crash"),
        # Lightning's own lines for a Ctrl-C and a SIGTERM (call.py, signal_connector.py)
        ("Detected KeyboardInterrupt, attempting graceful shutdown ...", "signal"),
        ("[rank: 0] Received SIGTERM: 15", "signal"),
        # glibc elf/dl-error-skeleton.c: "%s: error while loading shared libraries: %s: %s"
        (
            "python: error while loading shared libraries: libcudart.so.12: cannot open "
            "shared object file: No such file or directory",
            "exception",
        ),
        # argparse's error (exit 2) and srun's node failure
        ("train.py: error: the following arguments are required: --data", "exception"),
        ("srun: error: Node failure on node04", "scheduler"),
        # Python 3.9+ names the function first, which may start with an underscore
        ("Fatal Python error: _enter_buffered_busy: could not acquire lock", "crash"),
    ],
)
def test_tool_lines_that_end_a_run(line: str, nature: str, tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("step 1 loss 2.0\n" + line + "\n")
    assert lead(analyze_log(log))[1] is Nature(nature)


def test_a_failure_after_torchrun_says_its_workers_finished_is_teardown(tmp_path: Path) -> None:
    """torch/distributed/elastic/agent/server/api.py: every worker of the group exited 0; the
    HF Trainer's "Training completed" is no such word (evaluation comes after it)."""
    done = (
        "INFO:torch.distributed.elastic.agent.server.api:[default] worker group successfully "
        "finished. Waiting 300 seconds for other agents to finish."
    )
    failure = "RuntimeError: CUDA error: unspecified launch failure\n"
    log = tmp_path / "job.log"
    log.write_text(f"step 100 loss 0.1\n{done}\n{failure}")
    analysis = analyze_log(log)
    assert not analysis.primary and analysis.decision is Decision.CONTINUE
    fit_only = tmp_path / "fit.log"
    fit_only.write_text(
        "Training completed. Do not forget to share your model on huggingface.co/models =)\n"
        + failure
    )
    assert lead(analyze_log(fit_only)) == (None, Nature.GPU_ERROR)


def _root_cause_table(rank: int, local: int, pid: int, host: str, exitcode: int = -6) -> str:
    """torchrun's failure table (torch/distributed/elastic/multiprocessing/errors/__init__.py,
    2.x): its root cause killed by SIGABRT, or ended with an exit code."""
    traceback = (
        f"Signal 6 (SIGABRT) received by PID {pid}"
        if exitcode == -6
        else "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
    )
    rule = "------------------------------------------------------------\n"
    return (
        "============================================================\n"
        f"/workspace/train.py FAILED\n{rule}Failures:\n  <NO_OTHER_FAILURES>\n{rule}"
        "Root Cause (first observed failure):\n[0]:\n  time      : 2024-11-12_10:41:07\n"
        f"  host      : {host}\n  rank      : {rank} (local_rank: {local})\n"
        f"  exitcode  : {exitcode} (pid: {pid})\n  error_file: <N/A>\n"
        f"  traceback : {traceback}\n"
        "============================================================\n"
    )


@pytest.mark.parametrize(
    "line",
    [
        # NCCL src/debug.cc: "%s:%d:%d [%d] %s:%d NCCL WARN " (host:pid:tid [cudaDev]);
        # src/transport/net_ib.cc's completion error
        "node-b:22403:23010 [2] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion "
        "from peer 10.0.0.11<46795> with status=12 opcode=0 len=0 vendor err 129",
        # the driver's Xid names the process whose GPU work faulted
        "[Tue Nov 12 10:41:02 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=22403, name=python, "
        "GPU has fallen off the bus.",
    ],
)
def test_a_pid_torchruns_table_names_gives_its_line_a_rank(line: str, tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("step 100 loss 1.5\n" + line + "\n" + _root_cause_table(6, 2, 22403, "node-b"))
    assert lead(analyze_log(log))[0] == 6


def test_a_connection_lost_while_every_peer_waited_alive_is_the_network(tmp_path: Path) -> None:
    """Rank 5 lost its connection (NCCL misc/socket.cc, PyTorch 2.0's watchdog message);
    every other rank timed out 30 minutes later, alive: no process died, the link broke."""
    analysis = analysed(
        tmp_path,
        "[E ProcessGroupNCCL.cpp:474] [Rank 5] NCCL watchdog thread terminated with exception: "
        "NCCL error: remote process exited or there was a network error, NCCL version 2.18.3\n"
        + "".join(
            f"[E ProcessGroupNCCL.cpp:828] [Rank {r}] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=48211, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for "
            "1800431 milliseconds before timing out.\n"
            for r in (0, 1, 2, 3, 4, 6, 7)
        ),
    )
    assert lead(analysis) == (5, Nature.NETWORK) and analysis.decision is Decision.RESTART


def test_where_every_rank_lost_a_peer_the_launchers_first_failure_names_the_rank(
    tmp_path: Path,
) -> None:
    """gloo (transport/tcp/pair.cc): rank 5 read a reset first, the others then saw its node
    close; no rank died on its own or timed out, and torchrun's Root Cause is rank 5's exit."""
    log = tmp_path / "job.log"
    closed = "".join(
        f"[rank{r}]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] "
        "Connection closed by peer [10.0.0.12]:41201\n"
        for r in (0, 1, 2, 3, 4, 6, 7)
    )
    log.write_text(
        "[rank5]: RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:575] Read "
        "error [10.0.0.11]:29873: Connection reset by peer\n"
        + closed
        + _root_cause_table(5, 1, 22402, "node-b", exitcode=1)
    )
    analysis = analyze_log(log)
    assert lead(analysis) == (5, Nature.NETWORK) and analysis.decision is Decision.RESTART
    assert "first observed failure" in analysis.primary[0].summary


def test_torchruns_tee_prefix_is_a_local_rank_its_failure_table_maps(tmp_path: Path) -> None:
    """torchrun --tee prefixes a worker's lines with its role and local rank
    (``[default1]:``, multiprocessing/tail_log.py); node-b's table says local rank 1 there is
    rank 5. Without a map the local rank is no global one: no rank is guessed from it."""
    assert_line = (
        "[default1]:/opt/conda/aten/src/ATen/native/cuda/Loss.cu:240: nll_loss_forward_reduce"
        "_cuda_kernel_2d: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < "
        "n_classes` failed.\n"
        "[default1]:RuntimeError: CUDA error: device-side assert triggered\n"
    )
    log = tmp_path / "job.log"
    log.write_text(assert_line + _root_cause_table(5, 1, 22402, "node-b"))
    assert lead(analyze_log(log)) == (5, Nature.GPU_ERROR)
    alone = tmp_path / "alone.log"
    alone.write_text(assert_line)
    assert lead(analyze_log(alone))[0] is None


def test_srun_cancelling_the_step_after_a_task_failed_is_its_teardown(tmp_path: Path) -> None:
    """srun (src/srun/launch.c) reports the task that failed, then the step is cancelled
    (slurmstepd req.c: ``*** STEP ... CANCELLED AT ... ***``) and the other tasks are killed:
    the task's failure is the cause; the same cancellation alone is scancel's."""
    progress = "".join(f"{r}: step 300 | loss 2.2000\n" for r in range(8))
    cancelled = (
        "slurmstepd: error: *** STEP 4812733.0 ON gpu-node02 CANCELLED AT 2024-05-14T03:12:09 ***\n"
    )
    log = tmp_path / "job.log"
    log.write_text(
        progress
        + "srun: error: gpu-node02: task 6: Segmentation fault (core dumped)\n"
        + "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n"
        + cancelled
        + "srun: error: gpu-node01: tasks 0-3: Killed\n"
        + "srun: error: gpu-node02: tasks 4-5,7: Killed\n"
    )
    analysis = analyze_log(log)
    assert [(f.rank, f.nature) for f in analysis.primary] == [(6, Nature.CRASH)]
    scancel = tmp_path / "scancel.log"
    scancel.write_text(progress + cancelled)
    assert lead(analyze_log(scancel)) == (None, Nature.SIGNAL)


def test_an_nccl_communicator_aborted_on_a_rank_is_that_rank_waiting(tmp_path: Path) -> None:
    """NCCLUtils.hpp: "NCCL communicator was aborted on rank N" names the printing rank: the
    ranks that print it waited; the one that printed nothing hung."""
    assert lead(
        analysed(
            tmp_path,
            "".join(
                f"RuntimeError: [Rank {r}] Caught collective operation timeout: WorkNCCL(OpType="
                "ALLREDUCE, TensorShape=[1], Timeout(ms)=1800000) ran for 1800313 milliseconds "
                "before timing out.\n"
                for r in (1, 2, 3)
            )
            + "".join(
                f"RuntimeError: NCCL communicator was aborted on rank {r}.\n" for r in (0, 4, 5, 7)
            )
            + "world_size=8\n",
        )
    ) == (6, Nature.HANG)


def test_a_ray_actor_whose_node_died_is_a_lost_node(tmp_path: Path) -> None:
    """Ray's ActorDiedError (gcs_actor_manager.cc): "The actor died unexpectedly ..." then,
    below the actor's fields, its death cause "The actor died because its node has died":
    infrastructure (restart without the node), not the job's crash."""
    analysis = analysed(
        tmp_path,
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this "
        "task.\n\tclass_name: RayTrainWorker\n\tactor_id: 9c1d\n\tpid: 47315\n"
        "\tnamespace: 3f2a\n\tip: 10.0.0.3\n"
        "The actor died because its node has died. Node Id: 9426f44574cce4866be798cfed308f2d\n"
        "\tthe actor's node was terminated unexpectedly: health check failed due to missing "
        "too many heartbeats\n",
    )
    assert lead(analysis) == (None, Nature.CRASH) and analysis.cause == "node_lost"
    assert analysis.decision is Decision.RESTART


def test_the_kernels_oom_kill_names_the_rank_by_pid(tmp_path: Path) -> None:
    """mm/oom_kill.c: "Out of memory: Killed process %d (%s) total-vm:..."; torchrun's table
    says which rank that pid was."""
    assert lead(
        analysed(
            tmp_path,
            "[Tue Nov 12 10:41:02 2024] Out of memory: Killed process 22402 (python) "
            "total-vm:102400000kB, anon-rss:98304000kB, file-rss:0kB, shmem-rss:0kB, UID:1000 "
            "pgtables:200000kB oom_score_adj:0\n" + _root_cause_table(5, 1, 22402, "node-b"),
        )
    ) == (5, Nature.CRASH)


def test_an_ignored_exception_ends_at_its_own_line_and_a_later_traceback_counts(
    tmp_path: Path,
) -> None:
    """Python/errors.c prints "Exception ignored in: %R" then the exception, here without a
    traceback (a ResourceWarning from __del__): the real traceback after it is a failure."""
    assert lead(
        analysed(
            tmp_path,
            "step 100 loss 1.23\n"
            "Exception ignored in: <function Popen.__del__ at 0x7f3c2a1b5e50>\n"
            "ResourceWarning: subprocess 4242 is still running\n"
            "step 110 loss 1.20\n"
            "Traceback (most recent call last):\n"
            '  File "/app/train.py", line 88, in <module>\n'
            "    main()\n"
            "RuntimeError: shape mismatch: [4, 128] vs [4, 256]\n",
        )
    ) == (None, Nature.EXCEPTION)


@pytest.mark.parametrize(
    "tail",
    [
        # Lib/traceback.py: a recursion's repeated frames, indented like a frame
        '  File "/app/train.py", line 10, in f\n    return f(n + 1)\n'
        "  [Previous line repeated 996 more times]\n",
        # 3.13: a multi-line source segment with its carets
        '  File "/app/train.py", line 10, in <module>\n    results = list(pool.map(\n'
        "              ^^^^^^^^^^^^^\n        work, items))\n        ^^^^^^^^^^^^\n",
    ],
)
def test_a_tracebacks_long_tail_still_reaches_its_exception_line(tail: str, tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        "step 1\nTraceback (most recent call last):\n"
        + tail
        + "concurrent.futures.process.BrokenProcessPool: A process in the process pool was "
        "terminated abruptly\n"
    )
    assert analyze_log(log).primary[0].summary.startswith("BrokenProcessPool")


def test_a_failure_tables_pid_is_looked_up_on_its_own_host(tmp_path: Path) -> None:
    """Containers on two nodes reuse pids: node-b's table pid 52 is not node-a's process 52,
    whose NCCL init line says it is rank 0."""
    analysis = analysed(
        tmp_path,
        "node-a:52:60 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 3d000 - Init "
        "COMPLETE\n"
        "node-b:52:61 [0] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 0 busId 3d000 - Init "
        "COMPLETE\n"
        "node-a:52:70 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer "
        "10.0.0.7<41284> with error 12, opcode 129, len 0, vendor err 129 (Recv)\n"
        + _root_cause_table(1, 0, 52, "node-b", exitcode=1),
    )
    assert lead(analysis) == (0, Nature.NETWORK) and analysis.primary[0].node == "node-a"


def test_a_count_of_aborted_jobs_is_no_crash(tmp_path: Path) -> None:
    """bash's job report (jobs.c) is "line N: PID Aborted ...": a table's "0 Aborted" is not."""
    log = tmp_path / "job.log"
    log.write_text("step 100 loss 1.5\nJobs: 12 Completed  0 Aborted  0 Failed\nstep 200\n")
    assert not analyze_log(log).primary


def _failures_then_root_cause(other: int, root: int) -> str:
    """torchrun's table lists the other failures above the root cause (errors/__init__.py
    ``_MSG_FORMAT_TEMPLATE``: ``Failures:`` then ``Root Cause (first observed failure):``)."""
    rule = "------------------------------------------------------------\n"

    def entry(index: int, rank: int, time: str) -> str:
        return (
            f"[{index}]:\n  time      : 2023-04-06_10:50:{time}\n  host      : gpu-node07\n"
            f"  rank      : {rank} (local_rank: {rank})\n  exitcode  : 1 (pid: {2209 + rank})\n"
            "  error_file: <N/A>\n"
            "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
        )

    return (
        "============================================================\n"
        f"train.py FAILED\n{rule}Failures:\n{entry(0, other, '03')}{rule}"
        f"Root Cause (first observed failure):\n{entry(1, root, '01')}"
        "============================================================\n"
    )


def test_an_unprefixed_error_belongs_to_the_root_cause_not_the_first_table_entry(
    tmp_path: Path,
) -> None:
    assert lead(
        analysed(
            tmp_path,
            "Traceback (most recent call last):\n"
            '  File "train.py", line 170, in main\n'
            "RuntimeError: Expected all tensors to be on the same device, but found at least two "
            "devices, cuda:3 and cpu!\n" + _failures_then_root_cause(other=0, root=3),
        )
    ) == (3, Nature.EXCEPTION)


def test_an_oom_names_a_device_which_the_failure_table_maps_to_its_global_rank(
    tmp_path: Path,
) -> None:
    """c10/cuda/CUDACachingAllocator.cpp prints the device (``GPU 2``), never the rank: on
    node 1 of two, torchrun's table says local rank 2 is rank 6."""
    assert lead(
        analysed(
            tmp_path,
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has "
            "a total capacty of 79.15 GiB of which 1.06 GiB is free.\n"
            + _root_cause_table(6, 2, 5122, "node1", exitcode=1),
        )
    ) == (6, Nature.EXCEPTION)


def test_an_unprefixed_cuda_error_takes_the_rank_of_the_exit_code_report(tmp_path: Path) -> None:
    """Python exits with 1 on a CUDA error's RuntimeError too: the table's exit code 1 is it."""
    assert lead(
        analysed(
            tmp_path,
            "RuntimeError: CUDA error: an illegal memory access was encountered\n"
            + _root_cause_table(6, 2, 22403, "node1", exitcode=1),
        )
    ) == (6, Nature.GPU_ERROR)


def test_an_error_training_went_on_past_did_not_stop_it(tmp_path: Path) -> None:
    """fairseq's trainer logs a caught OOM as a warning, recovers, and ends with its own
    ``done training in`` (fairseq_cli/train.py)."""
    analysis = analysed(
        tmp_path,
        "2024-10-14 11:04:10 | WARNING | fairseq.trainer | OOM: Ran out of memory with "
        "exception: CUDA out of memory. Tried to allocate 1.22 GiB. GPU 3 has a total capacity "
        "of 79.15 GiB of which 612.00 MiB is free.\n"
        "2024-10-14 11:04:10 | WARNING | fairseq.trainer | attempting to recover from OOM in "
        "forward/backward pass\n"
        "2024-10-14 11:05:00 | INFO | train_inner | epoch 001:    500 / 1200 loss=8.4\n"
        "2024-10-14 11:14:05 | INFO | fairseq_cli.train | done training in 804.1 seconds\n",
    )
    assert not analysis.primary and analysis.decision is Decision.CONTINUE


def test_a_network_error_gives_way_to_the_gpu_fault_of_the_peer_it_lost(tmp_path: Path) -> None:
    """Node 0's InfiniBand retry-exceeded error is printed before rank 5's own CUDA failure
    (NCCL src/include/checks.h): the dead peer's fault explains the lost link, not the reverse."""
    analysis = analysed(
        tmp_path,
        "node0:3301:3450 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from "
        "peer 10.0.0.2<45678> with error 12, opcode 0, len 0, vendor err 129 (Recv)\n"
        "node1:4602:4780 [1] enqueue.cc:1051 NCCL WARN Cuda failure 'an illegal memory access "
        "was encountered'\n" + _root_cause_table(5, 1, 4602, "node1", exitcode=1),
    )
    assert lead(analysis) == (5, Nature.GPU_ERROR) and analysis.decision is Decision.STOP


@pytest.mark.parametrize(
    ("line", "summary"),
    [
        # c10/hip/HIPException.cpp: PyTorch's CUDA checks, hipified for ROCm builds
        ("[rank5]: RuntimeError: HIP error: an illegal memory access was encountered", "HIP error"),
        (
            "[rank5]: torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 1 "
            "has a total capacity of 63.98 GiB of which 1.02 GiB is free.",
            "OutOfMemoryError: HIP",
        ),
    ],
)
def test_rocm_builds_say_hip_where_cuda_builds_say_cuda(
    line: str, summary: str, tmp_path: Path
) -> None:
    analysis = analysed(tmp_path, f"[rank0]: step 10\n{line}\n")
    assert analysis.primary[0].rank == 5 and analysis.primary[0].summary.startswith(summary)


def test_lightnings_child_process_report_names_the_rank_that_raised(tmp_path: Path) -> None:
    """lightning/fabric/strategies/launchers/subprocess_script.py reports the failed child by
    its local rank, then kills the rest (the shell's ``Killed`` is the main process)."""
    assert lead(
        analysed(
            tmp_path,
            "Initializing distributed: GLOBAL_RANK: 2, MEMBER: 3/4\n"
            "Traceback (most recent call last):\n"
            '  File "train.py", line 40, in training_step\n'
            "ValueError: too many values to unpack (expected 2)\n"
            "[rank: 2] Child process with PID 5678 terminated with code 1. Forcefully terminating "
            "all other processes to avoid zombies 🧟\nKilled\n",
        )
    ) == (2, Nature.EXCEPTION)


@pytest.mark.parametrize(("locals_seen", "rank"), [(range(4), 2), (range(1, 4), None)])
def test_a_tee_prefixs_local_rank_is_global_where_its_workers_are_the_whole_world(
    locals_seen: range, rank: int | None, tmp_path: Path
) -> None:
    """torchrun's ``--tee`` prefix names the local rank (``[default2]:``); where the log's
    workers number the world size, there is one node and the local rank is the global one."""
    assert lead(
        analysed(
            tmp_path,
            "world_size: 4\n"
            + "".join(f"[default{local}]:step 10 loss 2.30\n" for local in locals_seen)
            + "[default2]:Traceback (most recent call last):\n"
            '[default2]:  File "/app/train.py", line 88, in <module>\n'
            "[default2]:ValueError: shard 7 is corrupt\n",
        )
    ) == (rank, Nature.EXCEPTION)


def _ranks(analysis: LogAnalysis) -> list[int | None]:
    return [f.rank for f in analysis.primary]


def test_every_rank_monitored_barrier_names_is_a_culprit_and_rank_0_reports_them(
    tmp_path: Path,
) -> None:
    """ProcessGroupGloo.cpp monitoredBarrier: rank 0 logs one line per rank that did not
    arrive, then "Ranks 1, 3 failed to pass ..."; ProcessGroupWrapper's exception on rank 0
    and rank 2's "successfully reached monitoredBarrier" are their consequences."""
    analysis = analysed(
        tmp_path,
        "[rank0]:[E514 10:30:11 ProcessGroupGloo.cpp:2893] [Rank 0]: Rank 1 failed to pass "
        "monitoredBarrier in 1800000 ms\n"
        "[rank0]:[E514 10:30:11 ProcessGroupGloo.cpp:2893] [Rank 0]: Rank 3 failed to pass "
        "monitoredBarrier in 1800000 ms\n"
        "[rank0]:RuntimeError: ProcessGroupWrapper: Monitored Barrier encountered error running "
        "collective: CollectiveFingerPrint(SequenceNumber=57, OpType=ALLREDUCE). Error: \n"
        "[rank0]:[Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 1800000 ms\n"
        "[rank2]:[E514 10:30:12 ProcessGroupGloo.cpp:137] Rank 2 successfully reached "
        "monitoredBarrier, but received errors while waiting for send/recv from rank 0. Please "
        "check rank 0 logs for faulty rank.\n",
    )
    assert _ranks(analysis) == [1, 3] and analysis.primary[0].nature is Nature.HANG
    assert {f.rank for f in analysis.secondary} == {0, 2}
    assert analysis.decision is Decision.RESTART


GLOO_RECV_TIMEOUT = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
    "waiting 1800000ms for recv operation to complete\n"
)


def test_gloos_connectivity_line_gives_the_tee_prefixes_rank_and_the_world(
    tmp_path: Path,
) -> None:
    """gloo context.cc printConnectivityInfo: "[Gloo] Rank k is connected to N peer ranks.
    Expected number of connected peer ranks is : M" names the process behind ``[defaultk]:``
    and the world (M + 1): the rank that never printed a word is the one the others wait for."""
    analysis = analysed(
        tmp_path,
        "".join(
            f"[default{k}]:[Gloo] Rank {k} is connected to 2 peer ranks. Expected number of "
            f"connected peer ranks is : 3\n"
            for k in range(3)
        )
        + "".join(f"[default{k}]:{GLOO_RECV_TIMEOUT}" for k in range(3)),
    )
    assert lead(analysis) == (3, Nature.HANG) and len(analysis.secondary) == 3


def test_gloos_not_connected_report_names_the_peer_unless_it_reported_itself(
    tmp_path: Path,
) -> None:
    """gloo 70dc360: "Rank k is NOT connected to: [3]" names rank 3; a lazily connecting
    context reports every peer unconnected while every rank reports: no one is named."""
    line = "[/pytorch/third_party/gloo/gloo/transport/tcp/context.cc:{n}] INFO Rank {k} is "
    connected = line + "connected to {c}. Expected number of connected peers is: 3\n"
    missing = line + "NOT connected to: [{peers}]\n"
    log = tmp_path / "job.log"
    log.write_text(
        "".join(
            f"[rank{k}]:"
            + connected.format(n=245, k=k, c=2)
            + f"[rank{k}]:"
            + missing.format(n=254, k=k, peers=3)
            for k in range(3)
        )
        + "".join(f"[rank{k}]:{GLOO_RECV_TIMEOUT}" for k in range(3))
    )
    assert lead(analyze_log(log)) == (3, Nature.HANG)
    lazy = tmp_path / "lazy.log"
    lazy.write_text(
        "".join(
            f"[rank{k}]:"
            + connected.format(n=245, k=k, c=0)
            + f"[rank{k}]:"
            + missing.format(n=254, k=k, peers=", ".join(str(p) for p in range(4) if p != k))
            for k in range(4)
        )
        + "[rank0]:step 1200 loss 1.5\n"
    )
    assert not analyze_log(lazy).primary


def _mismatch(rank: int, op: str, other: int, other_op: str) -> str:
    """ProcessGroupWrapper.cpp CollectiveFingerPrint::verify's exception, as rank ``rank``
    raises it (the first peer whose fingerprint differs from its own)."""
    fingerprint = "CollectiveFingerPrint(SequenceNumber=1207, OpType={}, TensorShape=[1])"
    return (
        f"[rank{rank}]:RuntimeError: Detected mismatch between collectives on ranks. Rank {rank} "
        f"is running collective: {fingerprint.format(op)}, but Rank {other} is running "
        f"collective: {fingerprint.format(other_op)}.\n"
    )


def test_a_collective_mismatch_blames_the_rank_the_others_name(tmp_path: Path) -> None:
    """TORCH_DISTRIBUTED_DEBUG=DETAIL: every rank raises; ranks 0, 1, 3 name rank 2 (the one
    running BROADCAST), rank 2 names rank 0. Two ranks naming each other tie: both stand."""
    log = tmp_path / "job.log"
    log.write_text(
        _mismatch(2, "BROADCAST", 0, "ALLREDUCE")
        + "".join(_mismatch(r, "ALLREDUCE", 2, "BROADCAST") for r in (0, 1, 3))
    )
    analysis = analyze_log(log)
    assert _ranks(analysis) == [2] and analysis.primary[0].nature is Nature.EXCEPTION
    assert analysis.decision is Decision.STOP
    tie = tmp_path / "tie.log"
    tie.write_text(_mismatch(0, "BARRIER", 1, "GATHER") + _mismatch(1, "GATHER", 0, "BARRIER"))
    assert _ranks(analyze_log(tie)) == [0, 1]


def _faulthandler_dump(label: int, top: str, current: bool = False, prefix: str = "{}: ") -> str:
    """faulthandler.c format_timeout's header, then traceback.c's thread header and frames
    ('  File "%s", line %d in %s'), as srun --label (or another launcher) prints them."""
    thread = "Current thread" if current else "Thread"
    return "".join(
        prefix.format(label) + f"{text}\n"
        for text in (
            "Timeout (0:10:00)!",
            f"{thread} 0x00007f2da4a3b740 (most recent call first):",
            f'  File "{top}", line 2050 in wait_here',
            '  File "/workspace/train.py", line 330 in <module>',
        )
    )


def test_faulthandlers_dump_blames_the_rank_no_thread_of_which_waits_in_a_collective(
    tmp_path: Path,
) -> None:
    """dump_traceback_later(exit=True): every rank prints "Timeout (0:10:00)!" and exits with
    code 1 (the hang's end, no exception). Rank 2 is in its data loader, the others in
    torch.distributed: rank 2 hung; identical dumps blame no rank."""
    c10d = "/usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py"
    loader = "/usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py"
    exits = "".join(f"srun: error: node17: task {r}: Exited with exit code 1\n" for r in range(4))
    log = tmp_path / "job.log"
    log.write_text(
        "".join(_faulthandler_dump(r, loader if r == 2 else c10d, r == 2) for r in range(4)) + exits
    )
    analysis = analyze_log(log)
    assert lead(analysis) == (2, Nature.HANG) and analysis.decision is Decision.RESTART
    same = tmp_path / "same.log"
    same.write_text("".join(_faulthandler_dump(r, c10d) for r in range(4)) + exits)
    assert lead(analyze_log(same)) == (None, Nature.HANG)


C10D_PY = "torch/distributed/distributed_c10d.py"


def _pyspy_dump(pid: int, waiting: bool, argv: str = "", prefix: str = "") -> str:
    """py-spy dump.rs: ``Process {}: {}``, ``Python v{} ({})``, a blank line, then each
    thread's ``Thread {} ({}): "{}"`` (stack_trace.rs status_str) and ``    {} ({}:{})``
    frames, most recent first (``--locals``: ``Arguments:`` and ``Locals:`` blocks)."""
    top = (
        [f"    barrier ({C10D_PY}:4159)", "        Arguments:", "            group: None"]
        if waiting
        else ["    _read_block (data/indexed_dataset.py:212)"]
    )
    lines = [
        f"Process {pid}: /usr/bin/python3.10 -u train.py{argv}",
        "Python v3.10.12 (/usr/bin/python3.10)",
        "",
        f'Thread {pid} ({"idle" if waiting else "active+gil"}): "MainThread"',
        *top,
        "    train (train.py:163)",
        "    <module> (train.py:205)",
        f'Thread {pid + 300} (idle): "Thread-2 (_pin_memory_loop)"',
        "    select (selectors.py:416)",
        "",
    ]
    return "".join(f"{prefix}{line}\n" for line in lines)


def _gdb_dump(pid: int, waiting: bool) -> str:
    """``gdb -p PID -batch -ex bt -ex py-bt``: gdb's frames, then libpython.py's py-bt
    (``Traceback (most recent call first):``, ``  File "%s", line %i, in %s``), then gdb's
    ``[Inferior 1 (process N) detached]``."""
    native, python = (
        ("c10d::ProcessGroupNCCL::WorkNCCL::wait(std::chrono::duration<long>) ()", C10D_PY),
        ("__GI___libc_read (fd=37) at read.c:26", "/opt/app/data/indexed_dataset.py"),
    )[0 if waiting else 1]
    return (
        "#0  0x00007ffd3b7f1b6d in clock_gettime ()\n"
        f"#1  0x00007f3b3f2e12a4 in {native}\n"
        "Traceback (most recent call first):\n"
        "  <built-in method wait of Work object at remote 0x7f3b9c1a9df0>\n"
        f'  File "/usr/lib/python3.10/site-packages/{python}", line 4159, in barrier\n'
        "    work.wait()\n"
        '  File "/opt/app/train.py", line 205, in <module>\n'
        "    main()\n"
        f"[Inferior 1 (process {pid}) detached]\n"
    )


PIDS = "".join(f"[rank {r}] pid={41231 + r} host=gpu-node07 local_rank={r}\n" for r in range(4))
"""A training script's own start-up print: the only tie of a dump's pid to a rank."""


@pytest.mark.parametrize("prefix", ["", "2024-06-12T10:31:18.126Z "])
def test_a_pyspy_dump_blames_the_process_not_waiting_where_the_others_wait(
    tmp_path: Path, prefix: str
) -> None:
    """``py-spy dump`` of every rank after a hang: ranks 0, 1 and 3 idle in barrier, rank 2
    reading its data: rank 2 hung. Its frames are no exception's traceback."""
    dumps = "".join(_pyspy_dump(41231 + r, r != 2, prefix=prefix) for r in range(4))
    analysis = analysed(tmp_path, PIDS + "step 1247 | loss 1.9012\n" + dumps)
    assert lead(analysis) == (2, Nature.HANG) and analysis.decision is Decision.RESTART


def test_a_dumps_pid_takes_a_rank_only_from_the_log(tmp_path: Path) -> None:
    """No line ties the pids to ranks: the process is named by its pid, no rank is guessed;
    torch.distributed.launch's ``--local_rank=2`` in the command line is the rank (one node)."""
    unmapped = analysed(tmp_path, "".join(_pyspy_dump(41231 + r, r != 2) for r in range(4)))
    assert lead(unmapped) == (None, Nature.HANG)
    assert "process 41233" in unmapped.primary[0].summary
    argv = "".join(_pyspy_dump(41231 + r, r != 2, f" --local_rank={r}") for r in range(4))
    assert lead(analysed(tmp_path, argv)) == (2, Nature.HANG)


def test_gdb_and_py_bt_dumps_blame_the_process_not_in_a_collective(tmp_path: Path) -> None:
    """gdb's native frames in WorkNCCL::wait or py-bt's in distributed_c10d.py: waiting; the
    pid comes from gdb's ``detached`` line. One dump alone names no rank."""
    dumps = "".join(_gdb_dump(41231 + r, r != 2) for r in range(4))
    analysis = analysed(tmp_path, PIDS + dumps)
    assert lead(analysis) == (2, Nature.HANG) and analysis.decision is Decision.RESTART
    assert lead(analysed(tmp_path, PIDS + _gdb_dump(41231, True))) == (None, Nature.HANG)


def test_a_dump_of_a_run_that_went_on_is_no_failure(tmp_path: Path) -> None:
    """One py-spy dump mid-run, then more steps and the end: the dumped process was busy."""
    steps = "".join(f"step {s} | loss 1.90{s % 10}\n" for s in range(1248, 1252))
    log = PIDS + _pyspy_dump(41231, False) + steps + "training complete: 1252 steps\n"
    assert analysed(tmp_path, log).decision is Decision.CONTINUE


def test_tee_prefixes_take_their_ranks_from_the_failure_tables_base(tmp_path: Path) -> None:
    """torchrun numbers an agent's workers from a base (global = base + local, api.py
    _assign_worker_ranks): the table's rank 1 at local 1 puts ``[default2]:`` at rank 2."""
    c10d = "/usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py"
    loader = "/usr/lib/python3.10/site-packages/torch/utils/data/dataloader.py"
    assert lead(
        analysed(
            tmp_path,
            "".join(
                _faulthandler_dump(r, loader if r == 2 else c10d, prefix="[default{}]:")
                for r in range(4)
            )
            + _root_cause_table(1, 1, 4601, "node1", exitcode=1),
        )
    ) == (2, Nature.HANG)


RAY_DRIVER = (
    "Traceback (most recent call last):\n"
    '  File "ray/air/execution/_internal/event_manager.py", line 110, in resolve_future\n'
    "    result = ray.get(future)\n"
    "ray.exceptions.RayTaskError({cause}): ray::_Inner.train() (pid=47169, ip=10.0.0.2, "
    "actor_id=5f2a, repr=TorchTrainer)\n"
    '  File "ray/train/_internal/utils.py", line 57, in check_for_failure\n'
    "    ray.get(object_ref)\n"
)
"""The driver re-raising a worker's failure (ray/exceptions.py RayTaskError.as_instanceof_cause)."""
ACTOR_DIED = (
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
    "\tclass_name: RayTrainWorker\n\tactor_id: 647f783b\n\tpid: 47316\n"
    "\tnamespace: 2405\n\tip: 10.0.0.3\n"
)
"""ray/exceptions.py ActorDiedError: the message, the dead actor's fields, then its cause."""
TRAINING_FAILED = (
    "\nray.train.base_trainer.TrainingFailedError: The Ray Train run failed. Please inspect the "
    "previous error messages for a cause.\n"
)


@pytest.mark.parametrize(
    ("cause", "nature", "decision", "cause_class"),
    [
        # gcs_actor_manager.cc's worker-died cause: the process was killed (SIGKILL, OOM)
        (
            "The actor is dead because its worker process has died. Worker exit type: "
            "SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error "
            "code 2. End of file.",
            Nature.CRASH,
            Decision.STOP,
            "crash",
        ),
        # GenNodeDiedCause, the older wording (before NodeDeathInfo)
        (
            "The actor is dead because its node has died. Node Id: 56b97436e673",
            Nature.CRASH,
            Decision.RESTART,
            "node_lost",
        ),
    ],
)
def test_a_dead_ray_actor_is_the_rank_its_pid_names(
    cause: str, nature: Nature, decision: Decision, cause_class: str, tmp_path: Path
) -> None:
    """utils.py check_for_failure logs ``Worker 6 has failed.`` on a RayActorError; the
    driver's ``RayTaskError(ActorDiedError)`` wraps the ActorDiedError printed after it, whose
    ``pid:`` the worker list maps to rank 6 and whose last line says why it died."""
    analysis = analysed(
        tmp_path,
        RAY_WORKERS
        + "(TorchTrainer pid=47169, ip=10.0.0.2) Worker 6 has failed.\n"
        + RAY_DRIVER.format(cause="ActorDiedError")
        + ACTOR_DIED
        + cause
        + "\n"
        + TRAINING_FAILED,
    )
    assert lead(analysis) == (6, nature) and analysis.primary[0].node == "10.0.0.3"
    assert analysis.decision is decision and analysis.cause == cause_class


def test_a_ray_actors_node_preempted_is_the_scheduler(tmp_path: Path) -> None:
    """GenNodeDiedCause's newer wording says on its next line why the node died."""
    analysis = analysed(
        tmp_path,
        RAY_WORKERS
        + RAY_DRIVER.format(cause="ActorDiedError")
        + ACTOR_DIED
        + "The actor died because its node has died. Node Id: 56b97436e673\n"
        + "\tthe actor's node was preempted: spot instance interruption notice received\n",
    )
    assert lead(analysis) == (None, Nature.SCHEDULER) and analysis.primary[0].node == "10.0.0.3"
    assert analysis.decision is Decision.RESTART


def test_rays_memory_monitor_names_the_worker_it_killed(tmp_path: Path) -> None:
    """node_manager.cc's kill message (the OutOfMemoryError's) names the worker's pid; the
    raylet's periodic summary before it names only the node."""
    assert lead(
        analysed(
            tmp_path,
            RAY_WORKERS
            + "(raylet, ip=10.0.0.3) node_manager.cc:3041: 1 Workers (tasks / actors) killed due "
            "to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 71e7, "
            "IP: 10.0.0.3) over the last time period.\n"
            + RAY_DRIVER.format(cause="OutOfMemoryError")
            + "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on "
            "memory.\n"
            "Memory on the node (IP: 10.0.0.3, ID: 71e7) where the task (actor ID: 647f, "
            "name=RayTrainWorker.__init__, pid=47316, memory used=61.20GB) was running was 121.83GB "
            "/ 128.00GB (0.951807), which exceeds the memory usage threshold of 0.95. Ray killed "
            "this worker (ID: 1207) because it was the most recently scheduled task\n",
        )
    ) == (6, Nature.CRASH)


@pytest.mark.parametrize(
    ("summary", "group", "culprit"),
    [
        # poll.py @a16e7bbd
        ("WorkerGroupError", "[Rank 0,1,2,3,4,6,7 Error Snippet]:", "[Rank 5 Error Snippet]:"),
        # poll.py @0c09d6c1
        ("WorkerTrainingFailedError", "[Rank 0, 1, 2, 3, 4, 6, 7]:", "[Rank 5]:"),
    ],
)
def test_ray_train_v2s_snippets_are_by_rank_not_time(
    summary: str, group: str, culprit: str, tmp_path: Path
) -> None:
    """The snippets are grouped by error and ordered by rank: the group that lost a peer,
    listed first, are victims of the rank whose own exception comes after them."""
    assert lead(
        analysed(
            tmp_path,
            f"ray.train.v2.api.exceptions.{summary}: Training failed due to worker errors:\n"
            f"{group}\nTraceback (most recent call last):\n"
            '  File "/workspace/train.py", line 188, in main\n'
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:2027, remote "
            "process exited or there was a network error, NCCL version 2.21.5\n"
            f"{culprit}\nTraceback (most recent call last):\n"
            '  File "/workspace/train.py", line 141, in train_step\n'
            "ValueError: bad batch\n",
        )
    ) == (5, Nature.EXCEPTION)


@pytest.mark.parametrize(
    "status",
    [
        # kubelet eviction/helpers.go: Reason = "Evicted", nodeLowMessageFmt
        "Reason:           Evicted\n"
        "Message:          The node was low on resource: memory. Threshold quantity: 100Mi, "
        "available: 88Mi. ",
        # kubelet nodeshutdown_manager_linux.go: nodeShutdownReason, nodeShutdownMessage
        "Reason:           Terminated\n"
        "Message:          Pod was terminated in response to imminent node shutdown.",
    ],
)
def test_a_pods_status_after_its_peers_errors_explains_them(status: str, tmp_path: Path) -> None:
    """kubectl describe prints a pod's status after the pods' logs: where it stands is not
    when it happened, so the peers that lost the pod are its victims, as with OOMKilled."""
    analysis = analysed(
        tmp_path,
        "".join(
            f"[pod/bert-{pod}/pytorch] [rank{r}]:[E1014 12:00:06.101 ProcessGroupNCCL.cpp:1896] "
            f"[PG ID 0 PG GUID 0(default_pg) Rank {r}] Process group watchdog thread terminated "
            "with exception: NCCL error: remote process exited or there was a network error\n"
            for pod, r in (("master-0", 0), ("worker-0", 1))
        )
        + "$ kubectl describe pod bert-worker-1\nName:             bert-worker-1\n"
        + status
        + "\n",
    )
    assert lead(analysis) == (None, Nature.SCHEDULER) and analysis.decision is Decision.RESTART


def test_skypilots_user_stream_says_the_cluster_was_preempted(tmp_path: Path) -> None:
    """sky/jobs/utils.py prints, in yellow, when the controller starts recovering."""
    analysis = analysed(
        tmp_path,
        "\x1b[36m(head, rank=0, pid=3808)\x1b[0m step 3 loss 7.6\n"
        "\x1b[33mThe job cluster is preempted or failed.\x1b[0m\n",
    )
    assert lead(analysis) == (None, Nature.SCHEDULER) and analysis.decision is Decision.RESTART


def test_docker_json_file_lines_read_as_their_messages(tmp_path: Path) -> None:
    """moby's json-file driver writes each line as a JSON record: its log field is read."""
    lines = [
        "[rank2]:[E1014 12:00:06.101 ProcessGroupNCCL.cpp:1896] [PG ID 0 PG GUID 0(default_pg) "
        "Rank 2] Process group watchdog thread terminated with exception: NCCL error: remote "
        "process exited or there was a network error",
        "[rank5]: Traceback (most recent call last):",
        '[rank5]:   File "/workspace/train.py", line 212, in <module>',
        "[rank5]: ValueError: bad batch",
    ]
    assert lead(
        analysed(
            tmp_path,
            "".join(
                json.dumps({"log": line + "\n", "stream": "stderr", "time": "2024-10-14T12:00:05Z"})
                .replace("<", "\\u003c")
                .replace(">", "\\u003e")
                + "\n"
                for line in lines
            ),
        )
    ) == (5, Nature.EXCEPTION)


@pytest.mark.parametrize("error", ["RendezvousTimeoutError", "RendezvousClosedError"])
def test_a_rendezvous_torchrun_gave_up_is_a_hang_in_initialization(
    error: str, tmp_path: Path
) -> None:
    """dynamic_rendezvous.py raises both without a message and no worker ever started, so no
    failure table follows: the log ends on the bare class name."""
    analysis = analysed(
        tmp_path,
        "I0612 11:00:02.000000 140001 torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:"
        "1094] The node 'node0_24612_0' attempts to join the next round of the rendezvous "
        "'job43'.\nTraceback (most recent call last):\n"
        '  File "/usr/local/bin/torchrun", line 8, in <module>\n    sys.exit(main())\n'
        f"    raise {error}\ntorch.distributed.elastic.rendezvous.api.{error}\n",
    )
    assert lead(analysis) == (None, Nature.HANG) and analysis.decision is Decision.RESTART


def test_a_ranks_compiler_failure_is_its_exception_not_a_launchers_report(tmp_path: Path) -> None:
    """Inductor wraps the compiler's subprocess.CalledProcessError in its own InductorError
    (torch/_inductor/exc.py): only a line that is the CalledProcessError itself is the
    legacy launcher's report."""
    assert lead(
        analysed(
            tmp_path,
            "[rank2]:[E1014 10:51:10 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=600000) ran for 600042 milliseconds before timing out.\n"
            "[rank6]: Traceback (most recent call last):\n"
            '[rank6]:   File "/workspace/train.py", line 140, in main\n'
            "[rank6]: torch._inductor.exc.InductorError: CalledProcessError: Command '['/usr/bin/gcc', "
            "'cuda_utils.c', '-O3']' returned non-zero exit status 1.\n",
        )
    ) == (6, Nature.EXCEPTION)


def test_a_bare_exception_ends_its_traceback(tmp_path: Path) -> None:
    """DeepSpeed's loss scaler raises ``Exception`` itself (runtime/fp16/loss_scaler.py)."""
    analysis = analysed(
        tmp_path,
        "[rank3]: Traceback (most recent call last):\n"
        '[rank3]:   File "/usr/lib/python3/deepspeed/runtime/fp16/loss_scaler.py", line 183, in '
        "update_scale\n"
        "[rank3]: Exception: Current loss scale already at minimum - cannot decrease scale "
        "anymore. Exiting run.\n",
    )
    assert lead(analysis) == (3, Nature.EXCEPTION)
    assert analysis.primary[0].summary.startswith("Exception: Current loss scale")


@pytest.mark.parametrize(
    "line",
    [
        # megatron/core/distributed/param_and_grad_buffer.py (core_v0.7-r0.9)
        "AssertionError: Rank 13: found NaN in local grad norm in backward pass before "
        "data-parallel communication collective. Device: 5, node: gpu-node-01",
        # megatron/core/rerun_state_machine.py (core_v0.10 on)
        "RuntimeError: Rank 13, node gpu-node-01, device 5, iteration 120: Unexpected result nan "
        "(message='found NaN in local forward loss calculation')",
    ],
)
def test_megatrons_nan_checks_name_the_global_rank(line: str, tmp_path: Path) -> None:
    assert lead(
        analysed(
            tmp_path,
            "Traceback (most recent call last):\n"
            '  File "/workspace/megatron/training/training.py", line 700, in train_step\n'
            f"{line}\n",
        )
    ) == (13, Nature.EXCEPTION)


def test_megatrons_exit_on_sigterm_is_an_end_from_outside(tmp_path: Path) -> None:
    """megatron/training/training.py: its signal handler saw SIGTERM; it checkpointed and left."""
    analysis = analysed(
        tmp_path,
        " [2024-09-06 17:50:01] iteration     1200/  100000 | lm loss: 2.1E+00 |\n"
        "[exiting program after receiving SIGTERM.] datetime: 2024-09-06 17:57:10 \n",
    )
    assert lead(analysis) == (None, Nature.SIGNAL) and analysis.decision is Decision.RESTART


def test_an_empty_exception_above_spawns_report_is_no_failure_of_its_own(tmp_path: Path) -> None:
    """torch.multiprocessing.spawn before 1.8 raised ``Exception(msg)`` whose message starts
    with a blank line, then ``-- Process 1 terminated with the following error:``: the
    process's traceback after it is the failure."""
    analysis = analysed(
        tmp_path,
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.7/site-packages/torch/multiprocessing/spawn.py", line 119, in '
        "join\n    raise Exception(msg)\nException: \n\n"
        "-- Process 1 terminated with the following error:\n"
        "Traceback (most recent call last):\n"
        '  File "/workspace/main.py", line 301, in train\n'
        "AttributeError: 'list' object has no attribute 'cuda'\n",
    )
    assert [(f.rank, f.nature) for f in analysis.primary] == [(1, Nature.EXCEPTION)]


def test_a_failure_before_the_trainers_fit_finished_did_not_stop_it(tmp_path: Path) -> None:
    """torchrun at its default WARNING level prints the failed worker, not its restart; the
    HF Trainer's ``Training completed`` (trainer.py) then says the fit ran to its end. A
    failure after it (evaluation, saving) is the job's."""
    failure = (
        "[rank1]: OSError: [Errno 5] Input/output error: '/lustre/ds/img/000412.jpg'\n"
        "E1014 10:50:01.000000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed "
        "(exitcode: 1) local_rank: 1 (pid: 2210) of binary: /usr/bin/python3\n"
    )
    done = "Training completed. Do not forget to share your model on huggingface.co/models =)\n"
    log = tmp_path / "job.log"
    log.write_text(failure + "{'loss': 0.71, 'epoch': 3.0}\n" + done)
    assert analyze_log(log).decision is Decision.CONTINUE
    log.write_text(done + failure)
    assert lead(analyze_log(log)) == (1, Nature.EXCEPTION)


def test_the_kill_after_lightnings_child_report_is_its_teardown(tmp_path: Path) -> None:
    """A child killed (code -9) says nothing; Lightning's observer reports it, then SIGKILLs
    the main process, whose shell prints ``Killed``: rank 3 died, the rest is teardown."""
    assert lead(
        analysed(
            tmp_path,
            "Epoch 0:  12%|█▏        | 120/1000 [00:31<03:49,  3.84it/s, v_num=3]\n"
            "[rank: 3] Child process with PID 5679 terminated with code -9. Forcefully terminating "
            "all other processes to avoid zombies 🧟\nKilled\n",
        )
    ) == (3, Nature.CRASH)


_FT_RESTART = (
    "2025-06-03 11:20:46,902 [INFO] [node1] [workload:?(?) infra:1(0)] launcher.py:561 "
    "[default] Worker group FAILED. 2/3 attempts left; will restart worker group\n"
)
"""nvidia-resiliency-ext's ft_launcher restarting its group (torchrun's agent wording)."""


@pytest.mark.parametrize(
    ("monitor_line", "rank"),
    [
        # 0.1-0.2: utils.create_logger's "[RankMonitorServer:R]"
        (
            "[2024-10-01 11:20:41,118] [WARNING] [RankMonitorServer:5] Did not get subsequent "
            "heartbeat. Waited 600.00 seconds.",
            5,
        ),
        # 0.3-0.4: RankMonitorLogger's "[RankMonServerPID@host:R]" (the rank it watches)
        (
            "[2025-03-01 11:20:41,118] [WARNING] [RankMonServer81299@node1:6] Section 'step' "
            "has been open for 901.37 seconds. Timeout is 900.00 seconds.",
            6,
        ),
        (
            "[2025-03-01 11:20:41,118] [WARNING] [RankMonServer81299@node1:3] Was out of "
            "section for 310.02 seconds. Timeout is 300.00 seconds.",
            3,
        ),
        # 0.5: the nvrx logger, the monitor started with the worker's env (RANK set)
        (
            "2025-06-03 11:20:41,118 [WARNING] [node1] [workload:13(5) infra:1(0)] "
            "rank_monitor_server.py:436 Did not get initial heartbeat. Waited 1800.00 seconds.",
            13,
        ),
        # 0.6+: LOCAL_RANK alone ("?" for the global rank), the cycle first; the launch
        # command's --node-rank and --nproc-per-node give the global rank
        (
            "2025-06-03 11:20:41,118 [WARNING] [node1] [workload:?(5) infra:1(0)] "
            "rank_monitor_server.py:497 [Cycle 0] Did not get subsequent heartbeat. "
            "Waited 600.00 seconds.",
            13,
        ),
    ],
)
def test_an_nvrx_rank_monitors_timeout_is_a_hang_of_the_rank_it_watches(
    monitor_line: str, rank: int, tmp_path: Path
) -> None:
    """rank_monitor_server.py's heartbeat and section timeouts: the monitor kills the rank
    it watches, which stopped making progress (its peers wait for it in collectives)."""
    analysis = analysed(
        tmp_path,
        "+ ft_launcher --nproc-per-node=8 --nnodes=2 --node-rank=1 train.py\n"
        "[rank13]: iteration 1500/20000 | lm loss 5.15 | step time 0.41s\n"
        f"{monitor_line}\n{_FT_RESTART}",
    )
    assert lead(analysis) == (rank, Nature.HANG) and analysis.decision is Decision.RESTART


def test_the_launchers_group_restart_alone_is_a_failure(tmp_path: Path) -> None:
    """torchrun's (and ft_launcher's) ``Worker group FAILED. N/M attempts left``: a worker
    failed, though the log does not say which."""
    analysis = analysed(tmp_path, "[rank0]: iteration 1500/20000 | lm loss 5.10\n" + _FT_RESTART)
    assert lead(analysis) == (None, Nature.EXCEPTION)
    assert analysis.decision is not Decision.CONTINUE


_STRAGGLERS = (
    "[NeMo W 2025-06-03 11:20:41 straggler_det_callback:125] STRAGGLER DETECTION WARNING: "
    "Some GPUs have worse relative performance. Affected ranks: "
    "{StragglerId(rank=6, node='node1'), StragglerId(rank=12, node='node3')}\n"
)


def test_the_ranks_the_straggler_detector_stops_training_for_are_the_cause(
    tmp_path: Path,
) -> None:
    """straggler_det_callback.py: rank 0 prints the report; with stop_if_detected every rank
    then stops training. StragglerId's repr names the rank (the node's digits are not one)."""
    analysis = analysed(
        tmp_path,
        "[rank6]: iteration 3000/20000 | lm loss 4.06 | step time 1.93s\n"
        + _STRAGGLERS
        + "[NeMo E 2025-06-03 11:20:41 straggler_det_callback:257] Detected stragglers. "
        "Terminating training...\n",
    )
    assert [(i.rank, i.nature) for i in analysis.primary] == [(6, Nature.HANG), (12, Nature.HANG)]
    assert analysis.decision is Decision.RESTART


def test_a_straggler_warning_that_does_not_stop_training_is_no_failure(tmp_path: Path) -> None:
    log = tmp_path / "straggler.log"
    log.write_text(_STRAGGLERS + "[rank0]: iteration 3100/20000 | lm loss 4.01\n")
    assert analyze_log(log).decision is Decision.CONTINUE


def test_healthy_training_under_nvrx_fault_tolerance_is_no_failure(tmp_path: Path) -> None:
    """ft_launcher (launcher.py), its rank monitors (rank_monitor_server.py) and the straggler
    detector's periodic scores (straggler_det_callback.py) on a run that trains on: the
    monitors' lines name ranks but say nothing failed."""
    analysis = analysed(
        tmp_path,
        "2025-06-03 10:05:11,002 [INFO] [node1] [workload:?(?) infra:0(0)] launcher.py:1476 "
        "Starting elastic_operator with launch configs:\n"
        "2025-06-03 10:05:12,441 [INFO] [node1] [workload:?(?) infra:0(0)] launcher.py:580 "
        "[default] starting workers for entrypoint: python\n"
        "2025-06-03 10:05:13,100 [INFO] [node1] [workload:?(0) infra:0(0)] "
        "rank_monitor_server.py:190 Enable NIC health monitoring.\n"
        "2025-06-03 10:05:30,511 [INFO] [node1] [workload:?(0) infra:0(0)] "
        "rank_monitor_server.py:289 Updated num_warmup_iterations to 2 from client\n"
        "[2025-03-01 10:05:31,118] [INFO] [RankMonServer81299@node1:<none>] Started periodic "
        "restart check.\n"
        + "".join(
            f"[rank{r}]: iteration 1500/20000 | lm loss 5.1{r} | step time 0.41s\n"
            for r in range(4)
        )
        + "[NeMo I 2025-06-03 11:20:41 straggler_det_callback:162] \n"
        "GPU relative performance:\n"
        "  Rank=0 Node=node1 Score=1.00\n"
        "  Rank=1 Node=node1 Score=0.99\n"
        "[NeMo I 2025-06-03 11:20:41 straggler_det_callback:254] Straggler report "
        "processing time: 0.012 sec.\n"
        "2025-06-03 12:40:02,417 [WARNING] [node1] [workload:?(0) infra:0(0)] "
        "rank_monitor_server.py:379 Section(s) ['step'] were still open. Use "
        "`.end_all_sections()` to avoid this.\n"
        "2025-06-03 12:40:03,001 [INFO] [node1] [workload:?(?) infra:0(0)] launcher.py:597 "
        "[default] worker group successfully finished. Waiting 300 seconds for other agents "
        "to finish.\n"
        "2025-06-03 12:40:04,210 [INFO] [node1] [workload:?(?) infra:0(0)] launcher.py:3547 "
        "Agent exits with exit code = 0.\n",
    )
    assert analysis.decision is Decision.CONTINUE and not analysis.primary


def _watchdog_timeout(rank: int) -> str:
    """ProcessGroupNCCL.cpp (2.1-2.5): a survivor's watchdog timeout."""
    return (
        f"[rank{rank}]:[E ProcessGroupNCCL.cpp:563] [Rank {rank}] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600042 milliseconds before timing out.\n"
    )


def test_a_log_of_one_nodes_workers_does_not_blame_the_nodes_it_does_not_show(
    tmp_path: Path,
) -> None:
    """torchrun's rendezvous result says the job has two nodes and this log's agent holds
    ranks 4-7: ranks 0-3 are absent from it, not silent. With both nodes' results in the
    log, the one rank that never timed out is the hung one."""
    log = tmp_path / "node1.log"
    log.write_text(RENDEZVOUS + "".join(_watchdog_timeout(r) for r in range(4, 8)))
    analysis = analyze_log(log)
    assert lead(analysis) == (None, Nature.HANG) and analysis.decision is Decision.RESTART
    node0 = RENDEZVOUS.replace("group_rank=1", "group_rank=0").replace(
        "[4, 5, 6, 7]", "[0, 1, 2, 3]"
    )
    both = node0 + RENDEZVOUS + "".join(_watchdog_timeout(r) for r in (0, 1, 3, 4, 5, 6, 7))
    log.write_text(both)
    assert lead(analyze_log(log)) == (2, Nature.HANG)


def test_ranks_that_lost_their_link_to_one_peer_name_the_peer_not_one_of_them(
    tmp_path: Path,
) -> None:
    """NCCL src/transport/net_ib.cc: every rank of this node got a retry-exceeded completion
    from the same remote address: what they share is that peer or the path to it."""
    analysis = analysed(
        tmp_path,
        "".join(
            f"[rank{r}]:node1:{5600 + r}:{5657 + r} [{r - 4}] transport/net_ib.cc:1909 NCCL WARN "
            f"NET/IB : Got completion from peer 10.0.0.1<{50210 + r}> with status=12 opcode=0 "
            "len=0 vendor err 129 (Recv)\n"
            for r in range(4, 8)
        ),
    )
    assert lead(analysis) == (None, Nature.NETWORK) and analysis.primary[0].node == "10.0.0.1"


def test_a_failure_after_the_fit_stays_the_jobs_when_one_before_it_passed(tmp_path: Path) -> None:
    """Lightning's fit loop (fit_loop.py) finished after a caught error; the test stage's OOM
    after it ended the job."""
    analysis = analysed(
        tmp_path,
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/app/data.py", line 12, in fetch\n'
        "[rank0]: botocore.exceptions.ReadTimeoutError: Read timeout on endpoint URL\n"
        "`Trainer.fit` stopped: `max_epochs=3` reached.\n"
        "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 "
        "has a total capacity of 79.15 GiB of which 1.06 GiB is free.\n",
    )
    assert lead(analysis) == (1, Nature.EXCEPTION) and analysis.decision is Decision.STOP


def test_a_network_error_does_not_give_way_to_its_own_processs_abort(tmp_path: Path) -> None:
    """An abort with no rank (the same process, NCCL's teardown) explains no lost link."""
    assert lead(
        analysed(
            tmp_path,
            "node1:4602:4780 [1] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from "
            "peer 10.0.0.2<45678> with error 12, opcode 0, len 0, vendor err 129 (Recv)\n"
            "Fatal Python error: Aborted\n",
        )
    ) == (None, Nature.NETWORK)


@pytest.mark.parametrize(
    ("lines", "ranks"),
    [
        # one report is one rank's view: the peer it names may be in step, itself out of it
        (
            [
                "[rank0]:RuntimeError: Detected mismatch between collectives on ranks. Rank 0 "
                "is running collective: CollectiveFingerPrint(SequenceNumber=7, "
                "OpType=BROADCAST), but Rank 1 is running collective: CollectiveFingerPrint("
                "SequenceNumber=7, OpType=ALLREDUCE)."
            ],
            [0],
        ),
        # a sub-group of two numbers its own ranks: the global ones are the prefixes'
        (
            [
                f"[rank{g}]:RuntimeError: Detected mismatch between collectives on ranks. Rank {r} is "
                f"running collective: CollectiveFingerPrint(SequenceNumber=7, OpType=ALLREDUCE), but "
                f"Rank {1 - r} is running collective: CollectiveFingerPrint(SequenceNumber=7, "
                "OpType=BROADCAST)."
                for g, r in ((6, 0), (7, 1))
            ],
            [6, 7],
        ),
    ],
)
def test_a_collective_mismatch_blames_no_one_on_too_little_or_sub_group_evidence(
    lines: list[str], ranks: list[int], tmp_path: Path
) -> None:
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    assert [f.rank for f in analyze_log(log).primary] == ranks


def test_a_gloo_context_smaller_than_the_nodes_workers_is_a_sub_groups(tmp_path: Path) -> None:
    """gloo's context.cc connectivity line of a two-rank group behind four --tee prefixes
    numbers the group's ranks: no global rank comes from it."""
    assert lead(
        analysed(
            tmp_path,
            "".join(
                f"[default{local}]:[Gloo] Rank {local % 2} is connected to 1 peer ranks. Expected "
                "number of connected peer ranks is : 1\n"
                for local in range(4)
            )
            + "[default3]:Traceback (most recent call last):\n"
            '[default3]:  File "/app/train.py", line 88, in <module>\n'
            "[default3]:ValueError: shard 7 is corrupt\n",
        )
    ) == (None, Nature.EXCEPTION)


def test_a_docker_json_record_passes_the_keyword_filter_in_its_escaped_form(
    tmp_path: Path,
) -> None:
    """Go's encoder escapes ``<`` as ``\\u003c``: a keyword holding it is looked for as the
    record writes it (the legacy launcher's ``died with <Signals.SIGKILL: 9>``)."""
    line = (
        "subprocess.CalledProcessError: Command '['/usr/bin/python', '-u', 'train.py', "
        "'--local_rank=3']' died with <Signals.SIGKILL: 9>."
    )
    record = json.dumps({"log": line + "\n", "stream": "stderr", "time": "2024-10-14T12:00:05Z"})
    assert lead(
        analysed(tmp_path, record.replace("<", "\\u003c").replace(">", "\\u003e") + "\n")
    ) == (None, Nature.CRASH)


def test_a_retry_librarys_caught_traceback_is_no_failure_but_its_last_one_is(
    tmp_path: Path,
) -> None:
    """tenacity's before_sleep_log logs the caught exception with its traceback, then
    retries; once its attempts are spent it raises RetryError, a failure like any."""
    retried = (
        "WARNING:ckpt.upload:Retrying ckpt.upload.put_shard in 4.0 seconds as it raised "
        "EndpointConnectionError: Could not connect to the endpoint URL.\n"
        "Traceback (most recent call last):\n"
        '  File "/app/ckpt/upload.py", line 40, in put_shard\n'
        "botocore.exceptions.EndpointConnectionError: Could not connect to the endpoint URL.\n"
        "step 5100 loss 1.21\n"
    )
    assert not analysed(tmp_path, retried).primary
    spent = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3/site-packages/tenacity/__init__.py", line 326, in iter\n'
        "tenacity.RetryError: RetryError[<Future at 0x7f state=finished raised "
        "EndpointConnectionError>]\n"
    )
    assert lead(analysed(tmp_path, retried + spent)) == (None, Nature.EXCEPTION)


STEPS = "".join(f"[rank{r}]: step {s}/5000 loss=2.31\n" for s in (100, 200) for r in range(2))


@pytest.mark.parametrize(
    ("end", "nature", "decision"),
    [
        # OpenPBS/Torque mom_main.c: "=>> PBS: job killed: %s" with mom_over_limit's reason
        ("=>> PBS: job killed: walltime 3611 exceeded limit 3600", Nature.SCHEDULER, "RESTART"),
        ("=>> PBS: job killed: cput 7300 exceeded limit 7200", Nature.SCHEDULER, "RESTART"),
        ("=>> PBS: job killed: mem 33554432kb exceeded limit 16777216kb", Nature.CRASH, "STOP"),
        ("=>> PBS: job killed: vmem 40000000 exceeded limit 32000000", Nature.CRASH, "STOP"),
        # LSF's job report: "TERM_<keyword>: <reason>." (IBM's termination reasons table)
        (
            "TERM_RUNLIMIT: job killed after reaching LSF run time limit.\n"
            "Exited with exit code 140.",
            Nature.SCHEDULER,
            "RESTART",
        ),
        ("TERM_PREEMPT: job killed after preemption.", Nature.SCHEDULER, "RESTART"),
        (
            "TERM_CPULIMIT: job killed after reaching LSF CPU usage limit.",
            Nature.SCHEDULER,
            "RESTART",
        ),
        (
            "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.\n"
            "Exited with exit code 137.",
            Nature.CRASH,
            "STOP",
        ),
        ("TERM_OWNER: job killed by owner.\nExited with exit code 130.", Nature.SIGNAL, "RESTART"),
        (
            "TERM_FORCE_ADMIN: job killed by root or LSF administrator without time for cleanup.",
            Nature.SIGNAL,
            "RESTART",
        ),
    ],
)
def test_pbs_and_lsf_say_how_they_ended_the_job(
    end: str, nature: Nature, decision: str, tmp_path: Path
) -> None:
    """A time limit or a preemption is the scheduler's end (requeue), the owner's kill a signal
    from outside, a memory limit the out-of-memory killer's (a restart is killed again)."""
    analysis = analysed(tmp_path, STEPS + end + "\n")
    assert lead(analysis) == (None, nature) and analysis.decision is Decision(decision)


def test_lsfs_report_after_a_ranks_exception_does_not_outrank_it(tmp_path: Path) -> None:
    """LSF appends its report after the job ended: the failure before it stays the cause."""
    analysis = analysed(
        tmp_path,
        STEPS
        + "[rank1]: Traceback (most recent call last):\n"
        + '[rank1]:   File "/workspace/train.py", line 212, in <module>\n'
        + "[rank1]: ValueError: bad batch\n"
        + "TERM_RUNLIMIT: job killed after reaching LSF run time limit.\n",
    )
    assert lead(analysis) == (1, Nature.EXCEPTION)
    # its kill took rank 0 first: the rank that lost it is no clue against the report
    killed = analysed(
        tmp_path,
        STEPS
        + "[rank1]: ncclRemoteError: A call failed possibly due to a network error or a remote"
        " process exiting prematurely.\n"
        + "TERM_RUNLIMIT: job killed after reaching LSF run time limit.\n",
    )
    assert lead(killed) == (None, Nature.SCHEDULER) and killed.decision is Decision.RESTART


STEPD_TERMINATED = (
    "slurmstepd: error: *** STEP 4242.0 STEPD TERMINATED ON node03 AT 2025-06-01T10:00:00 "
    "DUE TO JOB NOT ENDING WITH SIGNALS ***\n"
)


def test_processes_slurm_cannot_kill_are_a_hang_on_their_node(tmp_path: Path) -> None:
    """step_terminate_monitor.c: the step's processes outlived SIGKILL (stuck in the driver or
    a filesystem) and Slurm drains the node: restart without it. After a rank's own failure it
    is the teardown of that failure; after peers timed out waiting, the hang rule decides."""
    alone = analysed(tmp_path, STEPS + STEPD_TERMINATED)
    assert lead(alone) == (None, Nature.SCHEDULER) and alone.primary[0].node == "node03"
    assert alone.decision is Decision.RESTART
    assert alone.explanation.endswith("restart without node node03")
    crashed = analysed(tmp_path, STEPS + segfault(1) + STEPD_TERMINATED)
    assert lead(crashed) == (1, Nature.CRASH)
    hung = analysed(tmp_path, STEPS + timeouts(range(1)) + STEPD_TERMINATED)
    assert lead(hung) == (1, Nature.HANG)


def test_the_shells_report_of_a_sigterm_is_a_signal_from_outside(tmp_path: Path) -> None:
    """bash's jobs.c (notify_of_job_status): a script's foreground job ended by SIGTERM is
    reported by the signal's description alone; a background job it killed itself (its own
    monitor, ``line 42: 51234 Terminated  nvidia-smi dmon``), or the word in a message, is no
    end of the run."""
    analysis = analysed(tmp_path, "Epoch 1/10: step 300 loss=1.99\nTerminated\n")
    assert lead(analysis) == (None, Nature.SIGNAL) and analysis.decision is Decision.RESTART
    for line in (
        "./train.sh: line 42: 51234 Terminated              nvidia-smi dmon -s u -d 10",
        "Terminated   early stopping after 3 epochs without improvement",
    ):
        assert not analysed(tmp_path, f"Epoch 1/10: step 300 loss=1.99\n{line}\n").primary


def describe(state: str, code: int) -> str:
    """kubectl describe.go describeStatus: a container's state block, tabwriter-aligned."""
    return (
        "Name:         llama-ft-worker-1\n"
        "Containers:\n"
        "  pytorch:\n"
        f"    {state}:          Terminated\n"
        "      Reason:       Error\n"
        f"      Exit Code:    {code}\n"
        "      Started:      Sun, 01 Jun 2025 09:00:00 +0000\n"
    )


@pytest.mark.parametrize(
    ("code", "nature", "decision"),
    [
        (1, Nature.EXCEPTION, Decision.STOP),  # an exception whose lines are not in the log
        (137, Nature.CRASH, Decision.STOP),  # 128 + SIGKILL
        (143, Nature.SIGNAL, Decision.RESTART),  # 128 + SIGTERM
    ],
)
def test_a_terminated_containers_exit_code_says_how_it_ended(
    code: int, nature: Nature, decision: Decision, tmp_path: Path
) -> None:
    """The pod's name gives no rank (a worker pod's index is a node's)."""
    analysis = analysed(tmp_path, describe("State", code))
    assert lead(analysis) == (None, nature) and analysis.decision is decision


def test_a_completed_container_and_the_run_before_a_restart_are_no_failure(
    tmp_path: Path,
) -> None:
    """Exit code 0 is a container that completed; ``Last State:`` is the run before the
    restart the pod now runs in."""
    assert not analysed(tmp_path, describe("State", 0)).primary
    assert not analysed(tmp_path, describe("Last State", 137)).primary


NCCL_HOST = "gpu-node07:5100{r}:5100{r} [{r}] NCCL INFO "
"""NCCL's INFO prefix (debug.cc: ``%s:%d:%d [%d] NCCL INFO ``), as its rank r's process."""


@pytest.mark.parametrize(
    "retry",
    [
        # socket.cc 2.8-2.23: socketStartConnect / socketPollConnect, every 1000th ECONNREFUSED
        "Call to connect returned Connection refused, retrying",
        # socket.cc 2.27-2.28, os/linux.cc 2.30: the attempt count and the sleep
        "socketStartConnect: connect to 10.1.2.7<43215> returned Connection refused, "
        "retrying (1/34) after sleep for 100 msec",
    ],
)
def test_nccls_info_that_it_retries_a_refused_connect_is_no_failure(
    retry: str, tmp_path: Path
) -> None:
    """NCCL retries a refused connect (its peer does not listen yet) and says so at INFO
    level; once the retries are spent it WARNs, and that is a failure."""
    init = "".join(
        NCCL_HOST.format(r=r) + f"comm 0x55d5c2a{r}e0 rank {r} nranks 4 cudaDev {r} "
        "busId 18000 commId 0x1a2b3c4d - Init COMPLETE\n"
        for r in range(4)
    )
    clean = NCCL_HOST.format(r=3) + retry + "\n" + init + "step 100 loss 1.9\n"
    assert not analysed(tmp_path, clean).primary
    spent = (
        "gpu-node07:51003:51003 [3] misc/socket.cc:484 NCCL WARN socketStartConnect: "
        "Connect to 10.1.2.7<43215> failed : Connection refused\n"
    )
    failed = analysed(tmp_path, NCCL_HOST.format(r=3) + retry + "\n" + spent)
    assert lead(failed)[1] is Nature.NETWORK


def _store_gone(rank: int) -> str:
    """What a rank prints when the store's host exits first (ProcessGroupNCCL.cpp's heartbeat
    monitor, 2.5-2.8, after TCPStore.cpp's TCPClient warning)."""
    return (
        f"[rank{rank}]:[W1120 01:13:21.971331164 TCPStore.cpp:106] [c10d] sendBytes failed on "
        f"SocketImpl(fd=64, addr=[gpu-node07]:3598{rank}, remote=[gpu-node07]:29500): "
        "Broken pipe\n"
        "Exception raised from sendBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:653 "
        "(most recent call first):\n"
        "frame #3: c10d::ProcessGroupNCCL::heartbeatMonitor() + 0x379 (0x7fd48edc99f9 in "
        "/usr/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so)\n\n"
        f"[rank{rank}]:[W1120 01:13:21.892421310 ProcessGroupNCCL.cpp:1662] [PG ID 0 PG GUID "
        f'0(default_pg) Rank {rank}] Failed to check the "should dump" flag on TCPStore, '
        "(maybe TCPStore server has shut down too early), with error: Connection reset by peer\n"
    )


def test_the_store_hosts_exit_after_training_ended_is_teardown_not_its_crash(
    tmp_path: Path,
) -> None:
    """Every survivor's heartbeat monitor warns when rank 0, the store's host, exits first:
    after the script said training ended that is the end of a successful run; without it,
    rank 0 went silent while the others lost it."""
    steps = "".join(f"[rank0]: step {s} | loss 1.90\n" for s in range(1240, 1248))
    gone = "".join(_store_gone(r) for r in range(1, 8))
    ended = analysed(tmp_path, steps + "[rank0]: Training complete: 1248 steps\n" + gone)
    assert not ended.primary and ended.decision is Decision.CONTINUE
    died = analysed(tmp_path, steps + gone)
    assert lead(died) == (0, Nature.CRASH)
    shouted = analysed(tmp_path, steps + "[rank0]: TRAINING COMPLETE\n" + gone)
    assert not shouted.primary
    # an epoch's end is no run's: rank 0 went on, then died
    epoch = "[rank0]: epoch 1 training complete, running evaluation\n[rank0]: eval loss 1.8\n"
    assert lead(analysed(tmp_path, epoch + steps + gone)) == (0, Nature.CRASH)
    # long after the run's end said so, the run went on (another phase, a second run)
    later = "[rank0]: Training complete\n" + steps * 70
    assert lead(analysed(tmp_path, later + gone)) == (0, Nature.CRASH)


def test_an_agent_that_keeps_losing_its_rendezvous_names_the_silent_ranks_node_lost(
    tmp_path: Path,
) -> None:
    """dynamic_rendezvous.py warns at every keep-alive interval that it cannot reach the
    rendezvous (hosted by node 0's agent): node 0's silent ranks died with their launcher.
    One warning is a race at shutdown: no node is named lost on it."""
    keep_alive = (
        "W0813 22:23:0{i}.979031 140204091807488 torch/distributed/elastic/rendezvous/"
        "dynamic_rendezvous.py:1267] The node 'gpu-node08_51000_0' has failed to send a "
        "keep-alive heartbeat to the rendezvous 'job812345' due to an error of type "
        "RendezvousConnectionError.\n"
    )
    should_dump = "".join(_store_gone(r).split("\n\n")[1] for r in range(4, 8))
    steps = "step 1247 | loss 1.9012\n"
    lost = analysed(
        tmp_path, steps + "".join(keep_alive.format(i=i) for i in range(3)) + should_dump
    )
    assert [i.rank for i in lost.primary] == [0, 1, 2, 3]
    assert lost.cause == "node_lost" and lost.decision is Decision.RESTART
    once = analysed(tmp_path, steps + keep_alive.format(i=0) + should_dump)
    assert once.cause == "crash"
    two_agents = keep_alive.format(i=0) + keep_alive.format(i=1).replace("node08", "node09")
    assert analysed(tmp_path, steps + two_agents + should_dump).cause == "crash"
    done = "[rank0]: training finished\n"
    assert not analysed(tmp_path, done + keep_alive.format(i=0) + should_dump).primary


# NCCL init.cc's communicator init lines, behind debug.cc's "%s:%d:%d [%d] NCCL INFO " prefix:
# 2.21.5 (commId, a START twin), 2.19.3 (no function name) and 2.14.3 (no commId, no START)
INIT_221 = (
    "ncclCommInitRank comm 0x55d5c2a{r}e0 rank {r} nranks {n} cudaDev {r} nvmlDev {r} "
    "busId {r}8000 commId {comm} - Init {step}"
)
INIT_219 = (
    "comm 0x55d5c2a{r}e0 rank {r} nranks {n} cudaDev {r} nvmlDev {r} busId {r}8000 "
    "commId {comm} - Init {step}"
)
INIT_214 = "comm 0x55d5c2a{r}e0 rank {r} nranks {n} cudaDev {r} busId {r}8000 - Init {step}"
TORCHRUN_SIGTERM = (
    "W0612 11:02:13.402000 140233 torch/distributed/elastic/agent/server/api.py:704] "
    "Received Signals.SIGTERM death signal, shutting down workers\n"
    "W0612 11:02:13.403000 140233 torch/distributed/elastic/multiprocessing/api.py:897] "
    "Sending process 51000 closing signal SIGTERM\n"
)


def nccl_info(rank: int, message: str) -> str:
    return f"gpu-node07:{51000 + rank}:{51180 + rank} [{rank}] NCCL INFO {message}\n"


def nccl_inits(form: str, ranks: range | list[int], step: str, comm: str = "0x8c1d2e3f") -> str:
    return "".join(nccl_info(r, form.format(r=r, n=8, comm=comm, step=step)) for r in ranks)


BOOTSTRAP = "".join(nccl_info(r, "Bootstrap : Using eth0:10.1.2.7<0>") for r in range(8))
"""bootstrap.cc's "Bootstrap : Using%s": every process's NCCL started."""
BUT_6 = [0, 1, 2, 3, 4, 5, 7]


@pytest.mark.parametrize(
    ("log", "ended_by"),
    [
        # 2.21.5 without its START lines: rank 6's process printed NCCL lines, no COMPLETE
        (BOOTSTRAP + nccl_inits(INIT_221, BUT_6, "COMPLETE"), TORCHRUN_SIGTERM),
        # 2.19.3: every rank's START, rank 6's COMPLETE missing
        (
            nccl_inits(INIT_219, range(8), "START") + nccl_inits(INIT_219, BUT_6, "COMPLETE"),
            TORCHRUN_SIGTERM,
        ),
        # 2.14.3: no commId (the communicator is its size), no START
        (BOOTSTRAP + nccl_inits(INIT_214, BUT_6, "COMPLETE"), TORCHRUN_SIGTERM),
    ],
)
def test_a_rank_that_never_finished_ncclcomminitrank_is_the_hang(
    tmp_path: Path, log: str, ended_by: str
) -> None:
    """Seven ranks print Init COMPLETE, rank 6 never does, nothing runs after: the launcher's
    SIGTERM (scancel after an hour) ends a hung job, it does not explain it."""
    analysis = analysed(tmp_path, log + ended_by)
    assert analysis.rule == "membership"
    assert [(i.rank, i.nature) for i in analysis.primary] == [(6, Nature.HANG)]
    assert analysis.decision is Decision.RESTART


def test_a_preemption_right_after_an_nccl_init_is_the_cause_not_a_hangs_end(
    tmp_path: Path,
) -> None:
    """A time limit is what a hung init runs into; a preemption ends the job whatever it was
    doing (slurmstepd req.c: DUE TO PREEMPTION), so it is the answer, not rank 6."""
    log = BOOTSTRAP + nccl_inits(INIT_221, BUT_6, "COMPLETE")
    cancelled = (
        "slurmstepd: error: *** JOB 4242 ON node03 CANCELLED AT 2025-06-01T10:00:00 DUE TO {} ***\n"
    )
    preempted = analysed(tmp_path, log + cancelled.format("PREEMPTION"))
    assert lead(preempted) == (None, Nature.SCHEDULER)
    timed_out = analysed(tmp_path, log + cancelled.format("TIME LIMIT"))
    assert lead(timed_out) == (6, Nature.HANG)


def test_an_unfinished_nccl_init_needs_the_missing_rank_in_the_log_and_nothing_after(
    tmp_path: Path,
) -> None:
    """A line lost from a clean run (training goes on), or a fragment that shows none of the
    missing rank (its START, its process), names no rank."""
    completes = nccl_inits(INIT_221, BUT_6, "COMPLETE")
    assert not analysed(tmp_path, BOOTSTRAP + completes + "step 1 | loss 2.30\n").primary
    # a log that stops in the init, with no end from outside, may be a pasted fragment
    assert not analysed(tmp_path, BOOTSTRAP + completes).primary
    fragment = nccl_inits(INIT_221, BUT_6, "START") + completes
    assert analysed(tmp_path, fragment + TORCHRUN_SIGTERM).rule != "membership"


def test_nccl_inits_are_counted_per_communicator(tmp_path: Path) -> None:
    """Rank 6 completed the world's first communicator, not the second one (its own commId):
    the second is unfinished. A sub-group's unfinished init (its own rank numbers) names no
    world rank."""
    first = nccl_inits(INIT_221, range(8), "START") + nccl_inits(INIT_221, range(8), "COMPLETE")
    second = nccl_inits(INIT_221, range(8), "START", "0x77aa") + nccl_inits(
        INIT_221, BUT_6, "COMPLETE", "0x77aa"
    )
    assert lead(analysed(tmp_path, first + second + TORCHRUN_SIGTERM)) == (6, Nature.HANG)
    group = "ncclCommInitRank comm 0x7f{r} rank {r} nranks 4 cudaDev {r} commId 0x5 - Init {s}"
    subgroup = "".join(nccl_info(r, group.format(r=r, s="START")) for r in range(4))
    subgroup += "".join(nccl_info(r, group.format(r=r, s="COMPLETE")) for r in (0, 1, 3))
    assert analysed(tmp_path, first + subgroup + TORCHRUN_SIGTERM).rule != "membership"


@pytest.mark.parametrize(
    ("described", "nature"), [("Killed", Nature.CRASH), ("Terminated", Nature.SIGNAL)]
)
def test_a_dataloader_workers_signal_is_read_from_its_strsignal_description(
    described: str, nature: Nature, tmp_path: Path
) -> None:
    """torch/csrc/DataLoader.cpp prints strsignal's description of the worker's signal:
    ``Killed`` is SIGKILL (the host's out-of-memory killer: a crash), ``Terminated`` SIGTERM."""
    log = (
        "[rank0]: step 100 loss=2.31\n[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "torch/utils/data/dataloader.py", line 1133, in _try_get_data\n'
        "[rank1]:     data = self._data_queue.get(timeout=timeout)\n"
        f"[rank1]: RuntimeError: DataLoader worker (pid 4567) is killed by signal: {described}. \n"
    )
    analysis = analysed(tmp_path, log)
    assert lead(analysis) == (1, nature)
    assert "DataLoader worker (pid 4567)" in analysis.primary[0].summary


def _param_count_mismatch(rank: int, count: int, other: int, other_count: int) -> str:
    """reducer.cpp verify_params_across_processes's exception, as rank ``rank`` raises it (the
    first rank whose parameter count differs from its own)."""
    return (
        f"[rank{rank}]: RuntimeError: DDP expects same model across all ranks, but Rank {rank} "
        f"has {count} params, while rank {other} has inconsistent {other_count} params.\n"
    )


def test_a_ddp_model_mismatch_blames_the_rank_the_others_name(tmp_path: Path) -> None:
    """Rank 3 builds a model with more parameters: ranks 0, 1, 2 name it, it names rank 0
    (printed first)."""
    log = _param_count_mismatch(0, 194, 3, 196) + _param_count_mismatch(3, 196, 0, 194)
    log += _param_count_mismatch(1, 194, 3, 196) + _param_count_mismatch(2, 194, 3, 196)
    analysis = analysed(tmp_path, log)
    assert _ranks(analysis) == [3] and lead(analysis) == (3, Nature.EXCEPTION)
    assert analysis.decision is Decision.STOP


@pytest.mark.parametrize("api", ["CUDA", "HIP"])
def test_an_invalid_device_ordinal_is_the_launchs_mistake_not_a_gpu_fault(
    api: str, tmp_path: Path
) -> None:
    """c10/cuda/CUDAException.cpp's ``CUDA error: `` + cudaGetErrorString, with
    CUDAMiscFunctions.cpp's help line: more processes on a node than it has GPUs."""
    log = "".join(
        f"[rank{rank}]: torch.AcceleratorError: {api} error: invalid device ordinal\n"
        f"[rank{rank}]: GPU device may be out of range, do you have enough GPUs?\n"
        for rank in (5, 4)
    )
    analysis = analysed(tmp_path, log)
    assert _ranks(analysis) == [5, 4] and analysis.primary[0].nature is Nature.EXCEPTION


# NCCL's WARN lines, from the format strings of its source (v2.10.3-v2.30.7): debug.cc prints
# "host:pid:tid [dev] file:line NCCL WARN msg" (2.30: "file:line (func) NCCL WARN msg"), and
# NCCLCHECK's error-return trace "host:pid:tid [dev] NCCL INFO file:line -> code" after it.
NCCL_WORLD = nccl_inits(INIT_221, range(8), "START") + nccl_inits(INIT_221, range(8), "COMPLETE")
"""Eight processes whose pids map to ranks 0-7 (gpu-node07:5100r)."""


def nccl_warn(rank: int, where: str, message: str) -> str:
    return f"gpu-node07:{51000 + rank}:{51300 + rank} [{rank}] {where} NCCL WARN {message}\n"


def nccl_trace(rank: int, *frames: str, code: int = 2) -> str:
    return "".join(nccl_info(rank, f"{frame} -> {code}") for frame in frames)


def others_time_out(culprit: int) -> str:
    """Every other rank's watchdog timing out in the collective the culprit left."""
    return "".join(
        f"[rank{r}]:[E ProcessGroupNCCL.cpp:475] [Rank {r}] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1534, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600081 milliseconds before timing out.\n"
        for r in range(8)
        if r != culprit
    )


@pytest.mark.parametrize(
    "warning",
    [
        # misc/ibvwrap.cc IBV_PTR_CHECK_ERRNO (2.10-2.30): every verb, not only the data path
        "misc/ibvwrap.cc:34 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory",
        # IBV_INT_CHECK_RET_ERRNO from 2.21: " errno %d"
        "misc/ibvwrap.cc:60 NCCL WARN Call to ibv_create_qp failed with error Cannot allocate "
        "memory errno 12",
        # misc/socket.cc 2.18-2.21: the connect's ECONNREFUSED retries spent
        "misc/socket.cc:515 NCCL WARN socketPollConnect: exceeded retries (34)",
    ],
)
def test_an_nccl_network_warning_is_the_printing_ranks_own_failure(
    tmp_path: Path, warning: str
) -> None:
    """The WARN names its process (pid -> rank 3); the proxy's report that rank 3's own
    operation failed, and the socket it then closes, are that failure's consequences: rank 3's
    network failure, not a peer's loss, while the others wait on."""
    where, message = warning.split(" NCCL WARN ")
    log = (
        NCCL_WORLD
        + nccl_warn(3, where, message)
        + nccl_trace(3, "transport/net_ib.cc:939", "transport/net.cc:720", "proxy.cc:1327")
        + nccl_warn(
            3,
            "proxy.cc:1462",
            "[Proxy Service 3] Failed to execute operation Connect from rank 3, retcode 2",
        )
        + nccl_warn(
            3,
            "misc/socket.cc:49",
            "socketProgress: Connection closed by remote peer gpu-node07<56011>",
        )
        + nccl_trace(3, "misc/socket.cc:749", "proxy.cc:1085", code=6)
        + others_time_out(3)
    )
    analysis = analysed(tmp_path, log)
    assert lead(analysis) == (3, Nature.NETWORK)
    assert analysis.decision is Decision.RESTART


def test_the_proxys_failure_of_its_own_ranks_operation_is_that_ranks_own(tmp_path: Path) -> None:
    """proxy.cc: "[Proxy Service %d] Failed to execute operation %s from rank %d, retcode %d"
    (the proxy's tpRank, then the client's): where both are the printing process's rank, the
    operation failed in it; where the client is another rank, that is a peer's report."""
    own = nccl_warn(
        5,
        "proxy.cc:1519",
        "[Proxy Service 5] Failed to execute operation Setup from rank 5, retcode 2",
    )
    peer = nccl_warn(
        4,
        "proxy.cc:1519",
        "[Proxy Service 4] Failed to execute operation Connect from rank 5, retcode 6",
    )
    analysis = analysed(tmp_path, NCCL_WORLD + peer + own)
    assert lead(analysis) == (5, Nature.EXCEPTION)
    assert analysis.decision is Decision.STOP


def test_nccls_host_allocation_failure_is_the_ranks_own(tmp_path: Path) -> None:
    """include/alloc.h "Failed to malloc %ld bytes"; misc/utils.cc "Unrecoverable error
    detected: malloc(size=%llu) returned null." (with the file prefix of 2.14-2.21)."""
    for message in (
        "Failed to malloc 17179869184 bytes",
        "misc/utils.cc:271 Unrecoverable error detected: malloc(size=17179869184) returned null.",
    ):
        log = NCCL_WORLD + nccl_warn(6, "include/alloc.h:65", message) + others_time_out(6)
        assert lead(analysed(tmp_path, log)) == (6, Nature.EXCEPTION)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        # transport/net_ib.cc ncclIbTest (2.12.10-2.18)
        (
            "transport/net_ib.cc:1081",
            "NET/IB : req 0/1 tag 7 peer 10.0.0.1<38412> collective mismatch error, local size "
            "2097152 remote size 1048576",
        ),
        # transport/net_socket.cc ncclNetSocketTest (2.12.10+)
        (
            "transport/net_socket.cc:483",
            "NET/Socket : peer 10.0.0.1<41877> message truncated : receiving 1048576 bytes "
            "instead of 65536. If you believe your socket network is in healthy state, there may "
            "be a mismatch in collective sizes or environment settings (e.g. NCCL_PROTO, "
            "NCCL_ALGO) between ranks",
        ),
        # bootstrap.cc bootstrapRecv
        ("bootstrap.cc:73", "Message truncated : received 4096 bytes instead of 256"),
    ],
)
def test_a_size_mismatch_between_ranks_is_their_usage_not_the_network(
    tmp_path: Path, where: str, message: str
) -> None:
    """Ranks that disagree on a message's size called mismatched collectives (or run other
    settings): the printing rank's exception, STOP (a restart repeats it); PyTorch's watchdog
    teardown after it ("failed or timed out") names no timeout of the rank's own."""
    log = (
        NCCL_WORLD
        + nccl_warn(2, where, message)
        + nccl_trace(2, "transport/net.cc:1091", code=5)
        + "[rank2]:[E ProcessGroupNCCL.cpp:537] Some NCCL operations have failed or timed out. "
        "Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
        "corrupted/incomplete data.\n" + f"Last error:\n{message}\n" + others_time_out(2)
    )
    analysis = analysed(tmp_path, log)
    assert lead(analysis) == (2, Nature.EXCEPTION)
    assert analysis.decision is Decision.STOP


@pytest.mark.parametrize(
    ("path", "rank"),
    [
        ("logs/rank2.log", 2),
        ("out/rank_2/stdout", 2),
        ("logs/train_rank2.log", 2),
        ("logs/2.log", None),
        ("logs/local_rank_2.log", None),
    ],
)
def test_files_joined_by_tail_give_their_lines_the_rank_their_path_names(
    path: str, rank: int | None, tmp_path: Path
) -> None:
    """coreutils tail.c/head.c write_header: ``==> %s <==`` before each file's lines (a blank
    line before all but the first); DeepSpeed's per-rank log is ``{prefix}_rank{N}.log``. A
    path without the word names no rank."""
    log = (
        "==> logs/launcher.log <==\nstarting 4 workers\n\n"
        f"==> {path} <==\nloading dataset shard /data/shard_02.bin\n"
        "Traceback (most recent call last):\n"
        '  File "/workspace/data.py", line 21, in __init__\n'
        "FileNotFoundError: [Errno 2] No such file or directory: '/data/shard_02.bin'\n\n"
        "==> logs/rank3.log <==\nloading dataset shard /data/shard_03.bin\n"
    )
    assert lead(analysed(tmp_path, log)) == (rank, Nature.EXCEPTION)


@pytest.mark.parametrize(
    ("down", "up"),
    [
        # net_ib.cc 2.10-2.18; 2.21 adds the device and port
        ("NET/IB : Got async event : port error", "NET/IB : Got async event : port active"),
        (
            "NET/IB : mlx5_3:1 Got async event : port error",
            "NET/IB : mlx5_3:1 Got async event : port active",
        ),
        # 2.23-2.28.3 and 2.28.7-2.30: the events NCCL lists as non-fatal
        (
            "NET/IB : mlx5_3:1 Got async error event: port error",
            "NET/IB : mlx5_3:1 Got async error event: port active",
        ),
        (
            "NET/IB : mlx5_3:1 Got non-fatal async event: port error(10)",
            "NET/IB : mlx5_3:1 Got non-fatal async event: port active(9)",
        ),
    ],
)
def test_an_infiniband_port_that_flapped_is_no_failure(tmp_path: Path, down: str, up: str) -> None:
    """ibv_event_type_str's "port error", then "port active": the link came back and the run
    went on; a port that never came back, where the log ends, is the network on that node."""
    where = "transport/net_ib.cc:95"
    steps = "".join(f"[rank0]: step {s}/1000 loss 2.0\n" for s in (3, 4, 1000))
    flapped = NCCL_WORLD + nccl_warn(2, where, down) + nccl_warn(2, where, up) + steps
    assert not analysed(tmp_path, flapped).primary
    stayed_down = NCCL_WORLD + "[rank0]: step 3/1000 loss 2.0\n" + nccl_warn(2, where, down)
    analysis = analysed(tmp_path, stayed_down)
    assert lead(analysis) == (2, Nature.NETWORK)
    assert analysis.decision is Decision.RESTART


def test_only_the_async_events_nccl_treats_as_fatal_stop_it(tmp_path: Path) -> None:
    """Before 2.23 every event was "Got async event : %s"; of them only the ones NCCL 2.23+
    handles as fatal (device, CQ, QP) are failures: not an SRQ's (NCCL uses none), not a path
    migration or an LID change."""
    where = "transport/net_ib.cc:95"
    for event in ("path migration request error", "LID change", "SRQ catastrophic error"):
        log = NCCL_WORLD + nccl_warn(2, where, f"NET/IB : Got async event : {event}")
        assert not analysed(tmp_path, log + "[rank0]: step 4/1000\n").primary, event
    log = NCCL_WORLD + nccl_warn(2, where, "NET/IB : Got async event : local catastrophic error")
    assert lead(analysed(tmp_path, log + others_time_out(2))) == (2, Nature.NETWORK)


@pytest.mark.parametrize(
    ("where", "message", "frame", "nature"),
    [
        (
            "misc/shmutils.cc:71",
            "Error while creating shared memory segment /dev/shm/nccl-Xy9k2P (size 9637888)",
            "transport/shm.cc:114",
            Nature.EXCEPTION,
        ),
        (
            "misc/cudawrap.cc:209",
            "CUDA Driver version found is 11040. Minimum requirement is 11070",
            "init.cc:1591",
            Nature.GPU_ERROR,
        ),
        ("bootstrap.cc:45", "Bootstrap : no socket interface found", "init.cc:149", Nature.NETWORK),
        # 2.30: "file:line (func) NCCL WARN", the trace "file:line (func) -> N" (INFO_LOC)
        (
            "transport/p2p.cc:306 (p2pSetup)",
            "failed to peer with device 0(=1b000): 217 peer access is not supported",
            "transport.cc:148 (ncclTransportP2pSetup)",
            Nature.GPU_ERROR,
        ),
        (
            "init.cc:795",
            "Duplicate GPU detected : rank 4 and rank 5 both on CUDA device 8000",
            "init.cc:1339",
            Nature.EXCEPTION,
        ),
    ],
)
def test_a_warning_no_entry_reads_is_its_processs_failure_where_ncclcheck_traces_it(
    tmp_path: Path, where: str, message: str, frame: str, nature: Nature
) -> None:
    """An NCCL WARN no catalogue entry reads, followed by NCCLCHECK's error-return trace from
    the same process: that process's own failure, of the nature its source file tells (the
    InfiniBand and socket transports and the bootstrap: the network; the CUDA and NVML
    wrappers and the P2P transport: the GPU; shared memory and allocations: the host)."""
    log = NCCL_WORLD + "[rank0]: step 1/1000\n" + nccl_warn(5, where, message)
    log += nccl_trace(5, frame, "init.cc:1347") + others_time_out(5)
    analysis = analysed(tmp_path, log)
    assert lead(analysis) == (5, nature)
    assert message in analysis.primary[0].summary


def test_a_warning_without_a_trace_or_a_trace_without_a_warning_is_no_failure(
    tmp_path: Path,
) -> None:
    """NCCL warns at one level for errors and for advice: a clamped setting, a topology hint
    (no trace follows); an abort at shutdown returns through NCCLCHECK without a WARN
    (misc/socket.cc's "socketProgressOpt: abort called" is INFO)."""
    log = (
        NCCL_WORLD
        + nccl_warn(
            1, "graph/connect.cc:331", "User asked for a minimum of 64 channels, limiting to 32"
        )
        + nccl_warn(
            2,
            "graph/search.cc:1036",
            "Could not find a path for pattern 4, falling back to simple order",
        )
        + "".join(f"[rank0]: step {s}/1000 loss 2.0\n" for s in range(1, 40))
        + nccl_info(3, "socketProgressOpt: abort called")
        + nccl_trace(3, "misc/socket.cc:808", code=3)
    )
    assert not analysed(tmp_path, log).primary


def test_only_a_processs_first_traced_warning_can_be_its_failure(tmp_path: Path) -> None:
    """A rank that lost its peer warns and traces that (a known consequence), then its
    communicator's teardown warns and traces too: no failure of its own. The peer that died
    silently is the culprit."""
    log = (
        NCCL_WORLD
        + nccl_warn(
            4,
            "misc/socket.cc:49",
            "socketProgress: Connection closed by remote peer gpu-node08<41877>",
        )
        + nccl_trace(4, "misc/socket.cc:749", code=6)
        + nccl_warn(
            4, "init.cc:2083", "commReclaim: comm 0x55d5c2a4e0 (rank = 4) in abort, error 6"
        )
        + nccl_trace(4, "init.cc:2090", code=6)
        + nccl_warn(4, "proxy.cc:1143", "Unknown command 9 from localRank 1")
        + nccl_trace(4, "proxy.cc:1150", code=3)
    )
    analysis = analysed(tmp_path, log)
    assert 4 not in {f.rank for f in analysis.primary}


def test_a_warning_of_an_unmapped_process_takes_the_rank_whose_last_error_repeats_it(
    tmp_path: Path,
) -> None:
    """NCCLUtils.cpp's "\\nLast error:\\n" + ncclGetLastError(): the text of the process's last
    WARN, under the rank that raised it, where no init line ties the WARN's pid to a rank."""
    log = (
        nccl_warn(9, "bootstrap.cc:45", "Bootstrap : no socket interface found")
        + nccl_trace(9, "init.cc:149", "init.cc:1591")
        + "[rank2]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/"
        "distributed/c10d/ProcessGroupNCCL.cpp:1691, internal error - please report this issue "
        "to the NCCL developers, NCCL version 2.18.3\n"
        "[rank2]: ncclInternalError: Internal check failed.\n[rank2]: Last error:\n"
        "[rank2]: Bootstrap : no socket interface found\n"
    )
    assert lead(analysed(tmp_path, log)) == (2, Nature.NETWORK)
