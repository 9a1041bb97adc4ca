"""Stored cases: one failure's artifacts and its ground truth, in a directory with ``case.toml``.

```
<corpus>/<case_id>/
  case.toml
  logs/...            one or more log files (*.log, *.out, *.err, *.txt)
  checkpoints/_dump_* optional flight-recorder dumps
  fault_injection.json  optional (a frozen injected run's marker)
```

``case.toml`` keys (anything else is refused with its line):

* ``id`` (default: the directory name), ``source`` (provenance; required for a real incident),
  ``notes``, ``split`` (``dev`` or ``test``: a real incident's side of the corpus split, fixed
  by its source thread, :mod:`pytest_faultloop.inputs.case_split`), ``launcher`` (what started the
  ranks, one of ``LAUNCHERS``: for the corpus's spread, and a breakdown by launcher);
* ``[job]``: ``world_size``, ``gpus_per_node``;
* ``[truth]``: ``culprit`` (acceptable culprit ranks; ``[]`` no single rank; omitted: unknown),
  ``nature`` (acceptable natures), ``decision`` (RESTART | STOP | CONTINUE), ``fr_culprit``
  (default: ``culprit``; scored only when dumps exist);
* ``[injected]``: ``fault_type``, ``rank`` (an integer, or a pool's rank list as a string:
  ``"12+14@3"``), ``iter``, ``nodes`` — a frozen injected run, whose truth comes from the same
  rules as a live experiment's (unless ``[truth]`` is given too).
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_faultloop.inputs.case_split import Split, split_of
from pytest_faultloop.models import Case, Decision, Experiment, PoolEntry, Truth
from pytest_faultloop.models.errors import FaultloopError
from pytest_faultloop.models.faults import FaultType, Nature
from pytest_faultloop.store.stored_files import LinkRefused, read_bytes, refuse_links_in
from pytest_faultloop.store.text_files import NotUtf8, read_utf8

CASE_FILE = "case.toml"
LOG_SUFFIXES = (".log", ".out", ".err", ".txt")
REPLAY_WORKLOAD = "replay"

_KEYS: dict[str, tuple[str, ...]] = {
    "": ("id", "source", "split", "launcher", "notes", "job", "truth", "injected"),
    "job": ("world_size", "gpus_per_node"),
    "truth": ("culprit", "nature", "decision", "fr_culprit"),
    "injected": ("fault_type", "rank", "iter", "nodes"),
}
LAUNCHERS = (
    "torchrun",
    "torch.distributed.launch",
    "mp.spawn",
    "deepspeed",
    "accelerate",
    "lightning",
    "horovodrun",
    "mpirun",
    "mpich",
    "srun",
    "ray",
    "kubernetes",
    "other",
)
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
"""A case id: a frozen run's directory name (``n2_SIGKILL_r1+6_i5``) or a name like it."""


class CaseError(FaultloopError):
    """A case directory or its ``case.toml`` is unusable."""


