"""A pytester project whose conftest drives experiments through the plugin's hooks.

The fake job records its start and end in ``jobs.log`` so tests can count runs and check the
in-flight limit; verdicts come from ``verdicts.json`` (key -> dimension values, or
``{"broken": "..."}`` to make the judge fail; FAKE_JUDGE=off leaves judging to the plugin).
``named.json`` gives the ranks the fake log analysis names (key -> list; default: the
injected rank; ``[]``: none, and no attribution text). ``never_fired.json`` lists keys whose
fault never fires (``KEY@1``: only on the first job).
FAKE_JOB_BARRIER=N makes each job wait until N have run at once (at most 30 s), so in-flight
peaks do not depend on the machine's speed. FAKE_LOG_SECONDS makes the log analysis sleep; FAKE_LOG_ANALYZER=off leaves it to the plugin
and gives each experiment a small ``fake.log``. FAKE_LOG_HOLD=KEY,KEY (or ``*``) holds those
experiments' log analysis until a file ``release`` appears beside ``jobs.log`` (at most 600 s),
so a test can act while a run is certainly in the middle of them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CONFTEST = """
import json, os, time, zlib
from pathlib import Path
import pytest
from pytest_faultloop.scoring.judges import JudgeError
from pytest_faultloop.models import (Artifacts, Decision, FaultMarker, FrAnalysis, Job,
    JobState, LogAnalysis, Verdict)
from pytest_faultloop.scoring.dimensions import DIMENSIONS

HERE = Path(__file__).parent
JOB_SECONDS = float(os.environ.get("FAKE_JOB_SECONDS", "0.05"))
ALL_TRUE = {d.name: d.values[0] for d in DIMENSIONS}  # each dimension's best label


