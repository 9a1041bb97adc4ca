"""The built-in analyzers do not care how a log reached them: every catalogue perturbation (and
every pair of them) of the shipped public corpus and of a frozen smoke run loses no cell.

The perturbed copies are scored the way users score theirs: replayed by pytest with
``--faultloop-perturb`` (the Robustness section of the session's report), and by the
leaderboard's robustness column for the pairs.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.sessions import only_session

from pytest_faultloop.engine.leaderboard import Configuration, leaderboard_table, score_session
from pytest_faultloop.inputs.perturb.catalogue import CATALOGUE, compositions
from pytest_faultloop.scoring.pass_rule import PassRule

REPO = Path(__file__).resolve().parents[1]
PUBLIC = REPO / "experiments" / "corpus" / "public"
FROZEN = REPO / "tests" / "fixtures" / "frozen" / "smoke"
PAIRS = ",".join(f"{a}+{b}" for a, b in itertools.combinations(CATALOGUE, 2))


def replay(corpus: Path, base: Path, *options: str) -> tuple[str, Path]:
    """pytest on the corpus, in a process of its own; its output and its session."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(corpus), "-q", "-p", "no:cacheprovider", *options],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        cwd=REPO,
        env={**os.environ, "BASE_EXPERIMENTS_DIR": str(base)},
    )
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-2000:]
    session = only_session(base)
    return done.stdout, session


@pytest.mark.parametrize("corpus", [PUBLIC, FROZEN], ids=["public", "frozen-smoke"])
def test_no_cell_is_lost_under_any_perturbation(corpus: Path, tmp_path: Path) -> None:
    output, session = replay(corpus, tmp_path, "--faultloop-perturb=all")
    report = (session / "experiments_report.md").read_text()
    assert "## Robustness" in report
    assert ", 0 lost, 0 gained." in report, report[report.index("## Robustness") :][:4000]
    applicable = (
        len(CATALOGUE) if corpus == FROZEN else sum(1 for n in CATALOGUE if not n.startswith("fr-"))
    )
    assert f"robustness: {applicable} perturbation(s), " in output  # no FR one without dumps
    assert ": 0 lost, 0 gained" in output


def test_no_cell_is_lost_under_any_pair_of_perturbations_of_the_public_corpus(
    tmp_path: Path,
) -> None:
    _, session = replay(PUBLIC, tmp_path)
    scored = score_session(session, [Configuration()], perturbations=compositions(PAIRS))
    (row,) = leaderboard_table(scored, PassRule())[2:]
    assert row.split(" | ")[-1].startswith("lost 0 of "), row


@pytest.mark.slow
def test_no_cell_is_lost_under_any_pair_of_perturbations_of_a_frozen_run(tmp_path: Path) -> None:
    _, session = replay(FROZEN, tmp_path)
    scored = score_session(session, [Configuration()], perturbations=compositions(PAIRS))
    (row,) = leaderboard_table(scored, PassRule())[2:]
    assert row.split(" | ")[-1].startswith("lost 0 of "), row
