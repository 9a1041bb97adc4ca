"""The log analyzer's reasoning, one rule at a time, each on a real case of the corpus's dev
split (the cases rules may be written against; the test split only measures them)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_log
from pytest_faultloop.inputs.cases import joined_logs
from pytest_faultloop.models import Decision, LogAnalysis
from pytest_faultloop.models.faults import Nature

CORPUS = Path(__file__).resolve().parents[1] / "experiments" / "corpus" / "public"


def analyse(case: str, tmp_path: Path) -> LogAnalysis:
    directory = CORPUS / case
    assert tomllib.loads((directory / "case.toml").read_text())["split"] == "dev", case
    logs = sorted(p for p in (directory / "logs").iterdir() if p.is_file())
    return analyze_log(joined_logs(logs, tmp_path))


@pytest.mark.parametrize(
    ("case", "rule", "rank", "nature"),
    [
        # 3. the earliest origin: a rank's own hardware error, out of memory, CUDA error
        ("kohya1434_ecc_rank1", "hard_failure", 1, Nature.GPU_ERROR),
        ("lf9510_oom_rank6", "hard_failure", 6, Nature.EXCEPTION),
        ("lf1221_oom_zero2_rank5", "hard_failure", 5, Nature.EXCEPTION),  # "GPU 5" only
        # 3. ... or the rank its peers name: desync report, Horovod's stall inspector
        ("pt152623_desync_rank7", "hard_failure", 7, Nature.HANG),
        ("hvd1442_stall_rank6", "hard_failure", 6, Nature.HANG),
        ("polyaxon657_stalled_rank0", "hard_failure", 0, Nature.HANG),  # behind pod prefixes
        # 4. an end from outside, or a launcher's report of a rank ended by a signal
        ("egovlp21_sigkill_rank3", "signal_or_job", 3, Nature.CRASH),
        ("hhrnet47_spawn_sigkill", "signal_or_job", 1, Nature.CRASH),  # mp.spawn's report
        ("pl20542_slurm_timelimit", "signal_or_job", None, Nature.SCHEDULER),
        # 5. a collective hang: the member absent where every other member waits
        ("axolotl2684_tokenize_timeout_rank0", "hang", 0, Nature.HANG),
        ("lf2424_tokenize_timeout_rank0", "hang", 0, Nature.HANG),
        # ... a silent member that died ends as its launcher reports: mpirun's exit code 1
        ("uniter31_mpirun_first_exit_rank0_oom", "hang", 0, Nature.EXCEPTION),
        # 6. exit codes: a headless torchrun table, mp.spawn's "Process 1 terminated with"
        ("lcl11_rootcause_rank1", "exit_code", 1, Nature.EXCEPTION),
        ("d2_3819_spawn_proc1", "exit_code", 1, Nature.EXCEPTION),
        # 6. ... else an error-level line: never "no failure"
        ("sky955_spot_vm_killed_bert", "fallback", None, Nature.EXCEPTION),
        # ... or a traceback cut before its exception line, whose rank the log does not say
        ("galvatron3_ecc_fsdp_init", "fallback", None, Nature.EXCEPTION),
        # 6. ... else a log that ends while the ranks connect to the store hung there
        ("pt81704_k8s_gloo_init_hang", "stalled_init", None, Nature.HANG),
    ],
)
def test_each_rule_on_a_real_case(
    case: str, rule: str, rank: int | None, nature: Nature, tmp_path: Path
) -> None:
    analysis = analyse(case, tmp_path)
    assert analysis.rule == rule, analysis.explanation
    assert analysis.primary[0].rank == rank, analysis.explanation
    assert analysis.primary[0].nature is nature, analysis.explanation


def test_the_watchdog_taking_a_process_down_is_a_consequence_not_a_crash(tmp_path: Path) -> None:
    """PyTorch 1.x: "Some NCCL operations have failed or timed out ... terminate called after
    throwing an instance of 'std::runtime_error'": the InfiniBand error after it is the cause."""
    analysis = analyse("alpaca207_ib_err12", tmp_path)
    assert analysis.primary[0].nature is Nature.NETWORK
    assert analysis.decision is Decision.RESTART


