"""The LLM judge: the seed's ``score_attribution.py`` judge, over any OpenAI-compatible endpoint.

The prompt holds what the seed gives its judge: the ground truth (with the node and segment of
the rank), the expected restart decision and rationale, the filtered log tail, the analyzers'
outputs and the FR output, GPUS_PER_NODE and FR_SEGMENT_SIZE; the instructions say each
dimension's part (its registry entry's ``prompt``). After the LLM answers, a dimension scored
by rule only (fr_rank_correct, from the FR suspects) is recomputed; the LLM's own label is kept
in ``extra["llm_<dimension>"]`` when it differs.
"""

from __future__ import annotations

from pydantic import ConfigDict, SecretStr, field_validator

from pytest_faultloop.analyzers import five_field_text
from pytest_faultloop.analyzers.llm_client import LlmEndpoint, LlmError, TokenCount, ask_structured
from pytest_faultloop.models import (
    DimensionLabels,
    Verdict,
)
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES, DIMENSIONS
from pytest_faultloop.scoring.judges.judge import JudgeCase, JudgeError
from pytest_faultloop.scoring.restart_policy import RestartPolicy

JUDGE_SYSTEM_PROMPT = (
    """\
You judge a benchmark of failure-attribution tools for distributed training. A known fault
was injected into one rank of a training job; a log analyzer and a flight-recorder (FR)
analyzer then tried to attribute the failure. Compare their answers with the ground truth.

Answer with one JSON object and nothing else, with exactly these keys:
"""
    + "".join(f'- "{d.name}": {d.prompt}\n' for d in DIMENSIONS)
    + """\
- "notes": one sentence naming the main gap, or confirming that all is right.

When the ground truth lists several injected ranks or a lost node, score rank_primary and
rank_any as it says. For the NONE control (no fault injected) the expected answer is "no failure": rank_primary and
rank_any are true when no culprit rank is named, fault_described is true when no failure is
described, fr_rank_correct is "rank" when FR names no suspect.
"""
)


class LlmJudgeAnswer(DimensionLabels):
    """The LLM's raw answer; booleans and case variants are read as the label strings."""

    model_config = ConfigDict(extra="ignore")

    notes: str

    @field_validator(*DIMENSION_NAMES, mode="before")
    @classmethod
    def _label(cls, value: object) -> object:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):
            text = value.strip()
            return "N/A" if text.upper() in ("N/A", "NA") else text.lower()
        return value


class LlmJudge:
    name = "llm"

    def __init__(
        self,
        policy: RestartPolicy,
        model: str,
        base_url: str,
        api_key: SecretStr,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 1.0,
    ) -> None:
        self.policy = policy
        self.endpoint = LlmEndpoint(model, base_url, api_key, timeout, retries, backoff)

    def ask(self, case: JudgeCase, usage: TokenCount | None = None) -> LlmJudgeAnswer:
        """The LLM's answer as given (before the FR re-check); ``usage`` counts its cost."""
        case = case.resolved(self.policy)
        has_expectation = case.expected.decision is not None

        def check(answer: LlmJudgeAnswer) -> str | None:
            if (answer.restart_correct == "N/A") == has_expectation:
                want = "true or false" if has_expectation else "N/A"
                return f"restart_correct={answer.restart_correct!r}, expected {want}"
            return None

        try:
            return ask_structured(
                self.endpoint,
                JUDGE_SYSTEM_PROMPT,
                judge_prompt(case, self.policy),
                LlmJudgeAnswer,
                check,
                usage,
            )
        except LlmError as exc:
            raise JudgeError(
                f"LLM judge ({self.endpoint.model}): {exc.reason}", timed_out=exc.timed_out
            ) from None

    def judge(self, case: JudgeCase) -> Verdict:
        case = case.resolved(self.policy)
        usage = TokenCount()
        answer = self.ask(case, usage)
        by_rule = {d.name: d.score(case) for d in DIMENSIONS if d.rule_only}
        extra = {"model": self.endpoint.model}
        extra |= {f"llm_{n}": answer.value(n) for n, v in by_rule.items() if answer.value(n) != v}
        return Verdict.model_validate(
            {
                **answer.model_dump(),
                **by_rule,
                "judge": self.name,
                "expected_decision": case.expected.decision,
                "extra": extra,
                "usage": usage.usage(),
            }
        )


