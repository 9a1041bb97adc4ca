"""The docs' integration contracts, checked against the code that implements them.

Each example block of "Command analyzers" and "LLM endpoints" (a fenced block after a
``<!-- faultloop-example: NAME -->`` marker in the README or a page under ``docs/``) goes through
the real parser or the real LLM request path, so the docs cannot drift from the code; the
job-script header of "Your own job script" through the local backend's ``launcher_module``; and
the conftest loading rule of "Your own attribution modules" through real pytest runs.
"""

from __future__ import annotations

import re
import shlex
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr
from support.docs import REPO, docs_text
from support.judge_cases import case
from support.openai_server import OpenAIServer, Reply
from support.stored_crash import stored_crash

from pytest_faultloop.analyzers import AnalyzerError, analyze_log_llm
from pytest_faultloop.analyzers.external.formats import parse_fr_output, parse_log_output
from pytest_faultloop.engine.builtin import BuiltinStages, make_judge
from pytest_faultloop.engine.pipeline import Pipeline
from pytest_faultloop.inputs.settings import Settings
from pytest_faultloop.jobs.backends.local import DIRECTIVE, launcher_module
from pytest_faultloop.models import Decision, ExperimentResult, LogAnalysis
from pytest_faultloop.models.faults import Nature
from pytest_faultloop.scoring.judges.llm import LlmJudge
from pytest_faultloop.scoring.restart_policy import load_policy

DOCS = docs_text()
FLAT_DOCS = " ".join(DOCS.split())
"""The docs with every run of whitespace one space: a quoted message may wrap."""
HOOK = "def pytest_faultloop_analyze_log(config, experiment, artifacts):\n    return None\n"


def example(name: str) -> str:
    """The fenced block right after ``<!-- faultloop-example: NAME -->`` in the docs."""
    found = re.search(
        rf"<!-- faultloop-example: {re.escape(name)} -->\n```[a-z]*\n(.*?)^```$",
        DOCS,
        re.DOTALL | re.MULTILINE,
    )
    assert found, f"no page of the docs has the example block {name!r}"
    return found[1]


def documented(message: str) -> bool:
    """Whether the docs quote ``message`` in backticks (wrapping aside)."""
    return f"`{' '.join(message.split())}`" in FLAT_DOCS


# --- cmd: analyzers ----------------------------------------------------------------------------


def test_the_five_field_example_parses_as_documented() -> None:
    analysis = parse_log_output(example("log-five-field"), "cmd:mine")
    assert (analysis.decision, analysis.decision_text) == (
        Decision.STOP,
        "STOP - DONT RESTART IMMEDIATE",
    )
    assert analysis.explanation.startswith("Rank 1 hit an uncorrectable ECC error")
    assert [(i.rank, i.nature) for i in analysis.primary] == [(1, Nature.GPU_ERROR)]
    assert [(i.rank, i.nature) for i in analysis.secondary] == [
        (0, Nature.HANG),
        (2, Nature.HANG),
        (3, Nature.HANG),
    ]
    assert analysis.checkpoint_saved is False


def test_the_restart_agent_example_parses_as_documented() -> None:
    analysis = parse_log_output(example("log-restart-agent"), "cmd:agent")
    assert (analysis.decision, analysis.decision_text) == (Decision.RESTART, "RESTART IMMEDIATE")
    assert analysis.explanation.startswith("Rank 3 stopped making progress")
    assert [(i.rank, i.node, i.nature) for i in analysis.primary] == [(3, "n1", Nature.HANG)]
    assert [(i.rank, i.nature) for i in analysis.secondary] == [(0, Nature.HANG)]
    # lines before the object are skipped; a line after it makes the output unrecognised
    assert parse_log_output("my agent says:\n" + example("log-restart-agent"), "x").decision is (
        Decision.RESTART
    )
    with pytest.raises(AnalyzerError, match="unrecognised log-analyzer output"):
        parse_log_output(example("log-restart-agent") + "done\n", "x")


def test_the_malformed_log_example_gives_the_documented_error() -> None:
    with pytest.raises(AnalyzerError) as error:
        parse_log_output(example("log-malformed"), "cmd:mine")
    assert str(error.value) == (
        "unrecognised log-analyzer output (expected logsage's five fields or a JSON object with "
        "'decision'): 'restart immediately: rank 1 hung'"
    )
    assert documented(f"AnalyzerError: {error.value}")


def test_a_range_names_only_its_first_rank_as_documented() -> None:
    text = "RESTART IMMEDIATE\nAttribution: Primary issues: [ranks 0-7 hung], Secondary issues: []"
    assert [i.rank for i in parse_log_output(text, "x").primary] == [0]


def _run_command_printing(tmp_path: Path, output: str) -> ExperimentResult:
    """The real pipeline on a stored crash, its log analyzer a command printing ``output``."""
    printed = tmp_path / "printed.txt"
    printed.write_text(output)
    experiment, artifacts = stored_crash(tmp_path)
    settings = Settings(log_analyzer=f"cmd:cat {shlex.quote(str(printed))} # {{log}}")
    pipeline = Pipeline(BuiltinStages(settings, threading.Event()))
    return pipeline.on_artifacts(experiment, artifacts)


