"""Slurm CLI parsing and retries, on outputs captured from the real local cluster (no cluster
needed: these run everywhere)."""

from __future__ import annotations

from pathlib import Path

import pytest
from slurm_support import job_spec, write_script

from pytest_faultloop.jobs.backends.slurm import cluster_reachable, sbatch_arguments
from pytest_faultloop.jobs.backends.slurm_cli import (
    RetryPolicy,
    SlurmCli,
    SlurmCommandError,
    parse_job_id,
    parse_sacct_rows,
    parse_scontrol_job,
    parse_state,
    parse_time,
)
from pytest_faultloop.models import JobState

CAPTURED = Path(__file__).parent / "fixtures" / "slurm"


def scontrol(name: str) -> str:
    return (CAPTURED / f"scontrol_{name}.txt").read_text()


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("COMPLETED", JobState.COMPLETED),
        ("FAILED", JobState.FAILED),
        ("TIMEOUT", JobState.TIMEOUT),
        ("CANCELLED by 0", JobState.CANCELLED),
        ("CANCELLED+", JobState.CANCELLED),
        ("NODE_FAIL", JobState.NODE_FAIL),
        ("OUT_OF_MEMORY", JobState.OUT_OF_MEMORY),
        ("PREEMPTED", JobState.PREEMPTED),
        ("PENDING", JobState.PENDING),
        ("RUNNING", JobState.RUNNING),
        ("COMPLETING", JobState.COMPLETING),
        ("CONFIGURING", JobState.PENDING),
        ("REQUEUED", JobState.PENDING),
        ("SUSPENDED", JobState.RUNNING),
        ("REVOKED", JobState.CANCELLED),
        ("BOOT_FAIL", JobState.BOOT_FAIL),
        ("DEADLINE", JobState.DEADLINE),
        ("", JobState.UNKNOWN),
        ("SOMETHING_NEW", JobState.UNKNOWN),
    ],
)
def test_states_match_by_prefix(text: str, state: JobState) -> None:
    assert parse_state(text) is state


@pytest.mark.parametrize(
    ("name", "job_id", "state", "exit_code", "reason"),
    [
        ("pending", "10", JobState.PENDING, "0:0", "Resources"),
        ("running", "9", JobState.RUNNING, "0:0", None),
        ("completed", "7", JobState.COMPLETED, "0:0", None),
        ("failed", "8", JobState.FAILED, "3:0", "NonZeroExitCode"),
        ("cancelled", "9", JobState.CANCELLED, "0:15", None),
        ("timeout", "10", JobState.TIMEOUT, "0:15", "TimeLimit"),
    ],
)
def test_scontrol_records(
    name: str, job_id: str, state: JobState, exit_code: str, reason: str | None
) -> None:
    record = parse_scontrol_job(scontrol(name), job_id)
    assert record is not None
    assert (record.state, record.exit_code, record.reason) == (state, exit_code, reason)
    assert record.source == "scontrol"


def test_scontrol_times() -> None:
    pending = parse_scontrol_job(scontrol("pending"), "10")
    timeout = parse_scontrol_job(scontrol("timeout"), "10")
    assert pending is not None and timeout is not None
    assert pending.started_at is None and pending.ended_at is None
    assert timeout.started_at is not None and timeout.ended_at is not None
    assert timeout.ended_at - timeout.started_at == 14


def test_scontrol_other_job_is_none() -> None:
    assert parse_scontrol_job(scontrol("completed"), "70") is None


def test_completion_file_rows() -> None:
    text = (CAPTURED / "sacct_c.txt").read_text()
    expected = {
        "7": (JobState.COMPLETED, "0:0"),
        "8": (JobState.FAILED, "3:0"),
        "9": (JobState.CANCELLED, "0:0"),
        "10": (JobState.TIMEOUT, "0:0"),
    }
    for job_id, (state, exit_code) in expected.items():
        record = parse_sacct_rows(text, job_id, "sacct -c")
        assert record is not None
        assert (record.state, record.exit_code) == (state, exit_code)
    assert parse_sacct_rows(text, "1", "sacct -c") is None


def test_sacct_keeps_qualifier_and_last_repeat() -> None:
    text = (
        "5|COMPLETED|0:0|2026-11-01T10:00:00|2026-11-01T10:00:01|\n"
        "5.batch|CANCELLED|0:15|2026-11-29T21:00:15|2026-11-29T21:00:16|\n"
        "5|CANCELLED by 0|0:15|2026-11-29T21:00:15|2026-11-29T21:00:16|\n"
    )
    record = parse_sacct_rows(text, "5", "sacct")
    assert record is not None
    assert (record.state, record.raw_state) == (JobState.CANCELLED, "CANCELLED by 0")


def test_time_parsing() -> None:
    assert parse_time("Unknown") is None
    assert parse_time("None") is None
    assert parse_time("") is None
    assert parse_time("2026-11-29T21:00:29") == parse_time("2026-11-29T21:00:15") + 14  # type: ignore[operator]


