"""The header names each stage's implementation; the fingerprint hashes what answered each stage,
each apart: hook implementations by their source, ``cmd:`` analyzers by the files they run,
the built-in log and FR analyzers by their own sources."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from support.fake_stages import make_project

from pytest_faultloop.analyzers import kinds
from pytest_faultloop.analyzers.kinds import command_files, log_kind
from pytest_faultloop.engine.builtin import BuiltinStages
from pytest_faultloop.engine.fingerprint import analyzer_part
from pytest_faultloop.inputs.settings import Settings
from pytest_faultloop.report.history import history_path, read_history

POOL = {"p": "GPU_SLEEP:1:5:2\n"}
JUDGE_LINE = 'return Verdict(judge="fake", notes=f"fake notes for {experiment.key}",'


def fingerprints(base: Path) -> list[str]:
    return [record.fingerprint for record in read_history(history_path(base))]


def run(pytester: pytest.Pytester) -> None:
    outcomes = pytester.runpytest("experiments/", "--faultloop-pool=p").parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 5


def edit_judge(pytester: pytest.Pytester) -> None:
    """A change inside the conftest's judge function (not its behaviour)."""
    conftest = pytester.path / "conftest.py"
    text = conftest.read_text()
    assert JUDGE_LINE in text
    conftest.write_text(text.replace(JUDGE_LINE, "pass  # edited\n    " + JUDGE_LINE))


def test_the_header_names_a_command_by_the_file_it_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools=POOL)
    (pytester.path / "conftest.py").unlink()
    (pytester.path / "my_analyzer.py").write_text("print('x')\n")
    result = pytester.runpytest(
        "experiments/",
        "--co",
        "--faultloop-log-analyzer=cmd:python my_analyzer.py --token=SECRET {log}",
    )
    result.stdout.fnmatch_lines(
        ["faultloop: judge=deterministic log_analyzer=cmd:my_analyzer.py fr_analyzer=builtin *"]
    )
    assert "SECRET" not in result.stdout.str()


def test_the_fingerprint_follows_the_implementation_that_answered(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools=POOL)
    run(pytester)
    monkeypatch.setenv("FAKE_JUDGE", "off")  # the conftest's judge returns None: built-in answers
    run(pytester)
    edit_judge(pytester)
    run(pytester)  # its edited source did not answer: same fingerprint
    monkeypatch.delenv("FAKE_JUDGE")
    run(pytester)  # now it answers, edited
    first, builtin_judge, still_builtin, edited = fingerprints(base)
    assert len({first, builtin_judge, edited}) == 3
    assert still_builtin == builtin_judge


def test_a_command_is_fingerprinted_by_the_files_it_names(tmp_path: Path) -> None:
    script = tmp_path / "my_analyzer.py"
    script.write_text("print('v1')\n")
    config = tmp_path / "rules.toml"
    config.write_text("a = 1\n")
    spec = f"cmd:python {script} --rules={config} {{log}}"
    assert command_files(spec) == [script, config]
    assert log_kind(spec).label == "cmd:my_analyzer.py,rules.toml"
    before = analyzer_part(log_kind(spec))
    script.write_text("print('v2')\n")
    assert analyzer_part(log_kind(spec)) != before
    assert log_kind("cmd:torchfrtrace {fr_dir}").label == "cmd:…"


def stages(**settings: str) -> BuiltinStages:
    return BuiltinStages(Settings(**settings), threading.Event())


def test_the_fr_analyzer_counts_beside_an_external_log_analyzer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fr_source = tmp_path / "fr_analyzer.py"
    fr_source.write_text("v1\n")
    monkeypatch.setattr(kinds.BuiltinFr, "sources", lambda self: (fr_source,))
    before = stages(log_analyzer="cmd:python my_analyzer.py {log}").parts
    fr_source.write_text("v2\n")
    after = stages(log_analyzer="cmd:python my_analyzer.py {log}").parts
    assert after["fr_analyzer"] != before["fr_analyzer"]
    assert after["log_analyzer"] == before["log_analyzer"]
    assert after["judge"] == before["judge"] == "deterministic"


def test_the_log_and_fr_analyzers_hash_their_own_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    default = stages().parts
    monkeypatch.setattr(kinds.BuiltinLog, "sources", lambda self: ())
    changed = stages().parts
    assert changed["log_analyzer"] != default["log_analyzer"]
    assert changed["fr_analyzer"] == default["fr_analyzer"]


def test_a_catalogue_entry_changed_changes_the_log_analyzers_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signature catalogue is data in the analyzer's directory: an entry edited there is a
    new analyzer, as an edited line of its code is."""
    (tmp_path / "scan.py").write_text("code\n")
    catalogue = tmp_path / "signatures.toml"
    catalogue.write_text('[[signature]]\nid = "a.b"\n')
    monkeypatch.setattr(kinds.BuiltinLog, "sources", lambda self: (tmp_path,))
    before = stages().parts["log_analyzer"]
    catalogue.write_text('[[signature]]\nid = "a.c"\n')
    assert stages().parts["log_analyzer"] != before
