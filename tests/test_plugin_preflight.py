"""Before the first job: what the run needs is checked, and a missing piece stops the run with one
line naming it and the fix (no job submitted, no traceback)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stops_with(result: pytest.RunResult, message: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([message])
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output
    assert "submitted:" not in output


def test_slurm_backend_without_a_cluster(
    pytester: pytest.Pytester, experiments_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(pytester.path / "nowhere" / "slurm.conf"))
    result = pytester.runpytest_subprocess(
        "experiments/", "--faultloop-pool=smoke", "--faultloop-backend=slurm", timeout=120
    )
    stops_with(
        result,
        "ERROR: the slurm backend cannot reach Slurm: SLURM_CONF=*nowhere/slurm.conf does not "
        "exist; *--faultloop-local-cluster*",
    )


def test_slurm_backend_without_a_cluster_under_xdist(
    pytester: pytest.Pytester, experiments_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(pytester.path / "nowhere" / "slurm.conf"))
    result = pytester.runpytest_subprocess(
        "experiments/",
        "--faultloop-pool=smoke",
        "--faultloop-backend=slurm",
        "-n",
        "2",
        timeout=120,
    )
    stops_with(result, "ERROR: the slurm backend cannot reach Slurm: SLURM_CONF=*")


def test_llm_judge_endpoint_that_does_not_answer(
    pytester: pytest.Pytester, experiments_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGE_API_KEY", "sk-test-preflight")
    url = f"http://127.0.0.1:{closed_port()}/v1"
    result = pytester.runpytest_subprocess(
        "experiments/",
        "--faultloop-pool=smoke",
        "--faultloop-judge=llm",
        f"--faultloop-judge-base-url={url}",
        timeout=120,
    )
    stops_with(
        result,
        f"ERROR: the LLM judge endpoint {url} does not answer (*refused*); set JUDGE_BASE_URL "
        "(--faultloop-judge-base-url) to a reachable OpenAI-compatible endpoint",
    )
    assert "sk-test-preflight" not in result.stdout.str() + result.stderr.str()


def test_an_endpoint_url_with_credentials_is_shown_masked(
    pytester: pytest.Pytester, experiments_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The URL's password and a token in its query are masked in the one line; the endpoint is
    asked without them (urllib would take the userinfo for part of the host name)."""
    monkeypatch.setenv("LLM_API_KEY", "sk-test-preflight")
    port = closed_port()
    url = f"http://alice:pw-SECRET-31@127.0.0.1:{port}/v1?api-key=tok-SECRET-42"
    result = pytester.runpytest_subprocess(
        "experiments/",
        "--faultloop-pool=smoke",
        "--faultloop-log-analyzer=llm",
        f"--faultloop-llm-base-url={url}",
        timeout=120,
    )
    stops_with(
        result,
        f"ERROR: the LLM log analyzer endpoint http://alice:***@127.0.0.1:{port}/v1?api-key=*** "
        "does not answer (*refused*); set NVRX_LLM_BASE_URL (--faultloop-llm-base-url) to a "
        "reachable OpenAI-compatible endpoint",
    )
    assert "SECRET" not in result.stdout.str() + result.stderr.str()


def test_unwritable_base_directory(
    pytester: pytest.Pytester, experiments_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = pytester.path / "a-file"
    blocker.write_text("not a directory\n")
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(blocker / "out"))
    result = pytester.runpytest_subprocess("experiments/", "--faultloop-pool=smoke", timeout=120)
    stops_with(
        result,
        "ERROR: BASE_EXPERIMENTS_DIR=*a-file/out: cannot write *a-file/out/fault_injection (Not a "
        "directory); point BASE_EXPERIMENTS_DIR (--faultloop-base-dir) at a writable directory",
    )


def test_missing_job_script(pytester: pytest.Pytester, experiments_copy: Path) -> None:
    result = pytester.runpytest_subprocess(
        "experiments/",
        "--faultloop-pool=smoke",
        "--faultloop-sbatch-script=missing.sh",
        timeout=120,
    )
    stops_with(
        result,
        "ERROR: job script *missing.sh cannot be read (given by SBATCH_SCRIPT "
        "(--faultloop-sbatch-script): give the path of a job script; relative paths start at "
        "the current directory)",
    )


def test_a_copied_experiments_directory_runs_the_packaged_job_script(
    pytester: pytest.Pytester, experiments_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POOL", "NONE:0:5:1")
    result = pytester.runpytest_subprocess("experiments/", "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(passed=5)


def test_collect_only_and_stored_cases_check_nothing(
    pytester: pytest.Pytester, experiments_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(pytester.path / "nowhere" / "slurm.conf"))
    result = pytester.runpytest_subprocess(
        "experiments/", "--faultloop-pool=smoke", "--faultloop-backend=slurm", "--collect-only"
    )
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
