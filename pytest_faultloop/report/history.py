"""The loop's memory: ``history.jsonl``, finding earlier records and the seed's stop condition."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pytest_faultloop.models import BrokenKind, ExperimentResult
from pytest_faultloop.models.schema_version import NewerSchema, refuse_newer
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE, PassRule, scored_verdict

HISTORY_FILE = Path("fault_injection") / "history.jsonl"
HISTORY_SCHEMA_VERSION = 1
"""The record format this code writes and reads (and every earlier one)."""
MIXED = "+"
"""Joins the fingerprints of a record whose cells several analyzer versions scored."""


class Cell(BaseModel):
    """One experiment's outcome in a run: the verdict values, or why there are none."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    values: dict[str, str] = {}
    """Dimension -> verdict value; empty when the experiment was not scored."""
    broken: BrokenKind | None = None
    fingerprint: str | None = None
    """The analyzer version that scored it (records written before it existed: the
    record's)."""

    @property
    def scored(self) -> bool:
        return bool(self.values)


class HistoryRecord(BaseModel):
    """One line of ``history.jsonl``: a run of the loop."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = Field(default=HISTORY_SCHEMA_VERSION, ge=1)
    """The format it was stored in (:mod:`pytest_faultloop.models.schema_version`)."""
    session: str
    time: datetime
    fingerprint: str
    """What answered each stage and the policy, hashed (:mod:`pytest_faultloop.engine.fingerprint`);
    any string, so records of earlier compositions load. Cells scored by several versions
    (a session continued, or partly re-scored, with another analyzer): their fingerprints
    joined by ``+`` (:data:`MIXED`), each cell carrying its own."""
    cells: dict[str, Cell]
    """Experiment key (``FAULT:RANK:ITER:NODES``) -> outcome."""
    revision: str | None = None
    """A re-analysis: the session's revision it wrote (:mod:`pytest_faultloop.store.revisions`)."""
    rescored: str | None = None
    """A re-analysis: the session's revision it re-scored."""

    @model_validator(mode="before")
    @classmethod
    def _known_version(cls, data: object) -> object:
        return refuse_newer(data, HISTORY_SCHEMA_VERSION)


def history_path(base_dir: Path) -> Path:
    """``${BASE_EXPERIMENTS_DIR}/fault_injection/history.jsonl``."""
    return Path(base_dir) / HISTORY_FILE


def record_from_results(
    session: str,
    results: Sequence[ExperimentResult],
    *,
    time: datetime | None = None,
    revision: str | None = None,
    rescored: str | None = None,
) -> HistoryRecord:
    """The history record of a run (``time`` defaults to now, UTC), each cell with the
    fingerprint that scored it; a re-analysis names the revision it wrote and the one it
    re-scored."""
    cells = {}
    for result in results:
        verdict = scored_verdict(result)
        if verdict is None:
            cell = Cell(broken=result.broken or "judge_failed", fingerprint=result.fingerprint)
        else:
            values = {d: verdict.value(d) for d in DIMENSION_NAMES}
            cell = Cell(values=values, fingerprint=result.fingerprint)
        cells[result.experiment.key] = cell
    return HistoryRecord(
        session=session,
        time=time or datetime.now(UTC),
        fingerprint=MIXED.join(versions(cells.values())),
        cells=cells,
        revision=revision,
        rescored=rescored,
    )


def versions(cells: Iterable[Cell]) -> list[str]:
    """The analyzer versions that scored these cells, sorted (unscored cells count none)."""
    return sorted({c.fingerprint for c in cells if c.scored and c.fingerprint})