def test_job_id_parsing() -> None:
    assert parse_job_id("12\n") == "12"
    assert parse_job_id("12;faultloop\n") == "12"
    with pytest.raises(SlurmCommandError, match="unexpected output"):
        parse_job_id("Submitted batch job 12\n")


@pytest.mark.parametrize(
    ("message", "transient"),
    [
        ("Batch job submission failed: Unable to contact slurm controller (connect failure)", True),
        ("slurm_load_jobs error: Socket timed out on send/recv operation", True),
        ("Batch job submission failed: Resource temporarily unavailable", True),
        ("Batch job submission failed: Node count specification invalid", False),
        ("Batch job submission failed: Requested node configuration is not available", False),
        ("slurm_load_jobs error: Invalid job id specified", False),
    ],
)
def test_transient_errors(message: str, transient: bool) -> None:
    assert SlurmCommandError(["sbatch"], 1, message).transient is transient


def test_retry_delays_back_off_within_deadline() -> None:
    assert RetryPolicy(deadline_s=10, first_delay_s=0.5, max_delay_s=2).delays() == [
        0.5,
        1.0,
        2.0,
        2.0,
        2.0,
        2.0,
    ]


def fake_tool(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text("#!/bin/bash\n" + body + "\n")
    tool.chmod(0o755)


def test_transient_errors_are_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "attempts"
    fake_tool(
        tmp_path / "bin",
        "scontrol",
        f"n=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 )); echo $n > {counter}\n"
        '[ $n -ge 3 ] && { echo "JobId=4 JobState=COMPLETED ExitCode=0:0"; exit 0; }\n'
        'echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2\n'
        "exit 1",
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{Path('/usr/bin')}:{Path('/bin')}")
    cli = SlurmCli(RetryPolicy(deadline_s=5, first_delay_s=0.05, max_delay_s=0.1))
    record = cli.scontrol_job("4")
    assert record is not None and record.state is JobState.COMPLETED
    assert counter.read_text().strip() == "3"


def test_permanent_errors_are_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tmp_path / "attempts"
    fake_tool(
        tmp_path / "bin",
        "sbatch",
        f"echo x >> {counter}\n"
        'echo "sbatch: error: Batch job submission failed: Node count specification invalid" >&2\n'
        "exit 1",
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    cli = SlurmCli(RetryPolicy(deadline_s=5, first_delay_s=0.05))
    with pytest.raises(SlurmCommandError) as caught:
        cli.sbatch(["job.sh"], {}, "faultloop:x")
    assert caught.value.message == "Batch job submission failed: Node count specification invalid"
    assert counter.read_text().count("x") == 1


def test_lost_sbatch_reply_finds_the_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A timeout after slurmctld accepted the job must not submit it a second time."""
    counter = tmp_path / "attempts"
    fake_tool(
        tmp_path / "bin",
        "sbatch",
        f"echo x >> {counter}\n"
        'echo "sbatch: error: Batch job submission failed: Socket timed out on send/recv '
        'operation" >&2\nexit 1',
    )
    fake_tool(tmp_path / "bin", "squeue", 'echo "41|(null)"; echo "42|faultloop:token"')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    cli = SlurmCli(RetryPolicy(deadline_s=5, first_delay_s=0.05))
    assert cli.sbatch(["job.sh"], {}, "faultloop:token") == "42"
    assert counter.read_text().count("x") == 1


def test_sbatch_arguments_follow_the_seed(tmp_path: Path) -> None:
    spec = job_spec(
        tmp_path,
        tmp_path / "job.sh",
        nodes=2,
        gpus_per_node=4,
        time_limit_s=90,
        env={"FAULT_TYPE": "GPU_SLEEP", "LIST": "a,b"},
    )
    spec = spec.model_copy(update={"account": "acct", "partition": "part"})
    logs = spec.experiment_dir / "logs" / "slurm"
    args = sbatch_arguments(spec, gres=False)
    assert args == [
        "--job-name=faultloop-n2_NONE_r0_i1",
        "--nodes=2",
        "--ntasks-per-node=4",
        "--time=2",
        "--exclusive",
        "--mem=0",
        f"--output={logs}/%j.launch.out",
        f"--error={logs}/%j.launch.err",
        f"--export=ALL,EXPERIMENT_DIR={spec.experiment_dir},FAULT_TYPE=GPU_SLEEP",
        "--account=acct",
        "--partition=part",
        str(tmp_path / "job.sh"),
    ]
    assert "--gpus-per-node=4" in sbatch_arguments(spec, gres=True)


def test_time_limit_is_at_least_one_minute(tmp_path: Path) -> None:
    spec = job_spec(tmp_path, write_script(tmp_path, "true"), time_limit_s=5)
    assert "--time=1" in sbatch_arguments(spec, gres=False)


def test_unreachable_cluster_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "missing.conf"))
    reason = cluster_reachable()
    assert reason is not None
    assert "missing.conf does not exist" in reason and "start.sh 4" in reason
