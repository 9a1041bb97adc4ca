"""What a run tests: pool entries placed in a run, stored cases and their ground truth, and the
restart decision (with the seed's wording of it)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pytest_faultloop.models.fault_ranks import FaultTarget, fault_ranks_text, parse_fault_ranks
from pytest_faultloop.models.faults import FaultType, Nature
from pytest_faultloop.models.layout import CHECKPOINTS
from pytest_faultloop.models.setting_types import FaultDelay, RanksPerNode, SlurmTime


class ReportColumns(NamedTuple):
    """An experiment's cells in the report table, in the seed's column order (which differs
    from the key's ``FAULT_TYPE:RANK:ITER:NODES`` and from the TSV's)."""

    fault: str
    nodes: str
    rank: str
    iteration: str


class Model(BaseModel):
    """A stage model: unknown fields are refused (a stored result from a newer version says so)."""

    model_config = ConfigDict(extra="forbid")


class ImmutableModel(BaseModel):
    """A stage model that is also hashable and never changed after it is built (pool entries,
    experiments, cases)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# --- Pool and experiment -------------------------------------------------------------------


class PoolEntry(ImmutableModel):
    """One ``FAULT_TYPE:RANK:ITER:NODES`` entry of a pool; RANK may list several ranks
    (:mod:`pytest_faultloop.models.fault_ranks`)."""

    fault: FaultType
    rank: int = Field(ge=0)
    """The injected rank; the first listed when there are several."""
    iter: int = Field(ge=0)
    nodes: int = Field(ge=1)
    targets: tuple[FaultTarget, ...] = Field(default=(), exclude_if=lambda targets: not targets)
    """Every injected rank with its offset when RANK lists several or an offset (``12+14@3``);
    empty for the seed's one plain rank, which ``rank`` alone says (stored as before)."""

    @model_validator(mode="after")
    def _first_target_is_rank(self) -> PoolEntry:
        if self.targets and self.targets[0].rank != self.rank:
            raise ValueError(f"rank {self.rank} must be the first of the targets")
        return self

    @classmethod
    def of(cls, fault: FaultType, ranks: str, iter: int, nodes: int) -> PoolEntry:
        """The entry whose RANK field is ``ranks`` (``12``, ``12+14@3``); raises ValueError."""
        targets = parse_fault_ranks(ranks)
        plain = len(targets) == 1 and not targets[0].offset_s
        return cls(
            fault=fault,
            rank=targets[0].rank,
            iter=iter,
            nodes=nodes,
            targets=() if plain else targets,
        )

    @property
    def ranks(self) -> tuple[int, ...]:
        """The injected ranks, ascending."""
        return tuple(t.rank for t in self.targets) or (self.rank,)

    @property
    def rank_text(self) -> str:
        """RANK as written in the key and exported as FAULT_RANK: ``12``, ``12+14@3``."""
        return fault_ranks_text(self.targets) if self.targets else str(self.rank)

    def nodes_hit(self, gpus_per_node: int) -> list[int]:
        """The nodes holding an injected rank, ascending."""
        return sorted({rank // gpus_per_node for rank in self.ranks})

    @property
    def key(self) -> str:
        return f"{self.fault.value}:{self.rank_text}:{self.iter}:{self.nodes}"

    @property
    def dirname(self) -> str:
        """The seed's per-experiment directory name (``@`` of an offset written ``at``)."""
        ranks = self.rank_text.replace("@", "at")
        return f"n{self.nodes}_{self.fault.value}_r{ranks}_i{self.iter}"


class Decision(StrEnum):
    """The restart decision of a log analysis; ``text`` is the seed's wording of it."""

    RESTART = "RESTART"
    STOP = "STOP"
    CONTINUE = "CONTINUE"
    UNKNOWN = "UNKNOWN"

    @property
    def text(self) -> str:
        return DECISION_TEXT[self]

    @classmethod
    def from_text(cls, text: str) -> Decision | None:
        """The decision a text states (any analyzer's wording); None when it states none.

        STOP wins over RESTART, so ``STOP - DONT RESTART IMMEDIATE`` reads STOP (the seed's
        substring test read it as RESTART)."""
        words = " ".join(text.upper().replace("\u2019", "'").split())
        for pattern, decision in _DECISION_WORDS:
            if pattern.search(words):
                return decision
        return None


DECISION_TEXT: Mapping[Decision, str] = MappingProxyType(
    {
        Decision.RESTART: "RESTART IMMEDIATE",
        Decision.STOP: "STOP - DONT RESTART IMMEDIATE",
        Decision.CONTINUE: "ERRORS NOT FOUND",
        Decision.UNKNOWN: "NO LOGS",
    }
)
"""The seed's vocabulary for each decision (``NO LOGS`` when there was nothing to analyse)."""

_DECISION_WORDS = (
    (re.compile(r"\bNO LOGS\b|\bLLM FAILURE\b|^UNKNOWN$"), Decision.UNKNOWN),
    (re.compile(r"\bSTOP\b|\bDO\s*N'?O?T\s+RESTART\b|\bNO\s+RESTART\b"), Decision.STOP),
    (re.compile(r"\bRESTART\b"), Decision.RESTART),
    (
        re.compile(r"\bERRORS NOT FOUND\b|\bCONTINUE\b|\bNO (?:FAILURE|ERRORS?)\b"),
        Decision.CONTINUE,
    ),
)


class Truth(ImmutableModel):
    """What a correct attribution says: the ground truth a judge scores against.

    Derived from the fault catalogue and the restart policy for an injected fault; given by a
    case's ``[truth]`` for a real incident. Sets are *acceptable* answers.
    """

    culprit: list[int] | None = None
    """Acceptable culprit global ranks; ``[]``: no single culprit rank (node-wide, scheduler,
    clean run); ``None``: unknown, the rank dimensions do not apply."""
    natures: list[Nature] = Field(min_length=1)
    """Acceptable natures of the failure (``[none]`` for a clean run)."""
    neighbours: list[Nature] = []
    """Natures that earn partial credit."""
    decision: Decision | None = None
    """The expected restart decision; ``None``: restart_correct does not apply."""
    rationale: str = ""
    fr_culprit: list[int] | None = None
    """Acceptable FR suspects; ``None``: fr_rank_correct does not apply (no dumps)."""
    culprit_groups: list[list[int]] | None = Field(default=None, exclude_if=lambda g: g is None)
    """Culprits that must each be named, naming any rank of a group names it (faults on
    several ranks or nodes); ``None``: one group, ``culprit``."""
    node_names_count: bool = Field(default=False, exclude_if=lambda count: not count)
    """Naming a culprit's node names the culprit (a lost node: every rank on it is)."""

    @property
    def clean(self) -> bool:
        return self.natures == [Nature.NONE]

    @property
    def groups(self) -> list[list[int]]:
        """The culprits to name, each a set of acceptable ranks."""
        return self.culprit_groups or [self.culprit or []]


class Case(ImmutableModel):
    """A stored failure replayed as an experiment: a real incident or a frozen injected run."""

    id: str
    directory: Path
    corpus: str
    """The corpus directory that holds the case (for the "by corpus" breakdown)."""
    source: str = ""
    notes: str = ""
    split: Literal["dev", "test"] | None = None
    """A real incident's side of the corpus split (``None``: a frozen run, or not recorded)."""
    launcher: str | None = None
    """What started the ranks (``cases.LAUNCHERS``), when recorded."""
    logs: list[Path] = Field(min_length=1)
    world_size: int | None = None
    truth: Truth | None = None
    """``None`` for a frozen injected run: its truth comes from the injected entry."""

    @property
    def dumps(self) -> Path:
        return self.directory / CHECKPOINTS


class Overrides(ImmutableModel):
    """Settings a Python test chose for one experiment where they differ from the run's
    (``faultloop.run(entry, fault_delay=5)``): part of the experiment's identity. One field per
    setting row marked ``per_experiment``, of the same type."""

    workload: str | None = None
    gpus_per_node: RanksPerNode | None = None
    fault_delay: FaultDelay | None = None
    time: SlurmTime | None = None
    """Per-job wall-clock limit, Slurm format."""
    sbatch_script: Path | None = None
    env: dict[str, str] = {}
    """Extra environment for the job script (the workload's own parameters)."""

    @property
    def label(self) -> str:
        """``fault_delay=5,env.LR=0.1``: what makes the experiment a variant of its entry."""
        parts = [
            f"{name}={value:g}" if isinstance(value, float) else f"{name}={value}"
            for name, value in self.model_dump(exclude={"env"}, exclude_none=True).items()
        ]
        parts += [f"env.{name}={value}" for name, value in sorted(self.env.items())]
        return ",".join(parts)


class Experiment(ImmutableModel):
    """A pool entry placed in a run (which workload, how many ranks per node, where it came
    from), or a stored case replayed; a frozen injected case has both."""

    entry: PoolEntry | None = None
    case: Case | None = None
    workload: str
    gpus_per_node: int = Field(ge=1)
    pool: str
    source: str
    """The pool file (or ``POOL`` for the environment variable) that listed the entry."""
    line: int
    priority: int = 0
    """Position in the selected pools: lower starts earlier."""
    overrides: Overrides | None = None
    """Settings a Python test chose for this experiment (``None``: the run's)."""
    test: str | None = None
    """The Python test (node id) that asked for the experiment; ``None`` for pool items."""
    trials: int = Field(default=1, ge=1)
    """How often the experiment runs (``--faultloop-trials``, ``ENTRY*N``); one item each
    dimension, passing at ``--faultloop-min-pass-rate``."""
    trial: int | None = None
    """Which run of a repeated experiment this is (1-based); None for the experiment itself."""
    perturbation: str | None = Field(default=None, exclude_if=lambda name: name is None)
    """The perturbations its artifacts are rewritten by (``ts+ansi``: the catalogue's names
    joined by ``+``); ``None`` for the artifacts as they were written."""

    @model_validator(mode="after")
    def _entry_or_case(self) -> Experiment:
        if self.entry is None and (self.case is None or self.case.truth is None):
            raise ValueError("an experiment needs a pool entry or a case with its truth")
        return self

    @property
    def variant(self) -> str:
        """The overrides' label, empty for an experiment on the run's settings."""
        return self.overrides.label if self.overrides is not None else ""

    @property
    def base_key(self) -> str:
        """The experiment's key whatever the trial: ``GPU_SLEEP:1:5:2``,
        ``GPU_SLEEP:1:5:2@fault_delay=5`` (a variant), or the case id; ``[ts+ansi]`` after
        it under a perturbation."""
        if self.case is not None:
            key = self.case.id
        else:
            assert self.entry is not None
            key = self.entry.key + (f"@{self.variant}" if self.variant else "")
        return key + (f"[{self.perturbation}]" if self.perturbation else "")

    @property
    def unperturbed(self) -> Experiment:
        """The same experiment on its artifacts as they were written."""
        return self.model_copy(update={"perturbation": None})

    def perturbed(self, perturbation: str) -> Experiment:
        return self.model_copy(update={"perturbation": perturbation})

    @property
    def key(self) -> str:
        """The base key, and ``#2`` for the second trial of a repeated experiment."""
        return self.base_key + (f"#{self.trial}" if self.trial is not None else "")

    @property
    def dirname(self) -> str:
        """Its directory in the session: the seed's name (a variant adds its label, made
        file-safe, and a digest of it; a perturbation ``__ts+ansi``; a trial ``_t2``), or the
        case id."""
        if self.case is not None:
            name = self.case.id
        else:
            assert self.entry is not None
            name = self.entry.dirname
            if self.variant:
                readable = re.sub(r"[^A-Za-z0-9.-]+", "-", self.variant)[:48].strip("-")
                digest = hashlib.sha256(self.variant.encode()).hexdigest()[:8]
                name = f"{name}_{readable}_{digest}"
        if self.perturbation:
            name += f"__{self.perturbation}"
        return name + (f"_t{self.trial}" if self.trial is not None else "")

    def runs(self) -> list[Experiment]:
        """What runs for it: the experiment itself, or each of its trials."""
        if self.trials == 1:
            return [self]
        return [self.model_copy(update={"trial": t}) for t in range(1, self.trials + 1)]

    @property
    def live(self) -> PoolEntry:
        """The pool entry of an experiment that runs a job (never a replayed case)."""
        if self.entry is None or self.case is not None:
            raise ValueError(f"{self.key} is a replayed case: it runs no job")
        return self.entry

    @property
    def world_size(self) -> int | None:
        if self.entry is not None:
            return self.entry.nodes * self.gpus_per_node
        return self.case.world_size if self.case is not None else None

    @property
    def columns(self) -> ReportColumns:
        """FAULT_TYPE, NODES, RANK and ITER as the report shows them (a perturbation's name
        follows the FAULT_TYPE: ``GPU_SLEEP[ts]``)."""
        plain = self._columns
        if self.perturbation:
            return plain._replace(fault=f"{plain.fault}[{self.perturbation}]")
        return plain

    @property
    def _columns(self) -> ReportColumns:
        if self.entry is not None:
            e = self.entry
            ranks = e.rank_text
            if e.fault is FaultType.NODE_KILL:
                hit = e.nodes_hit(self.gpus_per_node)
                ranks += f" (node{'s' if len(hit) > 1 else ''} {'+'.join(map(str, hit))})"
            return ReportColumns(e.fault.value, str(e.nodes), ranks, str(e.iter))
        assert self.case is not None and self.case.truth is not None
        culprit = self.case.truth.culprit
        ranks = "-" if culprit is None else ("none" if not culprit else "/".join(map(str, culprit)))
        world = self.world_size
        nodes = "-" if world is None else str(-(-world // self.gpus_per_node))
        return ReportColumns("REAL", nodes, ranks, "-")
