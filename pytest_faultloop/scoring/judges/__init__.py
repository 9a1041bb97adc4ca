"""Judges: score an experiment's analyses against its ground truth on the five dimensions.

``DeterministicJudge`` (default) scores by rule, ``LlmJudge`` asks an LLM the seed's questions,
``HybridJudge`` combines them. All take a ``JudgeCase`` and return a ``Verdict`` or raise
``JudgeError``.
"""

from pytest_faultloop.scoring.judges.deterministic import DeterministicJudge
from pytest_faultloop.scoring.judges.hybrid import HybridJudge
from pytest_faultloop.scoring.judges.judge import Judge, JudgeCase, JudgeError
from pytest_faultloop.scoring.judges.llm import LlmJudge

__all__ = [
    "DeterministicJudge",
    "HybridJudge",
    "Judge",
    "JudgeCase",
    "JudgeError",
    "LlmJudge",
]
