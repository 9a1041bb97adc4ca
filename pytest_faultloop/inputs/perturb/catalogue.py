"""The catalogue: every perturbation by name, and the spec a user writes to choose some
(``ts``, ``ts+ansi,pdsh``, ``all``)."""

from __future__ import annotations

from pytest_faultloop.inputs.perturb.fr_rewrites import FR_PERTURBATIONS
from pytest_faultloop.inputs.perturb.log_rewrites import LOG_PERTURBATIONS
from pytest_faultloop.inputs.perturb.perturbation import Composition, Perturbation
from pytest_faultloop.models.errors import ConfigError

_ENTRIES: tuple[Perturbation, ...] = (*LOG_PERTURBATIONS, *FR_PERTURBATIONS)
CATALOGUE: dict[str, Perturbation] = {entry.name: entry for entry in _ENTRIES}
ALL = "all"


def catalogue_names() -> str:
    return ", ".join(CATALOGUE)


def compositions(
    spec: str, name: str = "--faultloop-perturb", origin: str | None = None
) -> list[Composition]:
    """The compositions a spec names: comma-separated, each ``NAME`` or ``NAME+NAME...``
    (applied left to right), or ``all`` (each catalogue entry alone). Raises ConfigError
    naming the setting (``name``, given in ``origin``), the bad part and the catalogue."""
    source = f"{name}={spec!r}" + (f" (from {origin})" if origin else "")
    chosen: list[Composition] = []
    for item in (part.strip() for part in spec.split(",")):
        if item == ALL:
            chosen += [Composition((p,)) for p in CATALOGUE.values()]
            continue
        names = [name.strip() for name in item.split("+")]
        unknown = [name for name in names if name not in CATALOGUE]
        if not item or unknown:
            what = f"unknown perturbation {unknown[0]!r}" if unknown and unknown[0] else "empty"
            raise ConfigError(
                f"{source}: {what}; choose from {catalogue_names()}, or {ALL} "
                "(join names with + to compose them, with , to list several)"
            )
        if len(set(names)) < len(names):
            raise ConfigError(f"{source}: {item!r} names a perturbation twice")
        chosen.append(Composition(tuple(CATALOGUE[name] for name in names)))
    unique = {c.name: c for c in chosen}
    return list(unique.values())