def append_history(path: Path, record: HistoryRecord) -> None:
    """Append ``record`` as one JSON line, creating the file and its directory if needed; a
    file cut short inside its last line gets the newline first (the record is never glued to
    the broken line, which stays as it was)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{path}.lock"), path.open("a+b") as out:
        out.seek(0, 2)
        if out.tell() > 0:
            out.seek(-1, 2)
            if out.read(1) != b"\n":
                out.write(b"\n")
        out.write(record.model_dump_json().encode() + b"\n")


def read_history(path: Path, *, unreadable: list[str] | None = None) -> list[HistoryRecord]:
    """All records in file order; an absent file is an empty history.

    A line that does not parse (a damaged disk's bytes that are not UTF-8 included), or that a
    newer pytest-faultloop wrote (its ``schema_version`` named), is skipped; when ``unreadable``
    is given, ``path:line: reason`` is appended to it for each.
    """
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(HistoryRecord.model_validate_json(line))
        except NewerSchema as exc:
            if unreadable is not None:
                unreadable.append(f"{path}:{number}: {exc}")
        except ValidationError as exc:
            if unreadable is not None:
                unreadable.append(f"{path}:{number}: {exc.errors()[0]['msg']}")
    return records


def find_record(history: Sequence[HistoryRecord], session: str) -> HistoryRecord | None:
    """The latest record of ``session``, matched by its full name or its last path component."""
    wanted = {session, Path(session).name}
    for record in reversed(history):
        if record.session in wanted or Path(record.session).name in wanted:
            return record
    return None


def records_before(history: Sequence[HistoryRecord], record: HistoryRecord) -> list[HistoryRecord]:
    """The records before the latest one equal to ``record`` (all of them when it is absent)."""
    for index in range(len(history) - 1, -1, -1):
        if history[index] == record:
            return list(history[:index])
    return list(history)


def previous_record(
    history: Sequence[HistoryRecord], current: HistoryRecord
) -> HistoryRecord | None:
    """The record just before ``current`` (``compare last``), whatever session it names: a
    re-analysis records the session it re-scored, so the previous record may share it."""
    earlier = records_before(history, current)
    return earlier[-1] if earlier else None


# --- Comparison ------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellChange:
    """One cell's dimension that changed between two runs (see ``report.paired``)."""

    cell: str
    dimension: str
    before: str
    after: str


# --- Stop condition --------------------------------------------------------------------------


@dataclass(frozen=True)
class StopCondition:
    met: bool
    fingerprints: tuple[str, ...]
    """The (at most two) latest consecutive analyzer fingerprints that were checked."""
    missing: tuple[str, ...]
    """What keeps the condition from holding, one line per gap."""

    def describe(self, limit: int = 3) -> str:
        """One line in plain words (the first ``limit`` gaps, then how many more)."""
        if self.met:
            first, second = self.fingerprints
            return (
                "stop condition met: every cell passed every dimension under two analyzer "
                f"versions in a row ({first}, then {second})"
            )
        gaps = list(self.missing[:limit])
        if len(self.missing) > limit:
            gaps.append(f"and {len(self.missing) - limit} more")
        versions = ""
        if len(self.fingerprints) == 2:
            versions = " under analyzer versions {} and {}".format(*self.fingerprints)
        return f"stop condition not met{versions}: {'; '.join(gaps)}"


def stop_condition(
    history: Sequence[HistoryRecord],
    rule: PassRule = DEFAULT_RULE,
    cells: Collection[str] | None = None,
) -> StopCondition:
    """Whether every cell passed every dimension under two consecutive, different fingerprints
    (analyzer versions).

    Consecutive runs with one fingerprint form one iteration (a targeted re-run adds to it); a
    run that scored nothing (every experiment broken) is no iteration. The cells checked are
    those of the last two iterations together, each needing a passing, scored run in both;
    ``cells`` (a run's own) limits the history to those cells, so runs of other pools or
    corpora in the same base directory neither count nor fill the gaps.
    """
    if cells is not None:
        wanted = set(cells)
        history = [
            r.model_copy(update={"cells": {k: c for k, c in r.cells.items() if k in wanted}})
            for r in history
        ]
    iterations = _iterations([r for r in history if any(c.scored for c in r.cells.values())])
    if len(iterations) < 2:
        needed = (
            f"only one analyzer version scored so far ({iterations[0][0]}); run again after "
            "changing an analyzer"
            if iterations
            else "no run has scored an experiment yet"
        )
        return StopCondition(False, tuple(fp for fp, _ in iterations), (needed,))
    last_two = iterations[-2:]
    keys = sorted({key for _, cells in last_two for key in cells})
    missing = [
        f"{key} {gap} under {fp}"
        for fp, cells in last_two
        for key in keys
        if (gap := _cell_gap(cells.get(key), rule))
    ]
    return StopCondition(not missing, tuple(fp for fp, _ in last_two), tuple(missing))


def _iterations(history: Sequence[HistoryRecord]) -> list[tuple[str, dict[str, Cell]]]:
    """Runs of consecutive records sharing a fingerprint, each with its cells merged; a cell
    counts only under the version that scored it.

    A record whose cells several versions scored is read as one group per version: the group
    of the latest iteration's version continues it; a group of an older version is results
    kept from earlier and recorded again (it revives no iteration); new versions follow. (A
    record of one version that went back to an older one is a new iteration, as ever.)
    """
    iterations: list[tuple[str, dict[str, Cell]]] = []
    for record in history:
        groups = _by_version(record)
        latest = iterations[-1][0] if iterations else None
        older = {fp for fp, _ in iterations[:-1]}
        for version in sorted(groups, key=lambda fp: (fp != latest, fp)):
            if len(groups) > 1 and version != latest and version in older:
                continue
            if not iterations or iterations[-1][0] != version:
                iterations.append((version, {}))
            merged = iterations[-1][1]
            for key, cell in groups[version].items():
                if cell.scored or not merged.get(key, Cell()).scored:
                    merged[key] = cell
    return iterations


def _by_version(record: HistoryRecord) -> dict[str, dict[str, Cell]]:
    """The record's cells by the version that scored them (a cell of an older record, or an
    unscored one without a fingerprint: the record's version where it has one)."""
    single = None if MIXED in record.fingerprint else record.fingerprint
    groups: dict[str, dict[str, Cell]] = {}
    for key, cell in record.cells.items():
        version = cell.fingerprint or single
        if version is not None:
            groups.setdefault(version, {})[key] = cell
    return groups


def _cell_gap(cell: Cell | None, rule: PassRule) -> str | None:
    if cell is None:
        return "not run"
    if not cell.scored:
        return f"not scored ({cell.broken})"
    failing = [f"{d}={v}" for d, v in cell.values.items() if rule.passes(d, v) is False]
    return "fails " + ", ".join(failing) if failing else None
