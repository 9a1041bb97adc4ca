"""Verdicts become outcomes; broken experiments ERROR; notes reach every report."""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.fake_stages import make_project, started
from support.sessions import only_session

from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES

POOL = {"p": "GPU_SLEEP:1:5:2\nSIGKILL:0:5:2\n"}


def run_with(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    verdict: dict[str, str],
    *args: str,
    dimension: str = "",
) -> pytest.RunResult:
    make_project(pytester, monkeypatch, pools=POOL, verdicts={"GPU_SLEEP:1:5:2": verdict})
    keyword = f"GPU_SLEEP and {dimension}" if dimension else "GPU_SLEEP"
    return pytester.runpytest("experiments/", "--faultloop-pool=p", "-k", keyword, "-rA", *args)


@pytest.mark.parametrize(
    ("dimension", "value", "outcome", "args"),
    [
        ("restart_correct", "true", "passed", ()),
        ("restart_correct", "false", "failed", ()),
        ("restart_correct", "N/A", "skipped", ()),
        ("rank_primary", "true", "passed", ()),
        ("rank_primary", "false", "failed", ()),
        ("rank_primary", "partial", "failed", ()),
        ("rank_primary", "partial", "passed", ("--faultloop-accept-partial",)),
        ("rank_any", "true", "passed", ()),
        ("rank_any", "false", "failed", ()),
        ("fault_described", "partial", "failed", ()),
        ("fault_described", "partial", "passed", ("--faultloop-accept-partial",)),
        ("fault_described", "false", "failed", ()),
        ("fr_rank_correct", "rank", "passed", ()),
        ("fr_rank_correct", "node", "failed", ()),
        ("fr_rank_correct", "node", "passed", ("--faultloop-fr-scope=node",)),
        ("fr_rank_correct", "segment", "failed", ("--faultloop-fr-scope=node",)),
        ("fr_rank_correct", "segment", "passed", ("--faultloop-fr-scope=segment",)),
        ("fr_rank_correct", "false", "failed", ("--faultloop-fr-scope=segment",)),
        ("fr_rank_correct", "no_dumps", "failed", ("--faultloop-fr-scope=segment",)),
    ],
)
def test_each_verdict_value_maps_to_an_outcome(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    dimension: str,
    value: str,
    outcome: str,
    args: tuple[str, ...],
) -> None:
    result = run_with(pytester, monkeypatch, {dimension: value}, *args, dimension=dimension)
    result.assert_outcomes(**{outcome: 1})
    if outcome == "failed":
        result.stdout.fnmatch_lines(
            [
                f"GPU_SLEEP:1:5:2 {dimension} = {value} (expected *)",
                "judge notes: fake notes for GPU_SLEEP:1:5:2",
            ]
        )
        assert "Traceback" not in result.stdout.str()
        assert "runner.py" not in result.stdout.str()
    if outcome == "skipped":
        result.stdout.fnmatch_lines(
            ["*restart_correct is N/A: no expectation for GPU_SLEEP:1:5:2*"]
        )


@pytest.mark.parametrize(
    ("named", "said"),
    [([3], "named primary rank 3; expected rank 1"), ([], "named no rank; expected rank 1")],
)
def test_a_failure_says_what_the_analyzer_named(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, named: list[int], said: str
) -> None:
    make_project(pytester, monkeypatch, pools=POOL, named={"GPU_SLEEP:1:5:2": named})
    monkeypatch.setenv("FAKE_JUDGE", "off")
    result = pytester.runpytest(
        "experiments/", "--faultloop-pool=p", "-k", "GPU_SLEEP and rank_primary"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "GPU_SLEEP:1:5:2 rank_primary = false (expected true)",
            said,
            "judge notes: Main gap: rank 1 not named (the analyzer named *",
            "*Captured faultloop call*",
            "rank_primary: false",
            said,
        ],
        consecutive=True,
    )
    after = result.stdout.lines.index("log analyzer (fake): RESTART IMMEDIATE") + 1
    expected = "  Primary issues: [rank 3]" if named else "FR analyzer (fake): suspects [1], "
    assert result.stdout.lines[after].startswith(expected)  # no blank line between


def test_judge_failure_errors_every_item_with_its_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_with(pytester, monkeypatch, {"broken": "HTTP 500 after 3 tries"})
    result.assert_outcomes(errors=5)
    result.stdout.fnmatch_lines(["*GPU_SLEEP:1:5:2: judge_failed: HTTP 500 after 3 tries*"])
    assert "Traceback" not in result.stdout.str()


RAISING_LOG_ANALYZER = """
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_faultloop_analyze_log(config, experiment, artifacts):
    if experiment.key == "SIGKILL:0:5:2":
        raise RuntimeError("logsage crashed: out of memory in the tokenizer")
"""


