"""Parsers for external analyzers' output, written from their documented formats.

Log analyzers: the seed's five-field logsage text, the restart-agent JSON
(``restart_agent_response.v1``) and our own ``analyze-log --json``. FR analyzers: the nvrx table
(``PGID | Process Group Desc | Op Type | Size | Dtype | Missing Ranks``), torchfrtrace's report
(``missing ranks: {1}``) and our own ``analyze-fr --json``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from pytest_faultloop.analyzers.failure import AnalyzerError
from pytest_faultloop.analyzers.log.text_forms import CHECKPOINT_LABEL, attribution_text
from pytest_faultloop.models import Decision, FrAnalysis, FrGroup, Issue, LogAnalysis
from pytest_faultloop.models.faults import Nature

_NATURE_WORDS: tuple[tuple[Nature, str], ...] = (
    (
        Nature.GPU_ERROR,
        r"cuda error|gpu (?:error|fault)|\becc\b|\bxid\b|illegal memory|fallen off the bus",
    ),
    (Nature.SCHEDULER, r"slurm|time ?limit|preempt|node fail|scheduler"),
    (Nature.HANG, r"hang|hung|stuck|timeout|timed out|deadlock|stall|sigstop"),
    (
        Nature.CRASH,
        r"crash|segfault|segmentation|sigsegv|sigkill|killed|abort|core dump|oom",
    ),
    (Nature.SIGNAL, r"signal|sigterm|sigint|interrupt|terminat"),
    (Nature.EXCEPTION, r"exception|error|traceback|raise"),
    (Nature.NETWORK, r"network|nccl|connection|socket|infiniband"),
)
_RANK_WORD = re.compile(r"\branks?\s*[:#=]?\s*\[?(\d+(?:\s*(?:,|and)\s*\d+)*)", re.IGNORECASE)
_CHECKPOINT_FLAGS = {
    "True": True,
    "False": False,
    f"{CHECKPOINT_LABEL} yes": True,
    f"{CHECKPOINT_LABEL} no": False,
}
"""The five-field text's last field: logsage's bare flag, or ours labelled."""
_VOCABULARY = (
    "STOP - DONT RESTART IMMEDIATE",
    "RESTART IMMEDIATE",
    "ERRORS NOT FOUND",
    "LLM FAILURE",
    "NO LOGS",
)


def nature_from_words(text: str) -> Nature:
    lowered = text.lower()
    for nature, words in _NATURE_WORDS:
        if re.search(words, lowered):
            return nature
    return Nature.NONE


def ranks_in(text: str) -> list[int]:
    """Ranks a free-text attribution names: ``rank 3``, ``ranks 1, 2``, ``Rank: [4]``."""
    found: list[int] = []
    for match in _RANK_WORD.finditer(text):
        found.extend(int(r) for r in re.findall(r"\d+", match.group(1)) if int(r) not in found)
    return found


# --- log analyzers -----------------------------------------------------------------------------


def parse_log_output(text: str, analyzer: str) -> LogAnalysis:
    """Whichever documented format the output is in; AnalyzerError when none fits."""
    data = _json_object(text)
    if data is not None:
        if "decision_text" in data and "primary" in data:
            return _own_log_json(data, analyzer, text)
        if "decision" in data:
            return _restart_agent(data, analyzer, text)
    lines = [line.strip() for line in text.splitlines()]
    for index, line in enumerate(lines):
        if line in _VOCABULARY:
            return _five_field(lines[index:], analyzer, text)
    raise AnalyzerError(
        "unrecognised log-analyzer output (expected logsage's five fields or a JSON object with "
        f"'decision'): {text.strip()[:200]!r}"
    )


def _json_object(text: str) -> dict[str, Any] | None:
    stripped = text.strip()
    candidates = [stripped] + [stripped[m.start() :] for m in re.finditer(r"(?m)^\{", stripped)]
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            return data
    return None


def _own_log_json(data: dict[str, Any], analyzer: str, text: str) -> LogAnalysis:
    try:
        analysis = LogAnalysis.model_validate({**data, "analyzer": analyzer, "raw_output": text})
    except ValidationError as exc:
        raise AnalyzerError(f"analyze-log JSON does not fit: {exc.errors()[0]['msg']}") from None
    return analysis


def _restart_agent(data: dict[str, Any], analyzer: str, text: str) -> LogAnalysis:
    decision = Decision.from_text(str(data.get("decision", ""))) or Decision.UNKNOWN
    primary = [_agent_issue(data.get("primary_failure"))] if data.get("primary_failure") else []
    secondary = [_agent_issue(item) for item in data.get("secondary_failures") or []]
    return LogAnalysis(
        analyzer=analyzer,
        decision=decision,
        decision_text=decision.text if decision is not Decision.UNKNOWN else str(data["decision"]),
        explanation=str(data.get("decision_basis") or data.get("explanation") or ""),
        primary=primary,
        secondary=secondary,
        attribution_text=attribution_text(primary, secondary),
        raw_output=text,
    )


def _agent_issue(item: object) -> Issue:
    if not isinstance(item, dict):
        return Issue(summary=str(item), nature=nature_from_words(str(item)))
    rank = str(item.get("rank", "")).strip()
    words = " ".join(
        str(item.get(k, "")) for k in ("failure_class", "description", "summary", "evidence")
    )
    node = item.get("node") or item.get("host")
    return Issue(
        rank=int(rank) if rank.isdigit() else None,
        node=str(node) if node else None,
        nature=nature_from_words(words),
        summary=" ".join(words.split())[:300],
    )


def _five_field(lines: list[str], analyzer: str, text: str) -> LogAnalysis:
    decision_text = lines[0]
    rest = [line for line in lines[1:] if line]
    attribution = next((line for line in rest if line.startswith("Attribution:")), "")
    explanation = rest[0] if rest and rest[0] != attribution else ""
    flags = [_CHECKPOINT_FLAGS[line] for line in rest if line in _CHECKPOINT_FLAGS]
    body = attribution.removeprefix("Attribution:").strip()
    first, _, second = body.partition("Secondary issues:")
    primary = _text_issues(first.replace("Primary issues:", "").strip(" ,"))
    secondary = _text_issues(second.strip())
    decision = Decision.from_text(decision_text) or Decision.UNKNOWN
    return LogAnalysis(
        analyzer=analyzer,
        decision=decision,
        decision_text=decision_text,
        explanation=explanation,
        primary=primary,
        secondary=secondary,
        attribution_text=body,
        checkpoint_saved=flags[-1] if flags else None,
        raw_output=text,
    )


def _text_issues(text: str) -> list[Issue]:
    inner = text.strip().strip("[]").strip()
    if not inner:
        return []
    nature = nature_from_words(inner)
    ranks = ranks_in(inner)
    if not ranks:
        return [Issue(nature=nature, summary=inner)]
    return [Issue(rank=rank, nature=nature, summary=inner) for rank in ranks]


# --- FR analyzers ------------------------------------------------------------------------------

_FR_HEADER = re.compile(r"PGID\s*\|.*Missing Ranks", re.IGNORECASE)
_TRACE_FIELD = re.compile(r"^(group info|collective|missing ranks|world size|input sizes): (.*)$")
_NO_DUMPS = re.compile(
    r"(?:missed FR dumps from ranks|Missing dump files from ranks) \(?\{([\d, ]+)\}"
)


def parse_fr_output(text: str, analyzer: str, dumps_found: int) -> FrAnalysis:
    """Whichever documented format the output is in; empty output means nothing diverged."""
    data = _json_object(text)
    if data is not None and "suspects" in data:
        try:
            return FrAnalysis.model_validate({**data, "analyzer": analyzer, "raw_output": text})
        except ValidationError as exc:
            raise AnalyzerError(f"analyze-fr JSON does not fit: {exc.errors()[0]['msg']}") from None
    groups = _fr_table_rows(text) or _torchfrtrace_groups(text)
    without_dump = sorted(
        {int(r) for m in _NO_DUMPS.finditer(text) for r in re.findall(r"\d+", m.group(1))}
    )
    if not groups and not without_dump and text.strip() and "Traceback" in text:
        raise AnalyzerError(f"FR analyzer failed: {text.strip().splitlines()[-1][:200]}")
    groups = mark_collateral(groups)
    suspects = {r for g in groups if g.culprit for r in g.missing_ranks} | set(without_dump)
    return FrAnalysis(
        analyzer=analyzer,
        suspects=sorted(suspects),
        groups=groups,
        dumps_read=dumps_found,
        table=text.strip(),
        raw_output=text,
    )


def _fr_table_rows(text: str) -> list[FrGroup]:
    rows: list[FrGroup] = []
    in_table = False
    for line in text.splitlines():
        if _FR_HEADER.search(line):
            in_table = True
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not in_table or len(cells) != 6 or set(line.strip()) <= set("-+| "):
            continue
        pg, desc, op, size, dtype, missing = cells
        ranks = [int(r) for r in re.findall(r"\d+", missing)]
        rows.append(
            FrGroup(
                pg_id=pg,
                name=pg,
                desc=desc,
                op=op,
                size=size,
                dtype=dtype,
                missing_ranks=ranks,
            )
        )
    return rows


def _torchfrtrace_groups(text: str) -> list[FrGroup]:
    groups: list[FrGroup] = []
    fields: dict[str, str] = {}
    for line in [*text.splitlines(), "collective stack trace:"]:
        if line.startswith(
            (
                "Not all ranks joining",
                "Collective sequence number",
                "collective stack trace",
            )
        ):
            if "missing ranks" in fields:
                groups.append(_trace_group(fields))
            fields = {}
        elif match := _TRACE_FIELD.match(line.strip()):
            fields[match.group(1)] = match.group(2).strip()
    return groups


def _trace_group(fields: dict[str, str]) -> FrGroup:
    name, _, desc = fields.get("group info", "").partition(":")
    dtype = re.findall(r"'?(\w+)'?", fields.get("input dtypes", ""))
    return FrGroup(
        pg_id=name,
        name=name,
        desc=desc,
        op=fields.get("collective", ""),
        size=fields.get("world size", ""),
        dtype=dtype[0] if dtype else "",
        missing_ranks=sorted(int(r) for r in re.findall(r"\d+", fields["missing ranks"])),
    )


def mark_collateral(groups: list[FrGroup]) -> list[FrGroup]:
    """A group missing a strict superset of another group's missing ranks is only collateral."""
    sets = [frozenset(g.missing_ranks) for g in groups]
    return [
        g.model_copy(update={"culprit": bool(s) and not any(o and o < s for o in sets)})
        for g, s in zip(groups, sets, strict=False)
    ]
