"""A configuration error stops the run with pytest's one-line ``ERROR:`` (exit status 4), or
errors the Python test that asked for the ``faultloop`` fixture with that line, whichever
process meets it (single process, xdist controller); never INTERNALERROR or a traceback. A
session directory that cannot be written any more stops the run and keeps what it recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_stages import make_project, started
from support.full_disk import FILLER, release, small_filesystem
from support.read_only import freeze, prepare, thaw
from support.sessions import only_session

from pytest_faultloop.store.session_dir import TSV_HEADER

REPO = Path(__file__).resolve().parents[1]
XDIST = pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["single", "xdist"])
STAMP = "20260101_000000"
FIXTURE_TEST = "def test_asks(faultloop):\n    assert faultloop.session_path\n"


def clean(result: pytest.RunResult) -> str:
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and "INTERNALERROR" not in output, output
    assert "During handling" not in output and "submitted:" not in output, output
    return output


def stops_with(result: pytest.RunResult, message: str) -> None:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    clean(result)


def errors_the_test_with(result: pytest.RunResult, message: str) -> None:
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([message])
    clean(result)


def unwritable_base(pytester: pytest.Pytester, where: str) -> Path:
    if where == "under-a-file":
        blocker = pytester.path / "a-file"
        blocker.write_text("not a directory\n")
        return blocker / "out"
    return Path("/proc/faultloop-nowhere/out")


BASE_ERROR = (
    "BASE_EXPERIMENTS_DIR=*out: cannot write *out/fault_injection (*); point "
    "BASE_EXPERIMENTS_DIR (--faultloop-base-dir) at a writable directory"
)


@XDIST
@pytest.mark.parametrize("where", ["under-a-file", "under-proc"])
def test_base_directory_that_cannot_be_created(
    pytester: pytest.Pytester,
    experiments_copy: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    xdist: list[str],
) -> None:
    """The default pool (no pool named): under xdist the controller creates the session when
    it configures the first worker (this was an INTERNALERROR)."""
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(unwritable_base(pytester, where)))
    result = pytester.runpytest_subprocess("experiments/", *xdist, timeout=120)
    stops_with(result, BASE_ERROR)


@XDIST
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--faultloop-session", "/nonexistent"],
            "--faultloop-session /nonexistent: /nonexistent is not a session directory (no "
            "experiments.tsv); give a directory under .../fault_injection/ or 'last'",
        ),
        (["--faultloop-session", "last"], "--faultloop-session last: no session with an *"),
        (["--faultloop-reanalyze"], "--faultloop-reanalyze needs a session to re-analyze: *"),
        (
            ["--faultloop-session", " "],
            "--faultloop-session=' ' (from --faultloop-session): empty; give a session "
            "directory or 'last', or leave the option out for a new session",
        ),
        (["--faultloop-compare", ""], "--faultloop-compare='' (from --faultloop-compare): empty;*"),
        (
            ["--faultloop-log-analyzer", "regex"],
            "FAULTLOOP_LOG_ANALYZER='regex' (from --faultloop-log-analyzer): expected builtin, "
            "naive, llm or 'cmd:COMMAND {log}'",
        ),
        (
            ["--faultloop-fr-analyzer", "nvrx"],
            "FAULTLOOP_FR_ANALYZER='nvrx' (from --faultloop-fr-analyzer): expected builtin or "
            "'cmd:COMMAND {fr_dir}'",
        ),
    ],
    ids=[
        "no-such-session",
        "no-last-session",
        "reanalyze-without-session",
        "blank-session",
        "empty-compare",
        "unknown-log-analyzer",
        "unknown-fr-analyzer",
    ],
)
def test_session_options_with_bad_values(
    pytester: pytest.Pytester,
    experiments_copy: Path,
    args: list[str],
    message: str,
    xdist: list[str],
) -> None:
    result = pytester.runpytest_subprocess(
        "experiments/", "--faultloop-pool=smoke", *args, *xdist, timeout=120
    )
    stops_with(result, message)


@XDIST
def test_fixture_with_a_base_directory_that_cannot_be_created(
    pytester: pytest.Pytester,
    experiments_copy: Path,
    monkeypatch: pytest.MonkeyPatch,
    xdist: list[str],
) -> None:
    """The test errors with the line once (it was repeated after "During handling of the
    above exception")."""
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(unwritable_base(pytester, "under-a-file")))
    pytester.makepyfile(test_asks=FIXTURE_TEST)
    result = pytester.runpytest_subprocess("test_asks.py", *xdist, timeout=120)
    errors_the_test_with(result, BASE_ERROR)


