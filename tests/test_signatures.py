"""The signature catalogue: every entry reads its tool's own line (the example, the format
string filled in), the scanner's keyword filter lets every entry's lines through, and the
catalogue is well-formed data loaded once per process."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_log
from pytest_faultloop.analyzers.log import keyword_filter, signatures
from pytest_faultloop.analyzers.log.line_wrappers import peel_line
from pytest_faultloop.analyzers.log.readers.registry import READERS, check_handlers, owners
from pytest_faultloop.analyzers.log.scan import LogScanner
from pytest_faultloop.analyzers.log.signatures import (
    ROLES,
    TAGS,
    CatalogueError,
    Signature,
    catalogue,
    classify,
    line_fact,
    load_catalogue,
    match_follower,
    match_line,
    render,
    tagged,
    tagged_entry,
)
from pytest_faultloop.models.faults import Nature

ENTRIES = catalogue()


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_each_entry_reads_its_tools_line_and_no_entry_tried_before_takes_it(entry) -> None:  # type: ignore[no-untyped-def]
    content = peel_line(entry.example).content
    # an entry read after another one (a traceback's exception line) is read on that one's
    # window only, where no other entry took the line
    if entry.follows is not None:
        assert match_line(content) is None, f"{entry.id}: another entry takes its example"
    found = match_follower(content, entry.follows) if entry.follows else match_line(content)
    assert found is not None, f"{entry.id}: its example is read by no entry"
    assert found[0].id == entry.id, (
        f"{entry.id} is dead: its example is taken by {found[0].id} (if {entry.id} is the "
        f"narrower, state it: before = [{found[0].id!r}] in {entry.id})"
    )
    if entry.kind is not None:
        fact = line_fact(*found)
        assert fact.kind is entry.kind
        assert fact.role == entry.role and fact.signature == entry.id
        assert "?" not in fact.detail, f"{entry.id}: a detail group did not match: {fact.detail}"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_the_scanners_keyword_filter_lets_every_entrys_line_through(entry) -> None:  # type: ignore[no-untyped-def]
    if entry.follows is None:  # the scanner reads a follower's window whatever its words
        assert keyword_filter.KEYWORDS.contains(entry.example)


def test_every_entry_names_its_source_versions_role_and_rank_naming() -> None:
    for entry in ENTRIES:
        assert entry.tool and entry.source and entry.versions and entry.string, entry.id
        assert entry.role in ROLES
        assert (entry.kind is None) != (entry.handler is None), entry.id
        assert entry.handler is None or entry.handler in owners()
        keyword = any(k in entry.example for k in entry.keywords)
        assert keyword or entry.follows is not None, f"{entry.id}: no keyword"


def _tried_in_order(content: str, after: Signature | None = None) -> tuple[str, str] | None:
    """``match_line`` as a plain walk of the catalogue: each entry's keywords, then its pattern."""
    start = ENTRIES.index(after) + 1 if after is not None else 0
    for entry in ENTRIES[start:]:
        if entry.follows is None and (match := entry.search(content)):
            return entry.id, match[0]
    return None


def _found(found: tuple[Signature, re.Match[str]] | None) -> tuple[str, str] | None:
    return (found[0].id, found[1][0]) if found is not None else None


def test_match_line_finds_what_a_walk_of_the_catalogue_finds() -> None:
    """Every example, alone, behind wrappers and beside another entry's (a line holding two
    entries' keywords), and read on past each entry found (a handler that declines): the
    entry and match a walk of the whole catalogue in order gives."""
    examples = [peel_line(e.example).content for e in ENTRIES]
    lines = [
        *examples,
        *(f"[rank3]: 2026-11-29 10:00:00 INFO {e}" for e in examples),
        *(f"{a} | {b}" for a, b in zip(examples, examples[7:] + examples[:7], strict=True)),
    ]
    for line in lines:
        found = match_line(line)
        assert _found(found) == _tried_in_order(line), line
        while found is not None:
            after = found[0]
            found = match_line(line, after=after)
            assert _found(found) == _tried_in_order(line, after=after), (line, after.id)


class _CountedTests(str):
    """A line that counts the substring tests made on it."""

    tests = 0

    def __contains__(self, key: object) -> bool:
        _CountedTests.tests += 1
        return str.__contains__(self, key)  # type: ignore[operator]


def test_classify_finds_what_a_walk_of_the_catalogue_finds() -> None:
    """The first entry with a kind (handlers' entries skipped) whose keyword and pattern the
    line holds, as a walk of the catalogue in order finds it."""
    kinds = [e for e in ENTRIES if e.kind is not None and e.follows is None]
    examples = [peel_line(e.example).content for e in ENTRIES]
    for line in [*examples, *(f"{a} | {b}" for a, b in zip(examples, examples[3:], strict=False))]:
        walked = next((e.id for e in kinds if e.search(line)), None)
        fact = classify(line)
        assert (fact.signature if fact is not None else None) == walked, line


