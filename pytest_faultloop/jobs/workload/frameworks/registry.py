"""The training frameworks a workload may run on, declared once: each is a name (its
workload's), the module its ranks run, the command each emulated node starts (the framework's
own launcher), what that launcher cannot do (one line each, refused when a pool is read), and
what must be installed. A new framework is its training module and one entry in
``FRAMEWORKS``.

Every node of a job runs the CPU workloads' node launcher (``jobs.workload.launcher``: the
local backend starts it once per emulated node, ``tiny_gloo.sh`` with one srun task per node),
which with ``FAULTLOOP_FRAMEWORK`` set replaces itself with the command here. Nothing here
imports a framework.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_faultloop.jobs.workload.environment import NodeSpec
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.faults import FaultType

FRAMEWORK_VAR = "FAULTLOOP_FRAMEWORK"
"""The framework a job's nodes start (set from the workload by the run)."""
INSTALL_HINT = "pip install -e '.[frameworks]'"
Command = Callable[[NodeSpec, Mapping[str, str], str], list[str]]
"""(the node, its environment, the training module) -> the command the node execs."""


@dataclass(frozen=True)
class Framework:
    """One framework: how a node starts its ranks, and what its launcher cannot do."""

    name: str
    description: str
    train_module: str
    command: Command
    one_node: str = ""
    """Why its launcher cannot span emulated nodes ("": it can)."""
    refuses: Mapping[FaultType, str] = field(default_factory=dict)
    """Fault types its launcher cannot express, and why."""
    refuses_on_local_zero: Mapping[FaultType, str] = field(default_factory=dict)
    """Fault types it cannot express on a node's local rank 0 (where that rank is the node's
    launcher itself), and why."""
    modules: tuple[str, ...] = ()
    """Python packages it needs (the ``frameworks`` extra)."""
    programs: tuple[str, ...] = ()
    """Programs it needs on PATH (Debian packages)."""
    programs_hint: str = ""
    time: str = "00:10:00"
    """Its jobs' wall-clock limit (start-up is slower than the fork launcher's)."""

    def refusal(self, fault: FaultType, nodes: int, local_ranks: tuple[int, ...]) -> str | None:
        """Why an entry of ``fault`` on ``nodes``, hitting ranks of these local ranks, cannot
        run on this framework (None: it can)."""
        if nodes > 1 and self.one_node:
            return f"{self.name} runs on one node only: {self.one_node}"
        reason = self.refuses.get(fault)
        if reason is None and 0 in local_ranks:
            reason = self.refuses_on_local_zero.get(fault)
            if reason is not None:
                return (
                    f"{fault.value} on a node's local rank 0 cannot run under {self.name}: {reason}"
                )
        return f"{fault.value} cannot run under {self.name}: {reason}" if reason else None

    def missing(self) -> str | None:
        """What this machine lacks to run it, with the fix (None: nothing)."""
        absent = [m for m in self.modules if importlib.util.find_spec(m) is None]
        if absent:
            return (
                f"workload {self.name!r} needs the Python package(s) {', '.join(absent)}, "
                f"not installed in {sys.executable}: {INSTALL_HINT}"
            )
        gone = [p for p in self.programs if shutil.which(p) is None]
        if gone:
            return f"workload {self.name!r} needs {', '.join(gone)} on PATH: {self.programs_hint}"
        return None


def _python_module(spec: NodeSpec, env: Mapping[str, str], module: str) -> list[str]:
    """The framework's launcher is in the training script itself (Lightning's, spawn)."""
    return [sys.executable, "-m", module]


ONE_LAUNCHER = "every rank is under one launcher on one node: a lost node is the whole job lost"
"""Why a one-node framework refuses NODE_KILL."""
MPIRUN_FORWARDED = ("MASTER_ADDR", "MASTER_PORT", "EXPERIMENT_DIR", "GPUS_PER_NODE")
MPIRUN_FORWARDED_PREFIXES = ("FAULT_", "FAULTLOOP_", "TORCH_", "SLURM_")
"""What mpirun passes to its ranks with ``-x`` (the job contract, the workload's settings):
its local ranks inherit its environment, but the variables a rank on another host needs are
named, as a real mpirun command line names them."""