@pytest.fixture
def read_only_session(experiments_copy: Path) -> Iterator[Path]:
    """An existing session (its TSV only) under a base directory nothing can write to."""
    prepare(experiments_copy)
    session = experiments_copy / "fault_injection" / STAMP
    session.mkdir(parents=True)
    (session / "experiments.tsv").write_text("JOB_ID\tFAULT_TYPE\tRANK\tITER\tNODES\n")
    freeze(experiments_copy)
    yield session
    thaw(experiments_copy)


SESSION_ERROR = (
    f"cannot write the session directory *{STAMP} (.session.claim: *); the run stops, what it "
    "recorded is kept: make the directory writable (or free space), then continue with "
    f"--faultloop-session *{STAMP}"
)


@XDIST
def test_an_existing_session_that_cannot_be_written(
    pytester: pytest.Pytester, read_only_session: Path, xdist: list[str]
) -> None:
    """It was an INTERNALERROR (the lock file's OSError)."""
    result = pytester.runpytest_subprocess(
        "experiments/", "--faultloop-pool=smoke", "--faultloop-session", "last", *xdist, timeout=120
    )
    stops_with(result, SESSION_ERROR)
    assert sorted(p.name for p in read_only_session.iterdir()) == ["experiments.tsv"]


def test_fixture_with_an_existing_session_that_cannot_be_written(
    pytester: pytest.Pytester, read_only_session: Path
) -> None:
    pytester.makepyfile(test_asks=FIXTURE_TEST)
    result = pytester.runpytest_subprocess(
        "test_asks.py", "--faultloop-session", "last", timeout=120
    )
    errors_the_test_with(result, SESSION_ERROR)


FREEZE_AFTER_FIRST = f"""

import sys
sys.path.insert(0, {str(REPO / "tests")!r})  # xdist workers: the sys.path pytest started with
from support.read_only import freeze

_FINISHED = []


@pytest.hookimpl
def pytest_faultloop_experiment_finished(config, result):
    _FINISHED.append(result.experiment.key)
    if len(_FINISHED) == 1:
        freeze(Path(os.environ["BASE_EXPERIMENTS_DIR"]))
"""


def first_experiment(pytester: pytest.Pytester) -> tuple[str, str]:
    """The key and directory of the experiment that ran first: under xdist either worker may
    submit first, so the pool's order does not say which one it was."""
    key = started(pytester)[0]
    fault, rank, iteration, nodes = key.split(":")
    return key, f"n{nodes}_{fault}_r{rank}_i{iteration}"


@XDIST
def test_a_session_that_becomes_unwritable_mid_run_stops_it_and_keeps_what_it_recorded(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: list[str]
) -> None:
    """After the first experiment nothing under the base directory can be written: no further
    job starts, the run stops (interrupted) naming the directory and how to go on, and the
    first experiment's result, TSV row and report rows are there as they were."""
    pool = "GPU_SLEEP:1:5:2\nSIGKILL:0:5:2\nSIGTERM:3:5:2\n"
    base = make_project(pytester, monkeypatch, pools={"p": pool})
    with (pytester.path / "conftest.py").open("a") as conftest:
        conftest.write(FREEZE_AFTER_FIRST)
    monkeypatch.setenv("BATCH_SIZE", "1")
    prepare(base)
    try:
        result = pytester.runpytest("experiments/", "--faultloop-pool=p", *xdist)
    finally:
        thaw(base)
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    clean(result)
    session = only_session(base)
    result.stdout.fnmatch_lines(
        [
            "faultloop: report not re-rendered (*); the stored results are kept: python -m "
            f"pytest_faultloop report {session} renders it",
            f"*Interrupted: cannot write the session directory {session} (*: *); the run stops, "
            "what it recorded is kept: * then continue with --faultloop-session *",
        ]
    )
    assert result.parseoutcomes()["passed"] == 5
    key, dirname = first_experiment(pytester)
    stored = json.loads((session / dirname / "result.json").read_text())
    assert stored["verdict"]["rank_primary"] == "true"
    rows = (session / "experiments.tsv").read_text().splitlines()
    assert rows[1].split("\t")[1:5] == key.split(":")
    assert f"| {key.split(':')[0]} |" in (session / "experiments_report.md").read_text()
    assert "SIGTERM:3:5:2" not in started(pytester)
    if not xdist:  # one process runs the experiments in order: none after the first started
        assert started(pytester) == ["GPU_SLEEP:1:5:2"] and len(rows) == 2


