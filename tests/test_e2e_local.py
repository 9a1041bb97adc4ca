"""End to end on the embedded default: real gloo jobs on the local backend, built-in analyzers
and judge, through pytest (subprocess runs)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
from support.full_disk import FILLER, fill, release, small_filesystem
from support.processes import events_with, live_processes_with_env, reaped
from support.sessions import only_session, sessions

from pytest_faultloop.analyzers import filter_harness_lines
from pytest_faultloop.jobs.backends.ports import LEASE_RANGE
from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES, DIMENSIONS
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    shutil.copytree(REPO / "experiments", pytester.path / "experiments")
    (pytester.path / "sbatch").mkdir()
    shutil.copy(REPO / "sbatch" / "tiny_gloo.sh", pytester.path / "sbatch")
    base = pytester.path / "out"
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(base))
    return base


def session_dir(base: Path) -> Path:
    session = only_session(base)
    return session


PYTEST_RUN = [sys.executable, "-m", "pytest", "experiments/", "-p", "no:cacheprovider"]


def start_pytest(directory: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """``pytest experiments/`` in ``directory``, its output read through a pipe."""
    return subprocess.Popen(
        PYTEST_RUN,
        cwd=directory,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def launchers_alive(experiment_dir: Path) -> list[int]:
    """Pids of processes whose environment names this experiment (launchers and ranks)."""
    return live_processes_with_env("EXPERIMENT_DIR", str(experiment_dir))


def test_smoke_pool_runs_for_real_and_every_cell_passes(
    pytester: pytest.Pytester, project: Path
) -> None:
    """The golden test of the injected pool: a hang, a crash, an exception, a signal and a
    clean control, real jobs, built-in analyzers; a regression in any cell fails CI."""
    result = pytester.runpytest_subprocess(
        "experiments/",
        "--faultloop-pool=smoke",
        "-p",
        "no:cacheprovider",
        "--junitxml=junit.xml",
        timeout=300,
    )
    result.assert_outcomes(passed=25)
    result.stdout.fnmatch_lines(
        [
            "*submitted: SIGKILL rank=1 iter=5 nodes=2 -> job=*",
            "*faultloop: 5 experiment(s): 5 scored*",
        ]
    )
    session = session_dir(project)
    report = (session / "experiments_report.md").read_text()
    assert "| SIGKILL | 2 | 1 | 5 |" in report and "| NONE | 2 | 0 | 5 |" in report
    stored = json.loads((session / "n2_SIGKILL_r1_i5" / "result.json").read_text())
    assert stored["artifacts"]["marker"]["fired_at"] is not None
    assert stored["job"]["state"] == "FAILED"
    assert stored["verdict"]["restart_correct"] == "true"
    # The analyzers never see the answer: the filtered log has no injection marker.
    log = Path(stored["artifacts"]["log"])
    raw = log.read_text().splitlines()
    assert any("FAULT INJECTION" in line for line in raw)
    seen = list(filter_harness_lines(raw))
    assert seen and not any(
        "FAULT INJECTION" in line or "[pytest_faultloop.inject]" in line for line in seen
    )
    evidence = json.dumps(stored["log_analysis"])
    assert "FAULT INJECTION" not in evidence


def test_sigterm_to_pytest_cancels_the_job_and_leaves_no_process(
    pytester: pytest.Pytester, project: Path
) -> None:
    env = {
        **os.environ,
        "PYTEST_ADDOPTS": os.environ.get("PYTEST_ADDOPTS", ""),
        "POOL": "GPU_SLEEP:1:5:2",
    }
    with reaped(start_pytest(pytester.path, env)) as proc:
        events = events_with(project, proc, "submitted:")
        assert events is not None, "the job never started"
        time.sleep(2)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
        experiment = events.parent / "n2_GPU_SLEEP_r1_i5"
        stored = json.loads((experiment / "result.json").read_text())
        assert stored["job"]["state"] == "CANCELLED"
        rows = (events.parent / "experiments.tsv").read_text().splitlines()
        assert len(rows) == 2 and rows[1].split("\t")[1] == "GPU_SLEEP"
        assert "cancelled: job=" in events.read_text()
        assert launchers_alive(experiment) == []


def sigint_ignored() -> None:
    """For ``preexec_fn``: SIGINT ignored, as a shell or CI runner leaves a background job."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_sigterm_to_a_background_xdist_run_cancels_the_workers_jobs(
    pytester: pytest.Pytester, project: Path
) -> None:
    """A CI runner's ``pytest -n 2`` in the background, stopped with SIGTERM: xdist stops each
    worker with SIGINT (which the workers inherited ignored), the worker cancels its job,
    nothing of it survives; the resumed session runs the experiment again, since a cancelled
    job has nothing to score."""
    env = {
        **os.environ,
        "POOL": "GPU_SLEEP:1:5:2",
        "FAULT_DELAY": "120",  # the job must still run when SIGTERM lands, however loaded
    }
    first = subprocess.Popen(
        [*PYTEST_RUN, "-n", "2"], cwd=pytester.path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
        preexec_fn=sigint_ignored,  # noqa: PLW1509 - only sets a signal disposition
    )  # fmt: skip
    with reaped(first) as proc:
        assert events_with(project, proc, "submitted:") is not None, "the job never started"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    session = session_dir(project)
    experiment = session / "n2_GPU_SLEEP_r1_i5"
    deadline = time.monotonic() + 60  # a process that is just ending is not a survivor
    while launchers_alive(experiment) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert launchers_alive(experiment) == []
    (record,) = (experiment / "logs" / "slurm").glob("*.local.json")
    assert json.loads(record.read_text())["stopped"] == "CANCELLED", out

    calm = {k: v for k, v in env.items() if k != "FAULT_DELAY"}
    resumed = subprocess.run(
        [*PYTEST_RUN, "-n", "2", "--faultloop-session", "last"],
        cwd=pytester.path, env=calm, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert "1 experiment(s): 1 scored" in resumed.stdout, resumed.stdout
    events = (session / "events.log").read_text()
    assert "CANCELLED: the job was cancelled before it ended" in events, events
    stored = json.loads((experiment / "result.json").read_text())
    assert stored["verdict"] is not None
    assert [a["job"]["state"] for a in stored["attempts"]] == ["CANCELLED"]


def test_a_run_damaged_by_a_full_disk_is_run_again_not_scored(
    pytester: pytest.Pytester, project: Path
) -> None:
    """The session's filesystem fills while a real job runs (a real ENOSPC on a small tmpfs):
    the run stops; once space is freed, the resumed session does not score the damaged run
    (its exit status could not be recorded) but runs the experiment again."""
    small_filesystem(project, size_mb=80)
    try:
        env = {**os.environ, "POOL": "SIGKILL:1:5:2", "FAULT_DELAY": "5"}
        with reaped(start_pytest(pytester.path, env)) as proc:
            assert events_with(project, proc, "submitted:") is not None, "the job never started"
            fill(project)
            out, _ = proc.communicate(timeout=300)
        assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
        assert "cannot write the session directory" in out, out
        assert "Traceback" not in out and "INTERNALERROR" not in out, out
        (project / FILLER).unlink()
        session = session_dir(project)
        damaged = [
            row.split("\t")[0] for row in (session / "experiments.tsv").read_text().splitlines()[1:]
        ]
        resumed = subprocess.run(
            [*PYTEST_RUN, "--faultloop-session", "last"],
            cwd=pytester.path, env=env, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert "1 experiment(s): 1 scored" in resumed.stdout, resumed.stdout
        stored = json.loads((session / "n2_SIGKILL_r1_i5" / "result.json").read_text())
        events = (session / "events.log").read_text()
        assert stored["verdict"] is not None and stored["job"]["job_id"] not in damaged, events
    finally:
        release(project)


def test_interrupted_pool_resumes_without_resubmitting_finished_jobs(
    pytester: pytest.Pytester, project: Path
) -> None:
    env = {**os.environ, "POOL": "SIGKILL:1:5:2 SIGTERM:1:5:2 SIGKILL:0:5:2", "BATCH_SIZE": "1"}
    with reaped(start_pytest(pytester.path, env)) as proc:
        events = events_with(project, proc, "submitted:", count=2)
        assert events is not None, "the second job never started"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
        session = events.parent
        first = [
            r.split("\t")[1:3] for r in (session / "experiments.tsv").read_text().splitlines()[1:]
        ]
        assert first == [["SIGKILL", "1"], ["SIGTERM", "1"]]

        resumed = subprocess.run(
            [*PYTEST_RUN, "--faultloop-session", "last"],
            check=False,
            cwd=pytester.path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert "error" not in resumed.stdout.splitlines()[-1], resumed.stdout
        rows = [
            r.split("\t")[1:3] for r in (session / "experiments.tsv").read_text().splitlines()[1:]
        ]
        assert rows == [["SIGKILL", "1"], ["SIGTERM", "1"], ["SIGTERM", "1"], ["SIGKILL", "0"]]
        assert (
            json.loads((session / "n2_SIGTERM_r1_i5" / "result.json").read_text())["job"]["state"]
            == "FAILED"
        )


@pytest.mark.parametrize("shared", [True, False], ids=["same-base-dir", "own-base-dirs"])
def test_two_pytest_runs_at_once_keep_apart(
    pytester: pytest.Pytester, project: Path, shared: bool
) -> None:
    """Two runs started together share the machine (and maybe the base directory): each gets
    its own session with only its own experiments, every run valid, every job a leased port."""
    pools = {"a": "SIGKILL:1:5:2 NONE:0:5:2", "b": "WORKLOAD_EXC:2:5:2 NONE:1:5:2"}
    env = dict(os.environ, PYTEST_ADDOPTS="-p no:langsmith_plugin -p no:hypothesispytest")
    bases = {name: project if shared else project.with_name(f"out-{name}") for name in pools}
    runs = {
        name: subprocess.Popen(
            [sys.executable, "-m", "pytest", "experiments/", "-p", "no:cacheprovider", "-q"],
            cwd=pytester.path,
            env=dict(env, POOL=pool, BASE_EXPERIMENTS_DIR=str(bases[name])),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, pool in pools.items()
    }
    outputs = {name: run.communicate(timeout=600)[0] for name, run in runs.items()}
    for name, out in outputs.items():
        assert runs[name].returncode in (0, 1), out
        assert "2 experiment(s): 2 scored" in out, out
    written = sorted({s for base in bases.values() for s in sessions(base)})
    assert len(written) == 2
    held = sorted(sorted(p.name for p in s.iterdir() if p.is_dir()) for s in written)
    assert held == [
        ["n2_NONE_r0_i5", "n2_SIGKILL_r1_i5"],
        ["n2_NONE_r1_i5", "n2_WORKLOAD_EXC_r2_i5"],
    ]
    ports: list[int] = []
    for session in written:
        rows = (session / "experiments.tsv").read_text().splitlines()[1:]
        assert len(rows) == 2
        for experiment in session.iterdir():
            if experiment.is_dir():
                result = json.loads((experiment / "result.json").read_text())
                assert result["broken"] is None, result["reason"]
                launch = next((experiment / "logs" / "slurm").glob("*.launch.out")).read_text()
                ports.append(int(re.search(r"rendezvous 127\.0\.0\.1:(\d+)", launch)[1]))
    assert all(port in LEASE_RANGE for port in ports), ports  # leased, not the kernel's pick
    records = [
        line
        for base in set(bases.values())
        for line in (base / "fault_injection" / "history.jsonl").read_text().splitlines()
    ]
    assert len(records) == 2


def test_the_launcher_option_runs_a_pool_under_torchrun(
    pytester: pytest.Pytester, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--faultloop-launcher=torchrun`` reaches the job: PyTorch's agent writes the log, and
    the built-in analyzers name the culprit in it."""
    monkeypatch.setenv("POOL", "SIGKILL:1:5:2")
    result = pytester.runpytest_subprocess(
        "experiments/", "--faultloop-launcher=torchrun", "-p", "no:cacheprovider", timeout=600
    )
    result.stdout.fnmatch_lines(["faultloop: backend=local workload=tiny_gloo *launcher=torchrun*"])
    stored = json.loads((session_dir(project) / "n2_SIGKILL_r1_i5" / "result.json").read_text())
    text = Path(stored["artifacts"]["log"]).read_text()
    assert "torch.distributed.elastic.multiprocessing.errors.ChildFailedError" in text
    verdict = stored["verdict"]
    log_dimensions = [d.name for d in DIMENSIONS if d.analysis == "log"]
    assert [verdict[d] for d in log_dimensions] == ["true"] * 4, verdict["notes"]
    # torchrun SIGTERMs a failed rank's node-mates at once, and some die before they dump;
    # the dumps alone cannot tell those from the culprit. FR must still suspect the culprit
    # and never a rank whose own dump shows it in step with the others.
    suspects = set(stored["fr_analysis"]["suspects"])
    dumps = Path(stored["artifacts"]["fr_dir"]).glob("_dump_*")
    dumped = {int(p.name.rsplit("_", 1)[1]) for p in dumps}
    assert 1 in suspects and not suspects & dumped, (suspects, dumped)


def test_a_frozen_smoke_session_replays_with_identical_verdicts(
    pytester: pytest.Pytester, project: Path
) -> None:
    live = pytester.runpytest_subprocess(
        "experiments/", "--faultloop-pool=smoke", "-p", "no:cacheprovider", timeout=300
    )
    assert "5 experiment(s): 5 scored" in live.stdout.str(), live.stdout.str()
    live_session = only_session(project)
    frozen = pytester.path / "frozen"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_faultloop",
            "freeze",
            str(live_session),
            "--into",
            str(frozen),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "froze 5 case(s)" in done.stdout
    replay = pytester.runpytest_subprocess("frozen/", "-p", "no:cacheprovider", timeout=300)
    assert "5 experiment(s): 5 scored" in replay.stdout.str(), replay.stdout.str()
    found = sessions(project)
    (replay_session,) = [s for s in found if s != live_session]

    def verdicts(session: Path) -> dict[str, dict[str, str]]:
        found = {}
        for path in session.glob("*/result.json"):
            verdict = json.loads(path.read_text())["verdict"]
            found[path.parent.name] = {
                k: verdict[k]
                for k in (
                    "restart_correct",
                    "rank_primary",
                    "rank_any",
                    "fault_described",
                    "fr_rank_correct",
                    "notes",
                )
            }
        return found

    assert verdicts(replay_session) == verdicts(live_session)
    assert (replay_session / "experiments.tsv").read_text().splitlines()[1:] == []


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def worker_running_a_job(base: Path, proc: subprocess.Popen[str]) -> int | None:
    """The pid of an xdist worker while the job it follows runs, found by the job's record:
    the parent of its node launcher, which inherited the worker's PYTEST_XDIST_WORKER, a
    child of the pytest run; the job is in the experiment's result.json (recorded: another
    process can re-attach to it) and has no node's exit status yet. None when the run ended,
    or five minutes passed, first."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        for record in base.glob("fault_injection/2*/*/logs/slurm/*.local.json"):
            job_id = record.name.split(".")[0]
            try:
                launcher = json.loads(record.read_text())["nodes"][0]["pid"]
                environ = Path(f"/proc/{launcher}/environ").read_bytes().split(b"\0")
                worker = parent_of(launcher)
                controller = parent_of(worker)
                stored = json.loads((record.parents[2] / "result.json").read_text())
                recorded = stored["job"]["job_id"] == job_id
            except (OSError, ValueError, KeyError, IndexError, TypeError):
                continue  # not recorded yet, or the launcher gone
            running = recorded and not list(record.parent.glob(f"{job_id}.node*.exit"))
            by_a_worker = any(v.startswith(b"PYTEST_XDIST_WORKER=") for v in environ)
            if running and by_a_worker and controller == proc.pid:
                return worker
        time.sleep(0.1)
    return None


def junit_outcomes(path: Path) -> dict[tuple[str, str], str]:
    """(experiment key, dimension) -> passed/failed/error/skipped, one per testcase (a cell
    with two testcases fails here)."""
    outcomes: dict[tuple[str, str], str] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        cell = (case.get("classname", "").rsplit(".", 1)[-1], case.get("name", ""))
        assert cell not in outcomes, f"{cell} has two testcases"
        tags = [c.tag for c in case if c.tag in ("error", "failure", "skipped")]
        outcomes[cell] = {"failure": "failed"}.get(tags[0], tags[0]) if tags else "passed"
    return outcomes


def test_a_worker_killed_mid_job_leaves_each_cell_reported_once_as_scored(
    pytester: pytest.Pytester, project: Path
) -> None:
    """SIGKILL to the xdist worker that follows a running job: the job goes on and another
    worker re-attaches to it (no second job); each cell is reported once — terminal, JUnit and
    the --lf cache agree — with the outcome the plugin scored (xdist reported the killed
    worker's cell FAILED, "worker crashed", beside its passing run: 11 reports for 10 items)."""
    env = {**os.environ, "POOL": "SIGKILL:1:5:1 WORKLOAD_EXC:0:5:1", "GPUS_PER_NODE": "2"}
    env["FAULT_DELAY"] = "5"  # the job still runs when its worker is found, however loaded
    command = [sys.executable, "-m", "pytest", "experiments/", "-n", "2", "--junitxml=junit.xml"]
    started = subprocess.Popen(
        command, cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    with reaped(started) as proc:
        worker = worker_running_a_job(project, proc)
        assert worker is not None, "no worker was seen following a running job"
        os.kill(worker, signal.SIGKILL)
        out, _ = proc.communicate(timeout=600)
    assert proc.returncode in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), out
    assert "went down while running" in out and "INTERNALERROR" not in out, out
    session = session_dir(project)
    assert len((session / "experiments.tsv").read_text().splitlines()) == 1 + 2, out
    assert "re-attached: job=" in (session / "events.log").read_text()

    scored: dict[tuple[str, str], str] = {}
    for stored in session.glob("*/result.json"):
        result = ExperimentResult.model_validate_json(stored.read_text())
        assert result.verdict is not None, result.reason
        for dimension in DIMENSION_NAMES:
            passed = DEFAULT_RULE.passes(dimension, result.verdict.value(dimension))
            outcome = "skipped" if passed is None else "passed" if passed else "failed"
            scored[(result.experiment.key, dimension)] = outcome
    assert junit_outcomes(pytester.path / "junit.xml") == scored, out
    summary = out.strip().splitlines()[-1]
    told = {word: int(n) for n, word in re.findall(r"(\d+) ([a-z]+)", summary)}
    assert told == Counter(scored.values()), summary  # no "rerun", no "error"
    lastfailed = pytester.path / ".pytest_cache" / "v" / "cache" / "lastfailed"
    recorded = json.loads(lastfailed.read_text()) if lastfailed.exists() else {}
    failing = {cell for cell, outcome in scored.items() if outcome == "failed"}
    assert {tuple(nodeid.split("::")[1:]) for nodeid in recorded} == failing