def test_a_scheduler_end_after_training_completed_is_a_teardown_hang(tmp_path: Path) -> None:
    analysis = analyse("mbridge1656_teardown_timelimit", tmp_path)
    assert analysis.primary[0].nature is Nature.SCHEDULER
    assert analysis.decision is Decision.CONTINUE  # the training itself had finished
    assert "training completed" in analysis.explanation


def test_a_clean_log_with_alarming_warnings_reads_as_no_failure(tmp_path: Path) -> None:
    analysis = analyse("hvd243_vader_read_warn_clean", tmp_path)
    assert not analysis.primary
    assert analysis.decision is Decision.CONTINUE


def test_conflicting_evidence_lowers_the_confidence(tmp_path: Path) -> None:
    """A rank's own out-of-memory error, while its peers' stall report names another rank:
    the origin wins, and the answer says it is less sure (lines as the tools print them)."""
    log = tmp_path / "train.log"
    log.write_text(
        "[rank2]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "[1,0]<stderr>:Stalled ranks:\n"
        "[1,0]<stderr>:5: [HorovodAllreduce_grad_0]\n"
        "[rank3]: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
        "OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600123 milliseconds before timing out.\n"
    )
    analysis = analyze_log(log)
    clean = tmp_path / "clean.log"
    clean.write_text(log.read_text().replace("[rank2]: torch.cuda", "[rank5]: torch.cuda"))
    agreed = analyze_log(clean)
    assert analysis.primary[0].rank == 2 and agreed.primary[0].rank == 5
    assert "conflicting evidence" in analysis.explanation
    assert analysis.confidence is not None and agreed.confidence is not None
    assert analysis.confidence < agreed.confidence


def test_a_log_that_goes_on_after_the_store_connected_did_not_hang_there(tmp_path: Path) -> None:
    """The connection step counts only as the log's last word: the same lines followed by
    training are no failure."""
    case = CORPUS / "pt81704_k8s_gloo_init_hang" / "logs" / "pytorch-simple-worker-0.log"
    log = tmp_path / "train.log"
    log.write_text(case.read_text() + "Train Epoch: 1 [0/60000 (0%)]\tloss=2.3018\n")
    assert not analyze_log(log).primary


def test_prrtes_report_broken_before_the_signal_is_read_whole(tmp_path: Path) -> None:
    """PRRTE's help text breaks ``exited on`` / ``signal 9 (Killed).`` over two lines."""
    log = tmp_path / "mpirun.log"
    log.write_text(
        "-" * 74 + "\n"
        "prterun noticed that process rank 3 with PID 0 on node node-1 exited on\n"
        "signal 9 (Killed).\n" + "-" * 74 + "\n"
    )
    analysis = analyze_log(log)
    assert analysis.primary[0].rank == 3
    assert analysis.primary[0].nature is Nature.CRASH
    assert "SIGKILL" in analysis.primary[0].summary


def test_horovods_stall_warning_is_a_hang_and_its_list_names_the_culprit(tmp_path: Path) -> None:
    """The stall inspector's warning (stall_inspector.cc) then its ``Missing ranks:`` list, as
    mpirun's output prefix carries them; the warning alone still reads as a hang."""
    warning = (
        "[1,0]<stderr>:[2021-02-02 21:19:07.345988: W horovod/common/stall_inspector.cc:105] "
        "One or more tensors were submitted to be reduced, gathered or broadcasted by subset of "
        "ranks and are waiting for remainder of ranks for more than 60 seconds. This may indicate "
        "that different ranks are trying to submit different tensors or that only subset of ranks "
        "is submitting tensors, which will cause deadlock. \n"
    )
    listed = warning + "[1,0]<stderr>:Missing ranks:\n[1,0]<stderr>:6: [HorovodAllreduce_grads_0]\n"
    log = tmp_path / "hvd.log"
    log.write_text(listed)
    analysis = analyze_log(log)
    assert analysis.primary[0].rank == 6 and analysis.primary[0].nature is Nature.HANG
    log.write_text(warning)
    alone = analyze_log(log)
    assert alone.primary[0].nature is Nature.HANG
    assert alone.decision is Decision.RESTART


