"""Settings precedence (command line > environment > env file > ini > default) and bad values."""

from __future__ import annotations

import pytest
from support.fake_stages import make_project

SOURCES = ("default", "ini", "env_file", "environment", "command_line")


def configure(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    upto: str,
    env: str,
    option: str,
    ini: str,
    values: list[str],
) -> list[str]:
    """Set the setting in every source up to ``upto``; returns the extra command-line args."""
    layers = SOURCES[: SOURCES.index(upto) + 1]
    if "ini" in layers:
        pytester.makeini(f"[pytest]\n{ini} = {values[1]}\n")
    if "env_file" in layers:
        (pytester.path / "user.env").write_text(f'# site defaults\nexport {env}="{values[2]}"\n')
    if "environment" in layers:
        monkeypatch.setenv(env, values[3])
    args = ["--faultloop-env-file=user.env"] if "env_file" in layers else []
    if "command_line" in layers:
        args.append(f"{option}={values[4]}")
    return args


@pytest.mark.parametrize("upto", SOURCES)
@pytest.mark.parametrize(
    ("env", "option", "ini", "values", "shown"),
    [
        (
            "BATCH_SIZE",
            "--faultloop-batch-size",
            "faultloop_batch_size",
            ["2", "3", "4", "5", "6"],
            "batch_size={}",
        ),
        (
            "GPUS_PER_NODE",
            "--faultloop-gpus-per-node",
            "faultloop_gpus_per_node",
            ["4", "5", "6", "7", "8"],
            "gpus_per_node={}",
        ),
        (
            "FAULTLOOP_SCHEDULE",
            "--faultloop-schedule",
            "faultloop_schedule",
            ["window", "pairs", "window", "pairs", "window"],
            "schedule={}",
        ),
        (
            "FAULTLOOP_LAUNCHER",
            "--faultloop-launcher",
            "faultloop_launcher",
            ["fork", "torchrun", "fork", "torchrun", "fork"],
            "launcher={}",
        ),
        (
            "FAULTLOOP_FR_SCOPE",
            "--faultloop-fr-scope",
            "faultloop_fr_scope",
            ["rank", "node", "segment", "node", "segment"],
            "fr_scope={}",
        ),
    ],
)
def test_each_source_overrides_the_ones_below(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    upto: str,
    env: str,
    option: str,
    ini: str,
    values: list[str],
    shown: str,
) -> None:
    make_project(pytester, monkeypatch)
    args = configure(pytester, monkeypatch, upto, env, option, ini, values)
    result = pytester.runpytest("experiments/", "--co", "--faultloop-pool=smoke", *args)
    assert result.ret == 0, result.stdout.str()
    expected = shown.format(values[SOURCES.index(upto)])
    assert expected in result.stdout.str()


