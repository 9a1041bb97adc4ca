"""From an experiment to the JobSpec a backend runs: script, time limit, fault delay and
environment, from the test's overrides, else the run's settings, else the workload's."""

from __future__ import annotations

from pathlib import Path

from pytest_faultloop.inputs.settings import Settings
from pytest_faultloop.jobs.backends.protocol import JobSpec, job_environment
from pytest_faultloop.jobs.workload.frameworks.registry import FRAMEWORK_VAR
from pytest_faultloop.jobs.workload.registry import Workload
from pytest_faultloop.models import Experiment, Overrides
from pytest_faultloop.models.setting_types import (
    DEFAULT_FAULT_DELAY_S,
    DEFAULT_TIME,
    time_limit_seconds,
)


def job_spec(
    experiment: Experiment, experiment_dir: Path, settings: Settings, workloads: dict[str, Workload]
) -> JobSpec:
    """The spec of the experiment's job, in ``experiment_dir``."""
    entry = experiment.live
    workload = workloads[experiment.workload]
    chosen = experiment.overrides or Overrides()
    extra = {"BASE_EXPERIMENTS_DIR": str(settings.base_experiments_dir), "WORKLOAD": workload.name}
    if workload.launcher is not None:
        extra["FAULTLOOP_LAUNCHER"] = settings.launcher or workload.launcher
    if workload.framework is not None:
        extra[FRAMEWORK_VAR] = workload.framework
    for name in (
        "megatron_repo_host_path",
        "shared_tmp_base_dir",
        "workspace_host_path",
        "container_image",
    ):
        value = getattr(settings, name)
        if value:
            extra[name.upper()] = str(value)
    env = job_environment(
        entry,
        experiment_dir,
        experiment.gpus_per_node,
        fault_delay=effective_fault_delay(settings, workload, chosen),
        extra={**extra, **chosen.env},
    )
    return JobSpec(
        experiment=experiment,
        experiment_dir=experiment_dir,
        script=effective_script(settings, workload, chosen),
        nodes=entry.nodes,
        gpus_per_node=experiment.gpus_per_node,
        time_limit_s=time_limit_seconds(effective_time(settings, workload, chosen)),
        env=env,
        account=settings.account,
        partition=settings.partition,
    )


def effective_fault_delay(settings: Settings, workload: Workload, chosen: Overrides) -> float:
    """Seconds from the iteration anchor to the fault: the test's, the run's, the workload's,
    else :data:`DEFAULT_FAULT_DELAY_S`."""
    for delay in (chosen.fault_delay, settings.fault_delay, workload.fault_delay):
        if delay is not None:
            return delay
    return DEFAULT_FAULT_DELAY_S


def effective_time(settings: Settings, workload: Workload, chosen: Overrides) -> str:
    return chosen.time or settings.time or workload.time or DEFAULT_TIME


def effective_script(settings: Settings, workload: Workload, chosen: Overrides) -> Path:
    return chosen.sbatch_script or settings.sbatch_script or workload.script