@pytest.mark.parametrize("read", [match_line, classify], ids=["match_line", "classify"])
def test_a_line_is_not_tested_for_every_keyword_of_the_catalogue(
    read: Callable[[str], object],
) -> None:
    """Issue 44, item 16: every line that holds a keyword (a log made of membership lines:
    each of them) was tested for all of the catalogue's 270 keywords, 190 entries one by one
    (0.6 MB/s); a failure table's fields, for those of the 130 entries with a kind. A keyword
    is tested only where the line holds its rarest character."""
    keywords = {k for e in ENTRIES for k in e.keywords}
    line = (
        "INFO:torch.distributed.distributed_c10d:Added key: store_based_barrier_key:1 to "
        "store for rank: 3"
    )
    _CountedTests.tests = 0
    read(_CountedTests(line))
    assert _CountedTests.tests < len(keywords) / 4


def test_each_reader_has_a_method_for_every_handler_it_declares() -> None:
    for reader in READERS:
        for handler in reader.HANDLERS:
            assert callable(getattr(reader, f"on_{handler}", None)), (reader, handler)


def test_the_scanner_dispatches_every_handler_of_every_reader(tmp_path: Path) -> None:
    assert set(LogScanner(tmp_path / "a.log").handlers) == set(owners())


def test_the_catalogue_loads_once_per_process() -> None:
    assert catalogue() is catalogue()
    assert catalogue.cache_info().misses <= 1


@pytest.mark.parametrize(
    ("line", "entry", "rank_or_detail"),
    [
        # PyTorch 1.x and 2.x watchdog wording, with the Timeout(ms)=... field inside WorkNCCL(...)
        (
            "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
            "OpType=BROADCAST, Timeout(ms)=1800000) ran for 1808493 milliseconds before timing out.",
            "nccl.watchdog_timeout",
            "NCCL BROADCAST (SeqNum=9) timed out after 1808493 ms",
        ),
        (
            "[PG ID 0 PG GUID 0(default_pg) Rank 3] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) "
            "ran for 600026 milliseconds before timing out.",
            "nccl.watchdog_timeout",
            "NCCL ALLREDUCE (SeqNum=1) timed out after 600026 ms",
        ),
        # the OOM message before and after PyTorch 2.1 names the device differently
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has "
            "a total capacity of 79.15 GiB of which 1.75 MiB is free.",
            "cuda.out_of_memory",
            "OutOfMemoryError: CUDA out of memory on GPU 3",
        ),
        # the legacy launcher's CalledProcessError names the last command: no rank is taken
        (
            "subprocess.CalledProcessError: Command '['/usr/bin/python', '-u', 'main.py', "
            "'--local_rank=7']' died with <Signals.SIGSEGV: 11>.",
            "launch.died_with_signal",
            "SIGSEGV (a worker of the launcher; its line does not say which)",
        ),
        # std::terminate of the c10d watchdog's own exception is a consequence, not a crash
        (
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            "c10d.terminate_dist_error",
            "the c10d watchdog's exception ended the process (std::terminate)",
        ),
    ],
)
def test_wordings_across_versions(line: str, entry: str, rank_or_detail: str) -> None:
    found = match_line(line)
    assert found is not None and found[0].id == entry
    assert line_fact(*found).detail == rank_or_detail


def test_classify_skips_the_scanners_structural_entries() -> None:
    assert classify("Sending process 1853 closing signal SIGTERM") is None
    fact = classify("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert fact is not None and fact.signature == "cuda.error"


def test_templates_drop_optional_parts_whose_groups_did_not_match() -> None:
    match = re.search(r"(?P<a>x)(?P<b>y)?", "x")
    assert match is not None
    assert render("{a}[ and {b}]!", match) == "x!"
    assert render("{a|lower}{0}", re.search(r"(?P<a>X)", "X")) == "xX"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("what", "nature", "summary"),
    [
        ("std::bad_alloc", Nature.CRASH, "crashed: an uncaught C++ exception (c10::Error)"),
        (
            "CUDA error: uncorrectable NVLink error detected during the execution",
            Nature.GPU_ERROR,
            "CUDA error: uncorrectable NVLink error detected during the execution",
        ),
    ],
)
def test_an_uncaught_cxx_exception_is_what_its_what_line_says(
    what: str, nature: Nature, summary: str, tmp_path: Path
) -> None:
    """libstdc++ prints the type, then ``what():``: the message decides what ended the rank."""
    log = tmp_path / "a.log"
    log.write_text(
        "[rank3]: step 10\n"
        "terminate called after throwing an instance of 'c10::Error'\n"
        f"  what():  {what}\n"
    )
    analysis = analyze_log(log)
    assert analysis.primary[0].nature is nature
    assert analysis.primary[0].summary.startswith(summary)


