"""Stored cases collected and scored like pools: no job, the built-in analyzers and judge."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.sessions import only_session

REPO = Path(__file__).resolve().parents[1]

SIGKILL_RANK3 = """\
[rank3]: iteration 40 done
W1130 10:00:01.000000 100 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 201 closing signal SIGTERM
W1130 10:00:01.000000 100 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 202 closing signal SIGTERM
E1130 10:00:02.000000 100 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) local_rank: 3 (pid: 204) of binary: /usr/bin/python
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-11-30_10:00:02
  host      : node1
  rank      : 3 (local_rank: 3)
  exitcode  : -9 (pid: 204)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 204
============================================================
"""
CLEAN = "[rank0]: iteration 1 done\n[rank0]: training finished\n"


def write_case(root: Path, name: str, truth: str, log: str) -> Path:
    directory = root / name
    (directory / "logs").mkdir(parents=True)
    (directory / "logs" / "job.log").write_text(log)
    (directory / "case.toml").write_text(
        f'source = "test fixture"\n[job]\nworld_size = 4\ngpus_per_node = 4\n[truth]\n{truth}\n'
    )
    return directory


@pytest.fixture
def corpus(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    experiments = pytester.path / "experiments"
    experiments.mkdir()
    shutil.copy(REPO / "experiments" / "workloads.toml", experiments)
    (experiments / "p.pool").write_text("SIGKILL:1:5:2\n")
    root = experiments / "corpus" / "demo"
    write_case(
        root,
        "kill3",
        'culprit = [3]\nnature = ["crash", "signal"]\ndecision = "STOP"',
        SIGKILL_RANK3,
    )
    write_case(root, "clean", 'culprit = []\nnature = ["none"]\ndecision = "CONTINUE"', CLEAN)
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(pytester.path / "out"))
    return root


def session_dir(pytester: pytest.Pytester) -> Path:
    session = only_session(pytester.path / "out")
    return session


def test_cases_replay_as_items_without_a_job(pytester: pytest.Pytester, corpus: Path) -> None:
    result = pytester.runpytest("experiments/corpus/", "-v", "--junitxml=junit.xml")
    result.assert_outcomes(passed=8, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "faultloop: * pools=none (stored cases: replay, no jobs)*",
            "experiments/corpus/demo/clean::restart_correct PASSED*",
            "experiments/corpus/demo/kill3::fr_rank_correct SKIPPED*",
            "*faultloop: 2 experiment(s): 2 scored*",
        ]
    )
    session = session_dir(pytester)
    assert (session / "experiments.tsv").read_text().splitlines()[1:] == []  # nothing submitted
    report = (session / "experiments_report.md").read_text()
    assert "| REAL | 1 | 3 | - | - | REPLAY | true | true | true | true | true | N/A |" in report
    assert "### Pass rate by corpus" in report and "| demo |" in report
    stored = json.loads((session / "kill3" / "result.json").read_text())
    assert stored["job"] is None and stored["experiment"]["case"]["source"] == "test fixture"
    props = {
        p.get("name"): p.get("value")
        for p in ET.parse(pytester.path / "junit.xml").iter("property")
    }
    assert props["fault_type"] == "REAL"


def test_pool_runs_leave_corpora_alone_and_k_selects_cases(
    pytester: pytest.Pytester, corpus: Path
) -> None:
    collected = pytester.runpytest("experiments/", "--faultloop-pool=p", "--collect-only", "-q")
    assert "corpus" not in collected.stdout.str()
    assert "p.pool::SIGKILL:1:5:2::rank_any" in collected.stdout.str()
    chosen = pytester.runpytest("experiments/corpus/", "-k", "kill3 and rank_primary")
    chosen.assert_outcomes(passed=1, deselected=9)


def test_last_failed_reruns_the_failing_cells_of_a_replay(
    pytester: pytest.Pytester, corpus: Path
) -> None:
    write_case(corpus, "wrong", 'culprit = [2]\nnature = ["hang"]', SIGKILL_RANK3)
    first = pytester.runpytest("experiments/corpus/")
    first.assert_outcomes(passed=8, failed=3, skipped=4)
    again = pytester.runpytest("experiments/corpus/", "--lf")
    again.assert_outcomes(failed=3, deselected=12)


def test_a_bad_case_fails_collection_with_its_file_and_line(
    pytester: pytest.Pytester, corpus: Path
) -> None:
    bad = write_case(corpus, "bad", 'culprit = [1]\nnature = ["melted"]', CLEAN)
    result = pytester.runpytest("experiments/corpus/")
    result.stdout.fnmatch_lines(
        [f"*{bad.relative_to(pytester.path)}/case.toml:7: unknown nature 'melted' (valid: hang, *"]
    )
    assert "Traceback" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED


def test_replay_under_xdist_scores_each_case_once(pytester: pytest.Pytester, corpus: Path) -> None:
    result = pytester.runpytest("experiments/corpus/", "-n", "2")
    result.assert_outcomes(passed=8, skipped=2)
    results = sorted(p.parent.name for p in session_dir(pytester).glob("*/result.json"))
    assert results == ["clean", "kill3"]


def test_the_naive_baseline_replays_the_same_cases(pytester: pytest.Pytester, corpus: Path) -> None:
    """``--faultloop-log-analyzer=naive``: the baseline beside the analyzer under test."""
    result = pytester.runpytest("experiments/corpus/", "--faultloop-log-analyzer=naive", "-v")
    result.stdout.fnmatch_lines(["*log_analyzer=naive*", "*faultloop: 2 experiment(s): 2 scored*"])
    result.assert_outcomes(passed=8, skipped=2)
    stored = json.loads((session_dir(pytester) / "kill3" / "result.json").read_text())
    assert stored["log_analysis"]["analyzer"] == "naive"
    assert stored["log_analysis"]["rule"] == "naive_root_cause"