def load_case(
    directory: Path,
    corpus: str,
    *,
    default_gpus_per_node: int,
    priority: int = 0,
    display: str | None = None,
) -> Experiment:
    """The experiment that replays the case in ``directory``; raises :class:`CaseError` naming
    the file, line and key at fault, or the first symbolic link in it (a case is read as
    itself: a corpus is meant to be shared, a link would carry what it points to along)."""
    path = directory / CASE_FILE
    shown = display or str(path)
    try:
        refuse_links_in(directory)
    except LinkRefused as exc:
        raise CaseError(str(exc)) from None
    try:
        text = read_utf8(path)
        data = tomllib.loads(text)
    except OSError as exc:
        raise CaseError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    except NotUtf8 as exc:
        raise CaseError(f"{shown}:{exc.line}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CaseError(f"{shown}: not valid TOML: {exc}") from None
    reader = _Reader(shown, text, data)
    reader.check_keys()
    case_id = reader.string("", "id") or directory.name
    if not _ID.fullmatch(case_id):
        raise CaseError(
            f"{reader.where('', 'id')}: id {case_id!r} must be letters, digits, '_', '.', '+' or '-'"
        )
    job = reader.table("job")
    world = reader.integer("job", "world_size", job, minimum=1)
    gpus = reader.integer("job", "gpus_per_node", job, minimum=1) or default_gpus_per_node
    entry = reader.injected()
    truth = reader.truth(world)
    if entry is None and truth is None:
        raise CaseError(
            f"{shown}: no [truth] and no [injected] table: a case needs its "
            "ground truth (add [truth] with at least nature = [...])"
        )
    source = reader.string("", "source") or ""
    if entry is None and not source:
        raise CaseError(
            f"{shown}: 'source' is required for a real incident (the URL or place "
            "the log was copied from)"
        )
    split = reader.split(source)
    launcher = reader.string("", "launcher")
    if launcher is not None and launcher not in LAUNCHERS:
        raise CaseError(
            f"{reader.where('', 'launcher')}: unknown launcher {launcher!r} "
            f"(one of: {', '.join(LAUNCHERS)})"
        )
    logs = _logs(directory, shown)
    dumps = directory / "checkpoints"
    if dumps.exists() and not dumps.is_dir():
        raise CaseError(f"{dumps}: not a directory (flight-recorder dumps go in checkpoints/)")
    has_dumps = dumps.is_dir() and any(dumps.iterdir())
    if truth is not None and not has_dumps:
        truth = truth.model_copy(update={"fr_culprit": None})
    if world is None and entry is not None:
        world = entry.nodes * gpus
    case = Case(
        id=case_id,
        directory=directory,
        corpus=corpus,
        source=source,
        notes=reader.string("", "notes") or "",
        split=split,
        launcher=launcher,
        logs=logs,
        world_size=world,
        truth=truth,
    )
    return Experiment(
        entry=entry,
        case=case,
        workload=REPLAY_WORKLOAD,
        gpus_per_node=gpus,
        pool=corpus,
        source=shown,
        line=1,
        priority=priority,
    )


def _logs(directory: Path, shown: str) -> list[Path]:
    folder = directory / "logs"
    try:
        logs = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in LOG_SUFFIXES)
    except OSError as exc:
        raise CaseError(f"{folder}: cannot read: {exc.strerror or exc}") from None
    if not logs:
        raise CaseError(
            f"{shown}: no log: put the log file(s) under {folder} "
            f"(names ending {', '.join(LOG_SUFFIXES)})"
        )
    return logs