def test_default_env_file_is_scripts_user_env(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch)
    (pytester.path / "scripts").mkdir()
    (pytester.path / "scripts" / "user.env").write_text("BATCH_SIZE=7\n")
    result = pytester.runpytest("experiments/", "--co", "--faultloop-pool=smoke")
    assert "batch_size=7" in result.stdout.str()


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (
            {"env": ("BATCH_SIZE", "two")},
            (),
            "ERROR: BATCH_SIZE='two' (from environment variable BATCH_SIZE): input should be a valid integer*",
        ),
        (
            {"env": ("BATCH_SIZE", "0")},
            (),
            "ERROR: BATCH_SIZE='0' (from environment variable BATCH_SIZE): input should be greater than or equal to 1*",
        ),
        (
            {"file": "BATCH_SIZE=-1\n"},
            ("--faultloop-env-file=user.env",),
            "ERROR: BATCH_SIZE='-1' (from user.env:1 (BATCH_SIZE)): input should be greater than or equal to 1*",
        ),
        (
            {},
            ("--faultloop-batch-size=x",),
            "ERROR: BATCH_SIZE='x' (from --faultloop-batch-size): input should be a valid integer*",
        ),
        (
            {},
            ("--faultloop-workload=llama5",),
            "ERROR: WORKLOAD='llama5' (from --faultloop-workload): unknown workload; registered in *: tiny_gloo, tiny_gloo_torchrun, spawn, mpirun, ray_train, accelerate, lightning, deepspeed, llama4_scout, n3_super",
        ),
        (
            {},
            ("--faultloop-env-file=missing.env",),
            "ERROR: env file missing.env: cannot read it (No such file or directory)*",
        ),
        (
            {"file": "this is not an assignment\n"},
            ("--faultloop-env-file=user.env",),
            "ERROR: user.env:1: expected KEY=VALUE, got 'this is not an assignment'",
        ),
        (
            {},
            ("--faultloop-time=soon",),
            "ERROR: TIME='soon' (from --faultloop-time): not a Slurm time limit*",
        ),
        (
            {},
            ("--faultloop-schedule=eager",),
            "ERROR: FAULTLOOP_SCHEDULE='eager' (from --faultloop-schedule): expected one of 'window' or 'pairs'",
        ),
        (
            {},
            ("--faultloop-workload=llama4_scout",),
            "ERROR: WORKLOAD='llama4_scout' cannot run on the local backend*",
        ),
        (
            {},
            ("--faultloop-launcher=mpirun",),
            "ERROR: FAULTLOOP_LAUNCHER='mpirun' (from --faultloop-launcher): expected one of 'fork' or 'torchrun'",
        ),
        (
            {"env": ("FAULTLOOP_FR_JOBS", "0")},
            (),
            "ERROR: FAULTLOOP_FR_JOBS='0' (from environment variable FAULTLOOP_FR_JOBS): input should be greater than or equal to 1",
        ),
        (
            {},
            (
                "--faultloop-backend=slurm",
                "--faultloop-workload=llama4_scout",
                "--faultloop-launcher=torchrun",
            ),
            "ERROR: FAULTLOOP_LAUNCHER='torchrun' (from --faultloop-launcher): workload 'llama4_scout' has no launcher choice*",
        ),
        (
            {},
            ("--faultloop-reanalyze",),
            "ERROR: --faultloop-reanalyze needs a session to re-analyze*",
        ),
        (
            {},
            ("--faultloop-session=nowhere",),
            "ERROR: --faultloop-session nowhere: * is not a session directory*",
        ),
    ],
)
def test_bad_settings_stop_the_run_with_one_line(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    setup: dict[str, object],
    args: tuple[str, ...],
    message: str,
) -> None:
    make_project(pytester, monkeypatch)
    if "env" in setup:
        name, value = setup["env"]  # type: ignore[misc]
        monkeypatch.setenv(name, value)
    if "file" in setup:
        (pytester.path / "user.env").write_text(str(setup["file"]))
    result = pytester.runpytest("experiments/", "--faultloop-pool=smoke", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_keys_never_appear_in_output_or_files(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools={"p": "SIGKILL:1:5:2"})
    secret = "sk-test-do-not-print-123"
    (pytester.path / "key").write_text(secret)
    (pytester.path / "user.env").write_text(f"LLM_API_KEY_FILE={pytester.path / 'key'}\n")
    monkeypatch.setenv("JUDGE_API_KEY", secret)
    result = pytester.runpytest(
        "experiments/",
        "--faultloop-pool=p",
        "-v",
        "--faultloop-env-file=user.env",
        "--junitxml=j.xml",
    )
    result.assert_outcomes(passed=5)
    assert secret not in result.stdout.str() + result.stderr.str()
    for path in [*base.rglob("*"), pytester.path / "j.xml"]:
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path


def test_help_groups_the_options_and_types_the_numeric_ini_keys(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "faultloop: what runs (pools, workload, jobs):",
            "  --faultloop-pool=NAME",
            "faultloop: Slurm:",
            "  --faultloop-local-cluster=N",
            "faultloop: analyzers:",
            "  --faultloop-log-analyzer=SPEC",
            "faultloop: judge and pass rule:",
            "  --faultloop-judge=NAME",
            "faultloop: session and reports:",
            "  --faultloop-base-dir=DIR",
            "  --faultloop-session=DIR",
        ]
    )
    out = result.stdout.str()
    slurm = out[out.index("faultloop: Slurm:") : out.index("faultloop: analyzers:")]
    assert "--faultloop-account" in slurm and "--faultloop-batch-size" not in slurm
    for key, kind in (
        ("faultloop_batch_size", "int"),
        ("faultloop_trials", "int"),
        ("faultloop_analyzer_timeout", "float"),
        ("faultloop_min_pass_rate", "float"),
        ("faultloop_accept_partial", "bool"),
        ("faultloop_workload", "string"),
    ):
        assert f"  {key} ({kind}):" in out, key


