"""Freezing a session into cases: what is written, what is skipped and why, bad input."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from support.verdicts import verdict

from pytest_faultloop.__main__ import main
from pytest_faultloop.inputs.cases import load_case
from pytest_faultloop.inputs.freeze import freeze_session
from pytest_faultloop.models import (
    Artifacts,
    Experiment,
    ExperimentResult,
    Job,
    JobState,
    PoolEntry,
)
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.store.session_dir import SessionDir


def stored(
    session: Path, fault: FaultType, rank: int, *, rank_any: str = "true", broken: str | None = None
) -> None:
    entry = PoolEntry(fault=fault, rank=rank, iter=5, nodes=2)
    experiment = Experiment(
        entry=entry, workload="tiny_gloo", gpus_per_node=4, pool="p", source="p.pool", line=1
    )
    directory = session / entry.dirname
    (directory / "logs" / "slurm").mkdir(parents=True)
    (directory / "checkpoints").mkdir()
    log = directory / "logs" / "slurm" / "7.0.1.main_workload.log"
    log.write_text(f"[rank{rank}]: boom\n")
    (directory / "checkpoints" / "_dump_0").write_bytes(b"dump")
    job = Job(job_id="7", backend="local", state=JobState.FAILED, experiment_dir=directory)
    scored = verdict(rank_any=rank_any, notes="n", judge="j")
    result = ExperimentResult(
        experiment=experiment,
        job=job,
        verdict=None if broken else scored,
        artifacts=Artifacts(experiment_dir=directory, log=log, fr_dir=directory / "checkpoints"),
        broken=broken,
        reason="the fault never armed" if broken else None,  # type: ignore[arg-type]
    )
    SessionDir(session, "# report\n").write_result(result)


@pytest.fixture
def session(tmp_path: Path) -> Path:
    path = tmp_path / "fault_injection" / "20261130_120000"
    path.mkdir(parents=True)
    stored(path, FaultType.SIGKILL, 1)
    stored(path, FaultType.GPU_SLEEP, 3, rank_any="false")
    stored(path, FaultType.SEGFAULT, 0, broken="run_invalid")
    return path


def test_freeze_writes_injected_cases_and_skips_invalid_runs(session: Path, tmp_path: Path) -> None:
    frozen = freeze_session(session, tmp_path / "frozen")
    assert sorted(p.name for p in frozen.written) == ["n2_GPU_SLEEP_r3_i5", "n2_SIGKILL_r1_i5"]
    assert frozen.skipped == ["SEGFAULT:0:5:2: invalid run (the fault never armed)"]
    case = tmp_path / "frozen" / "n2_SIGKILL_r1_i5"
    data = tomllib.loads((case / "case.toml").read_text())
    assert data["injected"] == {"fault_type": "SIGKILL", "rank": 1, "iter": 5, "nodes": 2}
    assert data["job"] == {"world_size": 8, "gpus_per_node": 4}
    assert "job 7" in data["source"]
    assert (case / "logs" / "7.0.1.main_workload.log").read_text() == "[rank1]: boom\n"
    assert (case / "checkpoints" / "_dump_0").read_bytes() == b"dump"
    experiment = load_case(case, "frozen", default_gpus_per_node=1)
    assert experiment.entry == PoolEntry(fault=FaultType.SIGKILL, rank=1, iter=5, nodes=2)


def test_only_failed_freezes_the_failing_cells(session: Path, tmp_path: Path) -> None:
    frozen = freeze_session(session, tmp_path / "frozen", "FAILED")
    assert [p.name for p in frozen.written] == ["n2_GPU_SLEEP_r3_i5"]
    assert "SIGKILL:1:5:2: passed every dimension" in frozen.skipped


def test_freezing_over_existing_cases_or_a_non_session_is_refused(
    session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    freeze_session(session, tmp_path / "frozen")
    with pytest.raises(ConfigError, match="exists: freeze into an empty or new directory"):
        freeze_session(session, tmp_path / "frozen")
    assert main(["freeze", str(tmp_path / "nowhere"), "--into", str(tmp_path / "x")]) == 2
    assert "not a session directory" in capsys.readouterr().err