def test_unparseable_command_output_is_analysis_failed_not_a_verdict(tmp_path: Path) -> None:
    result = _run_command_printing(tmp_path, example("log-malformed"))
    assert result.verdict is None and result.broken == "analysis_failed"
    assert result.reason == (
        "AnalyzerError: unrecognised log-analyzer output (expected logsage's five fields or a "
        "JSON object with 'decision'): 'restart immediately: rank 1 hung'"
    )
    assert "its items ERROR with `<KEY>: analysis_failed: AnalyzerError: <message>`" in FLAT_DOCS


def test_a_documented_command_output_is_scored(tmp_path: Path) -> None:
    result = _run_command_printing(tmp_path, example("log-five-field"))
    assert result.broken is None and result.verdict is not None
    assert result.log_analysis is not None and result.log_analysis.decision is Decision.STOP


def test_the_nvrx_table_example_parses_as_documented() -> None:
    analysis = parse_fr_output(example("fr-nvrx-table"), "cmd:nvrx", dumps_found=4)
    assert analysis.suspects == [1]
    assert [(g.pg_id, g.desc, g.op, g.missing_ranks, g.culprit) for g in analysis.groups] == [
        ("0", "default_pg", "allreduce", [0, 1], False),
        ("1", "tp_0", "allgather", [1], True),
    ]


def test_the_torchfrtrace_example_parses_as_documented() -> None:
    analysis = parse_fr_output(example("fr-torchfrtrace"), "cmd:torchfrtrace", dumps_found=4)
    assert analysis.suspects == [1]
    assert [(g.pg_id, g.desc, g.missing_ranks, g.culprit) for g in analysis.groups] == [
        ("0", "default_pg", [0, 1], False),
        ("1", "tp_0", [1], True),
    ]


def test_fr_output_without_groups_is_no_suspect_unless_it_is_a_traceback() -> None:
    assert parse_fr_output("", "x", dumps_found=4).suspects == []
    assert parse_fr_output("all ranks agree\n", "x", dumps_found=4).suspects == []
    without_dump = "Missing dump files from ranks {2}\n"
    assert parse_fr_output(without_dump, "x", dumps_found=3).suspects == [2]
    traceback = "Traceback (most recent call last):\n  File 'x.py'\nValueError: bad dump\n"
    with pytest.raises(AnalyzerError) as error:
        parse_fr_output(traceback, "x", dumps_found=4)
    assert str(error.value) == "FR analyzer failed: ValueError: bad dump"
    assert documented("AnalyzerError: FR analyzer failed: <its last line>")


# --- LLM endpoints -----------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


def _llm_log(server: OpenAIServer, tmp_path: Path) -> LogAnalysis:
    """The LLM log analyzer as the plugin runs it (its default retries), with short waits."""
    log = tmp_path / "job.log"
    log.write_text("[rank1]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n")
    return analyze_log_llm(
        log,
        model="log-model",
        base_url=server.base_url,
        api_key=SecretStr("sk-test"),
        evidence=None,
        timeout=5,
        backoff=0.01,
    )


