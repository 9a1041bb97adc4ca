"""End to end on the real local Slurm cluster: pytest submits real tiny_gloo jobs with sbatch
from two xdist workers, never more than two in flight; a resumed session re-attaches the jobs
an interrupted run left running."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.processes import events_with, foreground_sigint
from support.sessions import only_session

from pytest_faultloop.jobs.backends.slurm_cli import SlurmCli

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slurm


def slurm_project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The repository's pools and job scripts in the test's directory; the experiments' base."""
    shutil.copytree(REPO / "experiments", pytester.path / "experiments")
    shutil.copytree(
        REPO / "sbatch", pytester.path / "sbatch", ignore=shutil.ignore_patterns("local-cluster")
    )
    base = pytester.path / "out"
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(base))
    return base


def run_on_slurm(pytester: pytest.Pytester, *options: str) -> pytest.RunResult:
    """``pytest experiments/`` on the Slurm backend, with ``options``, in a subprocess."""
    return pytester.runpytest_subprocess(
        "experiments/", "--faultloop-backend=slurm", *options, "-p", "no:cacheprovider",
        timeout=600,
    )  # fmt: skip


def test_smoke_pool_on_slurm_with_two_workers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, slurm_cluster: object
) -> None:
    base = slurm_project(pytester, monkeypatch)
    monkeypatch.setenv("POOL", "SIGKILL:1:5:2 WORKLOAD_EXC:3:5:2 NONE:0:5:2")
    result = run_on_slurm(pytester, "-n", "2", "--dist", "loadscope", "--faultloop-poll-interval=5")
    outcomes = result.parseoutcomes()
    assert outcomes.get("error", 0) == 0, result.stdout.str()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 15
    session = only_session(base)
    rows = [r.split("\t") for r in (session / "experiments.tsv").read_text().splitlines()[1:]]
    assert sorted(r[1] for r in rows) == ["NONE", "SIGKILL", "WORKLOAD_EXC"]
    assert len({r[0] for r in rows}) == 3
    spans = []
    for row in rows:
        stored = json.loads((Path(row[5]) / "result.json").read_text())
        assert stored["job"]["backend"] == "slurm" and stored["job"]["job_id"] == row[0]
        spans.append((stored["job"]["started_at"], stored["job"]["ended_at"]))
        assert list((Path(row[5]) / "logs" / "slurm").glob(f"{row[0]}.*.1.main_workload.log"))
    starts = sorted(s for s, _ in spans)
    # Slurm times have 1 s resolution: the third job starts no earlier than the first end.
    assert starts[2] >= min(e for _, e in spans) - 1


def test_a_rank_that_leaves_early_on_slurm_is_named(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, slurm_cluster: object
) -> None:
    """The incidents pool's program bug on the real Slurm cluster, each node under torchrun:
    rank 6 of 8 (node 1's third) leaves the loop and exits 0, and the built-in analyzers name
    it. (Whether its decision reads STOP depends on whether torchrun's agent still had a
    node-mate to stop when it looked: tests/test_program_bugs.py reads both kinds of table.)"""
    base = slurm_project(pytester, monkeypatch)
    monkeypatch.setenv("POOL", "EARLY_EXIT:6:5:2")
    result = run_on_slurm(pytester, "--faultloop-launcher=torchrun", "--faultloop-poll-interval=2")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 5, result.stdout.str()
    stored = json.loads((only_session(base) / "n2_EARLY_EXIT_r6_i5" / "result.json").read_text())
    assert stored["job"]["backend"] == "slurm" and stored["artifacts"]["marker"]["fired_at"]
    assert [i["rank"] for i in stored["log_analysis"]["primary"]] == [6]
    assert 6 in stored["fr_analysis"]["suspects"]


@pytest.mark.slow
def test_kept_slurm_jobs_are_re_attached_by_the_resumed_session(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, slurm_cluster: object
) -> None:
    base = slurm_project(pytester, monkeypatch)
    monkeypatch.setenv("POOL", "NONE:0:5:2 SIGKILL:1:5:2")
    # both jobs must still run when the interrupt lands, however loaded the machine: the fault
    # fires 30 s after its anchor, and the clean run trains on for 40 s
    monkeypatch.setenv("FAULT_DELAY", "30")
    monkeypatch.setenv("FAULTLOOP_EXIT_MARGIN_S", "40")
    slurm = ("--faultloop-backend=slurm", "--faultloop-poll-interval=2", "-p", "no:cacheprovider")
    first = subprocess.Popen(
        [sys.executable, "-m", "pytest", "experiments/", "--faultloop-keep-jobs", *slurm],
        cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=foreground_sigint,  # noqa: PLW1509 - only sets a signal disposition
    )  # fmt: skip
    job_ids: list[str] = []
    try:
        events_with(base, first, "submitted:", count=2)  # both jobs run (checked below)
        first.send_signal(signal.SIGINT)
        output, _ = first.communicate(timeout=300)
        session = only_session(base)
        rows_before = (session / "experiments.tsv").read_text().splitlines()
        job_ids = [row.split("\t")[0] for row in rows_before[1:]]
        assert len(job_ids) == 2, output  # both submitted before the interrupt
        assert (session / "events.log").read_text().count("left running: job=") == 2, output
        left = [SlurmCli().scontrol_job(job_id) for job_id in job_ids]  # Slurm still has both
        assert all(record is not None and record.state.active for record in left), left

        resumed = pytester.runpytest_subprocess(
            "experiments/", "--faultloop-session", "last", *slurm, timeout=600
        )
        resumed.assert_outcomes(passed=10)
        resumed.stdout.fnmatch_lines(["*re-attached: job=*"])
        assert "submitted:" not in resumed.stdout.str()  # nothing submitted again
        assert (session / "experiments.tsv").read_text().splitlines() == rows_before
        stored = json.loads((session / "n2_SIGKILL_r1_i5" / "result.json").read_text())
        assert stored["job"]["backend"] == "slurm" and stored["job"]["job_id"] in job_ids
        assert stored["job"]["state"] == "FAILED"
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        if job_ids:
            subprocess.run(["scancel", *job_ids], check=False)