STALL_WARNING = (
    "[W /tmp/pip-req-build/horovod/common/stall_inspector.cc:107] One or more tensors were "
    "submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for "
    "remainder of ranks for more than 60 seconds. This may indicate that different ranks are "
    "trying to submit different tensors or that only subset of ranks is submitting tensors, "
    "which will cause deadlock. \n"
)
"""stall_inspector.cc's LOG(WARNING) (logging.cc's ``[W file:line]``)."""


@pytest.mark.parametrize("prefix", ["", "[0]<stderr>:", "[1,0]<stderr>:"])
@pytest.mark.parametrize(
    "tensors", ["allreduce.fc3.weight, allreduce.fc3.bias", "allreduce.noname.12"]
)
def test_a_stall_list_names_its_rank_whatever_the_tensors_are_called(
    prefix: str, tensors: str, tmp_path: Path
) -> None:
    """``Missing ranks:`` then ``5: [..]`` (stall_inspector.cc), with horovod.torch's own
    tensor names (``allreduce.<param>``, ``allreduce.noname.N``: no keyword in the entry),
    bare, under horovodrun's prefix and under mpirun's tag."""
    log = tmp_path / "hvd.log"
    log.write_text(f"{prefix}{STALL_WARNING}{prefix}Missing ranks:\n{prefix}5: [{tensors}]\n" * 2)
    analysis = analyze_log(log)
    assert [(f.rank, f.nature) for f in analysis.primary] == [(5, Nature.HANG)]
    assert analysis.decision is Decision.RESTART


def test_a_stall_the_named_rank_outlives_is_no_hang(tmp_path: Path) -> None:
    """A stall warning whose rank then prints its progress passed (the run went on); a
    warning after that is a stall again; the rank marked ``!`` with ``Will shutdown.``
    stalled for good, whatever it prints."""
    steps = "".join(f"[{r}]<stdout>:step 300 rank {r}\n" for r in range(8))
    warned = f"[0]<stderr>:{STALL_WARNING}[0]<stderr>:Missing ranks:\n"
    log = tmp_path / "hvd.log"
    log.write_text(warned + "[0]<stderr>:3: [allreduce.fc1.weight]\n" + steps)
    passed = analyze_log(log)
    assert not passed.primary and passed.decision is Decision.CONTINUE
    log.write_text(warned + "[0]<stderr>:3: [allreduce.fc1.weight]\n" + steps + warned)
    assert analyze_log(log).decision is Decision.RESTART  # it stalled again later
    log.write_text(
        warned + "[0]<stderr>:3!: [allreduce.fc1.weight]\n"
        '[0]<stderr>:One or more rank (marked by "!") is stalled for longer than 300 seconds. '
        "Will shutdown.\n" + steps
    )
    shut_down = analyze_log(log)
    assert [(f.rank, f.nature) for f in shut_down.primary] == [(3, Nature.HANG)]
    assert shut_down.decision is Decision.RESTART


def test_a_stall_another_ranks_progress_outlives_is_no_hang(tmp_path: Path) -> None:
    """Only rank 0 prints its steps: its steps advancing after the list mean the allreduce the
    list waited for completed (it needs every rank); a line repeated as it was, or a failure
    line of rank 0, do not."""
    warned = f"[1,0]<stderr>:{STALL_WARNING}[1,0]<stderr>:Missing ranks:\n"
    entry = "[1,0]<stderr>:3: [DistributedAdam.Allreduce.layer4.1.conv2.weight]\n"
    log = tmp_path / "hvd.log"
    steps = "[1,0]<stdout>:Epoch 1 step 300 loss 1.24\n[1,0]<stdout>:Epoch 1 step 400 loss 1.19\n"
    log.write_text(warned + entry + steps)
    assert analyze_log(log).decision is Decision.CONTINUE
    # a monitor thread repeating its line, and a list naming the rank again: still stalled
    monitor = "[1,1]<stdout>:gpu-mon: mem 61.2 GiB util 0%\n"
    log.write_text((warned + entry + monitor * 2) * 2)
    assert analyze_log(log).primary[0].rank == 3
    log.write_text(
        warned + entry + "[1,0]<stderr>:RuntimeError: Horovod has been shut down. This was "
        "caused by an exception on one of the ranks or an attempt to allreduce, allgather or "
        "broadcast a tensor after one of the ranks finished execution.\n"
    )
    assert analyze_log(log).primary[0].rank == 3


