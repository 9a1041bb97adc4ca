"""The breakdown by workload: a session whose jobs ran on two workloads (the pool's on the run's
workload, a Python test's on another) shows pass rates per workload and dimension, clustered by
experiment where trials repeat, and each workload's median job time, in the report, the HTML
summary and the leaderboard; a session on one workload shows none of it."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from support.fake_stages import make_project
from support.report_samples import make_result
from support.sessions import only_session

from pytest_faultloop.__main__ import main
from pytest_faultloop.engine.leaderboard import configurations, score_session, workload_table
from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.report.aggregate import aggregate_section, by_workload
from pytest_faultloop.report.html import summary_matrix
from pytest_faultloop.report.stats import clustered_rate, wilson
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES
from pytest_faultloop.scoring.pass_rule import DEFAULT_RULE
from pytest_faultloop.store.results import load_results

OTHER = "tiny_gloo_torchrun"
POOLS = {"p": "SIGKILL:1:5:2*3 GPU_SLEEP:3:5:2 SIGTERM:0:5:2\n"}
"""On the run's workload (tiny_gloo): one experiment of three trials, two of one."""
TESTS = f"""
def test_on_another_workload(faultloop):
    faultloop.run("SEGFAULT:2:5:2", workload="{OTHER}")
    faultloop.run("OS_ABORT:5:5:2", workload="{OTHER}")
"""
VERDICTS = {
    "SIGKILL:1:5:2#2": {"rank_primary": "false"},
    "SIGTERM:0:5:2": {"rank_primary": "false", "fault_described": "false"},
    f"SEGFAULT:2:5:2@workload={OTHER}": {"rank_any": "false"},
}
"""Every other cell passes (the fake judge's default)."""