def test_the_llm_log_analyzer_example_is_read_as_documented(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.script(Reply.answer(example("llm-log-analyzer")))
    analysis = _llm_log(server, tmp_path)
    assert (analysis.decision, analysis.decision_text) == (
        Decision.STOP,
        "STOP - DONT RESTART IMMEDIATE",
    )
    assert [(i.rank, i.node, i.nature) for i in analysis.primary] == [(1, "n1", Nature.GPU_ERROR)]
    assert [(i.rank, i.nature) for i in analysis.secondary] == [(0, Nature.HANG)]
    assert analysis.checkpoint_saved is False
    (request,) = server.requests
    assert request.body["response_format"] == {"type": "json_object"}
    assert request.body["temperature"] == 0


def test_a_wrong_llm_reply_costs_four_requests_then_analysis_failed(
    server: OpenAIServer, tmp_path: Path
) -> None:
    wrong = Reply.answer(example("llm-log-analyzer-malformed"))
    server.script(wrong, wrong, wrong, wrong)
    with pytest.raises(AnalyzerError) as error:
        _llm_log(server, tmp_path)
    reason = (
        "invalid answer: decision: Input should be 'RESTART', 'STOP' or 'CONTINUE' "
        "(got 'RESTART IMMEDIATE')"
    )
    assert str(error.value) == f"LLM log analyzer (log-model): {reason} (after 4 attempts)"
    assert len(server.requests) == 4
    assert documented(reason)
    assert "3 retries after the first request, 1, 2 and 4 s apart" in FLAT_DOCS
    assert "costs 4 requests and 7 s of back-off" in FLAT_DOCS


def test_the_plugin_asks_with_the_documented_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_API_KEY", "sk-test")
    judge = make_judge(Settings(judge="llm"), load_policy())
    assert isinstance(judge, LlmJudge)
    endpoint = judge.endpoint
    assert (endpoint.retries, endpoint.backoff, endpoint.timeout) == (3, 1.0, 600.0)
    assert "(600 by default)" in FLAT_DOCS and "600 s by default" in FLAT_DOCS


def test_the_llm_judge_example_is_read_as_documented(server: OpenAIServer) -> None:
    server.script(Reply.answer(example("llm-judge")))
    judge = LlmJudge(
        load_policy(), "judge-model", server.base_url, SecretStr("sk-test"), 5, backoff=0.01
    )
    answer = judge.ask(case())
    assert answer.model_dump() == {
        "restart_correct": "true",
        "rank_primary": "true",
        "rank_any": "true",
        "fault_described": "partial",
        "fr_rank_correct": "rank",
        "notes": "Names rank 1 but calls its ECC error a crash.",
    }


# --- own job scripts on the local backend ------------------------------------------------------


def test_the_job_script_header_names_its_launcher(tmp_path: Path) -> None:
    script = tmp_path / "my_job.sh"
    script.write_text(example("job-script-header"))
    assert launcher_module(script) == "my_package.node_launcher"


def test_a_job_script_without_the_line_is_told_the_fix(tmp_path: Path) -> None:
    script = tmp_path / "my_job.sh"
    script.write_text(example("job-script-header").replace(DIRECTIVE, "# no directive:"))
    with pytest.raises(ValueError) as error:
        launcher_module(script)
    message = str(error.value)
    assert message.startswith(
        f"{script} cannot run on the local backend: it has no "
        "'# faultloop-local-launcher: MODULE' line. "
    )
    assert "Add a line '# faultloop-local-launcher: MODULE' naming the module" in message
    assert "srun tasks run" in message
    assert "use the slurm backend (--faultloop-backend=slurm)" in message
    documented_start = (
        "cannot run on the local backend: it has no '# faultloop-local-launcher: MODULE' line."
    )
    assert documented_start in FLAT_DOCS and documented_start in message


# --- which conftest.py files pytest loads ------------------------------------------------------


@pytest.fixture
def pools_elsewhere(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``proj/`` (a conftest and a hook module, the directory pytest runs from) beside
    ``data/pools/`` (the pools) with a conftest in ``data/`` and one at the top."""
    pools = pytester.path / "data" / "pools"
    pools.mkdir(parents=True)
    (pools / "workloads.toml").write_text((REPO / "experiments" / "workloads.toml").read_text())
    (pools / "default.pool").write_text("GPU_SLEEP:1:5:2\n")
    (pytester.path / "data" / "conftest.py").write_text(HOOK)
    proj = pytester.path / "proj"
    proj.mkdir()
    (proj / "conftest.py").write_text(HOOK)
    (proj / "my_hooks.py").write_text(HOOK)
    pytester.makeconftest(HOOK)
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(pytester.path / "out"))
    monkeypatch.chdir(proj)
    return proj


def _log_analyzer_label(result: pytest.RunResult) -> str:
    line = next(line for line in result.outlines if line.startswith("faultloop: judge="))
    found = re.search(r"log_analyzer=(\S+)", line)
    assert found, line
    return found[1]


def test_conftests_load_from_the_pools_upwards_not_from_the_current_directory(
    pytester: pytest.Pytester, pools_elsewhere: Path
) -> None:
    result = pytester.runpytest("../data/pools", "--co")
    result.stdout.fnmatch_lines([f"rootdir: {pytester.path}"])
    assert _log_analyzer_label(result) == (
        "data/conftest.py:pytest_faultloop_analyze_log,conftest.py:pytest_faultloop_analyze_log"
    )
    assert "proj/conftest.py" not in result.stdout.str()


def test_a_config_file_stops_the_search_at_its_directory(
    pytester: pytest.Pytester, pools_elsewhere: Path
) -> None:
    (pytester.path / "data" / "pytest.ini").write_text("[pytest]\n")
    result = pytester.runpytest("../data/pools", "--co")
    result.stdout.fnmatch_lines(["configfile: pytest.ini"])
    # rootdir is data/: its conftest is the only one (the top one lies above the limit)
    assert _log_analyzer_label(result) == "conftest.py:pytest_faultloop_analyze_log"


def test_hooks_elsewhere_load_as_a_plugin_module_named_with_p(
    pytester: pytest.Pytester, pools_elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(pools_elsewhere)
    result = pytester.runpytest("-p", "my_hooks", "../data/pools", "--co")
    assert _log_analyzer_label(result).split(",") == [
        "data/conftest.py:pytest_faultloop_analyze_log",
        "conftest.py:pytest_faultloop_analyze_log",
        "my_hooks",
    ]
    assert "`log_analyzer=my_hooks`" in DOCS