def _mpirun(spec: NodeSpec, env: Mapping[str, str], module: str) -> list[str]:
    """Open MPI's launcher starts the job's ranks itself; they run unbuffered, so that a rank's
    last lines reach mpirun before it is killed."""
    forwarded = sorted(
        name
        for name in env
        if name in MPIRUN_FORWARDED or name.startswith(MPIRUN_FORWARDED_PREFIXES)
    )
    return [
        "mpirun",
        "--allow-run-as-root",  # the CI containers run as root; no effect otherwise
        "--oversubscribe",  # more ranks than the host's cores
        "--tag-output",
        # the job's SLURM_* variables (a real allocation, or the local backend's emulation)
        # would make mpirun ask Slurm for hosts and start its ranks with srun: this host only
        *("--mca", "ras", "^slurm", "--mca", "plm", "^slurm"),
        "-np",
        str(spec.world_size),
        *(arg for name in forwarded for arg in ("-x", name)),
        sys.executable,
        "-u",
        "-m",
        module,
    ]


def _accelerate_launch(spec: NodeSpec, env: Mapping[str, str], module: str) -> list[str]:
    """``accelerate launch --multi_gpu`` on this node (torchrun's elastic agent inside it,
    static rendezvous on ``MASTER_ADDR:MASTER_PORT``); its ranks train on CPU over gloo."""
    return [
        sys.executable,
        "-m",
        "accelerate.commands.accelerate_cli",  # the ``accelerate`` command
        "launch",
        "--multi_gpu",
        f"--num_processes={spec.world_size}",
        f"--num_machines={spec.nnodes}",
        f"--machine_rank={spec.node}",
        f"--main_process_ip={env['MASTER_ADDR']}",
        f"--main_process_port={env['MASTER_PORT']}",
        "--same_network",
        "--rdzv_backend=static",
        "--max_restarts=0",
        "--num_cpu_threads_per_process=1",
        "--mixed_precision=no",
        "--dynamo_backend=no",
        "-m",
        module,
    ]


def hostfile(spec: NodeSpec) -> Path:
    """DeepSpeed's hostfile for the job, written under the experiment directory (every node
    writes the same text, atomically): one line per emulated node, ``node<N> slots=<GPUS>``.
    With ``--no_ssh`` the names are labels only: each node's launcher finds itself by
    ``--node_rank`` and every rank connects to ``--master_addr``."""
    path = spec.experiment_dir / f"deepspeed_hostfile.{spec.job_id}"
    text = "".join(f"node{n} slots={spec.gpus_per_node}\n" for n in range(spec.nnodes))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def _deepspeed(spec: NodeSpec, env: Mapping[str, str], module: str) -> list[str]:
    """``deepspeed --num_gpus N --master_port P --module M`` on one node; on several, each
    node's runner starts only its own ranks (``--no_ssh --node_rank``) from a shared hostfile."""
    runner = [sys.executable, "-m", "deepspeed.launcher.runner"]  # what `deepspeed` runs
    rendezvous = ["--master_addr", env["MASTER_ADDR"], "--master_port", env["MASTER_PORT"]]
    if spec.nnodes == 1:
        nodes = ["--num_gpus", str(spec.gpus_per_node)]
    else:
        nodes = ["--hostfile", str(hostfile(spec)), "--no_ssh", "--node_rank", str(spec.node)]
    return [*runner, *nodes, *rendezvous, "--module", module]


