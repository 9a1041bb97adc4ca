"""``--faultloop-perturb`` through the plugin: each case × perturbation collected beside the
case (``case[ts]::rank_primary``), selected with ``-k`` and ``--lf``, under xdist, in JUnit's
properties, and told in the report's Robustness section and the terminal summary; a
re-analysis of a live session perturbs its stored experiments the same way."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support.sessions import only_session

from pytest_faultloop.inputs.freeze import freeze_session
from pytest_faultloop.scoring.dimensions import DIMENSION_NAMES
from tests.support.fake_stages import make_project

REPO = Path(__file__).resolve().parents[1]
PUBLIC = REPO / "experiments" / "corpus" / "public"
FROZEN = REPO / "tests" / "fixtures" / "frozen" / "smoke"
FRAGILE_ANALYZER = '''
import re
from pytest_faultloop.models.faults import Nature
from pytest_faultloop.models import Decision, Issue, LogAnalysis

def pytest_faultloop_analyze_log(config, experiment, artifacts):
    """A user's analyzer that reads the rank prefix at the start of a line only."""
    text = artifacts.log.read_text(errors="replace")
    found = re.search(r"^\\[rank(\\d+)\\]:.*(?:Error|error)", text, re.M)
    issues = [Issue(rank=int(found[1]), nature=Nature.GPU_ERROR, summary="x")] if found else []
    return LogAnalysis(analyzer="anchored", decision=Decision.STOP, decision_text="STOP",
                       primary=issues)
