"""The ``spawn`` workload for real: a node starting its ranks with
``torch.multiprocessing.spawn``, a rank SIGKILLed, the built-in analyzers scoring what spawn
printed (a subprocess run on the local backend)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.sessions import only_session

REPO = Path(__file__).resolve().parents[1]


def test_a_rank_killed_under_spawn_is_named_from_spawns_own_report(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(REPO / "experiments", pytester.path / "experiments")
    base = pytester.path / "out"
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(base))
    monkeypatch.setenv("POOL", "SIGKILL:2:5:1@workload=spawn")
    result = pytester.runpytest_subprocess(
        "experiments/", "-p", "no:cacheprovider", "-k", "not fr_rank_correct", timeout=600
    )
    result.assert_outcomes(passed=4, deselected=1)
    session = only_session(base)
    stored = json.loads(next(session.glob("n1_SIGKILL_r2_i5_*/result.json")).read_text())
    assert stored["experiment"]["workload"] == "spawn"
    assert stored["artifacts"]["marker"]["rank"] == 2
    log = Path(stored["artifacts"]["log"]).read_text()
    assert "ProcessExitedException: process 2 terminated with signal SIGKILL" in log
