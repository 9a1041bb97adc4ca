"""The ``torchrun`` launcher: one emulated node run by PyTorch's own elastic agent.

``python -m pytest_faultloop.jobs.workload.launcher`` with ``FAULTLOOP_LAUNCHER=torchrun`` replaces
itself with ``python -m torch.distributed.run`` (static rendezvous on ``MASTER_ADDR:MASTER_PORT``,
``--nnodes`` / ``--node-rank`` from Slurm's variables, ``--max-restarts=0``, ``--tee=3`` and
``--log-dir=logs/torchrun`` as real jobs use them), which starts ``GPUS_PER_NODE`` workers of
:mod:`pytest_faultloop.jobs.workload.tiny_gloo`. Everything in the log around the ranks' own lines is
then PyTorch's: the ``[default0]:`` prefixes, "Sending process ... closing signal", the
``ChildFailedError`` failure report and the agent's exit code. ``FAULTLOOP_TORCHRUN_ARGS`` adds
options (e.g. ``--local-ranks-filter=0``). The agent's console is the node's stdout/stderr, which
the job script (or the local backend) appends to the workload log.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import NoReturn

from pytest_faultloop.jobs.workload.environment import NodeSpec, torchrun_extra_args
from pytest_faultloop.models.layout import ExperimentLayout

WORKER_MODULE = "pytest_faultloop.jobs.workload.tiny_gloo"


def agent_command(spec: NodeSpec, env: Mapping[str, str]) -> list[str]:
    """The torchrun command line for this node."""
    extra = torchrun_extra_args(env)
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={spec.nnodes}",
        f"--node-rank={spec.node}",
        f"--nproc-per-node={spec.gpus_per_node}",
        "--rdzv-backend=static",
        f"--rdzv-id={spec.job_id}",
        f"--master-addr={env['MASTER_ADDR']}",
        f"--master-port={env['MASTER_PORT']}",
        "--max-restarts=0",
        "--tee=3",
        f"--log-dir={ExperimentLayout(spec.experiment_dir).torchrun_logs}",
        *extra,
        "-m",
        WORKER_MODULE,
    ]


def exec_agent(spec: NodeSpec, env: Mapping[str, str]) -> NoReturn:
    """Become this node's torchrun agent."""
    command = agent_command(spec, env)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(command[0], command, dict(env))