class _Reader:
    """Typed access to the parsed TOML, with ``file:line: key`` in every message."""

    def __init__(self, shown: str, text: str, data: dict[str, Any]) -> None:
        self.shown, self.lines, self.data = shown, text.splitlines(), data

    def where(self, table: str, key: str) -> str:
        current = ""
        for number, line in enumerate(self.lines, start=1):
            stripped = line.strip()
            if not table and re.match(rf"\[\s*{re.escape(key)}\s*\]", stripped):
                return f"{self.shown}:{number}"
            if stripped.startswith("[") and not stripped.startswith("[["):
                current = stripped.strip("[]").strip()
            elif current == table and re.match(rf"{re.escape(key)}\s*=", stripped):
                return f"{self.shown}:{number}"
        return self.shown

    def check_keys(self) -> None:
        for table, allowed in _KEYS.items():
            values = self.data if not table else self.data.get(table, {})
            if not isinstance(values, dict):
                raise CaseError(f"{self.where('', table)}: [{table}] must be a table")
            for key in values:
                if key not in allowed:
                    place = f"[{table}]" if table else "the top level"
                    raise CaseError(
                        f"{self.where(table, key)}: unknown key {key!r} in {place} "
                        f"(allowed: {', '.join(allowed)})"
                    )

    def split(self, source: str) -> Split | None:
        """The recorded split, which must be the one the source thread's hash gives."""
        value = self.string("", "split")
        if value is None:
            return None
        if not source:
            raise CaseError(f"{self.where('', 'split')}: split needs a 'source' to be fixed by")
        expected = split_of(source)
        if value != expected:
            raise CaseError(
                f"{self.where('', 'split')}: split {value!r} is not the one its source thread "
                f"gives: write split = {expected!r} (the split follows the thread, never the case)"
            )
        return expected

    def table(self, name: str) -> Mapping[str, Any]:
        value = self.data.get(name, {})
        return value if isinstance(value, dict) else {}

    def string(self, table: str, key: str) -> str | None:
        value = (self.data if not table else self.table(table)).get(key)
        if value is not None and not isinstance(value, str):
            raise CaseError(f"{self.where(table, key)}: {key} must be a string")
        return value

    def integer(
        self, table: str, key: str, values: Mapping[str, Any], *, minimum: int
    ) -> int | None:
        value = values.get(key)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise CaseError(
                f"{self.where(table, key)}: {key} must be an integer >= {minimum}, not {value!r}"
            )
        return value

    def ranks(
        self, table: str, key: str, values: Mapping[str, Any], world: int | None
    ) -> list[int] | None:
        value = values.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(
            isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in value
        ):
            raise CaseError(
                f"{self.where(table, key)}: {key} must be a list of global ranks "
                f"(non-negative integers; [] for no single rank), not {value!r}"
            )
        if world is not None and any(r >= world for r in value):
            raise CaseError(
                f"{self.where(table, key)}: {key} {value} lies outside the job's "
                f"{world} ranks ([job] world_size)"
            )
        return sorted(set(value))

    def truth(self, world: int | None) -> Truth | None:
        if "truth" not in self.data:
            return None
        values = self.table("truth")
        natures = values.get("nature")
        valid = ", ".join(n.value for n in Nature)
        if natures is None:
            raise CaseError(
                f"{self.where('', 'truth')}: [truth] needs nature = [...] (one or more of: {valid})"
            )
        if isinstance(natures, str):
            natures = [natures]
        if not isinstance(natures, list) or not natures:
            raise CaseError(
                f"{self.where('truth', 'nature')}: nature must be a non-empty list of: {valid}"
            )
        try:
            parsed = [Nature(n) for n in natures]
        except ValueError:
            bad = next(n for n in natures if n not in {m.value for m in Nature})
            raise CaseError(
                f"{self.where('truth', 'nature')}: unknown nature {bad!r} (valid: {valid})"
            ) from None
        decision = values.get("decision")
        allowed = ("RESTART", "STOP", "CONTINUE")
        if decision is not None and decision not in allowed:
            raise CaseError(
                f"{self.where('truth', 'decision')}: decision {decision!r} must be "
                f"one of {', '.join(allowed)}"
            )
        culprit = self.ranks("truth", "culprit", values, world)
        fr_culprit = self.ranks("truth", "fr_culprit", values, world)
        return Truth(
            culprit=culprit,
            natures=parsed,
            decision=Decision(decision) if decision else None,
            fr_culprit=fr_culprit if fr_culprit is not None else culprit,
        )

    def injected(self) -> PoolEntry | None:
        if "injected" not in self.data:
            return None
        values = self.table("injected")
        missing = [k for k in _KEYS["injected"] if k not in values]
        if missing:
            raise CaseError(f"{self.where('', 'injected')}: [injected] needs {', '.join(missing)}")
        fault = values["fault_type"]
        if fault not in {f.value for f in FaultType}:
            valid = ", ".join(f.value for f in FaultType)
            raise CaseError(
                f"{self.where('injected', 'fault_type')}: unknown fault type "
                f"{fault!r} (valid: {valid})"
            )
        ranks = values["rank"]
        if not isinstance(ranks, str):
            ranks = str(self.integer("injected", "rank", values, minimum=0))
        numbers = {
            k: self.integer("injected", k, values, minimum=1 if k == "nodes" else 0)
            for k in ("iter", "nodes")
        }
        try:
            return PoolEntry.of(
                FaultType(fault), ranks, numbers["iter"] or 0, numbers["nodes"] or 1
            )
        except ValueError as exc:
            raise CaseError(f"{self.where('injected', 'rank')}: {exc}") from None


def joined_logs(logs: Sequence[Path], directory: Path) -> Path:
    """A case's several logs as one file, ``joined.log`` in ``directory`` (in the given
    order), for analyzers that read one; as private as the most private of them."""
    joined = directory / "joined.log"
    with joined.open("wb") as out:
        mode = stat.S_IMODE(os.fstat(out.fileno()).st_mode)
        for log in logs:
            data = read_bytes(log)
            out.write(data if data.endswith(b"\n") or not data else data + b"\n")
            mode &= stat.S_IMODE(log.stat().st_mode)
        os.fchmod(out.fileno(), mode | stat.S_IRUSR | stat.S_IWUSR)
    return joined