def test_an_analyzer_hook_that_raises_errors_its_experiment_and_nothing_else(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A conftest's analyzer raising: that experiment's items ERROR with analysis_failed and the
    exception's message (recorded so); the other experiment is scored; no traceback."""
    base = make_project(pytester, monkeypatch, pools=POOL)
    (pytester.path / "experiments" / "conftest.py").write_text(RAISING_LOG_ANALYZER)
    result = pytester.runpytest("experiments/", "--faultloop-pool=p")
    result.assert_outcomes(passed=5, errors=5)
    message = "analysis_failed: RuntimeError: logsage crashed: out of memory in the tokenizer"
    result.stdout.fnmatch_lines(
        [f"*ERROR at setup of SIGKILL:0:5:2 {d}*" for d in DIMENSION_NAMES]
        + ["faultloop: 2 experiment(s): 1 scored, 1 without a valid score (1 analysis_failed)"]
    )
    output = result.stdout.str() + result.stderr.str()
    assert result.stdout.lines.count(f"SIGKILL:0:5:2: {message}") == 5
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert sorted(started(pytester)) == ["GPU_SLEEP:1:5:2", "SIGKILL:0:5:2"]
    session = only_session(base)
    stored = json.loads((session / "n2_SIGKILL_r0_i5" / "result.json").read_text())
    assert (stored["broken"], stored["verdict"]) == ("analysis_failed", None)
    assert stored["reason"] == message.removeprefix("analysis_failed: ")


CORRUPT_MARKER = """
import pytest

from pytest_faultloop.store.artifacts import collect_artifacts


@pytest.hookimpl(tryfirst=True)
def pytest_faultloop_collect_artifacts(config, experiment, job, experiment_dir):
    if experiment.key == "SIGKILL:0:5:2":
        (experiment_dir / "fault_injection.json").write_text('{"fault": "SIGK')
        return collect_artifacts(experiment_dir, job.job_id)
"""


def test_a_corrupt_marker_on_a_live_run_is_recorded_as_analysis_failed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The live path reads a job's ``fault_injection.json`` as the replay does: a truncated one
    ERRORs that experiment with the file named, and its result is stored."""
    base = make_project(pytester, monkeypatch, pools=POOL)
    (pytester.path / "experiments" / "conftest.py").write_text(CORRUPT_MARKER)
    result = pytester.runpytest("experiments/", "--faultloop-pool=p")
    result.assert_outcomes(passed=5, errors=5)
    result.stdout.fnmatch_lines(
        ["*SIGKILL:0:5:2: analysis_failed: *fault_injection.json: not a fault marker*"]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    stored = json.loads((only_session(base) / "n2_SIGKILL_r0_i5" / "result.json").read_text())
    assert stored["broken"] == "analysis_failed" and "fault_injection.json" in stored["reason"]


def test_fault_that_never_fired_is_an_invalid_run_not_a_failure(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOL, never_fired=["SIGKILL:0:5:2"])
    result = pytester.runpytest("experiments/", "--faultloop-pool=p")
    result.assert_outcomes(passed=5, errors=5)
    result.stdout.fnmatch_lines(
        ["*SIGKILL:0:5:2: run_invalid: the fault was armed but never fired*"]
    )


def test_a_job_that_ended_before_its_fault_fired_is_resubmitted_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL, never_fired=["SIGKILL:0:5:2@1"])
    result = pytester.runpytest("experiments/", "--faultloop-pool=p")
    result.assert_outcomes(passed=10)
    assert started(pytester).count("SIGKILL:0:5:2") == 2
    session = only_session(base)
    rows = [r for r in (session / "experiments.tsv").read_text().splitlines() if "SIGKILL" in r]
    assert len(rows) == 2
    report = [
        r
        for r in (session / "experiments_report.md").read_text().splitlines()
        if r.startswith("| 2 | SIGKILL |")
    ]
    assert len(report) == 2 and "resubmitted (files in" in report[0] and "| true |" in report[1]
    stored = json.loads((session / "n2_SIGKILL_r0_i5" / "result.json").read_text())
    (attempt,) = stored["attempts"]
    assert "never fired" in attempt["reason"] and Path(attempt["moved_to"]).is_dir()


@pytest.mark.parametrize(("retries", "jobs"), [("0", 1), ("2", 3)])
def test_retries_invalid_bounds_the_resubmissions(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, retries: str, jobs: int
) -> None:
    make_project(pytester, monkeypatch, pools=POOL, never_fired=["SIGKILL:0:5:2"])
    result = pytester.runpytest(
        "experiments/", "--faultloop-pool=p", f"--faultloop-retries-invalid={retries}"
    )
    result.assert_outcomes(passed=5, errors=5)
    assert started(pytester).count("SIGKILL:0:5:2") == jobs


def test_a_failed_control_run_is_never_resubmitted(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NONE control that fails is the harness's own alarm, not a job to try again: one job,
    its items ERROR saying so, whatever ``--faultloop-retries-invalid`` allows."""
    make_project(pytester, monkeypatch, pools={"p": "NONE:0:5:2\n"})
    result = pytester.runpytest(
        "experiments/", "--faultloop-pool=p", "--faultloop-retries-invalid=2"
    )
    result.assert_outcomes(errors=5)
    result.stdout.fnmatch_lines(
        ["*NONE:0:5:2: run_invalid: the control run failed: job * ended FAILED*"]
    )
    assert started(pytester) == ["NONE:0:5:2"]


def test_rejected_submission_errors_its_items_and_the_pool_goes_on(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOL, submit_failed=["GPU_SLEEP:1:5:2"])
    result = pytester.runpytest("experiments/", "--faultloop-pool=p")
    result.assert_outcomes(passed=5, errors=5)
    result.stdout.fnmatch_lines(
        [
            "*GPU_SLEEP:1:5:2: infrastructure: job * SUBMIT_FAILED: the scheduler refused the job: sbatch: error: fake refusal*"
        ]
    )


def test_junit_properties_carry_the_verdict(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_with(pytester, monkeypatch, {"rank_primary": "partial"}, "--junitxml=out.xml")
    result.assert_outcomes(passed=4, failed=1)
    tree = ET.parse(pytester.path / "out.xml")
    cases = {c.get("name"): c for c in tree.iter("testcase")}
    case = next(c for name, c in cases.items() if "rank_primary" in name)
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["fault_type"] == "GPU_SLEEP"
    assert props["rank"] == "1" and props["iter"] == "5" and props["nodes"] == "2"
    assert props["dimension"] == "rank_primary" and props["value"] == "partial"
    assert props["notes"] == "fake notes for GPU_SLEEP:1:5:2"
    assert props["job_id"]
    assert case.find("failure") is not None


def test_html_report_has_columns_matrix_and_notes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = run_with(
        pytester,
        monkeypatch,
        {"rank_primary": "partial"},
        "--html=report.html",
        "--self-contained-html",
    )
    result.assert_outcomes(passed=4, failed=1)
    html = (pytester.path / "report.html").read_text()
    for column in ("Fault", "Rank", "Iter", "Nodes", "Dimension"):
        assert f">{column}</th>" in html
    assert "fake notes for GPU_SLEEP:1:5:2" in html
    assert "faultloop-named" in html and "named primary rank 1" in html
    assert html.index("faultloop-summary") < html.index('id="results-table"')


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["single", "n2"])
def test_html_report_environment_styles_and_one_log_tail_per_experiment(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]
) -> None:
    make_project(pytester, monkeypatch, pools=POOL)
    monkeypatch.setenv("FAKE_LOG_ANALYZER", "off")  # a log per experiment, the built-in analyzer
    result = pytester.runpytest("experiments/", "--faultloop-pool=p", "--html=r.html", *workers)
    result.assert_outcomes(passed=10)
    text = (pytester.path / "r.html").read_text()
    blob = re.search(r'data-jsonblob="([^"]*)"', text)
    assert blob is not None
    data = json.loads(html.unescape(blob.group(1)))
    (session,) = pytester.path.glob("out/fault_injection/2*")
    assert data["environment"]["faultloop"] == {
        "pools": "p (2 experiments)",
        "backend": "local",
        "workload": "tiny_gloo",
        "launcher": "fork",
        # the fake project's conftest answers every stage: named, not taken for the built-in
        "analyzers": "log conftest.py:pytest_faultloop_analyze_log, "
        "FR conftest.py:pytest_faultloop_analyze_fr",
        "judge": "conftest.py:pytest_faultloop_judge",
        "session": str(session),
    }
    assert "<style>.faultloop-summary" in text and "padding: 4px 8px" in text
    tails = {
        run["testId"].rsplit("::", 1)[1]: "Log tail (" in run["extras"][0]["content"]
        for runs in data["tests"].values()
        for run in runs
        if "GPU_SLEEP" in run["testId"]
    }
    assert tails == {d: d == "restart_correct" for d in DIMENSION_NAMES}  # the first cell only
    assert text.count("Log tail: with experiments/p.pool::") == 8


def test_session_directory_tsv_result_and_report(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=10)
    session = only_session(base)
    rows = (session / "experiments.tsv").read_text().splitlines()
    assert rows[0] == "JOB_ID\tFAULT_TYPE\tRANK\tITER\tNODES\tEXPERIMENT_DIR\tTRIAL"
    assert sorted(r.split("\t")[1:5] for r in rows[1:]) == [
        ["GPU_SLEEP", "1", "5", "2"],
        ["SIGKILL", "0", "5", "2"],
    ]
    result = json.loads((session / "n2_GPU_SLEEP_r1_i5" / "result.json").read_text())
    assert result["verdict"]["notes"] == "fake notes for GPU_SLEEP:1:5:2"
    for sub in ("logs/slurm", "checkpoints", "tensorboard"):
        assert (session / "n2_SIGKILL_r0_i5" / sub).is_dir()
    report = (session / "experiments_report.md").read_text()
    assert report.startswith("# Fault Injection Experiment Report")
    assert "| 1 | GPU_SLEEP | 2 | 1 | 5 |" in report and "## Aggregate" in report
    assert sorted(started(pytester)) == ["GPU_SLEEP:1:5:2", "SIGKILL:0:5:2"]