FILL_AFTER_FIRST = FREEZE_AFTER_FIRST.replace(
    "read_only import freeze", "full_disk import fill"
).replace("freeze(Path", "fill(Path")


@XDIST
def test_a_full_disk_mid_run_stops_it_and_keeps_what_it_recorded(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: list[str]
) -> None:
    """The base directory's filesystem fills up after the first experiment (a real ENOSPC on a
    small tmpfs): no further job starts, the run stops naming the free space, and the first
    experiment's result, TSV row and report rows are kept; freed, the session goes on."""
    pool = "GPU_SLEEP:1:5:2\nSIGKILL:0:5:2\nSIGTERM:3:5:2\n"
    base = make_project(pytester, monkeypatch, pools={"p": pool})
    with (pytester.path / "conftest.py").open("a") as conftest:
        conftest.write(FILL_AFTER_FIRST)
    monkeypatch.setenv("BATCH_SIZE", "1")
    small_filesystem(base, size_mb=80)
    try:
        result = pytester.runpytest_subprocess("experiments/", "--faultloop-pool=p", *xdist)
        assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
        clean(result)
        session = only_session(base)
        result.stdout.fnmatch_lines(
            [
                f"*Interrupted: cannot write the session directory {session} (*); the run "
                "stops, what it recorded is kept: make the directory writable (or free space), "
                "then continue with --faultloop-session *",
            ]
        )
        assert "free on its filesystem" in result.stdout.str() or "No space left" in (
            result.stdout.str()
        )
        key, dirname = first_experiment(pytester)
        stored = json.loads((session / dirname / "result.json").read_text())
        assert stored["verdict"]["rank_primary"] == "true"
        rows = (session / "experiments.tsv").read_text().splitlines()
        assert rows[1].split("\t")[1:5] == key.split(":")
        assert "SIGTERM:3:5:2" not in started(pytester)

        (base / FILLER).unlink()
        pytester.path.joinpath("conftest.py").write_text(
            pytester.path.joinpath("conftest.py").read_text().replace(FILL_AFTER_FIRST, "")
        )
        resumed = pytester.runpytest_subprocess(
            "experiments/", "--faultloop-pool=p", "--faultloop-session", "last", *xdist
        )
        assert resumed.ret == pytest.ExitCode.OK, resumed.stdout.str()
        assert started(pytester).count(key) == 1  # kept, not run again
    finally:
        release(base)


FILL_DURING_JOB = f"""
import os, sys
from pathlib import Path
import pytest
sys.path.insert(0, {str(REPO / "tests")!r})
from support.full_disk import fill

_JOBS = []


@pytest.hookimpl(wrapper=True)
def pytest_faultloop_run_job(config, spec, submitted):
    job = yield
    submitted(job)  # recorded once submitted, as a real backend does
    _JOBS.append(job.job_id)
    if len(_JOBS) == int(os.environ["FILL_DURING_JOB"]):  # then the disk fills as it runs
        fill(Path(os.environ["BASE_EXPERIMENTS_DIR"]))
    return job
"""


def _tsv_jobs(session: Path) -> list[str]:
    return [
        row.split("\t")[0] for row in (session / "experiments.tsv").read_text().splitlines()[1:]
    ]


def _report_jobs(session: Path) -> list[str]:
    rows = (session / "experiments_report.md").read_text().split("## Aggregate")[0].splitlines()
    return [row.split(" | ")[5] for row in rows if row.startswith("| ") and "GPU_SLEEP" in row]


