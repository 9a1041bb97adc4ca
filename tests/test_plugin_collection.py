"""Pools become test items: counts, node ids, selection, bad entries (real pytest runs)."""

from __future__ import annotations

import pytest
from support.fake_stages import make_project, started


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    make_project(pytester, monkeypatch)
    return pytester


def test_default_pool_collects_170_items_in_seed_order(project: pytest.Pytester) -> None:
    result = project.runpytest("experiments/", "--collect-only", "-q")
    ids = [line for line in result.outlines if "::" in line]
    assert len(ids) == 170
    assert ids[0] == "experiments/default.pool::GPU_SLEEP:1:5:2::restart_correct"
    assert ids[1:5] == [
        "experiments/default.pool::GPU_SLEEP:1:5:2::rank_primary",
        "experiments/default.pool::GPU_SLEEP:1:5:2::rank_any",
        "experiments/default.pool::GPU_SLEEP:1:5:2::fault_described",
        "experiments/default.pool::GPU_SLEEP:1:5:2::fr_rank_correct",
    ]
    assert ids[-1] == "experiments/default.pool::SIGNAL_EXC:1:5:2::fr_rank_correct"


def test_header_shows_the_resolved_settings(project: pytest.Pytester) -> None:
    result = project.runpytest("experiments/", "--co", "--faultloop-pool=gpu")
    result.stdout.fnmatch_lines(
        [
            "faultloop: backend=local workload=tiny_gloo pools=gpu (18 experiments) gpus_per_node=4 "
            "batch_size=2 *schedule=window",
            "faultloop: judge=conftest.py:pytest_faultloop_judge "
            "log_analyzer=conftest.py:pytest_faultloop_analyze_log "
            "fr_analyzer=conftest.py:pytest_faultloop_analyze_fr fr_scope=rank",
        ]
    )


def test_selected_pools_keep_the_order_given(project: pytest.Pytester) -> None:
    result = project.runpytest("experiments/", "--faultloop-pool=signal,python", "--co", "-q")
    ids = [line for line in result.outlines if "::" in line]
    assert len(ids) == 40
    assert ids[0].startswith("experiments/signal.pool::SIGTERM:1:5:2::")
    assert ids[-1].startswith("experiments/python.pool::ASYNC_EXC:1:5:2::")


def test_pool_option_is_repeatable(project: pytest.Pytester) -> None:
    result = project.runpytest(
        "experiments/", "--faultloop-pool", "gpu", "--faultloop-pool", "crash", "--co", "-q"
    )
    result.stdout.fnmatch_lines(["130 tests collected*"])


def test_keyword_selection_runs_only_selected_experiments(project: pytest.Pytester) -> None:
    result = project.runpytest("experiments/", "--faultloop-pool=gpu", "-k", "GPU_SLEEP and 5:2")
    result.assert_outcomes(passed=20)
    assert sorted(started(project)) == sorted(
        ["GPU_SLEEP:1:5:2", "GPU_SLEEP:0:5:2", "GPU_SLEEP:4:5:2", "GPU_SLEEP:7:5:2"]
    )


def test_keyword_selects_a_dimension(project: pytest.Pytester) -> None:
    result = project.runpytest("experiments/", "-k", "SIGKILL and rank_any")
    result.assert_outcomes(passed=4)


def test_node_id_on_the_command_line(project: pytest.Pytester) -> None:
    result = project.runpytest("experiments/gpu.pool::GPU_SLEEP:1:5:2::rank_primary", "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*gpu.pool::GPU_SLEEP:1:5:2::rank_primary PASSED*"])
    assert started(project) == ["GPU_SLEEP:1:5:2"]


def test_pool_file_given_directly_is_collected_alone(project: pytest.Pytester) -> None:
    result = project.runpytest("experiments/python.pool", "--co", "-q")
    result.stdout.fnmatch_lines(["20 tests collected*"])


