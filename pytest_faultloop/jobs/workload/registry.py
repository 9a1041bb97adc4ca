"""The workload registry (``experiments/workloads.toml``)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from pytest_faultloop.jobs.workload.frameworks.registry import FRAMEWORKS
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.models.setting_types import FaultDelay, SlurmTime
from pytest_faultloop.store.text_files import NotUtf8, read_utf8


class Workload(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    script: Path
    min_nodes: int = Field(ge=1)
    local: bool = False
    description: str = ""
    time: SlurmTime | None = None
    fault_delay: FaultDelay | None = None
    launcher: Literal["fork", "torchrun"] | None = None
    """How a CPU workload's nodes start their ranks (``FAULTLOOP_LAUNCHER``); ``None``: the job
    script starts them itself."""
    framework: str | None = None
    """The training framework whose own launcher starts each node's ranks
    (``FAULTLOOP_FRAMEWORK``, one of ``frameworks.registry.FRAMEWORKS``)."""

    @field_validator("framework")
    @classmethod
    def _known_framework(cls, name: str | None) -> str | None:
        if name is not None and name not in FRAMEWORKS:
            raise ValueError(f"{name!r} is not a framework; one of: {', '.join(FRAMEWORKS)}")
        return name

    def missing(self) -> str | None:
        """What this machine lacks to run the workload's jobs, with the fix (None: nothing)."""
        return FRAMEWORKS[self.framework].missing() if self.framework else None

    def refusal(self, fault: FaultType, nodes: int, local_ranks: tuple[int, ...]) -> str | None:
        """Why this workload cannot run ``fault`` on ``nodes`` (None: it can)."""
        if self.framework is None:
            return None
        return FRAMEWORKS[self.framework].refusal(fault, nodes, local_ranks)


WORKLOADS_NAME = "workloads.toml"


TINY_GLOO_SCRIPT = Path(__file__).resolve().parent / "tiny_gloo.sh"
"""The built-in workload's job script, shipped inside the package (works from any directory)."""


def builtin_workloads() -> dict[str, Workload]:
    """The workloads every run knows; a project's workloads.toml adds to them."""
    tiny = Workload(
        name="tiny_gloo",
        script=TINY_GLOO_SCRIPT,
        min_nodes=1,
        local=True,
        time="00:05:00",
        fault_delay=1,
        launcher="fork",
        description="Tiny data-parallel model on torch.distributed gloo (CPU)",
    )
    torchrun = tiny.model_copy(
        update={
            "name": "tiny_gloo_torchrun",
            "launcher": "torchrun",
            "time": "00:10:00",
            "description": "tiny_gloo with each node under PyTorch's torchrun agent",
        }
    )
    frameworks = (
        Workload(
            name=framework.name,
            script=TINY_GLOO_SCRIPT,
            min_nodes=1,
            local=True,
            time=framework.time,
            fault_delay=1,
            framework=framework.name,
            description=framework.description,
        )
        for framework in FRAMEWORKS.values()
    )
    return {w.name: w for w in (tiny, torchrun, *frameworks)}


def load_workloads(path: Path) -> dict[str, Workload]:
    """The built-in workloads plus the registry's (which may redefine them); relative script
    paths start at the current directory."""
    try:
        data = tomllib.loads(read_utf8(path))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the workload registry: {exc.strerror}") from None
    except NotUtf8 as exc:
        raise ConfigError(f"{path}:{exc.line}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    workloads = builtin_workloads()
    for name, table in data.items():
        try:
            workload = Workload(name=name, **table)
        except (ValidationError, TypeError) as exc:
            raise ConfigError(f"{path}: workload [{name}]: {_first_error(exc)}") from None
        if not workload.script.is_absolute():
            workload = workload.model_copy(update={"script": Path.cwd() / workload.script})
        workloads[name] = workload
    return workloads


def _first_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
    return str(exc)
