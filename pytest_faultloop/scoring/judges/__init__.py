"""Judges: score an experiment's analyses against its ground truth on every dimension.

``deterministic.DeterministicJudge`` (default) scores by rule, ``llm.LlmJudge`` asks an LLM the
seed's questions, ``hybrid.HybridJudge`` combines them. All take a ``JudgeCase`` and return a
``Verdict`` or raise ``JudgeError``. Import each from its module: the package imports none of
them, as the dimension registry (:mod:`pytest_faultloop.scoring.dimensions`) that they read
imports the rules from here.
"""

from pytest_faultloop.scoring.judges.judge import Judge, JudgeCase, JudgeError

__all__ = ["Judge", "JudgeCase", "JudgeError"]