def _log(line):
    fd = os.open(HERE / "jobs.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, (line + "\\n").encode())
    os.close(fd)


def _meet(peers):
    # stay until `peers` jobs have run at once (or 30 s pass): a peak that does not hang on
    # how fast a loaded machine starts the jobs; once reached, jobs no longer wait
    deadline = time.monotonic() + 30
    while peers and time.monotonic() < deadline:
        level = 0
        for line in (HERE / "jobs.log").read_text().splitlines():
            level += 1 if line.startswith("start") else -1
            if level >= peers:
                return
        time.sleep(0.02)


@pytest.hookimpl
def pytest_faultloop_run_job(config, spec):
    start = time.time()
    _log(f"start {spec.experiment.key} {start:.4f} {os.getpid()}")
    _meet(int(os.environ.get("FAKE_JOB_BARRIER", "0")))
    time.sleep(JOB_SECONDS)
    end = time.time()
    _log(f"end {spec.experiment.key} {end:.4f} {os.getpid()}")
    state = JobState.FAILED
    if spec.experiment.key in json.loads((HERE / "submit_failed.json").read_text() or "[]"):
        state = JobState.SUBMIT_FAILED
    job_id = str(zlib.crc32(f"{spec.experiment.key}{start}".encode()))
    return Job(job_id=job_id, backend="fake", state=state,
               exit_code="1:0", reason="sbatch: error: fake refusal" if state == JobState.SUBMIT_FAILED else None,
               experiment_dir=spec.experiment_dir, submitted_at=start, started_at=start,
               ended_at=end)


@pytest.hookimpl
def pytest_faultloop_collect_artifacts(config, experiment, job, experiment_dir):
    e = experiment.entry
    never = json.loads((HERE / "never_fired.json").read_text() or "[]")
    jobs = (HERE / "jobs.log").read_text().splitlines() if (HERE / "jobs.log").exists() else []
    starts = sum(line.split()[:2] == ["start", experiment.key] for line in jobs)
    unfired = experiment.key in never or (f"{experiment.key}@1" in never and starts == 1)
    markers = [FaultMarker(fault=e.fault, rank=r, node=r // experiment.gpus_per_node,
                           iteration=e.iter, armed_at=1.0,
                           fired_at=None if unfired else 2.0, pid=1,
                           acted_at=None if unfired or len(e.ranks) == 1 else 2.0)
               for r in e.ranks]
    log = None
    if os.environ.get("FAKE_LOG_ANALYZER") == "off":
        log = experiment_dir / "fake.log"
        log.write_text(f"[rank{e.rank}]: RuntimeError: fake failure\\n")
    return Artifacts(experiment_dir=experiment_dir, fr_dir=experiment_dir / "checkpoints",
                     marker=markers[0], rank_markers=markers[1:], log=log)


@pytest.hookimpl
def pytest_faultloop_analyze_log(config, experiment, artifacts):
    if os.environ.get("FAKE_LOG_ANALYZER") == "off":
        return None
    time.sleep(float(os.environ.get("FAKE_LOG_SECONDS", "0")))
    held = os.environ.get("FAKE_LOG_HOLD", "").split(",")
    deadline = time.monotonic() + 600
    while (experiment.key in held or "*" in held) and not (HERE / "release").exists():
        assert time.monotonic() < deadline, "FAKE_LOG_HOLD: never released"
        time.sleep(0.05)
    named = json.loads((HERE / "named.json").read_text() or "{}")
    ranks = named.get(experiment.key, [experiment.entry.rank])
    text = f"Primary issues: [{', '.join(f'rank {r}' for r in ranks)}]" if ranks else ""
    return LogAnalysis(analyzer="fake", decision=Decision.RESTART,
                       decision_text="RESTART IMMEDIATE", attribution_text=text)


@pytest.hookimpl
def pytest_faultloop_analyze_fr(config, experiment, artifacts):
    return FrAnalysis(analyzer="fake", suspects=[experiment.entry.rank], dumps_read=2)


@pytest.hookimpl
def pytest_faultloop_judge(config, experiment, artifacts, log_analysis, fr_analysis):
    if os.environ.get("FAKE_JUDGE") == "off":
        return None
    table = json.loads((HERE / "verdicts.json").read_text() or "{}")
    values = table.get(experiment.key, {})
    if "broken" in values:
        raise JudgeError(values["broken"])
    return Verdict(judge="fake", notes=f"fake notes for {experiment.key}",
                   **{**ALL_TRUE, **values})
"""


def make_project(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    pools: dict[str, str] | None = None,
    verdicts: dict[str, dict[str, str]] | None = None,
    submit_failed: list[str] | None = None,
    never_fired: list[str] | None = None,
    named: dict[str, list[int]] | None = None,
) -> Path:
    """Write the project: ``experiments/`` (the repo's pools unless ``pools`` is given, and the
    repo's workload registry), the fake-stage conftest, and an isolated BASE_EXPERIMENTS_DIR."""
    experiments = pytester.path / "experiments"
    experiments.mkdir()
    shutil.copy(REPO / "experiments" / "workloads.toml", experiments)
    if pools is None:
        for pool in (REPO / "experiments").glob("*.pool"):
            shutil.copy(pool, experiments)
    else:
        for name, text in pools.items():
            (experiments / f"{name}.pool").write_text(text)
    pytester.makeconftest(CONFTEST)
    (pytester.path / "verdicts.json").write_text(json.dumps(verdicts or {}))
    (pytester.path / "submit_failed.json").write_text(json.dumps(submit_failed or []))
    (pytester.path / "never_fired.json").write_text(json.dumps(never_fired or []))
    (pytester.path / "named.json").write_text(json.dumps(named or {}))
    base = pytester.path / "out"
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(base))
    return base


def job_runs(pytester: pytest.Pytester) -> list[tuple[str, str, float, int]]:
    """``(event, key, time, pid)`` rows of the fake job log."""
    path = pytester.path / "jobs.log"
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        event, key, stamp, pid = line.split()
        rows.append((event, key, float(stamp), int(pid)))
    return rows


def started(pytester: pytest.Pytester) -> list[str]:
    return [key for event, key, _, _ in job_runs(pytester) if event == "start"]


def max_in_flight(pytester: pytest.Pytester) -> int:
    """The most jobs running at once, from the jobs' own start/end times."""
    level = peak = 0
    for event, *_ in sorted(job_runs(pytester), key=lambda r: (r[2], r[0] == "start")):
        level += 1 if event == "start" else -1
        peak = max(peak, level)
    return peak
