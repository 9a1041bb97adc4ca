"""Open MPI, PRRTE and MPICH reports of how a job's processes ended, each as its help text or
format string prints it (the source strings filled in; line breaks where the help file has
them): the rank, nature and cause the log analyzer reads from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_log
from pytest_faultloop.models import Decision
from pytest_faultloop.models.faults import Nature

TRAINING = "Epoch 1 step 100 loss 2.3124\nEpoch 1 step 200 loss 2.1032\n"
DASHES = "-" * 74
EQUALS = "=" * 83


def framed(text: str) -> str:
    """As opal_show_help / pmix_show_help print a help topic: between 74-dash lines."""
    return f"{DASHES}\n{text}\n{DASHES}\n"


REPORTS = {
    # orte/mca/errmgr/base/help-errmgr-base.txt [node-died], Open MPI 2.0-4.1.8
    "orte_node_died": framed(
        "ORTE has lost communication with a remote daemon.\n\n"
        "  HNP daemon   : [[56171,0],0] on node gpu-node-1\n"
        "  Remote daemon: [[56171,0],2] on node gpu-node-2\n\n"
        "This is usually due to either a failure of the TCP network\n"
        "connection to the node, or possibly an internal failure of\n"
        "the daemon itself. We cannot recover from this failure, and\n"
        "therefore will terminate the job."
    ),
    # the same topic, Open MPI 1.8.0-1.10.7
    "orte18_node_died": framed(
        "ORTE has lost communication with its daemon located on node:\n\n"
        "  hostname:  gpu-node-2\n\n"
        "This is usually due to either a failure of the TCP network\n"
        "connection to the node, or possibly an internal failure of\n"
        "the daemon itself. We cannot recover from this failure, and\n"
        "therefore will terminate the job."
    ),
    # prrte help-errmgr-base.txt [node-died], PRRTE 2.0-4.1 (Open MPI 5)
    "prte_node_died": framed(
        "PRTE has lost communication with a remote daemon.\n\n"
        "  HNP daemon   : [prterun-gpu-node-1-12340@0,0] on node gpu-node-1\n"
        "  Remote daemon: [prterun-gpu-node-1-12340@0,2] on node gpu-node-2"
    ),
    # help-orterun.txt [orterun:proc-comm-failed], Open MPI 1.8-4.1.8
    "orte_comm_failed": framed(
        "A critical communication path was lost to:\n\n"
        "  My name:      [[56171,0],0]\n"
        "  Process name: [[56171,1],3]\n"
        "  Node:         gpu-node-2"
    ),
    # prrte help-prun.txt [prun:proc-comm-failed], PRRTE 3.0.3+ (3-space indent)
    "prte_comm_failed": framed(
        "A critical communication path was lost to:\n\n"
        "   My name:      [prterun-gpu-node-1-12340@0,0]\n"
        "   Process name: [prterun-gpu-node-1-12340@1,3]\n"
        "   Node:         gpu-node-2"
    ),
    # help-orterun.txt [orterun:proc-heartbeat-failed], Open MPI 1.8-4.1.8
    "orte_heartbeat_failed": framed(
        "mpirun failed to receive scheduled heartbeat communications from a remote\n"
        "process:\n\n"
        "  Process name: [[56171,1],3]\n"
        "  Node:         gpu-node-2"
    ),
    # help-errmgr-base.txt [normal-termination-but], Open MPI 3.0-4.1.8, the only report
    "orte_normal_termination_but": framed(
        "Primary job  terminated normally, but 1 process returned\n"
        "a non-zero exit code. Per user-direction, the job has been aborted."
    ),
    # help-orterun.txt [orterun:proc-aborted-unknown], printed by Open MPI 1.3-1.10.7
    "orte_aborted_unknown": framed(
        "mpirun noticed that the job aborted, but has no info as to the process\n"
        "that caused that situation."
    ),
    # ompi/mpi/c/abort.c, Open MPI 1.2.x
    "ompi12_mpi_abort": (
        "[gpu-node-2:12345] MPI_ABORT invoked on rank 3 in communicator MPI_COMM_WORLD "
        "with errorcode 1\n"
    ),
    # MPICH ch4: ch4_globals.c's prefix + init_impl.c's message, MPICH 3.3-4.3
    "mpich_abort_ch4": (
        "Abort(1) on node 3 (rank 3 in comm 0): application called "
        "MPI_Abort(MPI_COMM_WORLD, 1) - process 3\n"
    ),
    # MPICH ch3: abort.c + simple_pmi.c, MPICH 3.0.x
    "mpich_abort_ch3": (
        "application called MPI_Abort(MPI_COMM_WORLD, 1) - process 3\n"
        "[cli_3]: aborting job:\n"
        "application called MPI_Abort(MPI_COMM_WORLD, 1) - process 3\n"
    ),
    # Hydra's pmiserv_cb.c block, then mpiexec.c's exit string for its own signalled status
    "hydra_sigkill": (
        f"\n{EQUALS}\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   PID 12345 RUNNING AT gpu-node-2\n=   EXIT CODE: 9\n"
        "=   CLEANING UP REMAINING PROCESSES\n=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n"
        f"{EQUALS}\nYOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)\n"
        "This typically refers to a problem with your application.\n"
    ),
    # ... 139: SIGSEGV with a core dump (over 128: a signal)
    "hydra_sigsegv": (
        f"\n{EQUALS}\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   PID 12345 RUNNING AT gpu-node-2\n=   EXIT CODE: 139\n"
        "=   CLEANING UP REMAINING PROCESSES\n=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n"
        f"{EQUALS}\n"
    ),
    # ... after a PMI abort the code is the abort's (simple_pmi.c's "aborting job", MPICH 3.x)
    "hydra_abort_exit_code": (
        "[cli_0]: aborting job:\nFatal error in PMPI_Init_thread: Other MPI error\n"
        f"\n{EQUALS}\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   EXIT CODE: 1\n=   CLEANING UP REMAINING PROCESSES\n"
        f"=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n{EQUALS}\n"
    ),
    # MPICH: MPI_Abort on another communicator names its rank there, no world rank
    "mpich_abort_subcomm": ("application called MPI_Abort(comm=0x84000002, 1) - process 1\n"),
    # MPICH ch4: "on node %d" is the world rank (MPID_Abort), whatever the communicator
    "mpich_abort_ch4_subcomm": (
        "Abort(1) on node 5 (rank 1 in comm 496): application called "
        "MPI_Abort(comm=0x84000002, 1) - process 1\n"
    ),
    # prrte help-prun.txt [prun:proc-comm-failed] naming a daemon (the @0 namespace)
    "prte_comm_failed_daemon": framed(
        "A critical communication path was lost to:\n\n"
        "   My name:      [prterun-gpu-node-1-12340@0,0]\n"
        "   Process name: [prterun-gpu-node-1-12340@0,2]\n"
        "   Node:         gpu-node-2"
    ),
    # help-orterun.txt [orterun:proc-failed-to-start], Open MPI 1.8-4.1: the rank it could not start
    "orte_failed_to_start": framed(
        "mpirun was unable to start the specified application as it encountered an\n"
        "error:\n\nError code: 1\nError name: (null)\nNode: gpu-node-2\n\n"
        "when attempting to start process rank 5."
    ),
    # prrte help-prun.txt [prun:wdir-not-found], PRRTE 3.0-4.1 (Open MPI 5): "while", 3-space indent
    "prte_wdir_not_found": framed(
        "prterun was unable to launch the specified application as it could not find\n"
        "the specified working directory:\n\n   Working directory: /scratch/run\n"
        "   Node: gpu-node-2\n\nwhile attempting to start process rank 5."
    ),
    # PRRTE's [normal-termination-but] (v3.0.14 help-errmgr-base.txt, state_base_fns.c): "%s job
    # %s" is "the primary" and an empty job id
    "prte_normal_termination_but": framed(
        "the primary job  terminated normally, but 1 process returned\n"
        "a non-zero exit code. Per user-direction, the job has been aborted."
    ),
    # [orterun:non-zero-exit]: %s is the basename of the launcher's argv[0]
    "orte_nonzero_exit_basename": framed(
        "mpirun.openmpi detected that one or more processes exited with non-zero status, "
        "thus causing\nthe job to be terminated. The first process to do so was:\n\n"
        "  Process name: [[56171,1],6]\n  Exit code:    1"
    ),
    # orterun.c abort_exit_callback, Open MPI 1.2-4.x: mpirun itself got the user's signal
    "orte_killing_job": "mpirun: killing job...\n\n",
    # bscu_wait.c, MPICH 3.0-5.0
    "hydra_terminated_badly": (
        "[mpiexec@gpu-node-1] HYDT_bscu_wait_for_completion (tools/bootstrap/utils/"
        "bscu_wait.c:76): one of the processes terminated badly; aborting\n"
        "[mpiexec@gpu-node-1] main (ui/mpich/mpiexec.c:340): process manager error waiting "
        "for completion\n"
    ),
}


@pytest.mark.parametrize(
    ("report", "rank", "nature", "cause"),
    [
        ("orte_node_died", None, Nature.CRASH, "node_lost"),
        ("orte18_node_died", None, Nature.CRASH, "node_lost"),
        ("prte_node_died", None, Nature.CRASH, "node_lost"),
        ("orte_comm_failed", 3, Nature.NETWORK, "network"),
        ("prte_comm_failed", 3, Nature.NETWORK, "network"),
        ("orte_heartbeat_failed", 3, Nature.NETWORK, "network"),
        ("orte_normal_termination_but", None, Nature.EXCEPTION, "exception"),
        ("orte_aborted_unknown", None, Nature.EXCEPTION, "exception"),
        ("ompi12_mpi_abort", 3, Nature.EXCEPTION, "exception"),
        ("mpich_abort_ch4", 3, Nature.EXCEPTION, "exception"),
        ("mpich_abort_ch3", 3, Nature.EXCEPTION, "exception"),
        ("hydra_sigkill", None, Nature.CRASH, "crash"),
        ("hydra_sigsegv", None, Nature.CRASH, "crash"),
        ("hydra_abort_exit_code", None, Nature.EXCEPTION, "exception"),
        ("mpich_abort_subcomm", None, Nature.EXCEPTION, "exception"),
        ("mpich_abort_ch4_subcomm", 5, Nature.EXCEPTION, "exception"),
        ("prte_comm_failed_daemon", None, Nature.CRASH, "node_lost"),
        ("hydra_terminated_badly", None, Nature.EXCEPTION, "exception"),
        ("orte_killing_job", None, Nature.SIGNAL, "signal"),
        ("orte_failed_to_start", 5, Nature.EXCEPTION, "exception"),
        ("prte_wdir_not_found", 5, Nature.EXCEPTION, "exception"),
        ("prte_normal_termination_but", None, Nature.EXCEPTION, "exception"),
        ("orte_nonzero_exit_basename", 6, Nature.EXCEPTION, "exception"),
    ],
)
def test_each_report_names_what_its_source_says(
    report: str, rank: int | None, nature: Nature, cause: str, tmp_path: Path
) -> None:
    log = tmp_path / "job.log"
    log.write_text(TRAINING + REPORTS[report])
    analysis = analyze_log(log)
    assert analysis.primary, analysis.explanation
    lead = analysis.primary[0]
    assert (lead.rank, lead.nature, analysis.cause) == (rank, nature, cause), analysis.explanation


def test_hydras_exit_string_names_the_signal(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(TRAINING + REPORTS["hydra_sigkill"])
    assert "SIGKILL" in analyze_log(log).primary[0].summary


def test_a_node_lost_is_restarted_without_the_node(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(TRAINING + REPORTS["orte_node_died"])
    assert analyze_log(log).decision is Decision.RESTART


def test_ranks_whose_mpi_peer_hung_up_blame_the_rank_that_went_silent(tmp_path: Path) -> None:
    """[peer hung up] (help-mpi-btl-tcp.txt, Open MPI 2.0-5.0.10) from ranks 0-2 under
    --tag-output; rank 3 of the four mpirun started says nothing: it died."""
    peers = "".join(
        f"[1,{r}]<stderr>:An MPI communication peer process has unexpectedly disconnected.  This\n"
        f"[1,{r}]<stderr>:usually indicates a failure in the peer process (e.g., a crash or\n"
        f"[1,{r}]<stderr>:otherwise exiting without calling MPI_FINALIZE first).\n"
        for r in range(3)
    )
    log = tmp_path / "job.log"
    log.write_text("$ mpirun -np 4 --tag-output python train.py\n" + peers)
    analysis = analyze_log(log)
    assert [(i.rank, i.nature) for i in analysis.primary] == [(3, Nature.CRASH)]


def test_a_fatal_mpi_error_is_evidence_never_no_failure(tmp_path: Path) -> None:
    """[mpi_errors_are_fatal] (help-mpi-errors.txt, 1.8-5.0.10): often a peer's failure seen
    through MPI, so only the fallback's evidence, with the rank its tag gives."""
    log = tmp_path / "job.log"
    log.write_text(
        TRAINING + "[1,2]<stderr>:[gpu-node-2:12345] *** An error occurred in MPI_Allreduce\n"
        "[1,2]<stderr>:[gpu-node-2:12345] *** MPI_ERRORS_ARE_FATAL (processes in this "
        "communicator will now abort,\n"
    )
    analysis = analyze_log(log)
    assert analysis.rule == "fallback"
    assert analysis.primary[0].rank == 2
