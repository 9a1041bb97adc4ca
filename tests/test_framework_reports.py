"""Training frameworks' reports of which rank failed and how (Lightning, Ray Train, accelerate,
torch.multiprocessing), each as its source's format string prints it (the strings filled in,
not copied from a run): the rank and nature the log analyzer reads from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_log
from pytest_faultloop.models import Decision
from pytest_faultloop.models.faults import Nature

TRAINING = "Epoch 1 step 100 loss 2.3124\nEpoch 1 step 200 loss 2.1032\n"
ERROR = "ValueError: Expected input batch_size (16) to match target batch_size (8)."
TRACE = (
    "Traceback (most recent call last):\n"
    '  File "/work/model.py", line 88, in training_step\n'
    '    loss = self.loss_fn(out, batch["y"])\n'
    f"{ERROR}\n"
)

REPORTS = {
    # pytorch_lightning/strategies/ddp.py reconciliate_processes (1.4-1.9): the failed rank's
    # traceback, then, raised while handling it, the exception naming the rank with the same
    # traceback after it (the other ranks were SIGKILLed and print nothing)
    "lightning_deadlock": (
        f"{TRACE}\nDuring handling of the above exception, another exception occurred:\n\n"
        "Traceback (most recent call last):\n"
        '  File "/work/train.py", line 40, in <module>\n'
        "    trainer.fit(model)\n"
        "pytorch_lightning.utilities.exceptions.DeadlockDetectedException: "
        "DeadLock detected from rank: 2 \n"
        f" {TRACE}"
    ),
    # ray/train/v2/_internal/exceptions.py BroadcastCollectiveTimeoutError, Ray 2.60.0
    "ray_collective_not_joined": (
        "Traceback (most recent call last):\n"
        '  File "/work/train.py", line 60, in <module>\n'
        "    trainer.fit()\n"
        "ray.train.v2._internal.exceptions.BroadcastCollectiveTimeoutError: The collective "
        "operation timed out after 1800.00 seconds. The following ranks have not joined the "
        "collective operation: [2]\n"
        "You can set the timeout with the RAY_TRAIN_COLLECTIVE_TIMEOUT_S environment variable "
        "(current value: 1800.00 seconds). Disable the timeout by setting the environment "
        "variable to `None`.\n"
    ),
    # the same exception, an earlier wording (exceptions.py @0397e410): the ranks on a line
    # of their own
    "ray_collective_not_reaching": (
        "ray.train.v2._internal.exceptions.BroadcastCollectiveTimeoutError: The checkpoint "
        "broadcast timed out after 1800.0 seconds. It may be caused by slow workers or not all "
        "workers calling `ray.train.report`. Please make sure all workers called "
        "`ray.train.report`\n"
        "The following ranks are not reaching the collective operation: [2]\n"
        "The current collective timeout is set to 1800.0 seconds. You can set the "
        "RAY_TRAIN_REPORT_BARRIER_TIMEOUT_S environment variable.\n"
    ),
    # a Ray Train worker SIGTERMed: worker_group.py lists the workers (pid -> world rank); the
    # raylet's worker_died error and the actor's death cause carry the worker's exit detail,
    # which ray/_private/worker.py's SIGTERM handler sets (Ray 2.60.0)
    "ray_worker_sigterm": (
        "(TrainController pid=18506) - (ip=10.0.0.3, pid=18687) world_rank=2, local_rank=2, "
        "node_rank=0\n"
        "(raylet) A worker died or was killed while executing a task by an unexpected system "
        "error. To troubleshoot the problem, check the logs for the dead worker. Lease ID: 0600 "
        "Worker ID: b654 Node ID: 33ae Worker IP address: 10.0.0.3 Worker port: 40947 Worker "
        "PID: 18687 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker exits unexpectedly "
        "by a signal. SystemExit is raised (sys.exit is called). Exit code: 1. The process "
        "receives a SIGTERM.\n"
        "(TrainController pid=18506) Training failed due to worker errors:\n"
        "(TrainController pid=18506) [Rank 2 Error Snippet]:\n"
        "(TrainController pid=18506) The actor is dead because its worker process has died. "
        "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker exits unexpectedly by a "
        "signal. SystemExit is raised (sys.exit is called). Exit code: 1. The process receives "
        "a SIGTERM.\n"
    ),
}


@pytest.mark.parametrize(
    ("report", "rank", "nature"),
    [
        ("ray_worker_sigterm", 2, Nature.SIGNAL),
        ("lightning_deadlock", 2, Nature.EXCEPTION),
        ("ray_collective_not_joined", 2, Nature.HANG),
        ("ray_collective_not_reaching", 2, Nature.HANG),
    ],
)
def test_each_report_names_the_rank_its_source_says(
    report: str, rank: int, nature: Nature, tmp_path: Path
) -> None:
    log = tmp_path / "job.log"
    log.write_text(TRAINING + REPORTS[report])
    analysis = analyze_log(log)
    assert analysis.primary, analysis.explanation
    lead = analysis.primary[0]
    assert (lead.rank, lead.nature) == (rank, nature), analysis.explanation


def test_lightnings_deadlock_report_is_the_ranks_own_error(tmp_path: Path) -> None:
    """The rank's exception is the fault, not the DeadlockDetectedException that reports it."""
    log = tmp_path / "job.log"
    log.write_text(TRAINING + REPORTS["lightning_deadlock"])
    assert analyze_log(log).primary[0].summary == ERROR


def test_a_sigtermed_ray_worker_is_restarted_not_stopped(tmp_path: Path) -> None:
    """Ray's SIGTERM handler exits the worker with SystemExit; its death cause is a signal from
    outside, which a restart survives (not the worker's crash)."""
    log = tmp_path / "job.log"
    log.write_text(TRAINING + REPORTS["ray_worker_sigterm"])
    analysis = analyze_log(log)
    assert analysis.decision is Decision.RESTART, analysis.explanation
    assert "SIGTERM" in analysis.primary[0].summary, analysis.explanation