def test_pool_environment_variable_replaces_the_pool(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POOL", "GPU_SLEEP:0:5:2 SIGKILL:1:5:2")
    result = project.runpytest("experiments/", "--co", "-q")
    ids = [line for line in result.outlines if "::" in line]
    assert len(ids) == 10
    assert ids[0] == "experiments/POOL::GPU_SLEEP:0:5:2::restart_correct"


def test_same_experiment_in_two_pools_runs_once(project: pytest.Pytester) -> None:
    result = project.runpytest(
        "experiments/", "--faultloop-pool=gpu,default", "-k", "GPU_SLEEP:1:5:2"
    )
    result.assert_outcomes(passed=10)
    assert started(project) == ["GPU_SLEEP:1:5:2"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "GPU_SLEEP:1:5:2\nGPU_SLEPE:1:5:2\n",
            "*bad.pool:2: 'GPU_SLEPE:1:5:2': unknown fault type 'GPU_SLEPE' (valid: GPU_ERROR, GPU_SLEEP*",
        ),
        (
            "GPU_SLEEP:x:5:2",
            "*bad.pool:1: 'GPU_SLEEP:x:5:2': RANK must be a non-negative integer, got 'x'*",
        ),
        (
            "GPU_SLEEP:1:-5:2",
            "*bad.pool:1: 'GPU_SLEEP:1:-5:2': ITER must be a non-negative integer, got '-5'*",
        ),
        (
            "GPU_SLEEP:8:5:2",
            "*bad.pool:1: 'GPU_SLEEP:8:5:2': rank 8 is outside [0, 8) for 2 node(s) x GPUS_PER_NODE=4*",
        ),
        ("GPU_SLEEP:1:5:0", "*bad.pool:1: 'GPU_SLEEP:1:5:0': NODES must be at least 1*"),
        (
            "GPU_ERROR:1+1:5:2",
            "*bad.pool:1: 'GPU_ERROR:1+1:5:2': rank 1 is listed twice in '1+1': list each rank once*",
        ),
        ("GPU_SLEEP:1:5", "*bad.pool:1: 'GPU_SLEEP:1:5': expected FAULT_TYPE:RANK:ITER:NODES*"),
        (
            "# c\nSIGKILL:1:5:2  # x\n\nSIGKILL:1:5:2",
            "*bad.pool:4: 'SIGKILL:1:5:2': duplicate entry (first listed on line 2)*",
        ),
    ],
)
def test_bad_pool_entries_fail_collection_and_nothing_runs(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    make_project(pytester, monkeypatch, pools={"bad": text, "good": "SIGKILL:0:5:2"})
    result = pytester.runpytest("experiments/", "--faultloop-pool=good,bad")
    result.stdout.fnmatch_lines([message])
    assert "Traceback" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert started(pytester) == []


def test_entry_below_the_workload_minimum(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_project(pytester, monkeypatch, pools={"p": "GPU_SLEEP:1:5:1"})
    result = pytester.runpytest(
        "experiments/",
        "--faultloop-pool=p",
        "--faultloop-workload=llama4_scout",
        "--faultloop-backend=slurm",
        "--co",
    )
    result.stdout.fnmatch_lines(
        [
            "*p.pool:1: 'GPU_SLEEP:1:5:1': NODES=1 is below workload 'llama4_scout'*minimum of 2 node(s)*"
        ]
    )


def test_unknown_pool_lists_the_available_ones(project: pytest.Pytester) -> None:
    result = project.runpytest("experiments/", "--faultloop-pool=gpus", "--co")
    result.stdout.fnmatch_lines(
        ["*unknown pool 'gpus': available pools are control, crash, default, frameworks, gpu,*"]
    )
    assert result.ret != 0


def test_plugin_stays_out_of_ordinary_test_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_one():\n    assert True\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "faultloop:" not in result.stdout.str()


def _own_project(pytester: pytest.Pytester) -> None:
    """A user's project: pools of its own, no default pool, one in a subdirectory."""
    pytester.path.joinpath("my.pool").write_text("SIGKILL:1:5:1\n")
    pytester.mkdir("sub").joinpath("other.pool").write_text("GPU_SLEEP:0:5:1\n")


def test_a_pool_file_in_a_project_without_a_default_pool(pytester: pytest.Pytester) -> None:
    _own_project(pytester)
    result = pytester.runpytest("my.pool", "--co", "-q")
    assert next(line for line in result.outlines if "::" in line) == (
        "my.pool::SIGKILL:1:5:1::restart_correct"
    )
    result.stdout.fnmatch_lines(["5 tests collected*"])
    header = pytester.runpytest("my.pool", "--co").stdout
    header.fnmatch_lines(["faultloop: * pools=my (1 experiments) *"])


def test_a_pool_given_by_its_path(pytester: pytest.Pytester) -> None:
    _own_project(pytester)
    for given in (str(pytester.path / "sub" / "other.pool"), "sub/other.pool,my"):
        result = pytester.runpytest(f"--faultloop-pool={given}", "--co", "-q")
        ids = {line.rsplit("::", 1)[0] for line in result.outlines if "::" in line}
        expected = {"sub/other.pool::GPU_SLEEP:0:5:1"}
        assert ids == (expected if "," not in given else {*expected, "my.pool::SIGKILL:1:5:1"})


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("nope.pool", "--faultloop-pool nope.pool: no such pool file (*nope.pool)"),
        ("{outside}", "--faultloop-pool *far.pool: pytest collects only below its arguments *"),
    ],
)
def test_a_pool_path_that_cannot_be_collected_is_refused(
    pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, given: str, says: str
) -> None:
    _own_project(pytester)
    outside = tmp_path_factory.mktemp("elsewhere") / "far.pool"
    outside.write_text("SIGKILL:1:5:1\n")
    result = pytester.runpytest(f"--faultloop-pool={given.format(outside=outside)}", "--co")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {says}"])


