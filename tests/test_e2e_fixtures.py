"""Experiments as Python tests on the embedded default: real gloo jobs on the local backend,
asked for by the ``faultloop`` fixture and marker next to pool items (subprocess runs)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from support.sessions import only_session

MARKED = """
import pytest

@pytest.mark.faultloop("SIGKILL:1:3:2")
def test_marked(faultloop_result):
    faultloop_result.assert_dimension("rank_primary")
    assert "rank 1" in faultloop_result.analyses.log.attribution_text

def test_called(faultloop):
    result = faultloop.run("SEGFAULT:2:3:2")
    result.assert_dimension("rank_any")
    assert result.analyses.fr.suspects == [2]
"""


def spans(session: Path) -> list[tuple[float, float, str]]:
    """Each stored job's start and end, as the backend recorded them."""
    found = []
    for path in session.glob("*/result.json"):
        job = json.loads(path.read_text())["job"]
        found.append((job["started_at"], job["ended_at"], job["job_id"]))
    return sorted(found)


def test_python_tests_and_pool_items_hold_one_slot_under_xdist(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    experiments = pytester.mkdir("experiments")
    (experiments / "mine.pool").write_text("SIGKILL:1:3:2 SIGTERM:3:3:2\n")
    pytester.makepyfile(test_mine=MARKED)
    base = pytester.path / "out"
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(base))
    result = pytester.runpytest_subprocess(
        "experiments/",
        "test_mine.py",
        "--faultloop-pool=mine",
        "--faultloop-gpus-per-node=2",
        "--faultloop-batch-size=1",
        "-n",
        "2",
        timeout=900,
    )
    result.assert_outcomes(passed=10 + 2)
    session = only_session(base)
    tsv = (session / "experiments.tsv").read_text().splitlines()[1:]
    assert sorted(row.split("\t")[1] for row in tsv) == ["SEGFAULT", "SIGKILL", "SIGTERM"]
    jobs = spans(session)
    assert len(jobs) == 3
    for (_, end, earlier), (start, _, later) in itertools.pairwise(jobs):
        assert end <= start, f"jobs {earlier} and {later} overlap with BATCH_SIZE=1"


def test_a_test_file_outside_any_project_uses_the_builtin_workload(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "their-repo"
    elsewhere.mkdir()
    (elsewhere / "test_theirs.py").write_text(
        "def test_sigkill(faultloop):\n"
        "    result = faultloop.run('SIGKILL:1:3:2', gpus_per_node=2)\n"
        "    result.assert_all()\n"
        "    assert result.experiment.workload == 'tiny_gloo'\n"
    )
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(tmp_path / "out"))
    result = pytester.runpytest_subprocess(
        str(elsewhere / "test_theirs.py"), "--rootdir", str(elsewhere), timeout=600
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["faultloop: 1 experiment(s): 1 scored"])
    assert list(
        (tmp_path / "out" / "fault_injection").glob(
            "2*/n2_SIGKILL_r1_i3_gpus-per-node-2_*/result.json"
        )
    )
