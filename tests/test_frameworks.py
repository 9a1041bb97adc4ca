"""The frameworks a workload may run on (declared once in ``frameworks.registry``) and the
injector library's view of a process: what each framework refuses, what it needs, and which
rank a process is."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_faultloop.inputs.pool import PoolRules, check_rules, parse_entry
from pytest_faultloop.jobs.workload.environment import NodeSpec
from pytest_faultloop.jobs.workload.fault_injector import (
    RANK_VARIABLES,
    FaultInjector,
    process_place,
)
from pytest_faultloop.jobs.workload.frameworks.registry import (
    FRAMEWORKS,
    Framework,
    framework_from,
)
from pytest_faultloop.jobs.workload.registry import Workload, builtin_workloads
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.faults import FaultType

ONE_HOST = Framework(
    "one_host",
    "a launcher that starts every rank from one process",
    "module",
    lambda spec, env, module: [module],
    one_node="its one launcher starts every rank",
    refuses={FaultType.NODE_KILL: "a lost node takes the one launcher"},
    modules=("no_such_module_here",),
)


def test_every_framework_is_a_built_in_workload_started_by_the_node_launcher() -> None:
    workloads = builtin_workloads()
    for name, framework in FRAMEWORKS.items():
        workload = workloads[name]
        assert workload.framework == name and workload.local
        assert workload.script.name == "tiny_gloo.sh"
        assert framework.train_module.startswith("pytest_faultloop.jobs.workload.frameworks.")


def test_a_framework_says_why_it_refuses_an_entry() -> None:
    assert ONE_HOST.refusal(FaultType.SIGKILL, 1, (2,)) is None
    assert ONE_HOST.refusal(FaultType.SIGKILL, 2, (2,)) == (
        "one_host runs on one node only: its one launcher starts every rank"
    )
    assert ONE_HOST.refusal(FaultType.NODE_KILL, 1, (2,)) == (
        "NODE_KILL cannot run under one_host: a lost node takes the one launcher"
    )
    lightning = FRAMEWORKS["lightning"]
    assert lightning.refusal(FaultType.NODE_KILL, 2, (2,)) is None
    assert lightning.refusal(FaultType.SIGKILL, 2, (0,)) is None
    refused = lightning.refusal(FaultType.NODE_KILL, 2, (0,))
    assert refused is not None
    assert refused.startswith("NODE_KILL on a node's local rank 0 cannot run under lightning: ")


def test_a_pool_refuses_what_the_workloads_launcher_cannot_do() -> None:
    rules = PoolRules(4, 1, "one_host", ONE_HOST.refusal)
    check_rules(parse_entry("SIGKILL:2:5:1"), rules)
    with pytest.raises(ValueError, match="workload 'one_host' refuses it: one_host runs on one"):
        check_rules(parse_entry("SIGKILL:6:5:2"), rules)
    lightning = PoolRules(4, 1, "lightning", FRAMEWORKS["lightning"].refusal)
    check_rules(parse_entry("NODE_KILL:6:5:2"), lightning)
    with pytest.raises(ValueError, match="NODE_KILL on a node's local rank 0 cannot run"):
        check_rules(parse_entry("NODE_KILL:1+4:5:2"), lightning)


def test_a_missing_package_is_named_with_the_install_command() -> None:
    assert ONE_HOST.missing() == (
        "workload 'one_host' needs the Python package(s) no_such_module_here, not installed in "
        f"{__import__('sys').executable}: pip install -e '.[frameworks]'"
    )


def test_an_unknown_framework_is_refused_by_the_registry_and_the_node(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'nope' is not a framework; one of: spawn"):
        Workload(name="w", script=tmp_path / "s.sh", min_nodes=1, framework="nope")
    spec = NodeSpec("1", 0, 0, 1, 4, "n1", tmp_path)
    assert framework_from({}, spec) is None
    with pytest.raises(ConfigError, match="FAULTLOOP_FRAMEWORK='nope' is not a framework"):
        framework_from({"FAULTLOOP_FRAMEWORK": "nope"}, spec)
    assert framework_from({"FAULTLOOP_FRAMEWORK": "spawn"}, spec) is FRAMEWORKS["spawn"]


@pytest.mark.parametrize(
    ("env", "place"),
    [
        ({"RANK": "3", "WORLD_SIZE": "8", "GROUP_RANK": "0"}, (3, 8, 0, "RANK")),
        (
            {"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "6"},
            (5, 6, 0, "OMPI_COMM_WORLD_RANK"),
        ),
        ({"PMI_RANK": "2", "PMI_SIZE": "4", "SLURM_NODEID": "1"}, (2, 4, 1, "PMI_RANK")),
        ({"SLURM_PROCID": "7", "SLURM_NTASKS": "8"}, (7, 8, 0, "SLURM_PROCID")),
        ({"RANK": "1", "SLURM_PROCID": "0", "WORLD_SIZE": "2"}, (1, 2, 0, "RANK")),
    ],
)
def test_the_rank_comes_from_the_launchers_variables_in_order(
    env: dict[str, str], place: tuple[int, int, int, str]
) -> None:
    found = process_place(env)
    assert (found.rank, found.world_size, found.node, found.told_by) == place


def test_a_process_that_nothing_places_is_told_how_to_fix_it() -> None:
    with pytest.raises(ConfigError) as error:
        process_place({})
    assert "create the FaultInjector after torch.distributed.init_process_group" in str(error.value)
    assert all(name in str(error.value) for name in RANK_VARIABLES)
    with pytest.raises(ConfigError, match="RANK=4 is outside WORLD_SIZE=4"):
        process_place({"RANK": "4", "WORLD_SIZE": "4"})


def test_a_clean_run_or_another_rank_injects_nothing(tmp_path: Path) -> None:
    assert not FaultInjector.from_env({"RANK": "1", "WORLD_SIZE": "2"}).targeted
    other = {"FAULT_TYPE": "SIGKILL", "FAULT_RANK": "0", "RANK": "1", "WORLD_SIZE": "2"}
    injector = FaultInjector.from_env(other)  # no EXPERIMENT_DIR needed: it writes nothing
    assert not injector.targeted
    for iteration in range(1, 20):
        injector.step(iteration)


def test_a_target_without_an_experiment_directory_is_refused(tmp_path: Path) -> None:
    env = {"FAULT_TYPE": "SIGKILL", "FAULT_RANK": "1", "RANK": "1", "WORLD_SIZE": "2"}
    with pytest.raises(ConfigError, match="EXPERIMENT_DIR='' is not an existing directory"):
        FaultInjector.from_env(env)
    assert FaultInjector.from_env({**env, "EXPERIMENT_DIR": str(tmp_path)}).targeted


def test_the_package_exports_the_injector_lazily() -> None:
    import pytest_faultloop

    assert pytest_faultloop.FaultInjector is FaultInjector
    with pytest.raises(AttributeError, match="has no attribute 'Injector'"):
        _ = pytest_faultloop.Injector  # type: ignore[attr-defined]
