"""The public corpus's committed scorecard is what the replay pipeline scores now: a rule
change that moves a corpus answer fails here, naming each moved case and dimension, until the
same commit rewrites the scorecard (``python -m pytest_faultloop.engine.corpus_scorecard --update``)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from pytest_faultloop.engine.corpus_scorecard import (
    OUTCOMES,
    UPDATE,
    cells,
    differences,
    render,
    score_corpus,
)
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES

REPO = Path(__file__).resolve().parents[1]
PUBLIC = REPO / "experiments" / "corpus" / "public"
SCORECARD = REPO / "experiments" / "corpus" / "scorecard.tsv"


def test_the_committed_scorecard_is_the_corpus_scored_now() -> None:
    moved = differences(SCORECARD.read_text(), score_corpus(PUBLIC))
    assert not moved, "\n".join(
        [
            "the public corpus scores differently from its scorecard:",
            *moved,
            f"if the change is meant, rewrite it in the same commit: {UPDATE}",
        ]
    )


def test_the_scorecard_holds_every_case_and_dimension_with_its_split() -> None:
    text = SCORECARD.read_text()
    pinned = cells(text)
    cases = {p.name for p in PUBLIC.iterdir() if (p / "case.toml").is_file()}
    assert {case for case, _ in pinned} == cases
    assert {d for _, d in pinned} == set(DIMENSION_NAMES)
    assert set(pinned.values()) <= set(OUTCOMES)
    rows = [line.split("\t") for line in text.splitlines() if not line.startswith("#")]
    assert {row[1] for row in rows[1:]} == {"dev", "test"}


def _run(*arguments: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_faultloop.engine.corpus_scorecard", *arguments],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_a_moved_answer_is_shown_by_case_and_dimension_and_update_rewrites_it(
    tmp_path: Path,
) -> None:
    lines = SCORECARD.read_text().splitlines()
    row = next(i for i, line in enumerate(lines) if "\tpass\t" in line and "\tdev\t" in line)
    case, split, *outcomes = lines[row].split("\t")
    dimension = DIMENSION_NAMES[outcomes.index("pass")]
    outcomes[outcomes.index("pass")] = "fail"
    lines[row] = "\t".join((case, split, *outcomes))
    moved = tmp_path / "scorecard.tsv"
    moved.write_text("\n".join(lines) + "\n")

    checked = _run("--corpus", str(PUBLIC), "--scorecard", str(moved))
    assert checked.returncode == 1, checked.stderr
    assert f"{case} {dimension}: pinned fail, now pass" in checked.stdout
    assert "pinned dev (89 cases)" in checked.stdout and "now    dev (89 cases)" in checked.stdout

    updated = _run("--corpus", str(PUBLIC), "--scorecard", str(moved), "--update")
    assert updated.returncode == 0, updated.stderr
    assert moved.read_text() == SCORECARD.read_text()
    assert _run("--corpus", str(PUBLIC), "--scorecard", str(moved)).returncode == 0


def test_a_case_that_now_fails_says_why(tmp_path: Path) -> None:
    scores = score_corpus(PUBLIC)
    failing = next(s for s in scores if "fail" in s.outcomes.values())
    dimension = next(d for d, o in failing.outcomes.items() if o == "fail")
    unmoved = replace(failing, outcomes={**failing.outcomes, dimension: "pass"})
    passing = render([s if s is not failing else unmoved for s in scores])
    moved = "\n".join(differences(passing, scores))
    assert f"{failing.case} {dimension}: pinned pass, now fail" in moved
    assert f"{dimension} = " in moved and "(expected " in moved


def test_a_missing_corpus_or_scorecard_is_one_line_naming_it(tmp_path: Path) -> None:
    for arguments in (
        ["--corpus", str(tmp_path / "none")],
        ["--scorecard", str(tmp_path / "none")],
    ):
        refused = _run("--corpus", str(PUBLIC), *arguments)
        assert refused.returncode == 2
        assert refused.stderr == (
            f"error: {tmp_path / 'none'}: not found; run from the repository's root or give "
            "--corpus and --scorecard\n"
        )