def test_the_stalled_coordinators_own_inspector_lines_are_not_its_word(tmp_path: Path) -> None:
    """Rank 0 prints the stall lists from its background thread, also when it is the rank
    stalled: its next warning and list do not withdraw its entry."""
    listed = (
        f"[0]<stderr>:{STALL_WARNING}[0]<stderr>:Missing ranks:\n[0]<stderr>:0: [allreduce.a]\n"
    )
    log = tmp_path / "hvd.log"
    log.write_text(listed * 2)
    assert [(f.rank, f.nature) for f in analyze_log(log).primary] == [(0, Nature.HANG)]


def horovodrun_failure(first: str, code: int) -> str:
    """horovodrun's (gloo_run.py, safe_shell_exec.py) lines when Process 5 exits with
    ``code`` first and the runner stops the others (SIGTERM: 143), then its RuntimeError
    naming ``first``."""
    survivors = "".join(f"Process {r} exit with status code 143.\n" for r in (0, 1, 2, 3, 4, 6, 7))
    return (
        f"Process 5 exit with status code {code}.\n"
        "Terminating remaining workers after failure of Process 5.\n"
        "[0]<stderr>:horovod.common.exceptions.HorovodInternalError: Horovod has been shut "
        "down. This was caused by an exception on one of the ranks or an attempt to allreduce, "
        "allgather or broadcast a tensor after one of the ranks finished execution.\n"
        f"{survivors}"
        "Traceback (most recent call last):\n"
        '  File "/usr/local/bin/horovodrun", line 8, in <module>\n'
        "    sys.exit(run_commandline())\n"
        "RuntimeError: Horovod detected that one or more processes exited with non-zero "
        "status, thus causing the job to be terminated. The first process to do so was:\n"
        f"Process name: {first}\nExit code: {code}\n"
    )


@pytest.mark.parametrize(
    ("code", "nature"), [(137, Nature.CRASH), (1, Nature.EXCEPTION)], ids=["sigkill", "exit1"]
)
def test_horovodruns_closing_runtime_error_gives_the_rank_it_names(
    code: int, nature: Nature, tmp_path: Path
) -> None:
    """The RuntimeError is the runner's summary, not an origin: its ``Process name: 5`` /
    ``Exit code: 137`` is rank 5 ended by SIGKILL (128 + 9); the others' 143 after
    ``Terminating remaining workers`` are the runner's own SIGTERMs."""
    log = tmp_path / "horovodrun.log"
    log.write_text(horovodrun_failure("5", code))
    analysis = analyze_log(log)
    assert [(f.rank, f.nature) for f in analysis.primary] == [(5, nature)]
    assert analysis.decision is Decision.STOP


def test_horovodruns_runtime_error_without_a_rank_stays_the_jobs_exception(tmp_path: Path) -> None:
    """The elastic driver names a process ``host[slot]`` (elastic/driver.py): no rank, so the
    RuntimeError stands as the job's exception."""
    log = tmp_path / "horovodrun.log"
    text = horovodrun_failure("node1[1]", 1)
    log.write_text(text[text.index("Traceback") :])
    analysis = analyze_log(log)
    assert [(f.rank, f.nature) for f in analysis.primary] == [(None, Nature.EXCEPTION)]
    assert analysis.decision is Decision.STOP


@pytest.mark.parametrize(
    "summary",
    [
        # torch/distributed/elastic/multiprocessing/errors/__init__.py: its table cut away
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        # ray/train/base_trainer.py: the workers' errors it points to are not in the paste
        "ray.train.base_trainer.TrainingFailedError: The Ray Train run failed. Please inspect"
        " the previous error messages for a cause.",
    ],
)
def test_a_launchers_summary_whose_details_were_cut_is_still_a_failure(
    summary: str, tmp_path: Path
) -> None:
    """The summary defers to what it sums up; where that is missing the run still failed: the
    fallback's guess, never "no failure"."""
    log = tmp_path / "driver.log"
    log.write_text(
        "step 100 loss=2.31\nTraceback (most recent call last):\n"
        '  File "/usr/local/bin/launcher", line 8, in <module>\n    sys.exit(main())\n'
        f"{summary}\n"
    )
    analysis = analyze_log(log)
    assert [(f.rank, f.nature) for f in analysis.primary] == [(None, Nature.EXCEPTION)]
    assert analysis.rule == "fallback"


