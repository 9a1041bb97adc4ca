"""Training frameworks' reports of which rank failed (Lightning, Ray Train, accelerate,
torch.multiprocessing), each as its source's format string prints it (the strings filled in,
not copied from a run): the rank and nature the log analyzer reads from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_log
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
}


@pytest.mark.parametrize(
    ("report", "rank", "nature"),
    [
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
