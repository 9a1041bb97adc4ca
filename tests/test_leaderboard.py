"""Several analyzer configurations on one stored session: rates with intervals and paired
McNemar p-values, checked against a hand count."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.sessions import only_session
from test_plugin_replay import CLEAN, SIGKILL_RANK3, write_case

from pytest_faultloop.__main__ import main
from pytest_faultloop.engine.leaderboard import configurations, score_session
from pytest_faultloop.report.stats import mcnemar_exact, wilson

REPO = Path(__file__).resolve().parents[1]
WRONG = REPO / "tests" / "fixtures" / "logs" / "external" / "restart_agent.json"
"""Always names rank 4, RESTART: wrong for every case below."""


@pytest.fixture
def session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A replayed corpus of four crashes on rank 3 and a clean run, stored as a session."""
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(pytester.path / "out"))
    corpus = pytester.path / "corpus" / "demo"
    for name in ("kill_a", "kill_b", "kill_c", "kill_d"):
        write_case(
            corpus,
            name,
            'culprit = [3]\nnature = ["crash", "signal"]\ndecision = "STOP"',
            SIGKILL_RANK3,
        )
    write_case(corpus, "clean", 'culprit = []\nnature = ["none"]\ndecision = "CONTINUE"', CLEAN)
    pytester.runpytest("corpus/").assert_outcomes(passed=20, skipped=5)
    found = only_session(pytester.path / "out")
    return found


def test_configurations_pair_the_nth_options() -> None:
    configs = configurations(["builtin", "cmd:x {log}"], [], ["deterministic"])
    assert [(c.log_analyzer, c.fr_analyzer, c.judge) for c in configs] == [
        ("builtin", "builtin", "deterministic"),
        ("cmd:x {log}", "builtin", "deterministic"),
    ]


def test_a_wrong_analyzer_loses_to_the_builtin_by_a_hand_counted_margin(session: Path) -> None:
    configs = configurations(["builtin", f"cmd:cat {WRONG} # {{log}}"], [], [])
    builtin, wrong = score_session(session, configs)
    assert [v.rank_primary if v else None for v in builtin.verdicts.values()] == ["true"] * 5
    assert [v.rank_primary if v else None for v in wrong.verdicts.values()] == ["false"] * 5


def test_the_command_prints_rates_intervals_and_the_paired_p_value(
    session: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "leaderboard",
            str(session),
            "--log-analyzer",
            "builtin",
            "--log-analyzer",
            f"cmd:cat {WRONG} # {{log}}",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    low, high = wilson(5, 5)
    assert f"5/5 (100%, {100 * low:.0f}–{100 * high:.0f})" in out
    # the builtin passes all 5 cases, the wrong analyzer none: 5 discordant pairs, 0 the other way
    assert f"0/5 (0%, 0–{100 * wilson(0, 5)[1]:.0f}); p={mcnemar_exact(5, 0):.3g}" in out
    assert mcnemar_exact(5, 0) == pytest.approx(2 * 0.5**5)


def test_a_directory_without_results_is_refused_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["leaderboard", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "Traceback" not in err


def test_an_unknown_analyzer_is_refused_with_the_option_and_the_choices(
    session: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["leaderboard", str(session), "--log-analyzer", "regex"]) == 2
    err = capsys.readouterr().err
    assert "--log-analyzer='regex': expected builtin, naive, llm or 'cmd:COMMAND {log}'" in err
    assert "Traceback" not in err


def test_repeat_reports_the_cases_whose_decision_flipped(
    session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command analyzer that says RESTART on its odd calls and STOP on its even ones flips
    every case over two analyses; the built-in flips none."""
    calls = tmp_path / "calls"
    flipper = tmp_path / "flipper.py"
    flipper.write_text(
        "import json, pathlib, sys\n"
        f"calls = pathlib.Path({str(calls)!r})\n"
        "n = int(calls.read_text()) + 1 if calls.exists() else 1\n"
        "calls.write_text(str(n))\n"
        "answer = json.loads(pathlib.Path(sys.argv[1]).read_text())\n"
        "answer['decision'] = 'RESTART' if n % 2 else 'STOP'\n"
        "print(json.dumps(answer))\n"
    )
    command = f"cmd:{sys.executable} {flipper} {WRONG} # {{log}}"
    code = main(
        ["leaderboard", str(session), "--log-analyzer", "builtin", "--log-analyzer", command,
         "--repeat", "2"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    section = out.split("Decision stability")[1].split("Restart decisions")[0]
    rows = {r.split(" | ")[0]: r for r in section.splitlines()}
    assert "| 2 | 0/5 (0%, 0–43) | none |" in rows["| builtin"]
    flipped = next(r for name, r in rows.items() if name.startswith("| cmd:"))
    assert "| 2 | 5/5 (100%, 57–100) |" in flipped and "clean 1/2 (RESTART, STOP)" in flipped
