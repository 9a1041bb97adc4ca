"""The fault injector in a Ray Train worker loop.

Ray starts its workers from the raylet, not from the driver: on a cluster they do not see the
driver's environment. ``ray_job_contract()`` carries the seed's job contract to them:

    from pytest_faultloop import FaultInjector, ray_job_contract

    ray.init(runtime_env={"env_vars": ray_job_contract()})

    def train_loop_per_worker(config):
        injector = FaultInjector.from_env()  # TorchTrainer has set up torch.distributed
        for step in range(1, steps + 1):
            ...
            injector.step(step)
"""

from __future__ import annotations

import os
from collections.abc import Mapping

JOB_CONTRACT = (
    "FAULT_TYPE",
    "FAULT_RANK",
    "FAULT_AT_ITER",
    "FAULT_DELAY",
    "EXPERIMENT_DIR",
)
"""The variables the injector reads."""


def ray_job_contract(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The job contract's variables that are set in ``env`` (default: ``os.environ``)."""
    env = os.environ if env is None else env
    return {name: env[name] for name in JOB_CONTRACT if env.get(name)}