FRAMEWORKS: dict[str, Framework] = {
    framework.name: framework
    for framework in (
        Framework(
            "spawn",
            "torch.multiprocessing.spawn: the script spawns the node's ranks",
            "pytest_faultloop.jobs.workload.frameworks.spawn_train",
            _python_module,
            one_node=(
                "torch.multiprocessing.spawn starts the processes of one machine and its "
                "reports name them by their index there, not by a global rank"
            ),
            refuses={FaultType.NODE_KILL: ONE_LAUNCHER},
            modules=("torch",),
            time="00:05:00",
        ),
        Framework(
            "mpirun",
            "Open MPI's mpirun starts the ranks; each sets up gloo itself from OMPI_COMM_WORLD_*",
            "pytest_faultloop.jobs.workload.frameworks.mpirun_train",
            _mpirun,
            one_node=(
                "one mpirun starts every rank of a job, on other hosts through its own daemons "
                "(ssh or a resource manager), so an emulated node cannot start just its share"
            ),
            refuses={FaultType.NODE_KILL: ONE_LAUNCHER},
            modules=("torch",),
            programs=("mpirun",),
            programs_hint=(
                "install Open MPI: scripts/install_openmpi.sh in a checkout, "
                "or apt-get install openmpi-bin"
            ),
            time="00:05:00",
        ),
        Framework(
            "ray_train",
            "Ray Train: each node's script is a TorchTrainer driver on a local Ray cluster",
            "pytest_faultloop.jobs.workload.frameworks.ray_train_train",
            _python_module,
            one_node=(
                "a Ray Train run is one driver on one Ray cluster, and Ray Train numbers nodes "
                "by IP address: raylets of emulated nodes, all on 127.0.0.1, would be one node"
            ),
            refuses={
                FaultType.NODE_KILL: (
                    "a Ray worker's parent is the raylet, not the node's launcher (the driver), "
                    "and the one node's loss is the loss of the whole Ray cluster"
                ),
            },
            modules=("torch", "ray"),
        ),
        Framework(
            "accelerate",
            "Transformers' Trainer on a tiny BERT, each node's ranks started by accelerate launch",
            "pytest_faultloop.jobs.workload.frameworks.accelerate_train",
            _accelerate_launch,
            modules=("accelerate", "transformers"),
        ),
        Framework(
            "lightning",
            "PyTorch Lightning: each node's script is Lightning's launcher for its other ranks",
            "pytest_faultloop.jobs.workload.frameworks.lightning_train",
            _python_module,
            refuses_on_local_zero={
                FaultType.NODE_KILL: (
                    "that rank is Lightning's launcher itself (the job script's child), so only "
                    "it would die: name a rank that is not its node's first"
                ),
            },
            modules=("lightning",),
            time="00:05:00",
        ),
        Framework(
            "deepspeed",
            "DeepSpeed: each node runs DeepSpeed's launcher (deepspeed --no_ssh --node_rank N), "
            "its ranks train a deepspeed.initialize engine on gloo",
            "pytest_faultloop.jobs.workload.frameworks.deepspeed_train",
            _deepspeed,
            modules=("deepspeed",),
        ),
    )
}


def framework_from(env: Mapping[str, str], spec: NodeSpec) -> Framework | None:
    """The framework ``FAULTLOOP_FRAMEWORK`` names for this node (None: unset, the fork or
    torchrun launcher); ConfigError for one that is unknown, cannot span the job's nodes, or
    is not installed here."""
    name = env.get(FRAMEWORK_VAR, "").strip()
    if not name:
        return None
    if name not in FRAMEWORKS:
        raise ConfigError(
            f"{FRAMEWORK_VAR}={name!r} is not a framework; one of: {', '.join(FRAMEWORKS)}"
        )
    chosen = FRAMEWORKS[name]
    if spec.nnodes > 1 and chosen.one_node:
        raise ConfigError(f"{name} runs on one node only: {chosen.one_node}")
    missing = chosen.missing()
    if missing:
        raise ConfigError(missing)
    return chosen