MPICH_BAD_TERMINATION = (
    "=" * 83 + "\n"
    "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
    "=   PID 23457 RUNNING AT node1\n"
    "=   EXIT CODE: 9\n"
    "=   CLEANING UP REMAINING PROCESSES\n"
    "=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n" + "=" * 83 + "\n"
    "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)\n"
)
"""MPICH Hydra's block for a process a signal ended (pmiserv_cb.c, mpiexec.c): no rank."""


def test_a_survivors_communication_error_names_the_rank_the_launcher_saw_killed(
    tmp_path: Path,
) -> None:
    """MPICH ch3's ``Communication error with rank 5: Connection reset by peer`` (errnames.txt
    **comm_fail, printed by the survivor) names the dead peer; Hydra's rank-less SIGKILL block
    after it is that rank's end: a crash (STOP), not a network failure."""
    log = tmp_path / "mpiexec.log"
    log.write_text(
        "[2] Fatal error in PMPI_Allreduce: Unknown error class, error stack:\n"
        "[2] MPID_nem_tcp_connpoll(1845)......: Communication error with rank 5: "
        "Connection reset by peer\n" + MPICH_BAD_TERMINATION
    )
    analysis = analyze_log(log)
    assert [(f.rank, f.nature) for f in analysis.primary] == [(5, Nature.CRASH)]
    assert analysis.decision is Decision.STOP


def intel_block(rank: int, signal: str) -> str:
    """Intel MPI's block for one rank, as real logs print it (closed source)."""
    return (
        "=" * 83 + "\n"
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        f"=   RANK {rank} PID {23452 + rank} RUNNING AT node1\n"
        f"=   KILLED BY SIGNAL: {signal}\n" + "=" * 83 + "\n\n"
    )


def test_intel_mpis_blocks_name_the_rank_and_the_cleanups_kills_are_not_it(
    tmp_path: Path,
) -> None:
    """One block names its rank and signal; of several, the rank another signal ended is the
    culprit, the SIGKILLs beside it the launcher's cleanup of the remaining processes."""
    log = tmp_path / "impi.log"
    log.write_text(intel_block(5, "9 (Killed)"))
    alone = analyze_log(log)
    assert [(f.rank, f.nature) for f in alone.primary] == [(5, Nature.CRASH)]
    assert alone.decision is Decision.STOP
    log.write_text(
        intel_block(4, "9 (Killed)")
        + intel_block(5, "11 (Segmentation fault)")
        + intel_block(6, "9 (Killed)")
    )
    several = analyze_log(log)
    assert [(f.rank, f.nature) for f in several.primary] == [(5, Nature.CRASH)]
    assert "SIGSEGV" in several.primary[0].summary


@pytest.mark.parametrize(
    "abort",
    [
        "-" * 74 + "\nMPI_ABORT was invoked on rank 5 in communicator MPI_COMM_WORLD\n"
        "with errorcode 1.\n",
        "Abort(1) on node 5 (rank 5 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 1)"
        " - process 5\n",
    ],
    ids=["openmpi", "mpich"],
)
def test_an_unprefixed_exception_belongs_to_the_rank_whose_abort_follows_it(
    abort: str, tmp_path: Path
) -> None:
    """The exception and the MPI_Abort its process called next (help-mpi-api.txt [mpi-abort],
    MPICH's ch4_globals.c) are one failure: one primary, rank 5's."""
    log = tmp_path / "mpirun.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "/workspace/train.py", line 142, in step\n'
        '    raise ValueError("injected workload exception")\n'
        "ValueError: injected workload exception\n" + abort
    )
    analysis = analyze_log(log)
    assert [(f.rank, f.nature) for f in analysis.primary] == [(5, Nature.EXCEPTION)]
    assert "ValueError" in analysis.primary[0].summary
