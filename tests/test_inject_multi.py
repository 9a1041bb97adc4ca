"""The injector on several ranks (FAULT_RANK=12+14@3): the plan, one injector per listed rank,
a marker per rank that no other rank overwrites, the run's validity; and NODE_KILL taking down
a real launcher and its children, and nothing above them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from support.polling import raises_soon
from support.processes import live_processes_with_env

from pytest_faultloop.engine.pipeline import run_invalid_reason
from pytest_faultloop.jobs.workload.fault_injector import FaultInjector
from pytest_faultloop.jobs.workload.inject import (
    FaultPlan,
    InjectedException,
    Injector,
)
from pytest_faultloop.jobs.workload.node_kill import descendants, node_processes
from pytest_faultloop.models import (
    Artifacts,
    Experiment,
    FaultMarker,
    Job,
    JobState,
    PoolEntry,
)
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.fault_ranks import FaultTarget
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.store.artifacts import read_marker, read_rank_markers

ENV = {"FAULT_TYPE": "GPU_ERROR", "FAULT_RANK": "12+14@3", "FAULT_DELAY": "1"}


def test_plan_reads_a_rank_list_with_offsets() -> None:
    plan = FaultPlan.from_env(ENV, world_size=16)
    assert plan is not None
    assert (plan.rank, plan.ranks) == (12, (12, 14))
    assert plan.targets == (FaultTarget(rank=12), FaultTarget(rank=14, offset_s=3))
    assert (plan.delay_of(12), plan.delay_of(14)) == (1.0, 4.0)


@pytest.mark.parametrize(
    ("rank", "words"),
    [
        ("12+16", "FAULT_RANK=16 is outside the job's ranks 0..15"),
        ("12+x", "FAULT_RANK='12+x': rank 'x' in '12+x' is not a non-negative integer"),
        ("12+14@-1", "FAULT_RANK='12+14@-1': offset '-1' of rank 14"),
        ("14+12", "FAULT_RANK='14+12': rank 12 in '14+12' is out of order"),
    ],
)
def test_bad_rank_lists_are_named(rank: str, words: str) -> None:
    with pytest.raises(ConfigError) as error:
        FaultPlan.from_env({**ENV, "FAULT_RANK": rank}, world_size=16)
    assert str(error.value).startswith(words)


def test_every_listed_rank_gets_its_own_injector(tmp_path: Path) -> None:
    env = {**ENV, "EXPERIMENT_DIR": str(tmp_path), "WORLD_SIZE": "16", "SLURM_NODEID": "3"}
    assert not FaultInjector.from_env({**env, "RANK": "13"}).targeted
    first, second = (FaultInjector.from_env({**env, "RANK": str(r)}).injector for r in (12, 14))
    assert isinstance(first, Injector) and isinstance(second, Injector)
    assert (first.rank, second.rank) == (12, 14)
    assert first.marker_path == tmp_path / "fault_injection.json"
    assert second.marker_path == tmp_path / "fault_injection.rank14.json"


def _fired(path: Path) -> dict[str, object]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if path.exists() and (marker := json.loads(path.read_text()))["fired_at"] is not None:
            return marker
        time.sleep(0.01)
    raise AssertionError(f"{path.name} never fired")


def test_markers_of_several_ranks_never_overwrite_each_other(tmp_path: Path) -> None:
    env = {"FAULT_TYPE": "WORKLOAD_EXC", "FAULT_RANK": "0+1@0.3+2", "FAULT_AT_ITER": "1"}
    env |= {"EXPERIMENT_DIR": str(tmp_path), "WORLD_SIZE": "4"}
    injectors = [FaultInjector.from_env({**env, "RANK": str(r)}) for r in range(3)]
    for injector in injectors:
        assert injector.targeted
        injector.step(1)  # armed at once, all three into one directory
    first = _fired(tmp_path / "fault_injection.json")
    others = [_fired(tmp_path / f"fault_injection.rank{r}.json") for r in (1, 2)]
    assert [first["rank"], *(m["rank"] for m in others)] == [0, 1, 2]
    assert others[0]["fired_at"] - others[0]["armed_at"] >= 0.3  # type: ignore[operator]
    assert read_marker(tmp_path) == FaultMarker.model_validate(first)
    assert [m.rank for m in read_rank_markers(tmp_path)] == [1, 2]
    assert "acted_at" not in first  # an exception in the loop acts at the next iteration end
    raises_soon(lambda: injectors[0].step(2), InjectedException)
    acted = json.loads((tmp_path / "fault_injection.json").read_text())
    assert acted["acted_at"] >= acted["fired_at"]


def test_a_fault_on_one_rank_writes_the_marker_it_always_wrote(tmp_path: Path) -> None:
    env = {"FAULT_TYPE": "WORKLOAD_EXC", "FAULT_RANK": "0", "FAULT_AT_ITER": "1"}
    env |= {"EXPERIMENT_DIR": str(tmp_path), "RANK": "0", "WORLD_SIZE": "2"}
    injector = FaultInjector.from_env(env)
    injector.step(1)
    _fired(tmp_path / "fault_injection.json")
    raises_soon(lambda: injector.step(2), InjectedException)
    keys = json.loads((tmp_path / "fault_injection.json").read_text())
    assert list(keys) == [
        "fault",
        "rank",
        "node",
        "iteration",
        "armed_at",
        "fired_at",
        "pid",
        "host",
    ]
    assert read_rank_markers(tmp_path) == []


def _experiment(token: str) -> Experiment:
    fault, ranks, iteration, nodes = token.split(":")
    return Experiment(
        entry=PoolEntry.of(FaultType(fault), ranks, int(iteration), int(nodes)),
        workload="tiny_gloo",
        gpus_per_node=4,
        pool="p",
        source="p",
        line=1,
    )


def test_a_run_is_valid_only_when_every_listed_rank_fired(tmp_path: Path) -> None:
    experiment = _experiment("SIGSTOP:1+6@1:5:2")
    job = Job(job_id="9", backend="local", state=JobState.FAILED, experiment_dir=tmp_path)

    def marker(rank: int, fired: bool, acted: bool = True) -> FaultMarker:
        return FaultMarker(
            fault=FaultType.SIGSTOP,
            rank=rank,
            node=rank // 4,
            iteration=5,
            armed_at=1,
            fired_at=2 if fired else None,
            acted_at=3 if fired and acted else None,
            pid=rank,
        )

    def why(*more: FaultMarker) -> str | None:
        artifacts = Artifacts(
            experiment_dir=tmp_path, fr_dir=tmp_path, marker=marker(1, True), rank_markers=[*more]
        )
        return run_invalid_reason(experiment, job, artifacts)

    assert why(marker(6, True)) is None
    assert why(marker(6, False)) == "rank 6's fault was armed but never fired: job 9 ended FAILED"
    assert why(marker(6, True, acted=False)) == (
        "rank 6's fault fired but never acted (a peer's failure ended it first): job 9 ended FAILED"
    )
    assert why() == "rank 6's fault never armed: job 9 ended FAILED"


# --- NODE_KILL -------------------------------------------------------------------------------


def test_node_kill_takes_the_launcher_and_its_tree_and_nothing_above() -> None:
    parent_of = {1: 0, 50: 1, 100: 50, 101: 100, 102: 100, 103: 100, 110: 101, 200: 50}
    assert descendants(100, parent_of) == [101, 102, 103, 110]
    assert node_processes(102, parent_of, launched=True) == [100, 101, 103, 110, 102]
    assert node_processes(102, parent_of, launched=False) == [102]
    assert node_processes(50, {50: 1}, launched=True) == [50]  # adopted by init: no launcher


RANK = textwrap.dedent(
    """
    import sys, time
    from pytest_faultloop import FaultInjector
    env = {"FAULT_TYPE": "NODE_KILL", "FAULT_RANK": "1", "FAULT_AT_ITER": "1",
           "RANK": sys.argv[1], "WORLD_SIZE": "3", "EXPERIMENT_DIR": sys.argv[2]}
    injector = FaultInjector.from_env(env)
    for iteration in range(1, 600):
        injector.step(iteration)
        time.sleep(0.05)
    """
)
LAUNCHER = textwrap.dedent(
    """
    import os, subprocess, sys
    env = dict(os.environ, LOCAL_WORLD_SIZE="3")
    ranks = [subprocess.Popen([sys.executable, "-c", sys.argv[1], str(r), sys.argv[2]], env=env)
             for r in range(3)]
    print(" ".join(str(r.pid) for r in ranks), flush=True)
    for r in ranks:
        r.wait()
    print("launcher finished", flush=True)
    """
)


def _run_tree(tmp_path: Path, script: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    """``script`` as a process whose tree carries a unique variable; returns it and the value."""
    token = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != "LOCAL_WORLD_SIZE"}
    process = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env={**env, "FAULTLOOP_TEST_TREE": token},
        stdout=subprocess.PIPE,
        text=True,
    )
    return process, token


def test_node_kill_sigkills_the_launcher_every_rank_and_itself(tmp_path: Path) -> None:
    launcher, token = _run_tree(tmp_path, LAUNCHER, RANK, str(tmp_path))
    try:
        assert launcher.wait(timeout=30) == -9
    finally:
        launcher.kill()
    out = launcher.stdout.read() if launcher.stdout else ""
    assert "launcher finished" not in out
    deadline = time.monotonic() + 5
    while live_processes_with_env("FAULTLOOP_TEST_TREE", token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert live_processes_with_env("FAULTLOOP_TEST_TREE", token) == []
    marker = read_marker(tmp_path)
    assert (
        marker is not None
        and marker.fired
        and (marker.fault, marker.node)
        == (
            FaultType.NODE_KILL,
            0,
        )
    )


SITTER = textwrap.dedent(
    """
    import subprocess, sys
    rank = subprocess.run([sys.executable, "-c", sys.argv[1], "1", sys.argv[2]])
    print(f"rank ended {rank.returncode}", flush=True)
    """
)


def test_a_rank_without_a_launcher_kills_only_itself(tmp_path: Path) -> None:
    """No LOCAL_WORLD_SIZE: the parent is not a launcher (here a plain process) and survives."""
    sitter, _ = _run_tree(tmp_path, SITTER, RANK, str(tmp_path))
    out, _ = sitter.communicate(timeout=30)
    assert sitter.returncode == 0 and "rank ended -9" in out