def test_each_line_fact_is_the_callers_own() -> None:
    """Facts of one repeated line are read once, yet each caller may change its own."""
    line = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    found = match_line(line)
    assert found is not None
    first, again = line_fact(*found), line_fact(*found)
    assert first == again
    assert first is not again
    first.node = "n1"
    first.extra["stack"] = "changed"
    assert line_fact(*found) == again


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_each_entry_reads_none_of_its_counter_examples(entry: Signature) -> None:
    """Every entry carries near misses (its tool's neighbouring messages, the same words in
    another sense or version) and reads none of them."""
    assert entry.counter_examples, f"{entry.id}: no counter-example"
    for line in entry.counter_examples:
        content = peel_line(line).content
        assert entry.search(content) is None, f"{entry.id} reads its counter-example {line!r}"


def _stated_before() -> set[tuple[str, str]]:
    """Every (first, then) pair the ``before`` lists state, through chains of them."""
    stated = {(e.id, other) for e in ENTRIES for other in e.before}
    grown = True
    while grown:
        chained = {(a, d) for a, b in stated for c, d in stated if b == c}
        grown = not chained <= stated
        stated |= chained
    return stated


def test_entries_that_match_one_line_have_a_stated_order() -> None:
    """Which of two entries reads a line they both match is stated (``before``), never left
    to their places in the file: checked on every line of the catalogue (its examples and
    counter-examples), for every two entries that match it (a handler that declines a line
    hands it to the next one, so the losers' order counts too)."""
    stated = _stated_before()
    unstated = []
    for owner in ENTRIES:
        for line in (owner.example, *owner.counter_examples):
            content = peel_line(line).content
            matching = [e for e in ENTRIES if e.follows == owner.follows and e.search(content)]
            for first, then in itertools.combinations(matching, 2):  # in the order tried
                if (first.id, then.id) not in stated:
                    unstated.append(
                        f"{first.id} and {then.id} both match {line!r} (a line of "
                        f"{owner.id}) and no order is stated: before = [{then.id!r}] in "
                        f"{first.id} (tried first now), or before = [{first.id!r}] in {then.id}"
                    )
    assert not unstated, "\n".join(unstated)


def test_the_order_tried_follows_the_before_lists() -> None:
    places = {e.id: at for at, e in enumerate(ENTRIES)}
    for entry in ENTRIES:
        for other in entry.before:
            assert places[entry.id] < places[other], (entry.id, other)


def _catalogue_file(tmp_path: Path, *entries: str) -> Path:
    """A catalogue of these entries (TOML fields after the common ones)."""
    common = (
        'tool = "t"\nsource = "s"\nversions = "v"\nstring = "s"\nkeywords = ["boom"]\n'
        'role = "origin"\nrank = "none"\nkind = "exception"\n'
    )
    path = tmp_path / "signatures.toml"
    path.write_text("".join(f"[[signature]]\n{common}{fields}\n" for fields in entries))
    return path


BROAD = 'id = "t.broad"\npattern = "boom"\nexample = "boom"\ncounter_examples = ["bang"]\n'
NARROW = (
    'id = "t.narrow"\npattern = "big boom"\nexample = "big boom"\ncounter_examples = ["boom"]\n'
)


def test_an_entry_appended_after_a_broader_one_is_tried_first_when_it_says_so(
    tmp_path: Path,
) -> None:
    """The order is the data's: an entry written last but stated before a broader one (which
    would take its lines) is tried before it; without the statement, after it."""
    stated = load_catalogue(_catalogue_file(tmp_path, BROAD, NARROW + 'before = ["t.broad"]\n'))
    assert [e.id for e in stated] == ["t.narrow", "t.broad"]
    unstated = load_catalogue(_catalogue_file(tmp_path, BROAD, NARROW))
    assert [e.id for e in unstated] == ["t.broad", "t.narrow"]


