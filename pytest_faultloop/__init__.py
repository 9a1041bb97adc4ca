"""pytest-faultloop: inject faults into distributed training jobs and score failure attribution.

The package's public face for training scripts is the fault injector and its adapters, loaded on
first use (the pytest plugin never imports torch or a framework at start-up):

- ``FaultInjector``: ``FaultInjector.from_env()``, then ``injector.step(iteration)``;
- ``LightningFaultInjection``: a Lightning ``Callback``;
- ``TrainerFaultInjection``: a Transformers ``TrainerCallback``;
- ``ray_job_contract``: the job contract for a Ray Train worker's ``runtime_env``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["FaultInjector", "LightningFaultInjection", "TrainerFaultInjection", "ray_job_contract"]

if TYPE_CHECKING:
    from pytest_faultloop.jobs.workload.adapters.lightning import LightningFaultInjection
    from pytest_faultloop.jobs.workload.adapters.ray_train import ray_job_contract
    from pytest_faultloop.jobs.workload.adapters.transformers import TrainerFaultInjection
    from pytest_faultloop.jobs.workload.fault_injector import FaultInjector


def __getattr__(name: str) -> Any:
    """Each public name from its module, imported when first asked for."""
    if name == "FaultInjector":
        from pytest_faultloop.jobs.workload.fault_injector import FaultInjector

        return FaultInjector
    if name == "LightningFaultInjection":
        from pytest_faultloop.jobs.workload.adapters.lightning import LightningFaultInjection

        return LightningFaultInjection
    if name == "TrainerFaultInjection":
        from pytest_faultloop.jobs.workload.adapters.transformers import TrainerFaultInjection

        return TrainerFaultInjection
    if name == "ray_job_contract":
        from pytest_faultloop.jobs.workload.adapters.ray_train import ray_job_contract

        return ray_job_contract
    raise AttributeError(f"module 'pytest_faultloop' has no attribute {name!r}")
