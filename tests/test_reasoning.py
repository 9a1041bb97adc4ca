"""The log analyzer's reasoning, one rule at a time, each on a real case of the corpus's dev
split (the cases rules may be written against; the test split only measures them)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_log
from pytest_faultloop.cases import joined_logs
from pytest_faultloop.faults import Nature
from pytest_faultloop.models import Decision, LogAnalysis

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