@pytest.mark.parametrize(
    ("narrow", "message"),
    [
        (
            NARROW.replace('counter_examples = ["boom"]\n', ""),
            "signature 't.narrow': unknown keys [], missing ['counter_examples']",
        ),
        (
            NARROW.replace('["boom"]', "[]"),
            "signature 't.narrow': counter_examples must be a list of one or more lines the "
            'entry must not match, e.g. counter_examples = ["..."] (List should have at least '
            "1 item after validation, not 0: [])",
        ),
        (
            NARROW.replace('["boom"]', '"boom"'),
            "signature 't.narrow': counter_examples must be a list",
        ),
        (
            NARROW + 'before = ["t.nothing"]\n',
            "signature 't.narrow': before = [... 't.nothing' ...] names no entry: give the ids "
            "of the entries this one is tried before",
        ),
        (
            NARROW + 'before = "t.broad"\n',
            "signature 't.narrow': before must be a list of the ids of the entries this one is "
            'tried before, e.g. before = ["tool.message"]',
        ),
    ],
    ids=["no-counter-example", "empty", "not-a-list", "unknown-id", "before-not-a-list"],
)
def test_a_malformed_entry_is_refused_naming_the_file_and_entry(
    tmp_path: Path, narrow: str, message: str
) -> None:
    path = _catalogue_file(tmp_path, BROAD, narrow)
    with pytest.raises(CatalogueError) as refused:
        load_catalogue(path)
    assert str(refused.value).startswith(f"{path}: {message}"), str(refused.value)


def test_before_lists_that_go_round_in_a_circle_are_refused(tmp_path: Path) -> None:
    path = _catalogue_file(
        tmp_path, BROAD + 'before = ["t.narrow"]\n', NARROW + 'before = ["t.broad"]\n'
    )
    with pytest.raises(CatalogueError, match=r"before lists of t\.broad, t\.narrow go round"):
        load_catalogue(path)


PACKAGE = Path(__file__).resolve().parents[1] / "pytest_faultloop"


def test_no_python_code_names_a_catalogue_entry() -> None:
    """Python tests an entry's tags (``signatures.TAGS``), never its id: an entry renamed or
    split in the catalogue cannot silently stop what the code did for it."""
    named = [
        f"{source.relative_to(PACKAGE)}: {entry.id}"
        for source in sorted(PACKAGE.rglob("*.py"))
        for text in [source.read_text()]
        for entry in ENTRIES
        if f'"{entry.id}"' in text or f"'{entry.id}'" in text
    ]
    assert named == []


def test_every_declared_tag_is_on_an_entry() -> None:
    carried = {tag for entry in ENTRIES for tag in entry.tags}
    assert carried == set(TAGS)


def _load(catalogue_text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Load a catalogue of the given text as the package loads its own."""
    path = tmp_path / "signatures.toml"
    path.write_text(catalogue_text)
    monkeypatch.setattr(signatures, "CATALOGUE", path)
    signatures.catalogue.__wrapped__()


ENTRY = """
[[signature]]
id = "tool.line"
{tags}
tool = "a tool"
source = "a file"
versions = "1"
string = "it failed"
example = "it failed"
counter_examples = ["it passed"]
keywords = ["failed"]
pattern = "it failed"
kind = "crash"
role = "origin"
rank = "own"
"""


def test_an_entry_with_an_undeclared_tag_is_one_error_naming_entry_and_tag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(CatalogueError) as raised:
        _load(ENTRY.format(tags='tags = ["no-such-tag"]'), tmp_path, monkeypatch)
    message = str(raised.value)
    assert "'tool.line'" in message and "no-such-tag" in message and "\n" not in message


def test_an_entry_with_declared_tags_loads_with_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "signatures.toml"
    path.write_text(ENTRY.format(tags='tags = ["shell-crash"]'))
    monkeypatch.setattr(signatures, "CATALOGUE", path)
    (entry,) = signatures.catalogue.__wrapped__()
    assert entry.tags == {"shell-crash"}


def test_an_undeclared_tag_asked_of_the_catalogue_is_an_error() -> None:
    with pytest.raises(CatalogueError, match="no-such-tag"):
        tagged("no-such-tag")


def test_an_entry_naming_a_handler_no_reader_declares_is_one_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = ENTRY.format(tags="").replace('kind = "crash"', 'handler = "no_such_handler"')
    path = tmp_path / "signatures.toml"
    path.write_text(text)
    monkeypatch.setattr(signatures, "CATALOGUE", path)
    entries = signatures.catalogue.__wrapped__()
    with pytest.raises(CatalogueError) as raised:
        check_handlers(entries)
    message = str(raised.value)
    assert "'tool.line'" in message and "'no_such_handler'" in message and "\n" not in message


def test_a_tag_the_code_takes_for_one_entry_is_on_one_entry() -> None:
    assert tagged_entry("traceback-frame").follows is None
    with pytest.raises(CatalogueError, match="traceback-line"):
        tagged_entry("traceback-line")  # the header's and the frames' tag: two entries
