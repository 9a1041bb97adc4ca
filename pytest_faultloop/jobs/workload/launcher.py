"""One emulated node: ``python -m pytest_faultloop.jobs.workload.launcher`` (one per node, e.g. srun).

It checks the job's configuration, then starts the node's ``GPUS_PER_NODE`` ranks with the
launcher ``FAULTLOOP_LAUNCHER`` names: ``fork`` (:mod:`~pytest_faultloop.jobs.workload.fork_launcher`,
the fast default) or ``torchrun`` (:mod:`~pytest_faultloop.jobs.workload.torchrun_agent`, PyTorch's
elastic agent); a framework workload (``FAULTLOOP_FRAMEWORK``,
:mod:`~pytest_faultloop.jobs.workload.frameworks.registry`) becomes that framework's own launcher. The node's stdout and stderr belong to the workload log (the job script appends
them to it, as ``srun ... >>LOG 2>&1`` does); the launcher's own messages (configuration errors,
which ranks it started, why it ended one) go to ``FAULTLOOP_LAUNCHER_NOTES`` when set (the
backends point it at ``logs/slurm/<JOB_ID>.launcher.err``), else to stderr. Exit status: the
launcher's, or 2 for a bad configuration.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TextIO

from pytest_faultloop.jobs.workload.environment import (
    NodeSpec,
    TrainSettings,
    hints_from,
    kill_grace_from,
    launcher_from,
)
from pytest_faultloop.jobs.workload.frameworks.registry import framework_from
from pytest_faultloop.jobs.workload.inject import FaultPlan
from pytest_faultloop.models.errors import ConfigError

NOTES_VAR = "FAULTLOOP_LAUNCHER_NOTES"


def main() -> int:
    with notes_stream() as notes:
        try:
            spec = NodeSpec.from_env(os.environ)
            TrainSettings.from_env(os.environ)
            kill_grace_from(os.environ)
            hints_from(os.environ)
            FaultPlan.from_env(os.environ, spec.world_size)
            launcher = launcher_from(os.environ)
            framework = framework_from(os.environ, spec)
        except ConfigError as exc:
            print(f"tiny_gloo launcher: configuration error: {exc}", file=notes)
            return 2
        if framework is not None:
            command = framework.command(spec, os.environ, framework.train_module)
            print(f"node {spec.node} ({spec.host}): starting {framework.name}", file=notes)
            notes.flush()
            sys.stdout.flush()
            os.execvpe(command[0], command, dict(os.environ))
        if launcher == "torchrun":
            from pytest_faultloop.jobs.workload.torchrun_agent import exec_agent

            print(f"node {spec.node} ({spec.host}): starting torchrun", file=notes)
            notes.flush()
            exec_agent(spec, os.environ)
        from pytest_faultloop.jobs.workload import fork_launcher  # imports torch

        return fork_launcher.run(spec, notes)


@contextlib.contextmanager
def notes_stream() -> Iterator[TextIO]:
    """Where a node's launcher writes its own messages (``FAULTLOOP_LAUNCHER_NOTES``, else
    stderr)."""
    path = os.environ.get(NOTES_VAR, "").strip()
    if not path:
        yield sys.stderr
        return
    try:
        stream = open(path, "a", buffering=1)  # noqa: SIM115 - closed below
    except OSError as exc:
        print(f"tiny_gloo launcher: cannot write {NOTES_VAR}={path}: {exc}", file=sys.stderr)
        yield sys.stderr
        return
    with stream:
        yield stream


if __name__ == "__main__":
    exit_code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)  # skip tearing torch down (about a second on this machine)
