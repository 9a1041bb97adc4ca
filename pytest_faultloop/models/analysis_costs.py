"""What an experiment's analyses cost: wall seconds per stage, LLM usage, stages that timed out."""

from __future__ import annotations

from typing import Literal

from pytest_faultloop.models.experiment import Model

CostStage = Literal["log", "fr", "judge"]
COST_STAGES: tuple[CostStage, ...] = ("log", "fr", "judge")


class Usage(Model):
    """LLM requests made and the tokens the server reported for them (0 when it reports none)."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0


class AnalysisCosts(Model):
    """Wall seconds of the log analysis, the FR analysis and the judge (``None``: not run)."""

    log_s: float | None = None
    fr_s: float | None = None
    judge_s: float | None = None
    log_usage: Usage | None = None
    """The LLM log analyzer's usage, when it ran."""
    judge_usage: Usage | None = None
    """The LLM or hybrid judge's usage, when it ran."""
    timed_out: list[CostStage] = []
    """Stages that hit their timeout (an external analyzer's or the LLM's)."""

    def seconds(self, stage: CostStage) -> float | None:
        value: float | None = getattr(self, f"{stage}_s")
        return value

    def usage(self, stage: CostStage) -> Usage | None:
        """The stage's LLM usage (the FR stage has none)."""
        return {"log": self.log_usage, "judge": self.judge_usage}.get(stage)
