"""The hybrid judge: rules where rules are exact, the LLM where reading is needed.

The dimensions that need reading (rank_primary, fault_described: ``needs_reading`` in the
registry) and the notes come from the LLM, the others from the deterministic judge. Both judges
score every dimension, and ``extra`` records how far they agree: ``agreement`` (``"4/5"``),
``disagreed`` (the dimensions, comma-separated), and each judge's labels as
``deterministic.<dim>`` and ``llm.<dim>`` (the LLM's labels as given, before any re-check).
"""

from __future__ import annotations

from pytest_faultloop.analyzers.llm_client import TokenCount
from pytest_faultloop.models import Verdict
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES, DIMENSIONS
from pytest_faultloop.scoring.judges.deterministic import DeterministicJudge
from pytest_faultloop.scoring.judges.judge import JudgeCase
from pytest_faultloop.scoring.judges.llm import LlmJudge


class HybridJudge:
    name = "hybrid"

    def __init__(self, deterministic: DeterministicJudge, llm: LlmJudge) -> None:
        self.deterministic = deterministic
        self.llm = llm

    def judge(self, case: JudgeCase) -> Verdict:
        rules = self.deterministic.judge(case)
        usage = TokenCount()
        answer = self.llm.ask(case, usage)
        disagreed = [d for d in DIMENSION_NAMES if rules.value(d) != answer.value(d)]
        extra = {
            "agreement": f"{len(DIMENSIONS) - len(disagreed)}/{len(DIMENSIONS)}",
            "disagreed": ",".join(disagreed),
            "model": self.llm.endpoint.model,
            **{f"deterministic.{d}": rules.value(d) for d in DIMENSION_NAMES},
            **{f"llm.{d}": answer.value(d) for d in DIMENSION_NAMES},
        }
        return rules.model_copy(
            update={
                **{d.name: answer.value(d.name) for d in DIMENSIONS if d.needs_reading},
                "notes": answer.notes,
                "judge": self.name,
                "extra": extra,
                "usage": usage.usage(),
            }
        )