@pytest.mark.parametrize("job", [1, 2], ids=["first-job", "resubmitted-job"])
def test_a_disk_filling_mid_job_keeps_every_attempts_row(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, job: int
) -> None:
    """The first job's fault never fires (it is resubmitted); the disk fills (a real ENOSPC on
    a small tmpfs) while the first or the resubmitted job runs. The run stops, and every job
    the TSV lists has its row in the report rendered once there is room; the same session then
    goes on (the resubmission it owes included) and reports every attempt. The first job's row
    was dropped: its result.json had gone under attempts/ before the room for the next job was
    checked, or the resubmitted job's record did not carry the attempt."""
    base = make_project(
        pytester, monkeypatch, pools={"p": "GPU_SLEEP:1:5:2\n"}, never_fired=["GPU_SLEEP:1:5:2@1"]
    )
    (pytester.path / "experiments" / "conftest.py").write_text(FILL_DURING_JOB)
    monkeypatch.setenv("FILL_DURING_JOB", str(job))
    small_filesystem(base, size_mb=80)
    try:
        result = pytester.runpytest_subprocess("experiments/", "--faultloop-pool=p")
        assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
        clean(result)
        session = only_session(base)
        assert len(_tsv_jobs(session)) == job
        (base / FILLER).unlink()
        rendered = subprocess.run(
            [sys.executable, "-m", "pytest_faultloop", "report", str(session)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert rendered.returncode == 0, rendered.stderr
        assert _report_jobs(session) == _tsv_jobs(session)
        assert "unfinished: job " in (session / "experiments_report.md").read_text()

        monkeypatch.setenv("FILL_DURING_JOB", "0")
        resumed = pytester.runpytest_subprocess(
            "experiments/", "--faultloop-pool=p", "--faultloop-session", "last"
        )
        assert resumed.ret == pytest.ExitCode.OK, resumed.stdout.str()
        assert _report_jobs(session) == _tsv_jobs(session)
        stored = json.loads((session / "n2_GPU_SLEEP_r1_i5" / "result.json").read_text())
        assert stored["attempts"][0]["job"]["job_id"] == _tsv_jobs(session)[0]
    finally:
        release(base)


NOT_UTF8 = b"# caf\xe9 (Latin-1)\n"
"""A comment an editor saved in Latin-1: its 0xe9 byte is not UTF-8."""


@pytest.mark.parametrize("kind", ["pool", "env file", "workload registry", "case"])
def test_an_input_file_that_is_not_utf8_is_named_with_its_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """It was a 42-line INTERNALERROR (a UnicodeDecodeError) naming no file; now one line
    names the file, the line and the fix, and nothing runs."""
    make_project(pytester, monkeypatch, pools={"p": "GPU_SLEEP:1:5:2\n"})
    experiments = pytester.path / "experiments"
    args = ["experiments/", "--faultloop-pool=p"]
    if kind == "pool":
        bad = experiments / "p.pool"
    elif kind == "env file":
        bad = pytester.path / "user.env"
        bad.write_text("BATCH_SIZE=1\n")
        args.append("--faultloop-env-file=user.env")
    elif kind == "workload registry":
        bad = experiments / "workloads.toml"
    else:
        bad = experiments / "corpus" / "c1" / "case.toml"
        (bad.parent / "logs").mkdir(parents=True)
        (bad.parent / "logs" / "job.log").write_text("[rank0]: boom\n")
        bad.write_text('source = "s"\n[truth]\nculprit = [0]\nnature = ["crash"]\n')
        args = ["experiments/corpus/"]
    lines = len(bad.read_bytes().splitlines())
    with bad.open("ab") as out:
        out.write(NOT_UTF8)
    result = pytester.runpytest(*args)
    output = clean(result)
    assert result.ret in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERRUPTED), output
    assert f"{bad.name}:{lines + 1}: byte 0xe9 is not UTF-8; save the file as UTF-8" in output
    assert started(pytester) == []


KNOB_FIX = "every job would stop before its fault is armed: give one, or unset it (default: *)"


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "FAULTLOOP_COLLECTIVE_TIMEOUT",
            "abc",
            "FAULTLOOP_COLLECTIVE_TIMEOUT='abc' (from environment variable "
            f"FAULTLOOP_COLLECTIVE_TIMEOUT): not a number of seconds of at least 1; {KNOB_FIX}",
        ),
        (
            "FAULTLOOP_KILL_GRACE_S",
            "-1",
            "FAULTLOOP_KILL_GRACE_S='-1' (from environment variable FAULTLOOP_KILL_GRACE_S): not "
            f"a number of seconds of at least 0; {KNOB_FIX}",
        ),
        (
            "FAULTLOOP_ITER_PERIOD_S",
            "nan",
            "FAULTLOOP_ITER_PERIOD_S='nan' (from environment variable FAULTLOOP_ITER_PERIOD_S): "
            f"not a number of seconds of at least 0; {KNOB_FIX}",
        ),
        (
            "FAULTLOOP_FR_STALL_S",
            "20",
            "FAULTLOOP_FR_STALL_S='20' (from environment variable FAULTLOOP_FR_STALL_S): not "
            "shorter than FAULTLOOP_COLLECTIVE_TIMEOUT=10, so the flight recorder would not dump "
            "before the timeout: lower it, or unset it (default: half the timeout)",
        ),
        (
            "FAULTLOOP_WORKLOAD_HINTS",
            "maybe",
            "FAULTLOOP_WORKLOAD_HINTS='maybe' (from environment variable "
            "FAULTLOOP_WORKLOAD_HINTS): not a switch; every job would stop before its fault is "
            "armed: use 1 or 0, or unset it (default: 0)",
        ),
        (
            "FAULTLOOP_TORCHRUN_ARGS",
            "--log-dir '/tmp/x",
            'FAULTLOOP_TORCHRUN_ARGS="--log-dir \'/tmp/x": No closing quotation (from '
            "environment variable FAULTLOOP_TORCHRUN_ARGS); every torchrun job would stop "
            "before it starts: quote it as a shell would, or unset it",
        ),
    ],
    ids=[
        "not-a-number",
        "below-its-floor",
        "not-finite",
        "stall-after-timeout",
        "hints",
        "torchrun-args",
    ],
)
@XDIST
def test_a_job_knob_that_would_stop_every_job_stops_the_run_before_any(
    pytester: pytest.Pytester,
    experiments_copy: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    message: str,
    xdist: list[str],
) -> None:
    """The jobs inherit the environment: a knob they would stop on was found by each job's
    launcher only (its line in a launcher file), every job submitted, resubmitted and
    reported as "the fault never armed"."""
    monkeypatch.setenv(variable, value)
    result = pytester.runpytest_subprocess(
        "experiments/", "--faultloop-pool=smoke", *xdist, timeout=120
    )
    stops_with(result, message)
    assert list((experiments_copy / "fault_injection").glob("2*")) == []


