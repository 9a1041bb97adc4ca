"""The optional LLM log analyzer: the filtered log tail plus the built-in analyzer's evidence,
asked of any OpenAI-compatible endpoint, answered into the same ``LogAnalysis``.

A log with nothing to read gives ``NO LOGS`` without a call; an LLM that fails for good raises
``AnalyzerError`` (the experiment's items ERROR as ``analysis_failed``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator

from pytest_faultloop.analyzers.cause_policy import DEFAULT_POLICY
from pytest_faultloop.analyzers.failure import AnalyzerError
from pytest_faultloop.analyzers.llm_client import LlmEndpoint, LlmError, TokenCount, ask_structured
from pytest_faultloop.analyzers.log.harness_filter import filter_harness_lines
from pytest_faultloop.analyzers.log.no_logs import no_log_analysis
from pytest_faultloop.analyzers.log.reader import log_tail
from pytest_faultloop.analyzers.log.text_forms import attribution_text
from pytest_faultloop.models import Decision, Issue, LogAnalysis
from pytest_faultloop.models.faults import Nature

TAIL_LINES = 400

LOG_ANALYZER_SYSTEM_PROMPT = f"""\
You attribute failures of distributed (multi-node, multi-GPU) training jobs from their logs.
Find the root cause: which global rank failed first and how. Tell the culprit from its
victims: ranks that time out in a collective waiting for a peer, or that the launcher
SIGTERMs after another rank died, are victims. When every failure is a collective timeout,
the culprit is the rank that did not time out, went silent, or is behind in the watchdog
counters; a rank named by another rank's error ("check rank 0") counts.

Answer with one JSON object and nothing else:
{{"decision": "RESTART" | "STOP" | "CONTINUE",
  "explanation": "one or two sentences",
  "primary": [{{"rank": <global rank or null>, "node": <node name or index or null>,
               "nature": <nature>, "summary": "what happened"}}],
  "secondary": [<issues of the same shape: victims and consequences>],
  "checkpoint_saved": true | false | null}}
where <nature> is one of: {", ".join(n.value for n in Nature)}.

Decide by the nature of the root cause ({DEFAULT_POLICY.describe()}): restart for a
transient hang or an external signal, stop for a deterministic code error, a crash or a GPU
error, continue when nothing failed (then primary is empty and the nature is none).
"""


class LlmIssue(BaseModel):
    model_config = ConfigDict(extra="ignore")

    rank: int | None = None
    node: str | None = None
    nature: Nature = Nature.NONE
    summary: str = ""

    @field_validator("rank", mode="before")
    @classmethod
    def _rank(cls, value: object) -> object:
        """``3``, ``"3"`` and ``"rank 3"`` are rank 3; ``""`` and ``"unknown"`` are none."""
        if isinstance(value, str):
            digits = re.fullmatch(r"\s*(?:rank\s*)?(\d+)\s*", value, re.IGNORECASE)
            return int(digits[1]) if digits else None
        return value

    @field_validator("node", mode="before")
    @classmethod
    def _node(cls, value: object) -> object:
        return str(value) if isinstance(value, int) else value

    @field_validator("nature", mode="before")
    @classmethod
    def _nature(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value


class LlmLogAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    decision: Literal["RESTART", "STOP", "CONTINUE"]
    explanation: str = ""
    primary: list[LlmIssue] = []
    secondary: list[LlmIssue] = []
    checkpoint_saved: bool | None = None

    @field_validator("decision", mode="before")
    @classmethod
    def _decision(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value


def analyze_log_llm(
    path: Path,
    *,
    model: str,
    base_url: str,
    api_key: SecretStr,
    evidence: LogAnalysis | None,
    timeout: float = 120.0,
    retries: int = 3,
    backoff: float = 1.0,
) -> LogAnalysis:
    """Attribute the failure in ``path`` with an LLM; ``evidence`` is the built-in analysis."""
    analyzer = f"llm:{model}"
    try:
        tail = log_tail(Path(path), TAIL_LINES)
    except OSError as exc:
        return no_log_analysis(analyzer, f"{path}: cannot read the log: {exc.strerror or exc}")
    if not tail.strip():
        return no_log_analysis(analyzer, f"{path}: the log is empty")
    endpoint = LlmEndpoint(model, base_url, api_key, timeout, retries, backoff)
    usage = TokenCount()
    try:
        answer = ask_structured(
            endpoint,
            LOG_ANALYZER_SYSTEM_PROMPT,
            log_prompt(tail, evidence),
            LlmLogAnswer,
            usage=usage,
        )
    except LlmError as exc:
        raise AnalyzerError(
            f"LLM log analyzer ({model}): {exc.reason}", timed_out=exc.timed_out
        ) from None
    decision = Decision(answer.decision)
    primary = [Issue(**i.model_dump()) for i in answer.primary]
    secondary = [Issue(**i.model_dump()) for i in answer.secondary]
    return LogAnalysis(
        analyzer=analyzer,
        decision=decision,
        decision_text=decision.text,
        explanation=answer.explanation,
        primary=primary,
        secondary=secondary,
        attribution_text=attribution_text(primary, secondary),
        evidence=evidence.evidence if evidence else [],
        checkpoint_saved=answer.checkpoint_saved,
        usage=usage.usage(),
    )


def log_prompt(tail: str, evidence: LogAnalysis | None) -> str:
    """The user message: the built-in analyzer's findings, then the log's last lines."""
    parts = []
    if evidence is not None:
        lines = filter_harness_lines(f"  line {e.line}: {e.text}" for e in evidence.evidence)
        parts.append(
            f"## Findings of the rule-based analyzer ({evidence.analyzer}); may be wrong\n"
            f"decision: {evidence.decision_text}\n"
            f"explanation: {evidence.explanation}\n"
            f"attribution: {evidence.attribution_text}\n"
            "evidence:\n" + ("\n".join(lines) or "  (none)")
        )
    parts.append(f"## The log's last {TAIL_LINES} lines\n{tail}")
    return "\n\n".join(parts) + "\n"
