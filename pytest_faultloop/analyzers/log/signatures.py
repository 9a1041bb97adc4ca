"""The signature catalogue (``catalogue/*.toml``, one file per tool family): every message the log analyzer reads, as data.

Each entry names the tool and source file that print the message, the versions read, what the
line says happened (``kind``, or the ``handler`` of a scanner's reader for reports and context:
``readers.registry``), its
``role`` in a failure (origin, consequence, report, context) and how it names a rank. The
catalogue is loaded and compiled once per process (:func:`catalogue`); :func:`match_line` finds
a line's first matching entry and :func:`line_fact` turns the match into a
:class:`~pytest_faultloop.analyzers.log.line_facts.LineFact`.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, TypeAdapter, ValidationError

from pytest_faultloop.analyzers.log.exit_codes import described_signal, signal_name
from pytest_faultloop.analyzers.log.keyword_index import KeywordIndex
from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact
from pytest_faultloop.analyzers.log.line_memo import MEMO_LINES, by_line

CATALOGUE = Path(__file__).with_name("catalogue")
"""One ``*.toml`` file per tool family, read in name order (``010_terminate.toml`` ...); its
``README.md`` says what each field means."""
Role = Literal["origin", "consequence", "report", "context"]
ROLES: tuple[Role, ...] = ("origin", "consequence", "report", "context")
RANK_NAMING = ("own", "named", "field", "message", "local", "device", "peer", "none")
TAGS = {
    "traceback-line": "a traceback's header or frame: its exception line comes after it",
    "traceback-frame": "a traceback's frame: the scanner reads a window of lines after it "
    "whatever their words, for its exception line (the only entry another may follow)",
    "generic-exception": "an exception line read by its form alone, not by what it says",
    "step-cancelled": "Slurm cancelled the step with no reason (scancel's, or srun's teardown)",
    "shell-crash": "a shell's report of a process it started ending on a signal",
    "death-cause": "the death cause a Ray ActorDiedError ends with (it takes the error's place)",
    "group-restart": "torchrun's agent restarts its worker group (its next start: a new cycle)",
    "stall-warning": "Horovod's stall warning, which a stall list follows",
    "stall-inspector": "a line of Horovod's stall inspector (rank 0's thread: no rank's word)",
    "init-timeout": "a timeout of initialization: the group's members never all arrived",
    "membership-step": "an initialization step that says who arrived",
    "store-client": "a client that cannot reach the rendezvous store",
    "store-server": "the rendezvous store's server could not listen",
    "watchdog-teardown": "PyTorch's NCCL watchdog teardown, after a failure or a timeout",
    "preemption": "the entry every preemption handler's fact names (whichever line said it)",
}
"""What Python code may know of an entry: it tests tags (``tagged``), never entry ids."""
DETAIL_CHARS = 200
_REQUIRED = (
    "id",
    "tool",
    "source",
    "versions",
    "string",
    "example",
    "counter_examples",
    "keywords",
    "pattern",
)
_OPTIONAL = (
    "kind",
    "handler",
    "role",
    "rank",
    "detail",
    "signal",
    "named",
    "pid",
    "pg",
    "enqueued",
    "completed",
    "node",
    "extra",
    "requires",
    "follows",
    "before",
    "tags",
)
_FIELD = re.compile(r"\{(\w+)(?:\|(lower|last|signal))?\}")
_OPTIONAL_PART = re.compile(r"\[([^\[\]]*)\]")
_RANK_FIELD = re.compile(r"\brank=(\d+)")
_LINES = TypeAdapter(
    Annotated[
        list[Annotated[str, StringConstraints(min_length=1, strict=True)]], Field(min_length=1)
    ]
)
"""``counter_examples``: one or more lines, none empty."""
_IDS = TypeAdapter(list[Annotated[str, StringConstraints(min_length=1, strict=True)]])
"""``before``: entry ids."""


class CatalogueError(ValueError):
    """An entry of the signature catalogue is malformed (a defect of the package)."""


@dataclass(frozen=True)
class Signature:
    id: str
    tool: str
    source: str
    versions: str
    string: str
    example: str
    keywords: tuple[str, ...]
    pattern: re.Pattern[str]
    role: Role
    rank: str
    kind: Kind | None = None
    handler: str | None = None
    detail: str = "{0}"
    signal: str | None = None
    named: str | None = None
    groups: dict[str, str] = field(default_factory=dict)
    """Fact fields taken from the match: pid, pg, enqueued, completed (field -> group)."""
    node: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)
    counter_examples: tuple[str, ...] = ()
    """Lines the entry must not match: near misses (a neighbouring message of its tool, the
    same words in another sense or at another level, another version's wording)."""
    before: tuple[str, ...] = ()
    """The entries this one is tried before (both match some line; this one says it)."""
    requires: re.Pattern[str] | None = None
    """A second pattern the line must also match (what the main pattern cannot say)."""
    follows: str | None = None
    """The entry this one is read after, on the lines its scanner window covers (a
    traceback's exception line after its frames), never on any other line; such an entry
    may have no keywords (the scanner reads those lines whatever their words)."""
    tags: frozenset[str] = frozenset()
    """What the scanner and the rules need to know of the entry (``TAGS``)."""

    def search(self, content: str) -> re.Match[str] | None:
        if self.keywords and not any(k in content for k in self.keywords):
            return None
        return self.match_holding(content)

    def match_holding(self, content: str) -> re.Match[str] | None:
        """The entry's match on a line known to hold one of its keywords."""
        match = self.pattern.search(content)
        if match is None or (self.requires is not None and not self.requires.search(content)):
            return None
        return match


@cache
def catalogue() -> tuple[Signature, ...]:
    """The catalogue, in the order entries are tried (loaded once per process)."""
    return load_catalogue(CATALOGUE)


def load_catalogue(path: Path) -> tuple[Signature, ...]:
    """The entries of a catalogue (a directory of ``*.toml`` files, read in name order, or one
    file), in the order they are tried (:func:`tried_order`); CatalogueError naming the file,
    the entry and the fix for a malformed one."""
    files = sorted(path.glob("*.toml")) if path.is_dir() else [path]
    found: list[Signature] = []
    home: dict[str, Path] = {}
    """Each entry's file."""
    for file in files:
        for raw in tomllib.loads(file.read_text()).get("signature", []):
            entry = _entry(raw, file)
            if entry.id in home:
                also = "" if home[entry.id] == file else f" (and in {home[entry.id]})"
                raise CatalogueError(f"{file}: signature id {entry.id!r} appears twice{also}")
            home[entry.id] = file
            found.append(entry)
    entries = tuple(found)
    seen = set(home)
    followable = [e.id for e in entries if "traceback-frame" in e.tags]
    for entry in entries:
        file = home[entry.id]
        if entry.follows is not None and entry.follows not in followable:
            raise CatalogueError(
                f"{file}: signature {entry.id!r} follows {entry.follows!r}; the scanner "
                f"reads a window only after {', '.join(followable)} (tag traceback-frame)"
            )
        if not entry.keywords and entry.follows is None:
            raise CatalogueError(
                f"{file}: signature {entry.id!r} has no keywords: give some, or the "
                "entry it follows (only lines in that entry's window are read without them)"
            )
        for other in entry.before:
            if other not in seen or other == entry.id:
                raise CatalogueError(
                    f"{file}: signature {entry.id!r}: before = [... {other!r} ...] names "
                    f"{'the entry itself' if other == entry.id else 'no entry'}: give the "
                    "ids of the entries this one is tried before"
                )
    return tried_order(entries, path)


def tried_order(entries: Sequence[Signature], path: Path) -> tuple[Signature, ...]:
    """The entries in the order they are tried: each after every entry whose ``before``
    names it, otherwise in file order (entries between which no order is stated match no
    common line of the catalogue: a test checks it)."""
    waiting = {e.id: {o.id for o in entries if e.id in o.before} for e in entries}
    order: list[Signature] = []
    placed: set[str] = set()
    left = list(entries)
    while left:
        ready = next((e for e in left if waiting[e.id] <= placed), None)
        if ready is None:
            cycle = ", ".join(e.id for e in left if waiting[e.id] - placed)
            raise CatalogueError(
                f"{path}: the before lists of {cycle} go round in a circle: "
                "remove the one that is not meant"
            )
        order.append(ready)
        placed.add(ready.id)
        left.remove(ready)
    return tuple(order)


@cache
def by_id() -> dict[str, Signature]:
    return {s.id: s for s in catalogue()}


@cache
def tagged(tag: str) -> frozenset[str]:
    """The ids of the entries that carry ``tag`` (one of ``TAGS``)."""
    if tag not in TAGS:
        raise CatalogueError(f"tag {tag!r} is not one of signatures.TAGS: declare it there")
    return frozenset(s.id for s in catalogue() if tag in s.tags)


def tagged_entry(tag: str) -> Signature:
    """The one entry that carries ``tag``."""
    ids = tagged(tag)
    if len(ids) != 1:
        raise CatalogueError(f"{CATALOGUE}: tag {tag!r} is on {sorted(ids)}: give it to one entry")
    return by_id()[next(iter(ids))]


def match_line(
    content: str, after: Signature | None = None
) -> tuple[Signature, re.Match[str]] | None:
    """The first entry that matches a line (its wrappers peeled), with the match; ``after``:
    the first of the entries after that one (its handler declined the line). Only the entries
    whose keywords the line holds are tried (``KeywordIndex``)."""
    if after is None:
        return _first_match(content)
    places = _places()
    candidates = _keyword_index().holders(content)
    for signature in (s for s in candidates if places[s.id] > places[after.id]):
        if match := signature.match_holding(content):
            return signature, match
    return None


@by_line
def _first_match(content: str) -> tuple[Signature, re.Match[str]] | None:
    """``match_line`` without ``after``: what a line matches depends on its text alone."""
    for signature in _keyword_index().holders(content):
        if match := signature.match_holding(content):
            return signature, match
    return None


@cache
def _keyword_index() -> KeywordIndex[Signature]:
    """The entries ``match_line`` tries, by keyword; the catalogue's examples (real lines) say
    which characters are rare."""
    entries = [s for s in catalogue() if s.follows is None]
    return KeywordIndex([(s, s.keywords) for s in entries], _examples())


@cache
def _examples() -> str:
    """The catalogue's examples: real lines, whose characters say which are rare."""
    return "\n".join(s.example for s in catalogue())


@cache
def _places() -> dict[str, int]:
    """Each entry's place in the catalogue's order."""
    return {s.id: at for at, s in enumerate(catalogue())}


def match_follower(content: str, leader: str) -> tuple[Signature, re.Match[str]] | None:
    """The first entry read after ``leader`` that matches a line of its window."""
    for signature in _followers(leader):
        if match := signature.search(content):
            return signature, match
    return None


@cache
def _followers(leader: str) -> tuple[Signature, ...]:
    return tuple(s for s in catalogue() if s.follows == leader)


def classify(content: str) -> LineFact | None:
    """What a message says happened, from the first entry with a ``kind`` that matches it
    (handlers' reports and context are the scanner's; here they are skipped)."""
    for signature in _kinds().holders(content):
        if match := signature.match_holding(content):
            return line_fact(signature, match)
    return None


@cache
def _kinds() -> KeywordIndex[Signature]:
    """The entries ``classify`` tries, by keyword."""
    entries = [s for s in catalogue() if s.kind is not None and s.follows is None]
    return KeywordIndex([(s, s.keywords) for s in entries], _examples())


def line_fact(signature: Signature, match: re.Match[str], kind: Kind | None = None) -> LineFact:
    """What an entry's match says happened (entries with a ``kind``, or the ``kind`` given
    for a handler's entry): a fact of its own (callers change theirs), read once per
    distinct match (a repeated line's: its text and its groups' places say all it says)."""
    key = (signature.id, kind, match.string, match.regs)
    fact = _FACTS.get(key)
    if fact is None:
        if len(_FACTS) >= MEMO_LINES:
            _FACTS.clear()
        fact = _FACTS[key] = _line_fact(signature, match, kind)
    return LineFact(
        fact.kind,
        fact.detail,
        fact.rank,
        fact.node,
        fact.named,
        fact.signal_name,
        fact.pid,
        fact.pg,
        fact.enqueued,
        fact.completed,
        fact.by_launcher,
        dict(fact.extra),
        fact.role,
        fact.signature,
    )


_FACTS: dict[tuple[str, Kind | None, str, tuple[tuple[int, int], ...]], LineFact] = {}
"""``line_fact``'s reading of each match, never handed out (at most ``MEMO_LINES``)."""


def _line_fact(signature: Signature, match: re.Match[str], kind: Kind | None) -> LineFact:
    kind = kind or signature.kind
    assert kind is not None, signature.id
    groups = match.groupdict()
    numbers = {k: _number(groups.get(g)) for k, g in signature.groups.items() if k != "pg"}
    sig = _signal(render(signature.signal, match)) if signature.signal else None
    named = _named_ranks(groups.get(signature.named) or "") if signature.named else ()
    node = next((groups[g] for g in signature.node if groups.get(g)), None)
    pg_group = signature.groups.get("pg")
    return LineFact(
        kind,
        render(signature.detail, match)[:DETAIL_CHARS],
        node=node,
        named=named,
        signal_name=sig,
        pid=numbers.get("pid"),
        pg=groups.get(pg_group) if pg_group else None,
        enqueued=numbers.get("enqueued"),
        completed=numbers.get("completed"),
        extra={k: render(v, match) for k, v in signature.extra.items()},
        role=signature.role,
        signature=signature.id,
    )


def _named_ranks(text: str) -> tuple[int, ...]:
    """The ranks a list names: its numbers, or where it spells them ``rank=N`` (a dataclass's
    repr, ``{StragglerId(rank=6, node='node1')}``) those alone (a node's name has digits too)."""
    return tuple(int(r) for r in _RANK_FIELD.findall(text) or re.findall(r"\d+", text))


def render(template: str, match: re.Match[str]) -> str:
    """A detail template filled from a match: ``{group}``, ``{group|lower}``, ``{group|last}``
    (after the last dot), ``{group|signal}`` (a signal's name), ``{0}`` the whole match;
    ``[...]`` is dropped when a group inside it did not match."""

    def value(name: str, how: str | None) -> str | None:
        text = match.group(int(name) if name.isdigit() else name)
        if text is None:
            return None
        text = text.strip()
        if how == "lower":
            return text.lower()
        if how == "last":
            return text.rsplit(".", 1)[-1]
        return _signal(text) if how == "signal" else text

    def optional(part: re.Match[str]) -> str:
        inner = part[1]
        if any(value(n, h) is None for n, h in _FIELD.findall(inner)):
            return ""
        return inner

    filled = _OPTIONAL_PART.sub(optional, template)
    return _FIELD.sub(lambda f: value(f[1], f[2]) or "?", filled)


def _entry(raw: dict[str, Any], path: Path) -> Signature:
    name = raw.get("id", "?")
    where = f"{path}: signature {name!r}"
    unknown = set(raw) - set(_REQUIRED) - set(_OPTIONAL)
    missing = [k for k in _REQUIRED if k not in raw]
    if unknown or missing:
        raise CatalogueError(f"{where}: unknown keys {sorted(unknown)}, missing {missing}")
    if ("kind" in raw) == ("handler" in raw):
        raise CatalogueError(f"{where}: give exactly one of kind and handler")
    tags = raw.get("tags", [])
    if not isinstance(tags, list) or not set(tags) <= set(TAGS):
        known = ", ".join(TAGS)
        raise CatalogueError(f"{where}: tags {tags!r}: give a list of the known tags ({known})")
    role = raw.get("role")
    if role not in ROLES:
        raise CatalogueError(f"{where}: role {role!r} is not one of {ROLES}")
    if raw.get("rank") not in RANK_NAMING:
        raise CatalogueError(f"{where}: rank {raw.get('rank')!r} is not one of {RANK_NAMING}")
    try:
        pattern = re.compile(raw["pattern"])
        requires = re.compile(raw["requires"]) if "requires" in raw else None
        kind = Kind(raw["kind"]) if "kind" in raw else None
    except (re.error, ValueError) as exc:
        raise CatalogueError(f"{where}: {exc}") from None
    try:
        counter_examples = tuple(_LINES.validate_python(raw["counter_examples"]))
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"]
        raise CatalogueError(
            f"{where}: counter_examples must be a list of one or more lines the entry must not "
            f'match, e.g. counter_examples = ["..."] ({problem}: {raw["counter_examples"]!r})'
        ) from None
    try:
        before = tuple(_IDS.validate_python(raw.get("before", [])))
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"]
        raise CatalogueError(
            f"{where}: before must be a list of the ids of the entries this one is tried "
            f'before, e.g. before = ["tool.message"] ({problem}: {raw["before"]!r})'
        ) from None
    groups: dict[str, str] = {
        k: str(raw[k]) for k in ("pid", "pg", "enqueued", "completed") if k in raw
    }
    return Signature(
        id=name,
        tool=raw["tool"],
        source=raw["source"],
        versions=raw["versions"],
        string=raw["string"],
        example=raw["example"],
        counter_examples=counter_examples,
        before=before,
        keywords=tuple(raw["keywords"]),
        pattern=pattern,
        role=role,
        rank=raw["rank"],
        kind=kind,
        handler=raw.get("handler"),
        detail=raw.get("detail", "{0}"),
        signal=raw.get("signal"),
        named=raw.get("named"),
        groups=groups,
        node=tuple(raw.get("node", ())),
        extra=dict(raw.get("extra", {})),
        requires=requires,
        follows=raw.get("follows"),
        tags=frozenset(tags),
    )


def _number(text: str | None) -> int | None:
    return int(text) if text is not None and text.lstrip("-").isdigit() else None


def _signal(text: str) -> str:
    """A signal's name from a number (``15``), a name (``SIGTERM``, ``Signals.SIGTERM``) or
    strsignal's description (``Terminated``)."""
    text = text.rsplit(".", 1)[-1]
    return signal_name(int(text)) if text.isdigit() else described_signal(text) or text


def catalogue_table() -> list[str]:
    """The catalogue as a Markdown table: what a reviewer checks (tools, versions, roles)."""
    lines = [
        "| entry | tool | versions read | role | names a rank | what it says | source file |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in catalogue():
        says = s.kind.value if s.kind is not None else f"read by the scanner ({s.handler})"
        cells = (f"`{s.id}`", s.tool, s.versions, s.role, s.rank, says, s.source)
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return lines
