"""What the scanner keeps of a log: classified lines (events), grouped per restart cycle."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact
from pytest_faultloop.analyzers.log.line_wrappers import Source
from pytest_faultloop.analyzers.log.membership import Membership, NcclInits
from pytest_faultloop.analyzers.log.process_ranks import ProcessRanks

EVIDENCE_CHARS = 400
"""Evidence lines are cut to this many characters."""
NCCL_WARN = "NCCL WARN "
"""What NCCL's debug.cc prints before a WARN's text."""


@dataclass(slots=True)
class Event:
    """A classified line of the log."""

    line: int
    fact: LineFact
    text: str
    rank: int | None
    report: bool = False
    """From an end-of-run report (torchrun's table, srun), not from the rank's own output."""
    root_cause: bool = False
    """torchrun's "Root Cause (first observed failure)"."""
    process: int | None = None
    """The pid a prefix names (Ray's, NCCL's): its rank is resolved when the cycle is read."""
    local: tuple[Source, int] | None = None
    """The launcher and local rank a torchrun ``--tee`` prefix names: the global rank is
    resolved once the log is read (the launcher's maps and failure tables)."""
    device: bool = False
    """``local`` is a device index the message names (``GPU 5``) or a worker's
    ``--local_rank`` argument (a py-spy dump's command line), not a launcher's prefix: where
    nothing maps it, it is taken as the rank itself (right on a single node)."""

    @property
    def kind(self) -> Kind:
        return self.fact.kind


@dataclass
class Cycle:
    """Facts of one restart cycle (the scanner keeps only the current one)."""

    first_line: int
    events: dict[tuple[int | None, Kind, str], Event] = field(default_factory=dict)
    launcher_term_pids: set[int] = field(default_factory=set)
    step_terminating: bool = False
    """srun or Slurm began stopping the whole step: later "Terminated" tasks are its doing."""
    task_failed: bool = False
    """srun reported a task's own end (not one it stopped): the step's cancellation and the
    kills after it are srun's teardown."""
    stopping_after: int | None = None
    """The rank whose failure made horovodrun stop the remaining workers (``Terminating
    remaining workers after failure of Process N``): their later signals are its doing."""
    killing_all: bool = False
    """A launcher said it kills every process after one failed (Lightning's observer)."""
    training_done_line: int | None = None
    work_done_line: int | None = None
    """The latest line that says the work ended: a tool's word (``training_done_line``'s) or
    the script's own (``run_facts.work_done``; an evaluation loop may say it every epoch)."""
    ended_ok_line: int | None = None
    """The latest line of a tool's word that the run, or a worker process, ended well (a
    trainer's end of fit, torchrun's ``successfully finished``, DeepSpeed's ``exits
    successfully``): words of a lost store before it were the teardown's."""
    fit_done_line: int | None = None
    """A trainer's word that its fit loop finished (failures before it did not stop it)."""
    checkpoint_saved: bool = False
    keep_alive_failures: dict[str, int] = field(default_factory=dict)
    """How many times each elastic agent (its rendezvous node id) failed to reach its
    rendezvous's store (its host, the agent of another node, is gone when one keeps failing)."""
    reported: set[int] = field(default_factory=set)
    """Ranks whose end a launcher's report names (kept even where the event is a repeat)."""
    launchers_heard: set[int] = field(default_factory=set)
    """The ranks of each node whose launcher reported its workers in a failure table (the
    node's block, ``base + local``): that launcher outlived them."""
    init_step: Event | None = None
    """The latest rendezvous or store connection step (context: a hang only where the log
    ends with it)."""
    traceback_line: Event | None = None
    """The latest line of a Python traceback (a failure on its own only where the log ends
    inside it, cut before the exception line)."""
    traceback_cut: bool = False
    """The log ends inside the latest traceback: after its frames, only their source and
    caret lines (its exception line was cut from the log)."""
    membership: Membership = field(default_factory=Membership)
    """Who joined the process group at initialization, as the cycle's lines say."""
    nccl_inits: NcclInits = field(default_factory=NcclInits)
    """NCCL communicators' inits in the cycle, and what came after the latest."""
    processes: ProcessRanks = field(default_factory=ProcessRanks)
    """Which rank each pid is, as the cycle's start-up lines say."""
    connectivity: set[int] = field(default_factory=set)
    """Ranks whose gloo context reported its connections (it got through initialization)."""
    unconnected: list[Event] = field(default_factory=list)
    """gloo's reports of the peers a rank has no connection to (``name_unconnected``)."""
    last_errors: dict[str, int] = field(default_factory=dict)
    """The NCCL WARN texts PyTorch's ``Last error:`` detail repeats, with the rank it printed
    them for (``ncclGetLastError``: the process's last WARN)."""

    def split(self, line: int) -> Cycle:
        """The cycle that starts at ``line``, with the events from it on, read before the
        scanner knew a cycle started there (a new torchrun agent's rendezvous tells later)."""
        later = Cycle(first_line=line)
        for key, event in list(self.events.items()):
            if event.line >= line:
                later.events[key] = self.events.pop(key)
                if event.report and event.rank is not None:
                    later.reported.add(event.rank)
        if self.init_step is not None and self.init_step.line >= line:
            later.init_step, self.init_step = self.init_step, None
        return later

    def name_unconnected(self) -> None:
        """The peers gloo contexts report no connection to are named, those that never
        reported connections of their own: a lazily connecting context (TORCH_GLOO_LAZY_INIT)
        reports every peer unconnected, while every rank reports."""
        for event in self.unconnected:
            named = tuple(r for r in event.fact.named if r not in self.connectivity)
            if named:
                event.fact.named = named
                self.add(event)

    def resolve_processes(self) -> None:
        """Give the events whose line named only a pid the rank that pid turned out to be; an
        NCCL WARN of a process no line ties to a rank, the rank whose ``Last error:`` repeats
        its text."""
        for event in self.events.values():
            if event.rank is None and event.process is not None:
                event.rank = self.processes.rank_of(event.process, event.fact.node)
                if event.rank is None and NCCL_WARN in event.text:
                    warned = event.text.partition(NCCL_WARN)[2].strip()
                    event.rank = self.last_errors.get(warned)
                if event.report and event.rank is not None:
                    self.reported.add(event.rank)

    def add(self, event: Event) -> None:
        if event.report and event.rank is not None:
            self.reported.add(event.rank)
        if len(event.text) > EVIDENCE_CHARS:
            event.text = event.text[:EVIDENCE_CHARS] + " [...]"
        key_detail = (event.fact.pg or "") if event.kind is Kind.PROGRESS else ""
        if event.kind is Kind.NAMED:  # one line per rank named (monitoredBarrier's)
            key_detail = " ".join(map(str, event.fact.named))
        if event.rank is None and event.process is not None:
            key_detail += f" pid {event.process}"  # its rank is resolved with the cycle
        if event.rank is None and event.local is not None:
            key_detail += f" local {event.local}"
        if event.report:
            key_detail += " report"  # a launcher's word on a rank beside the rank's own lines
        key = (event.rank, event.kind, key_detail)
        if key not in self.events or event.kind is Kind.PROGRESS:
            self.events[key] = event  # the first of each, but the latest counters

    def ordered(self) -> list[Event]:
        return sorted(self.events.values(), key=lambda e: e.line)


@dataclass
class ScanResult:
    """What one pass over a log found: its last restart cycle and the job's shape."""

    cycle: Cycle
    cycles: int
    ranks_seen: set[int]
    world_size: int | None
    has_text: bool = False
    """Anything but whitespace and the harness's lines."""
    not_text: str | None = None
    """Why the file is not a text log (binary data), when it is not."""
    last_line: int = 0
    """The number of the log's last line that is not blank."""
    covered: set[int] | None = None
    """The ranks a log of some of the job's nodes can show (None: the whole world)."""
