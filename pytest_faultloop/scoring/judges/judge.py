"""What every judge takes and returns: a ``JudgeCase`` in, a ``Verdict`` out, or ``JudgeError``."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from pytest_faultloop.models import Experiment, FrAnalysis, LogAnalysis, Truth, Verdict
from pytest_faultloop.models.errors import FaultloopError
from pytest_faultloop.scoring.restart_policy import RestartPolicy
from pytest_faultloop.scoring.truth import truth_of


class JudgeCase(BaseModel):
    """One experiment's ground truth and the two analyzers' answers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    experiment: Experiment
    log_analysis: LogAnalysis
    fr_analysis: FrAnalysis
    log_tail: str
    """The filtered last lines of the log (what the log analyzer saw)."""
    gpus_per_node: int = Field(ge=1)
    segment_size: int = Field(ge=1)
    """FR_SEGMENT_SIZE: ranks per segment for coarse FR scoring."""
    node_host: str | None = None
    """Hostname of the injected rank's node, when known (the fault marker's ``host``)."""
    node_hosts: dict[int, str] = {}
    """Node index -> hostname of each injected node, from the fault markers, when several
    ranks were injected (else ``node_host`` says it)."""
    truth: Truth | None = None
    """What a correct attribution says; ``None`` until a judge resolves it with its policy."""

    def resolved(self, policy: RestartPolicy) -> JudgeCase:
        """This case with its truth (:func:`pytest_faultloop.scoring.truth.truth_of` under ``policy``)."""
        if self.truth is not None:
            return self
        return self.model_copy(update={"truth": truth_of(self.experiment, policy)})

    @property
    def expected(self) -> Truth:
        if self.truth is None:
            raise ValueError("the case's truth is not resolved: call resolved(policy) first")
        return self.truth

    def node_block(self, rank: int) -> range:
        """The GPUS_PER_NODE ranks of ``rank``'s node."""
        return _block(rank, self.gpus_per_node)

    def segment_block(self, rank: int) -> range:
        """The FR_SEGMENT_SIZE ranks of ``rank``'s segment."""
        return _block(rank, self.segment_size)


def _block(rank: int, size: int) -> range:
    start = rank // size * size
    return range(start, start + size)


class JudgeError(FaultloopError):
    """The judge could not score; the plugin reports ``judge_failed: reason`` and ERRORs.

    ``timed_out`` marks a failure by timeout (counted apart in the costs).
    """

    def __init__(self, reason: str, *, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


class Judge(Protocol):
    name: str

    def judge(self, case: JudgeCase) -> Verdict:
        """Score the case on the five dimensions; raise ``JudgeError`` when that is impossible."""
        ...