@pytest.fixture
def session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run of the fake-stage project: five experiments on tiny_gloo, two on the other."""
    base = make_project(pytester, monkeypatch, pools=POOLS, verdicts=VERDICTS)
    monkeypatch.setenv("FAKE_LOG_ANALYZER", "off")  # a log on disk for the leaderboard
    monkeypatch.setenv("FAKE_JOB_SECONDS", "0.2")
    pytester.makepyfile(test_workloads=TESTS)
    result = pytester.runpytest_subprocess(
        "experiments/", "test_workloads.py", "--faultloop-pool=p"
    )
    # 3 experiments x 5 dimensions and the Python test; SIGKILL's rank_primary (2 of 3 trials)
    # and SIGTERM's rank_primary and fault_described fail
    result.assert_outcomes(passed=13, failed=3)
    return only_session(base)


def job_seconds(results: list[ExperimentResult], workload: str) -> list[float]:
    return [
        r.job.elapsed
        for r in results
        if r.experiment.workload == workload and r.job is not None and r.job.elapsed is not None
    ]


def expected_clusters(workload: str, dimension: str) -> list[tuple[int, int]]:
    """``(passed, trials)`` per experiment of ``workload``, counted from the verdicts the fake
    judge was given (a dimension passes unless VERDICTS says false)."""
    experiments = {
        "tiny_gloo": {"SIGKILL:1:5:2": 3, "GPU_SLEEP:3:5:2": 1, "SIGTERM:0:5:2": 1},
        OTHER: {f"SEGFAULT:2:5:2@workload={OTHER}": 1, f"OS_ABORT:5:5:2@workload={OTHER}": 1},
    }[workload]
    clusters = []
    for key, trials in experiments.items():
        keys = [f"{key}#{t}" for t in range(1, trials + 1)] if trials > 1 else [key]
        passed = sum(VERDICTS.get(k, {}).get(dimension) != "false" for k in keys)
        clusters.append((passed, trials))
    return clusters


def rate_text(clusters: list[tuple[int, int]]) -> str:
    """The report's ``k/n (rate%, low–high)``: Wilson, on the effective sample size where an
    experiment repeats (:func:`clustered_rate`)."""
    k, n = sum(c[0] for c in clusters), sum(c[1] for c in clusters)
    _, low, high = clustered_rate(clusters)
    return f"{k}/{n} ({round(100 * k / n)}%, {100 * low:.0f}–{100 * high:.0f})"


def test_two_workloads_get_a_row_each_with_counts_intervals_and_job_time(session: Path) -> None:
    report = (session / "experiments_report.md").read_text()
    results = load_results(session)
    assert {r.experiment.workload for r in results} == {"tiny_gloo", OTHER}
    section = report.split("### Pass rate by workload", 1)[1].split("###", 1)[0]
    header, _, gloo, other = [line for line in section.splitlines() if line.startswith("|")]
    assert header == "| WORKLOAD | scored | " + " | ".join(DIMENSION_NAMES) + " | median job s |"

    for line, workload, scored in ((gloo, "tiny_gloo", "5/5"), (other, OTHER, "2/2")):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[:2] == [workload, scored]
        for dimension, cell in zip(DIMENSION_NAMES, cells[2:-1], strict=True):
            assert cell == rate_text(expected_clusters(workload, dimension)), dimension
        seconds = job_seconds(results, workload)
        assert cells[-1] == f"{statistics.median(seconds):.1f} ({len(seconds)} jobs)"
    # the three trials of SIGKILL:1:5:2 are one cluster, not three independent draws: where
    # they agree, the interval is wider than Wilson's on 4 of 5
    fault_described = expected_clusters("tiny_gloo", "fault_described")
    assert fault_described == [(3, 3), (1, 1), (0, 1)]
    _, low, high = clustered_rate(fault_described)
    assert high - low > wilson(4, 5)[1] - wilson(4, 5)[0]

    html = summary_matrix(results)
    assert "By workload: the framework each job ran on" in html
    assert f"<td>{OTHER}</td><td>2/2</td>" in html


def test_the_leaderboard_breaks_each_configuration_down_by_workload(
    session: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configs = configurations(["builtin", "naive"], [], [])
    scored = score_session(session, configs)
    lines = workload_table(scored, DEFAULT_RULE)
    assert lines[0] == (
        "| configuration | workload | scored | " + " | ".join(DIMENSION_NAMES) + " | median job s |"
    )
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert [row[:2] for row in rows] == [
        ["builtin", "tiny_gloo"],
        ["builtin", OTHER],
        ["naive", "tiny_gloo"],
        ["naive", OTHER],
    ]
    for entry, row in zip([s for s in scored for _ in (1, 2)], rows, strict=True):
        workload = row[1]
        for dimension, cell in zip(DIMENSION_NAMES, row[3:-1], strict=True):
            clusters: dict[str, list[bool]] = {}
            for key, verdict in entry.verdicts.items():
                result = entry.results[key]
                if result.experiment.workload == workload and verdict is not None:
                    passed = DEFAULT_RULE.passes(dimension, verdict.value(dimension))
                    if passed is not None:
                        clusters.setdefault(result.experiment.base_key, []).append(passed)
            counted = [(sum(c), len(c)) for c in clusters.values()]
            assert cell == (rate_text(counted) if counted else "—"), (row[:2], dimension)
    assert main(["leaderboard", str(session), "--log-analyzer", "builtin"]) == 0
    out = capsys.readouterr().out
    assert "By workload (the framework each job ran on" in out
    assert f"| builtin | {OTHER} | 2/2 |" in out


def test_one_workload_shows_no_breakdown() -> None:
    results = [make_result(FaultType.GPU_SLEEP, 1), make_result(FaultType.SIGKILL, 0)]
    assert by_workload(results) == {}
    assert "by workload" not in aggregate_section(results)
    assert "By workload" not in summary_matrix(results)


def test_a_workload_without_job_times_shows_a_dash() -> None:
    """Results stored without a job's start and end (a replayed case runs no job)."""
    plain = make_result(FaultType.GPU_SLEEP, 1)
    other = plain.model_copy(
        update={"experiment": plain.experiment.model_copy(update={"workload": OTHER})}
    )
    rows = by_workload([plain, other])
    assert list(rows) == ["llama4_scout", OTHER]
    assert rows[OTHER].median_job == "—"
    assert "| " + OTHER + " | 1/1 |" in aggregate_section([plain, other])
