"""The fault injector as a library: two lines in any training loop.

    from pytest_faultloop import FaultInjector

    injector = FaultInjector.from_env()  # once torch.distributed is set up (or RANK is set)
    for iteration, batch in enumerate(loader, start=1):
        ...  # the training step
        injector.step(iteration)

It reads the seed's job contract (``FAULT_TYPE FAULT_RANK FAULT_AT_ITER FAULT_DELAY
EXPERIMENT_DIR``), learns which rank this process is from the framework (``torch.distributed``
when its default group is up, else the first of ``RANK``, ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``,
``SLURM_PROCID`` that is set), and fires for real at ``step``: iteration ``FAULT_AT_ITER`` arms the
fault and ``FAULT_DELAY`` seconds later a thread fires it. Every fault type the seed names is
the one implementation of :mod:`pytest_faultloop.jobs.workload.inject` (its ground-truth marker
``fault_injection.json`` and its ``FAULT INJECTION:`` lines included); a rank that injects
nothing, and a clean run (``FAULT_TYPE`` unset or ``NONE``), get an injector whose ``step``
does nothing.

On a CPU the GPU faults are emulated at ``step``, the loop's one point of contact: an emulated
``GPU_SLEEP`` never returns from it (as a rank stuck behind a hung kernel never reaches its next
collective), an emulated ``GPU_ERROR`` raises PyTorch's asynchronous CUDA error from it.
Adapters for the frameworks' own hooks: :mod:`~pytest_faultloop.jobs.workload.adapters`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pytest_faultloop.jobs.workload.envparse import env_int
from pytest_faultloop.jobs.workload.inject import FaultPlan, Injector
from pytest_faultloop.models.errors import ConfigError

RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
"""Where launchers put a process's global rank: torchrun and the launchers built on it
(accelerate, DeepSpeed, Lightning's), Open MPI, MPICH/Hydra, srun (one task per rank)."""
SIZE_VARIABLES = {
    "RANK": "WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK": "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK": "PMI_SIZE",
    "SLURM_PROCID": "SLURM_NTASKS",
}
"""The world size beside each rank variable."""
NODE_VARIABLES = ("SLURM_NODEID", "GROUP_RANK", "NODE_RANK")
"""Where launchers put the node's index (recorded in the marker; the rank is what is scored)."""


@dataclass(frozen=True)
class ProcessPlace:
    """Which rank of how many this process is, on which node, and who said so."""

    rank: int
    world_size: int
    node: int
    told_by: str
    """``torch.distributed`` or the variable the rank came from."""


def process_place(env: Mapping[str, str]) -> ProcessPlace:
    """This process's place in the job: ``torch.distributed``'s, else the launchers'
    variables'. Raises :class:`ConfigError` when nothing tells it."""
    node = next((env_int(env, name, 0, minimum=0) for name in NODE_VARIABLES if env.get(name)), 0)
    distributed = _distributed_place()
    if distributed is not None:
        rank, world = distributed
        return ProcessPlace(rank, world, node, "torch.distributed")
    for name in RANK_VARIABLES:
        if env.get(name, "").strip():
            rank = env_int(env, name, 0, minimum=0)
            size_name = SIZE_VARIABLES[name]
            world = env_int(env, size_name, rank + 1, minimum=1)
            if rank >= world:
                raise ConfigError(f"{name}={rank} is outside {size_name}={world}")
            return ProcessPlace(rank, world, node, name)
    raise ConfigError(
        "cannot tell this process's rank: create the FaultInjector after "
        "torch.distributed.init_process_group, or start the process with a launcher that "
        f"sets one of {', '.join(RANK_VARIABLES)}"
    )


def _distributed_place() -> tuple[int, int] | None:
    """(rank, world size) from torch.distributed's default group, where torch is imported and
    the group is up (the library never imports torch itself)."""
    torch_distributed = sys.modules.get("torch.distributed")
    if torch_distributed is None or not torch_distributed.is_available():
        return None
    if not torch_distributed.is_initialized():
        return None
    return int(torch_distributed.get_rank()), int(torch_distributed.get_world_size())


def _cuda_device() -> int | None:
    """The CUDA device this process trains on, where torch is imported and sees one (the GPU
    faults then use the real mechanisms); None selects their CPU emulations."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return int(torch.cuda.current_device())


class FaultInjector:
    """The injector of one process: fires the planned fault when this process is a target."""

    def __init__(self, place: ProcessPlace, injector: Injector | None) -> None:
        self.place = place
        self.injector = injector
        self._device_hooks = False
        """Whether the loop calls the device hooks itself."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> FaultInjector:
        """The injector the job's environment (default: ``os.environ``) plans for this
        process. Raises :class:`ConfigError` naming a bad variable and its fix."""
        env = os.environ if env is None else env
        place = process_place(env)
        plan = FaultPlan.from_env(env, place.world_size)
        if plan is None or place.rank not in plan.ranks:
            return cls(place, None)
        experiment_dir = env.get("EXPERIMENT_DIR", "").strip()
        if not experiment_dir or not Path(experiment_dir).is_dir():
            raise ConfigError(
                f"EXPERIMENT_DIR={experiment_dir!r} is not an existing directory: the injector "
                "writes the fault's marker (fault_injection.json) there"
            )
        injector = Injector(
            plan,
            node=place.node,
            experiment_dir=Path(experiment_dir),
            cuda_device=_cuda_device(),
            rank=place.rank,
        )
        return cls(place, injector)

    @property
    def targeted(self) -> bool:
        """Whether this process injects a fault."""
        return self.injector is not None

    def step(self, iteration: int) -> None:
        """Call once per iteration, after it finished (``iteration`` counts from 1). Arms the
        fault at ``FAULT_AT_ITER``; a fired fault that acts in the loop acts here (the GPU
        faults' emulations too, unless the loop calls the device hooks itself)."""
        injector = self.injector
        if injector is None:
            return
        if not self._device_hooks:
            injector.device_sync()
            injector.device_step()
        injector.on_iteration_end(iteration)

    def device_work_starts(self) -> None:
        """Optional, where the loop launches its device work: an emulated ``GPU_SLEEP`` hangs
        here instead of at ``step``."""
        self._device_hooks = True
        if self.injector is not None:
            self.injector.device_step()

    def device_work_done(self) -> None:
        """Optional, where the loop waits for its device work: an emulated ``GPU_ERROR`` raises
        here instead of at ``step``."""
        self._device_hooks = True
        if self.injector is not None:
            self.injector.device_sync()
