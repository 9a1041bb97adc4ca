"""The pinned scorecard of a corpus: each case's outcome per scoring dimension, as the built-in
log and FR analyzers and the deterministic judge score it on replay, with its dev/test split.

The outcomes are the ones ``pytest <corpus>`` gives its items (``pass``, ``fail``, ``skip``
where the dimension is N/A, ``error`` for a case its replay cannot score), computed in this
process through the replay's own pipeline (``Pipeline.replayed``) and pass rule. A test
compares the committed scorecard with them, so a change that moves a corpus answer shows in
the commit that makes it; this rewrites the scorecard after such a change (from the
repository's root)::

    python -m pytest_faultloop.engine.corpus_scorecard --update
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_faultloop.engine.builtin import BuiltinStages
from pytest_faultloop.engine.pipeline import Pipeline
from pytest_faultloop.engine.run_session import RunSession
from pytest_faultloop.inputs.cases import CASE_FILE, load_case
from pytest_faultloop.inputs.settings import Settings
from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE

CORPUS = Path("experiments/corpus/public")
SCORECARD = Path("experiments/corpus/scorecard.tsv")
UPDATE = "python -m pytest_faultloop.engine.corpus_scorecard --update"
COLUMNS = ("case", "split", *DIMENSION_NAMES)
OUTCOMES = ("pass", "fail", "skip", "error")


@dataclass(frozen=True)
class CaseScore:
    """One case's outcome per dimension, and why each failing one failed."""

    case: str
    split: str
    outcomes: dict[str, str]
    failures: dict[str, str]


def score_corpus(corpus: Path) -> list[CaseScore]:
    """Every case of ``corpus`` replayed through the built-in stages with the default settings
    (the run's session, which joins a case's several logs, in a scratch directory)."""
    settings = Settings()
    cases = sorted(d for d in corpus.iterdir() if (d / CASE_FILE).is_file())
    stop = threading.Event()
    with tempfile.TemporaryDirectory(prefix="faultloop-scorecard-") as scratch:
        session = RunSession.open(Path(scratch) / "session", Path(scratch) / "run", stop)
        pipeline = Pipeline(BuiltinStages(settings, stop), session)
        experiments = [
            load_case(d, corpus.name, default_gpus_per_node=settings.gpus_per_node) for d in cases
        ]
        return [_scored(pipeline.replayed(e)) for e in experiments]


def _scored(result: ExperimentResult) -> CaseScore:
    """A replayed case's items as ``pytest`` judges them (one trial, the default pass rule)."""
    case = result.experiment.case
    assert case is not None
    outcomes, failures = {}, {}
    for dimension in DIMENSION_NAMES:
        if result.broken is not None or result.verdict is None:
            outcomes[dimension] = "error"
            failures[dimension] = f"{result.broken}: {result.reason}"
            continue
        passed = DEFAULT_RULE.passes(dimension, result.verdict.value(dimension))
        outcomes[dimension] = {True: "pass", False: "fail", None: "skip"}[passed]
        if passed is False:
            failures[dimension] = DEFAULT_RULE.failure_message(result, dimension)
    return CaseScore(result.experiment.key, case.split or "-", outcomes, failures)


def render(scores: Sequence[CaseScore]) -> str:
    """The scorecard's text: a header saying how to rewrite it, one row per case, and the
    passes per dimension of each split (``k/n``: n the cases the dimension applies to)."""
    lines = [
        "# The public corpus scored by the built-in analyzers and the deterministic judge,",
        f"# one row per case (pass, fail, skip: N/A, error: not scored). Rewrite: {UPDATE}",
        "\t".join(COLUMNS),
    ]
    lines += [
        "\t".join((s.case, s.split, *(s.outcomes[d] for d in DIMENSION_NAMES))) for s in scores
    ]
    for split in sorted({s.split for s in scores}):
        chosen = [s for s in scores if s.split == split]
        totals = []
        for dimension in DIMENSION_NAMES:
            outcomes = [s.outcomes[dimension] for s in chosen]
            passed, scored = outcomes.count("pass"), len(outcomes) - outcomes.count("skip")
            totals.append(f"{dimension} {passed}/{scored}")
        lines.append(f"# {split} ({len(chosen)} cases): " + ", ".join(totals))
    return "\n".join(lines) + "\n"


def cells(text: str) -> dict[tuple[str, str], str]:
    """A scorecard's outcomes by (case, dimension)."""
    rows = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]
    header, body = rows[0], rows[1:]
    return {
        (row[0], dimension): value
        for row in body
        for dimension, value in zip(header[2:], row[2:], strict=True)
    }


def differences(pinned: str, scores: Sequence[CaseScore]) -> list[str]:
    """What moved from the pinned scorecard, a line per cell (with why a cell now fails),
    then the totals that moved; empty when the scorecard still holds."""
    now = render(scores)
    before, after = cells(pinned), cells(now)
    failures = {(s.case, d): why for s in scores for d, why in s.failures.items()}
    lines = []
    for key in sorted(before.keys() | after.keys()):
        was, is_now = before.get(key, "absent"), after.get(key, "absent")
        if was != is_now:
            lines.append(f"{key[0]} {key[1]}: pinned {was}, now {is_now}")
            lines += [f"    {line}" for line in failures.get(key, "").splitlines()]
    pinned_totals, totals = _totals(pinned), _totals(now)
    if lines or pinned_totals != totals:
        lines += [f"pinned {line[2:]}" for line in pinned_totals]
        lines += [f"now    {line[2:]}" for line in totals]
    return lines


def _totals(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("# ") and " cases): " in line]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_faultloop.engine.corpus_scorecard",
        description="compare a corpus's pinned scorecard with its replay now, or rewrite it",
    )
    parser.add_argument("--corpus", type=Path, default=CORPUS, help=f"default: {CORPUS}")
    parser.add_argument("--scorecard", type=Path, default=SCORECARD, help=f"default: {SCORECARD}")
    parser.add_argument("--update", action="store_true", help="rewrite the scorecard")
    args = parser.parse_args(argv)
    missing = args.corpus if not args.corpus.is_dir() else None
    if not args.update and not args.scorecard.is_file():
        missing = missing or args.scorecard
    if missing is not None:
        print(
            f"error: {missing}: not found; run from the repository's root or give "
            "--corpus and --scorecard",
            file=sys.stderr,
        )
        return 2
    scores = score_corpus(args.corpus)
    if args.update:
        args.scorecard.write_text(render(scores))
        print(f"wrote {args.scorecard} ({len(scores)} cases)")
        return 0
    moved = differences(args.scorecard.read_text(), scores)
    print("\n".join(moved or [f"{args.scorecard} holds ({len(scores)} cases)"]))
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
