"""Restart decisions by kind of error, where a user reads them: the run's summary and its
false-STOP gate, the report, the leaderboard (its table and gate) and ``compare``. The run
replays two stored cases: a SIGKILL whose truth says RESTART (the analyzer's STOP is a false
STOP: a job killed that would have resumed) and a clean run (CONTINUE, right)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.sessions import only_session, sessions
from test_plugin_replay import CLEAN, SIGKILL_RANK3, write_case

REPO = Path(__file__).resolve().parents[1]
NOT_THE_DECISION = ("-k", "not restart_correct")
"""Every other item passes: what fails the run below is the gate alone."""


@pytest.fixture
def corpus(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    experiments = pytester.path / "experiments"
    experiments.mkdir()
    shutil.copy(REPO / "experiments" / "workloads.toml", experiments)
    root = experiments / "corpus" / "demo"
    truth = 'culprit = [3]\nnature = ["crash", "signal"]\ndecision = "RESTART"'
    write_case(root, "kill3", truth, SIGKILL_RANK3)
    write_case(root, "clean", 'culprit = []\nnature = ["none"]\ndecision = "CONTINUE"', CLEAN)
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(pytester.path / "out"))
    return root


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_faultloop", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_gate_fails_a_run_whose_false_stop_bound_is_too_high(
    pytester: pytest.Pytester, corpus: Path
) -> None:
    ungated = pytester.runpytest("experiments/corpus/", *NOT_THE_DECISION)
    assert ungated.ret == 0, ungated.stdout.str()
    ungated.stdout.fnmatch_lines(
        ["faultloop: restart decisions: decided as expected 1/2 *; false STOP 1/2 (50%, 9–91); "
         "false RESTART —"]
    )  # fmt: skip
    loose = pytester.runpytest(
        "experiments/corpus/", *NOT_THE_DECISION, "--faultloop-max-false-stop=0.95"
    )
    assert loose.ret == 0, loose.stdout.str()
    gated = pytester.runpytest(
        "experiments/corpus/", *NOT_THE_DECISION, "--faultloop-max-false-stop=0.5"
    )
    assert gated.ret == pytest.ExitCode.TESTS_FAILED
    gated.stdout.fnmatch_lines(
        ["faultloop: FAILED the gate --faultloop-max-false-stop: false-STOP rate 1/2 (50%, "
         "9–91): its upper bound 91% exceeds the allowed 50%"]
    )  # fmt: skip
    newest = sessions(pytester.path / "out")[-1]
    report = (newest / "experiments_report.md").read_text()
    assert "| RESTART | 0 | 1 | 0 | 0 |" in report and "| CONTINUE | 0 | 0 | 1 | 0 |" in report
    assert "a job killed that would have resumed): 1/2 (50%, 9–91)" in report


def test_a_bad_gate_is_one_line_naming_the_option(pytester: pytest.Pytester, corpus: Path) -> None:
    result = pytester.runpytest("experiments/corpus/", "--faultloop-max-false-stop=1.5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--faultloop-max-false-stop" in result.stderr.str()


def test_the_leaderboard_shows_each_configurations_matrix_and_gates_them(
    pytester: pytest.Pytester, corpus: Path
) -> None:
    pytester.runpytest("experiments/corpus/", "-p", "no:cacheprovider")
    session = str(only_session(pytester.path / "out"))
    board = cli("leaderboard", session, "--log-analyzer", "builtin", "--log-analyzer", "naive")
    assert board.returncode == 0, board.stderr
    assert "Restart decisions (false STOP: a job killed that would have resumed;" in board.stdout
    assert "| builtin | RESTART | 0 | 1 | 0 | 0 | 1/2 (50%, 9–91) | 1/2 (50%, 9–91) | — |" in (
        board.stdout
    )
    gated = cli("leaderboard", session, "--max-false-stop", "0.5")
    assert gated.returncode == 1
    assert gated.stderr.strip() == (
        "FAILED the gate --max-false-stop: builtin: false-STOP rate 1/2 (50%, 9–91): its "
        "upper bound 91% exceeds the allowed 50%"
    )
    wrong = cli("leaderboard", session, "--max-false-stop", "ten")
    assert wrong.returncode == 2 and "'ten' is not a share between 0 and 1" in wrong.stderr


def test_compare_prints_both_sessions_decisions(pytester: pytest.Pytester, corpus: Path) -> None:
    pytester.runpytest("experiments/corpus/", "-p", "no:cacheprovider")
    session = str(only_session(pytester.path / "out"))
    compared = cli("compare", session, session)
    assert compared.returncode == 0, compared.stderr
    assert compared.stdout.count(f"restart decisions of {session}:") == 2
    assert "| RESTART | 0 | 1 | 0 | 0 |" in compared.stdout
