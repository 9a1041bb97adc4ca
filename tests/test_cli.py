"""``python -m pytest_faultloop analyze-log / analyze-fr``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_faultloop.__main__ import SUBCOMMANDS, main

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = Path(__file__).resolve().parents[1] / "experiments" / "corpus" / "public"


def test_analyze_log_prints_five_fields(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["analyze-log", str(FIXTURES / "logs" / "synthetic" / "gloo_exception_rank2.log")])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "STOP - DONT RESTART IMMEDIATE"
    assert lines[2].startswith("Attribution: Primary issues: [rank 2")
    assert lines[4] == "Checkpoint saved: no" and len(lines) == 5


def test_analyze_log_labels_the_checkpoint_flag_and_reads_it_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The five-field text ends with logsage's checkpoint flag, labelled (it was a bare
    ``True``/``False``); the external-analyzer parser reads both forms."""
    from pytest_faultloop.analyzers.external.formats import parse_log_output

    log = FIXTURES / "logs" / "synthetic" / "clean_checkpoint_done.log"
    assert main(["analyze-log", str(log)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "Checkpoint saved: yes"
    assert parse_log_output(out, "ours").checkpoint_saved is True
    seed = out.replace("Checkpoint saved: yes", "False")
    assert parse_log_output(seed, "logsage").checkpoint_saved is False


def test_analyze_log_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "analyze-log",
                str(FIXTURES / "logs" / "synthetic" / "nccl_gpu_error_rank3.log"),
                "--json",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["decision"] == "STOP" and data["decision_text"] == "STOP - DONT RESTART IMMEDIATE"
    assert data["primary"] == [
        {
            "rank": 3,
            "node": None,
            "nature": "gpu_error",
            "summary": data["primary"][0]["summary"],
        }
    ]
    assert set(data) >= {"secondary", "attribution_text", "evidence", "explanation"}
    assert set(data["evidence"][0]) == {"line", "text"}


def test_analyze_fr_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze-fr", str(FIXTURES / "fr" / "gloo_tp_hang")]) == 0
    assert capsys.readouterr().out.startswith("PGID | Process Group Desc | Op Type")
    assert (
        main(
            [
                "analyze-fr",
                str(FIXTURES / "fr" / "gloo_tp_hang"),
                "-p",
                "_dump_*",
                "--json",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["suspects"] == [1] and data["dumps_read"] == 4 and data["unreadable"] == []
    assert {g["desc"]: g["culprit"] for g in data["groups"]} == {
        "tp": True,
        "default_pg": False,
    }


def test_subcommands_are_registered_by_name() -> None:
    assert list(SUBCOMMANDS) == [
        "analyze-log",
        "analyze-fr",
        "compare",
        "freeze",
        "leaderboard",
        "signatures",
        "perturb",
        "report",
        "rebuild-tsv",
    ]


@pytest.mark.parametrize("command", [[], *([name] for name in SUBCOMMANDS)])
def test_help_is_plain_text(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Every help page prints (a ``%`` in a help text once crashed argparse), in plain words:
    no reST markup from docstrings."""
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "usage: python -m pytest_faultloop" in out
    assert "``" not in out and ":mod:" not in out and ":class:" not in out, out
    if not command:
        assert "95 % intervals" in out and "SUBCOMMAND --help" in out


def test_module_entry_point() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_faultloop",
            "analyze-fr",
            str(FIXTURES / "fr" / "absent"),
        ],
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(f"error: {FIXTURES / 'fr' / 'absent'}: no such directory")


def test_a_reader_that_went_away_is_not_blamed_on_the_input() -> None:
    """``analyze-log LOG | head -2``: a closed stdout is no error of the log's."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # closed before the command writes: every write meets a broken pipe
    log = CORPUS / "galvatron3_ecc_fsdp_init" / "logs" / "console.log"
    command = [sys.executable, "-m", "pytest_faultloop", "analyze-log", str(log)]
    try:
        done = subprocess.run(
            command, check=False, stdout=write_end, stderr=subprocess.PIPE, text=True
        )
    finally:
        os.close(write_end)
    assert done.returncode == 1 and done.stderr == ""


@pytest.fixture
def stamped_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stored session under BASE_EXPERIMENTS_DIR (set as a pytest run's shell would have it)."""
    from test_freeze import stored

    from pytest_faultloop.models.faults import FaultType
    from pytest_faultloop.store.session_dir import TSV_HEADER, TSV_NAME

    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(tmp_path / "base"))
    session = tmp_path / "base" / "fault_injection" / "20261130_120000"
    session.mkdir(parents=True)
    (session / TSV_NAME).write_text(TSV_HEADER)
    stored(session, FaultType.SIGKILL, 1)
    return session


@pytest.mark.parametrize(
    "command",
    [
        ["report", "last"],
        ["report", "20261130_120000"],
        ["leaderboard", "last"],
        ["freeze", "last", "--into", "{tmp}/frozen"],
        ["compare", "20261130_120000", "last"],
    ],
    ids=["report-last", "report-stamp", "leaderboard-last", "freeze-last", "compare"],
)
def test_a_session_is_found_as_last_or_its_stamp_under_base_experiments_dir(
    command: list[str],
    stamped_session: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """As the pytest options do: BASE_EXPERIMENTS_DIR is the base directory without
    --base-dir, and every command that reads a session takes 'last' and a <stamp>."""
    assert main([word.format(tmp=tmp_path) for word in command]) == 0
    captured = capsys.readouterr()
    assert "error" not in captured.err, captured.err
    assert str(stamped_session) in captured.out


def test_last_without_a_session_names_the_base_directory_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "last", "--base-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: last: no session under {tmp_path / 'fault_injection'}; give --base-dir (or "
        "BASE_EXPERIMENTS_DIR) the base directory the runs wrote to, or the session's directory\n"
    )