@pytest.mark.parametrize(
    ("config", "line"),
    [
        ("pytest.ini", "[pytest]\nfaultloop_batch_size = 3\nfaultloop_min_pass_rate = 0.5\n"),
        ("pytest.toml", "[pytest]\nfaultloop_batch_size = 3\nfaultloop_min_pass_rate = 0.5\n"),
    ],
)
def test_numeric_ini_keys_take_numbers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, config: str, line: str
) -> None:
    make_project(pytester, monkeypatch)
    (pytester.path / config).write_text(line)
    result = pytester.runpytest("experiments/", "--co", "--faultloop-pool=smoke", "-W", "error")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert "batch_size=3" in result.stdout.str()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "faultloop_batch_size = many",
            "ERROR: BATCH_SIZE (from ini option faultloop_batch_size): invalid literal for int() "
            "with base 10: 'many'; write a whole number (unquoted in TOML)",
        ),
        (
            "faultloop_batch_size = 0",
            "ERROR: BATCH_SIZE=0 (from ini option faultloop_batch_size): input should be greater "
            "than or equal to 1",
        ),
        (
            "faultloop_min_pass_rate = half",
            "ERROR: FAULTLOOP_MIN_PASS_RATE (from ini option faultloop_min_pass_rate): could not "
            "convert string to float: 'half'; write a number (unquoted in TOML)",
        ),
    ],
)
def test_bad_numeric_ini_values_stop_the_run_with_one_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, line: str, message: str
) -> None:
    make_project(pytester, monkeypatch)
    pytester.makeini(f"[pytest]\n{line}\n")
    result = pytester.runpytest("experiments/", "--co", "--faultloop-pool=smoke")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_a_quoted_number_in_native_toml_is_refused_by_name(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest types a native TOML value itself (a string is not an int there): the line says
    which key and how to write it, not a traceback."""
    make_project(pytester, monkeypatch)
    (pytester.path / "pytest.toml").write_text('[pytest]\nfaultloop_batch_size = "3"\n')
    result = pytester.runpytest("experiments/", "--co", "--faultloop-pool=smoke")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: BATCH_SIZE (from ini option faultloop_batch_size): *pytest.toml: config "
            "option 'faultloop_batch_size' expects an int, got str: '3'; write a whole number "
            "(unquoted in TOML)"
        ]
    )
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_every_row_states_the_default_of_its_field() -> None:
    """The help's default is rendered from the field's, so the two cannot drift apart."""
    from pytest_faultloop.inputs.settings import SETTINGS, Settings

    for row in SETTINGS:
        default = Settings.model_fields[row.field].default
        assert "{default}" not in row.help, row.field
        if default not in (None, False):
            shown = f"{default:g}" if isinstance(default, float) else str(default)
            shown = ",".join(default) if isinstance(default, list) else shown
            assert shown in row.help, (row.field, row.help)


def test_per_experiment_overrides_are_the_rows_marked_so_with_their_types() -> None:
    """``faultloop.run(entry, time=...)`` takes exactly the rows marked per-experiment, each
    validated by the same type as the run's setting: what one refuses the other refuses."""
    from pydantic import ValidationError

    from pytest_faultloop.inputs.settings import SETTINGS, Settings
    from pytest_faultloop.models import Overrides

    marked = {s.field for s in SETTINGS if s.per_experiment}
    assert set(Overrides.model_fields) == marked | {"env"}
    bad = {"workload": 3, "gpus_per_node": 0, "time": "soon", "fault_delay": -1, "sbatch_script": 3}
    assert set(bad) == marked
    for field, value in bad.items():
        with pytest.raises(ValidationError) as run_error:
            Settings.model_validate({field: value})
        with pytest.raises(ValidationError) as test_error:
            Overrides.model_validate({field: value})
        assert run_error.value.errors()[0]["msg"] == test_error.value.errors()[0]["msg"], field