def test_a_job_knob_a_test_gives_its_experiment_fails_that_call_before_its_job(
    pytester: pytest.Pytester, experiments_copy: Path
) -> None:
    """As any other bad value of the call: the test fails with the line, no job runs."""
    pytester.makepyfile(
        test_knob="def test_knob(faultloop):\n"
        "    faultloop.run('GPU_SLEEP:1:5:1', env={'FAULTLOOP_COLLECTIVE_TIMEOUT': '5s'})\n"
    )
    result = pytester.runpytest_subprocess("test_knob.py", timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "FAULTLOOP_COLLECTIVE_TIMEOUT='5s' (from faultloop.run('GPU_SLEEP:1:5:1', env=...)): "
            f"not a number of seconds of at least 1; {KNOB_FIX}"
        ]
    )
    clean(result)
    assert list(experiments_copy.glob("fault_injection/2*/n1_*")) == []


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("out\twith-tab", "out\\twith-tab"),
        ("out\nline", "out\\nline"),
        ("out-\udce9", "out-\\udce9"),
    ],
    ids=["tab", "newline", "not-utf8"],
)
def test_a_base_directory_the_tsv_cannot_hold_is_refused_at_start_up(
    pytester: pytest.Pytester,
    experiments_copy: Path,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    shown: str,
) -> None:
    """experiments.tsv names each job's directory in a tab-separated column: under a base
    directory with a tab the run wrote a row it then flagged as malformed itself (a newline
    splits the row, bytes that are not UTF-8 could not be written at all)."""
    base = pytester.path / name
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(base))
    result = pytester.runpytest_subprocess("experiments/", "--faultloop-pool=smoke", timeout=120)
    stops_with(
        result,
        f"BASE_EXPERIMENTS_DIR='*{shown}' (from environment variable BASE_EXPERIMENTS_DIR): "
        "holds a tab, a line break or a byte that is not UTF-8, which experiments.tsv (one "
        "tab-separated row per job, its directory in a column) cannot hold; choose a directory "
        "without them",
    )
    assert not os.path.lexists(base)


def test_a_session_given_under_a_path_the_tsv_cannot_hold_is_refused(
    pytester: pytest.Pytester, experiments_copy: Path
) -> None:
    session = pytester.path / "moved\there" / STAMP
    session.mkdir(parents=True)
    (session / "experiments.tsv").write_text(TSV_HEADER)
    result = pytester.runpytest_subprocess(
        "experiments/", "--faultloop-pool=smoke", "--faultloop-session", str(session), timeout=120
    )
    stops_with(result, f"--faultloop-session '*moved\\there/{STAMP}': holds a tab, a line break*")
    assert sorted(p.name for p in session.iterdir()) == ["experiments.tsv"]