def ground_truth_text(case: JudgeCase) -> str:
    """The truth as the judge reads it: the injected fault and its scopes, or a case's sets."""
    truth, experiment = case.expected, case.experiment
    natures = ", ".join(n.value for n in truth.natures)
    neighbours = ", ".join(n.value for n in truth.neighbours) or "none"
    if experiment.case is None or experiment.case.truth is None:
        entry = experiment.entry
        assert entry is not None
        return (
            f"fault_type: {entry.fault.value} ({entry.fault.spec.group.value}; natures: "
            f"{natures}; neighbouring natures: {neighbours})\n"
            f"{_injected_ranks_text(case)}"
            f"iter: {entry.iter}\n"
            f"nodes: {entry.nodes} x {case.gpus_per_node} GPUs = "
            f"{entry.nodes * case.gpus_per_node} ranks"
        )
    incident = experiment.case
    if truth.culprit is None:
        culprit = "unknown (answer rank_primary and rank_any N/A)"
    elif not truth.culprit:
        culprit = "none: no single rank is the cause (rank_primary true when no rank is blamed)"
    else:
        culprit = ", ".join(map(str, truth.culprit)) + " (any of them is correct)"
    fr = "not scored (answer N/A)" if truth.fr_culprit is None else str(truth.fr_culprit)
    return (
        f"real incident: {incident.id} ({incident.source or 'no source'})\n"
        f"acceptable culprit ranks: {culprit}\n"
        f"acceptable natures: {natures}; neighbouring natures: {neighbours}\n"
        f"acceptable FR suspects: {fr}\n"
        f"world size: {incident.world_size or 'unknown'}"
    )


def _injected_ranks_text(case: JudgeCase) -> str:
    """The injected rank with its node and segment; for several ranks or a lost node, what
    naming them takes."""
    entry, truth = case.experiment.entry, case.expected
    assert entry is not None
    if truth.node_names_count:
        lines = [f"rank: {entry.rank_text}; its node's ranks and launcher were killed (node lost)"]
        lines += [
            f"node lost: {g[0] // case.gpus_per_node} (ranks {g[0]}-{g[-1]}); naming the node "
            "(index, nodeN or its hostname) or any of its ranks names it"
            for g in truth.groups
        ]
        if len(truth.groups) > 1:
            lines.append("rank_primary is true only when every lost node is named; rank_any: any")
        return "".join(line + "\n" for line in lines)
    several = len(entry.ranks) > 1
    lines = [
        f"ranks: {', '.join(map(str, entry.ranks))} (the fault was injected into each: "
        "rank_primary is true only when every one is named among the primary issues, partial "
        "when some are; rank_any is true when any is named)"
        if several
        else f"rank: {entry.rank}"
    ]
    for rank in entry.ranks:
        node, segment = case.node_block(rank), case.segment_block(rank)
        of = f"rank {rank}" if several else "the rank"
        lines.append(
            f"node of {of}: {rank // case.gpus_per_node} (ranks {node.start}-{node.stop - 1})"
        )
        lines.append(
            f"segment of {of}: {rank // case.segment_size} "
            f"(ranks {segment.start}-{segment.stop - 1})"
        )
    return "".join(line + "\n" for line in lines)


def judge_prompt(case: JudgeCase, policy: RestartPolicy) -> str:
    """The user message: ground truth, expectation, analyzers' outputs, FR output, log tail."""
    case = case.resolved(policy)
    truth = case.expected
    expected = (
        f"{truth.decision.value} - {truth.rationale}".rstrip(" -")
        if truth.decision
        else "none (answer restart_correct N/A)"
    )
    fr = case.fr_analysis
    fr_json = fr.model_dump_json(include={"suspects", "groups", "dumps_read", "unreadable"})
    return f"""\
## Ground truth
{ground_truth_text(case)}
GPUS_PER_NODE: {case.gpus_per_node}
FR_SEGMENT_SIZE: {case.segment_size}

## Expected restart decision
{expected}

## Log analyzer output ({case.log_analysis.analyzer})
{case.log_analysis.raw_output or five_field_text(case.log_analysis)}

## Log analyzer output as JSON
{case.log_analysis.model_dump_json(exclude={"raw_output", "usage"})}

## FR analyzer output ({fr.analyzer})
{fr.raw_output or fr.table or "(no table)"}

## FR analyzer output as JSON
{fr_json}

## Filtered log, last lines
{case.log_tail or "(empty)"}
"""