'''


@pytest.fixture
def corpus(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two real incidents and a frozen injected run (with dumps), in one corpus."""
    root = pytester.path / "experiments" / "corpus" / "mixed"
    root.mkdir(parents=True)
    shutil.copy(REPO / "experiments" / "workloads.toml", pytester.path / "experiments")
    for case in ("qlorapipe51_ima_rank1", "pt152623_desync_rank7"):
        shutil.copytree(PUBLIC / case, root / case)
    shutil.copytree(FROZEN / "n2_GPU_SLEEP_r1_i5", root / "n2_GPU_SLEEP_r1_i5")
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(pytester.path / "out"))
    return root


def _literal(pattern: str) -> str:
    """An fnmatch pattern whose brackets are literal (``case[ts]``), ``*`` still a wildcard."""
    return pattern.replace("[", "[[]")


def _report(pytester: pytest.Pytester) -> str:
    session = only_session(pytester.path / "out")
    return (session / "experiments_report.md").read_text()


def test_each_case_and_perturbation_is_collected_beside_the_case(
    pytester: pytest.Pytester, corpus: Path
) -> None:
    result = pytester.runpytest(
        "experiments/corpus/",
        "-v",
        "--faultloop-perturb=ts,ansi+pdsh,fr-missing",
        "--junitxml=junit.xml",
        "--html=report.html",
    )
    # 3 cases + 3 x 2 log copies + the frozen run's fr-missing copy = 10 experiments
    assert result.ret == 0
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] + outcomes.get("skipped", 0) == 50
    expected = [
        "faultloop: * perturb=ts,ansi+pdsh,fr-missing",
        "faultloop: 7 perturbed copies of 3 experiment(s) under 3 perturbation(s), each "
        "collected beside the unperturbed one (NAME[PERTURBATION])",
        "faultloop: not applicable (experiments): fr-missing (2)",
        "experiments/corpus/mixed/n2_GPU_SLEEP_r1_i5[fr-missing]::fr_rank_correct PASSED*",
        "experiments/corpus/mixed/qlorapipe51_ima_rank1::restart_correct PASSED*",
        "experiments/corpus/mixed/qlorapipe51_ima_rank1[ts]::restart_correct PASSED*",
        "experiments/corpus/mixed/qlorapipe51_ima_rank1[ansi+pdsh]::rank_primary PASSED*",
        "faultloop: 3 experiment(s): 3 scored; 7 perturbed copies",
        "faultloop: robustness: 3 perturbation(s), * cells compared with the unperturbed: "
        "0 lost, 0 gained",
    ]
    result.stdout.fnmatch_lines([_literal(line) for line in expected])
    assert "pt152623_desync_rank7[fr-missing]" not in result.stdout.str()
    report = _report(pytester)
    assert "## Robustness" in report and "0 lost, 0 gained" in report
    assert "| fr-missing | FR: builtin | 1 | 1 | 0 | 0 |" in report
    assert "[ts]" not in report.split("## Aggregate")[0]  # the table holds the cases as run
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    perturbed = [
        {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in cases
        if case.get("classname", "").endswith("[ansi+pdsh]")
    ]
    assert len(perturbed) == 15 and {p["perturbation"] for p in perturbed} == {"ansi+pdsh"}
    html = (pytester.path / "report.html").read_text()
    assert "Robustness: cells a perturbation changed" in html and "fr-missing" in html


def test_lost_cells_fail_and_rerun_alone_with_lf(pytester: pytest.Pytester, corpus: Path) -> None:
    """An analyzer that anchors the rank prefix at the line's start loses it under a host
    prefix: those cells fail, are named in the Robustness section, and --lf reruns them."""
    pytester.makeconftest(FRAGILE_ANALYZER)
    shutil.rmtree(corpus / "pt152623_desync_rank7")
    shutil.rmtree(corpus / "n2_GPU_SLEEP_r1_i5")
    first = pytester.runpytest("experiments/corpus/", "--faultloop-perturb=pdsh,crlf")
    first.assert_outcomes(passed=9, failed=3, skipped=3)
    first.stdout.fnmatch_lines(
        [
            _literal("faultloop: robustness: 2 perturbation(s), * 3 lost, 0 gained (*"),
            _literal("FAILED experiments/corpus/mixed/qlorapipe51_ima_rank1[pdsh]::rank_primary*"),
        ]
    )
    assert "| pdsh | log: anchored | 1 | 4 | 3 | 0 | lost qlorapipe51_ima_rank1[pdsh]::" in _report(
        pytester
    )
    again = pytester.runpytest("experiments/corpus/", "--faultloop-perturb=pdsh,crlf", "--lf", "-v")
    again.assert_outcomes(failed=3)
    again.stdout.fnmatch_lines([_literal("*qlorapipe51_ima_rank1[pdsh]::rank_any FAILED*")])
    selected = pytester.runpytest(
        "experiments/corpus/", "--faultloop-perturb=pdsh,crlf", "-k", "crlf", "--co", "-q"
    )
    assert [line for line in selected.outlines if "::" in line] == [
        f"experiments/corpus/mixed/qlorapipe51_ima_rank1[crlf]::{d}" for d in DIMENSION_NAMES
    ]


def test_a_case_given_by_path_comes_with_its_copies_once(
    pytester: pytest.Pytester, corpus: Path
) -> None:
    result = pytester.runpytest(
        "experiments/corpus/mixed/qlorapipe51_ima_rank1", "--faultloop-perturb=ts", "--co", "-q"
    )
    assert sorted(line for line in result.outlines if "::" in line) == sorted(
        f"experiments/corpus/mixed/qlorapipe51_ima_rank1{copy}::{d}"
        for copy in ("", "[ts]")
        for d in DIMENSION_NAMES
    )
    result.stdout.fnmatch_lines(["faultloop: 1 perturbed copy of 1 experiment(s) under 1 *"])


def test_perturbed_copies_under_xdist(pytester: pytest.Pytester, corpus: Path) -> None:
    result = pytester.runpytest("experiments/corpus/", "-n", "2", "--faultloop-perturb=ts,cri")
    result.assert_outcomes(passed=39, skipped=6)  # 3 cases x 3; 2 cases without dumps
    result.stdout.fnmatch_lines(["faultloop: robustness: 2 perturbation(s), * 0 lost, 0 gained"])


def test_a_bad_perturbation_is_one_line_naming_the_catalogue(
    pytester: pytest.Pytester, corpus: Path
) -> None:
    result = pytester.runpytest("experiments/corpus/", "--faultloop-perturb=ts+nope")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: FAULTLOOP_PERTURB='ts+nope' (from --faultloop-perturb): unknown "
            "perturbation 'nope'; choose from ts, cri, asctime, *, fr-hostnames, or all*"
        ]
    )
    assert "Traceback" not in result.stderr.str()


def test_a_reanalysis_perturbs_the_sessions_stored_experiments(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools={"p": "SIGKILL:1:5:2\nGPU_SLEEP:3:5:2\n"})
    monkeypatch.setenv("FAKE_LOG_ANALYZER", "off")  # the built-in analyzer reads a real line
    monkeypatch.setenv("FAKE_JUDGE", "off")
    pytester.runpytest("experiments/", "--faultloop-pool=p").assert_outcomes(passed=7, failed=3)
    result = pytester.runpytest(
        "experiments/",
        "--faultloop-reanalyze",
        "--faultloop-session",
        "last",
        "--faultloop-perturb=journald,fr-hostnames",
        "-v",
    )
    result.assert_outcomes(passed=14, failed=6)  # the copies fail where the originals do
    expected = [
        "faultloop: not applicable (experiments): fr-hostnames (2)",
        "experiments/p.pool::SIGKILL:1:5:2[journald]::rank_primary PASSED*",
        "faultloop: robustness: 1 perturbation(s), 10 cells compared * 0 lost, 0 gained",
    ]
    result.stdout.fnmatch_lines([_literal(line) for line in expected])
    session = only_session(pytester.path / "out")
    copy = session / "n2_SIGKILL_r1_i5__journald"
    log = (copy / "logs" / "fake.log").read_text()
    assert "python3[12345]: [rank1]: RuntimeError: fake failure" in log
    again = pytester.runpytest(
        "experiments/", "--faultloop-reanalyze", "--faultloop-session", "last"
    )
    again.assert_outcomes(passed=7, failed=3)  # the stored copies are not its experiments
    frozen = freeze_session(session, pytester.path / "frozen")
    assert len(frozen.written) == 2
    assert sum("a perturbed copy" in line for line in frozen.skipped) == 2


def test_a_live_run_is_not_perturbed_and_says_how_to_get_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools={"p": "SIGKILL:1:5:2\n"})
    result = pytester.runpytest("experiments/", "--faultloop-pool=p", "--faultloop-perturb=ts")
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        [
            "faultloop: 1 live experiment(s) not perturbed (their jobs run first): re-analyse "
            "the session with --faultloop-reanalyze --faultloop-perturb"
        ]
    )