def test_langsmiths_plugin_stays_out_unless_asked_for(pytester: pytest.Pytester) -> None:
    """langchain-openai brings langsmith, whose pytest plugin adds about 2 s to every start-up
    (measured: 3.6 s against 1.6 s for a collect-only run); -p brings it back."""
    pytester.makeconftest(
        "def pytest_configure(config):\n"
        "    pm = config.pluginmanager\n"
        "    loaded = pm.has_plugin('langsmith_plugin') or pm.has_plugin('langsmith.pytest_plugin')\n"
        "    print('langsmith loaded:', loaded)\n"
    )
    pytester.makepyfile("def test_one():\n    pass\n")
    plain = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    plain.stdout.fnmatch_lines(["langsmith loaded: False"])
    asked = pytester.runpytest_subprocess(
        "-s", "-p", "no:cacheprovider", "-p", "langsmith.pytest_plugin"
    )
    asked.stdout.fnmatch_lines(["langsmith loaded: True"])


def test_an_unexpected_error_in_a_pool_collector_is_that_collector_s_error(
    project: pytest.Pytester,
) -> None:
    """Not an INTERNALERROR from the error's own report (a collector's repr_failure takes no
    style argument in pytest 9)."""
    (project.path / "conftest.py").write_text(
        (project.path / "conftest.py").read_text()
        + "\nimport pytest_faultloop.plugin.items as _items\n"
        + "def _broken(self):\n    raise RuntimeError('a bug in collection')\n"
        + "_items.PoolFile.collect = _broken\n"
    )
    # a process of its own: the patched class would stay patched for every later in-process run
    result = project.runpytest_subprocess(
        "experiments/", "--faultloop-pool=smoke", "--collect-only"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*RuntimeError: a bug in collection*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_an_entry_may_name_the_workload_it_runs_on(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = "SIGKILL:2:5:1@workload=spawn\nSIGKILL:2:5:1\nNONE:0:5:1@workload=tiny_gloo"
    make_project(pytester, monkeypatch, pools={"p": pool})
    result = pytester.runpytest("experiments/", "--faultloop-pool=p", "--co", "-q")
    ids = [line for line in result.stdout.lines if "::restart_correct" in line]
    assert ids == [
        "experiments/p.pool::SIGKILL:2:5:1@workload=spawn::restart_correct",
        "experiments/p.pool::SIGKILL:2:5:1::restart_correct",
        "experiments/p.pool::NONE:0:5:1::restart_correct",  # the run's own: no variant
    ]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            "SIGKILL:2:5:1@workload=nope",
            "*p.pool:1: 'SIGKILL:2:5:1@workload=nope': WORKLOAD='nope' (from an entry's "
            "@workload=nope): unknown workload; registered in *: tiny_gloo, *spawn*",
        ),
        (
            "SIGKILL:2:5:1@fault_delay=3",
            "*p.pool:1: *: after NODES, '@' takes workload=NAME (a registered workload), "
            "got 'fault_delay=3'",
        ),
        (
            "SIGKILL:2:5:1@workload=llama4_scout",
            "*p.pool:1: *: WORKLOAD='llama4_scout' cannot run on the local backend*",
        ),
    ],
)
def test_a_bad_workload_after_an_entry_is_named_with_its_place(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, entry: str, message: str
) -> None:
    make_project(pytester, monkeypatch, pools={"p": entry})
    result = pytester.runpytest("experiments/", "--faultloop-pool=p", "--co")
    result.stdout.fnmatch_lines([message])
    assert "Traceback" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED
