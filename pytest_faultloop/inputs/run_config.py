"""What a pytest run is configured to do, fixed before anything runs: its settings and where
each came from, the workload registry and the main workload, the pass rule and the chosen
perturbations. Built from the run's option values and the pool directory; it starts nothing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_faultloop.inputs.perturb.catalogue import compositions
from pytest_faultloop.inputs.perturb.perturbation import Composition
from pytest_faultloop.inputs.settings import OptionValues, Settings, resolve
from pytest_faultloop.jobs.workload.registry import (
    WORKLOADS_NAME,
    Workload,
    builtin_workloads,
    load_workloads,
)
from pytest_faultloop.models.errors import ConfigError
from pytest_faultloop.scoring.pass_rule import PassRule


@dataclass(frozen=True)
class RunConfiguration:
    settings: Settings
    sources: dict[str, str]
    """Setting -> where its value came from (for messages)."""
    pool_dir: Path
    registry_file: Path
    """Where workloads are registered (``workloads.toml`` beside the pools by default)."""
    workloads: dict[str, Workload]
    workload: Workload
    """The run's main workload (``WORKLOAD``); a Python test may choose another."""
    pass_rule: PassRule
    perturbations: list[Composition]
    """``--faultloop-perturb``'s compositions, in the order given."""

    @classmethod
    def load(cls, given: OptionValues, pool_dir: Path) -> RunConfiguration:
        """Resolve the settings and the workloads (raises ConfigError naming the bad value)."""
        resolved = resolve(given)
        settings, sources = resolved.settings, resolved.sources
        registry_file = _registry_file(settings, pool_dir, given.rootpath)
        if settings.workloads_file is None and not registry_file.is_file():
            workloads = builtin_workloads()
        else:
            workloads = load_workloads(registry_file)
        workload = choose_workload(
            settings, sources, workloads, registry_file, settings.workload, sources.get("workload")
        )
        return cls(
            settings=settings,
            sources=sources,
            pool_dir=pool_dir,
            registry_file=registry_file,
            workloads=workloads,
            workload=workload,
            pass_rule=PassRule(
                accept_partial=settings.accept_partial,
                fr_scope=settings.fr_scope,
                min_pass_rate=settings.min_pass_rate,
            ),
            perturbations=compositions(settings.perturb) if settings.perturb else [],
        )

    def chosen_workload(self, name: str, source: str | None) -> Workload:
        """A registered workload the backend can run; ConfigError naming ``source`` if not."""
        return choose_workload(
            self.settings, self.sources, self.workloads, self.registry_file, name, source
        )

    @property
    def launcher(self) -> str | None:
        """How the main workload's nodes start their ranks (``None``: its job script decides)."""
        return self.settings.launcher or self.workload.launcher


def _registry_file(settings: Settings, pool_dir: Path, root: Path) -> Path:
    path = settings.workloads_file
    if path is None:
        return pool_dir / WORKLOADS_NAME
    return path if path.is_absolute() else root / path


def choose_workload(
    settings: Settings,
    sources: dict[str, str],
    workloads: dict[str, Workload],
    registry_file: Path,
    name: str,
    source: str | None,
) -> Workload:
    """The registered workload ``name`` if this run's backend and launcher can run it."""
    if name not in workloads:
        raise ConfigError(
            f"WORKLOAD={name!r} (from {source or 'default'}): unknown workload; "
            f"registered in {registry_file}: {', '.join(workloads)}"
        )
    workload = workloads[name]
    if settings.backend == "local" and not workload.local:
        raise ConfigError(
            f"WORKLOAD={workload.name!r} cannot run on the local backend (it needs "
            f"{workload.script.name} on a GPU cluster); use --faultloop-backend=slurm "
            "or WORKLOAD=tiny_gloo"
        )
    if settings.launcher is not None and workload.launcher is None:
        raise ConfigError(
            f"FAULTLOOP_LAUNCHER={settings.launcher!r} "
            f"(from {sources.get('launcher')}): workload {workload.name!r} has no "
            "launcher choice (its job script starts its ranks itself); drop the option or "
            "use a CPU workload such as tiny_gloo"
        )
    return workload
