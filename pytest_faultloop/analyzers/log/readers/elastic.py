"""torch.distributed.elastic (torchrun) and the launchers that report like it (Lightning's
child observer, torch.multiprocessing's spawn): worker failures, rank maps, restart cycles."""

from __future__ import annotations

import re
from typing import ClassVar

from pytest_faultloop.analyzers.log import torchrun_reports as torchrun
from pytest_faultloop.analyzers.log.exit_codes import exit_fact
from pytest_faultloop.analyzers.log.failure_table import FailureTables
from pytest_faultloop.analyzers.log.line_facts import VICTIM_KINDS, LineFact
from pytest_faultloop.analyzers.log.line_wrappers import PeeledLine, Source
from pytest_faultloop.analyzers.log.readers.context import ScanContext
from pytest_faultloop.analyzers.log.scan_events import Event
from pytest_faultloop.analyzers.log.signatures import Signature


class ElasticReader:
    """torchrun's agents and their failure tables, by launcher (``Source``)."""

    HANDLERS: ClassVar[tuple[str, ...]] = (
        "closing_signal",
        "child_terminated",
        "agent_failure",
        "rank_list",
        "restart_announced",
        "group_rank",
        "rendezvous_failed",
        "keep_alive_failed",
        "error_follows",
        "rank_error_follows",
    )

    def __init__(self, ctx: ScanContext) -> None:
        self.ctx = ctx
        self.tables = FailureTables()
        self.agent_failures: dict[int, tuple[Event, Source]] = {}
        """torchrun's ``failed (exitcode) local_rank`` lines by pid: kept unless its failure
        table reports the same process (with the global rank)."""
        self.rank_maps: dict[Source, list[dict[int, int]]] = {}
        """torchrun's local -> global rank maps (rendezvous results), by launcher."""
        self.local_ranks: dict[Source, list[int]] = {}
        self.group_world: int | None = None
        """How many nodes torchrun's rendezvous results say the job has."""
        self.node_layout: tuple[int | None, int | None] = (None, None)
        """``--node_rank`` and ``--nproc_per_node`` of a launch command in the log."""
        self.agent_start: int | None = None
        """The first ``Starting elastic_operator`` since the last worker group started: the
        cycle a new agent opens starts there, once its rendezvous shows it is one."""
        self.new_agents: set[Source] = set()
        """Launchers whose agent started since their last worker group did."""
        self.agent_places: dict[Source, torchrun.AgentPlace] = {}
        """Each launcher's rendezvous result, read since its last worker group started."""
        self.cycle_agents: list[torchrun.AgentPlace] = []
        """The places of the agents whose worker groups run in this cycle."""
        self.restart_announced = False
        """An agent said it restarts its worker group: its next start is a new cycle."""

    def on_closing_signal(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """torchrun stopping a worker after another one failed: that worker is a victim."""
        self.ctx.cycle.launcher_term_pids.add(int(match["pid"] or match["pid2"]))

    def on_child_terminated(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """Lightning's report of a failed child: it SIGKILLs the others and its main process
        next, so a shell's ``Killed`` after it is that teardown."""
        self.on_agent_failure(line_no, line, match, signature)
        self.ctx.cycle.killing_all = True

    def on_agent_failure(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        code, local, pid = int(match["code"]), int(match["local"]), int(match["pid"])
        self._agent_failure(line_no, line.text, line.source, code, local, pid)

    def on_rank_list(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        ranks = [int(r) for r in re.findall(r"\d+", match["ranks"])]
        self._rank_list(line.source, match["which"], ranks)

    def on_restart_announced(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """An agent restarts its worker group (new nodes joined the rendezvous)."""
        self.restart_announced = True

    def on_group_rank(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """The node's place in the agent's rendezvous result, or how many nodes it has."""
        if match["nodes"] is not None:
            self.group_world = int(match["nodes"])
            return
        self.agent_places.setdefault(line.source, torchrun.AgentPlace()).group_rank = int(
            match["group"]
        )

    def on_rendezvous_failed(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """torchrun's agent gave up its rendezvous: no worker started, initialization hung
        (the stalled-init rule reads it where the log ends on it)."""
        self.ctx.init_step(line_no, line, match, signature)

    def on_keep_alive_failed(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """An elastic agent could not reach its rendezvous's store (hosted by another node's
        agent): counted per agent, as one failure is a race at shutdown (several agents may
        each race once) and an agent's repeated ones a lost host."""
        failures = self.ctx.cycle.keep_alive_failures
        failures[match["node"]] = failures.get(match["node"], 0) + 1

    def on_error_follows(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A launcher's header over the error the lines after it print without a rank: the
        error of the (local) ranks it names, the first's where it names several."""
        numbers = [match["rank"], *re.findall(r"\d+", match.groupdict().get("others") or "")]
        ranks = tuple(self.global_rank(int(n), line.source) or 0 for n in numbers)
        self.ctx.error_owner = (ranks, line_no)

    def on_rank_error_follows(
        self, line_no: int, line: PeeledLine, match: re.Match[str], signature: Signature
    ) -> None:
        """A report naming the global rank (not a launcher's local index) whose traceback the
        lines after it print without a rank: Lightning's deadlock detection."""
        self.ctx.error_owner = ((int(match["rank"]),), line_no)

    def read_layout(self, content: str) -> None:
        """A launch command's ``--node_rank`` and ``--nproc_per_node``, where it gives both."""
        node, nproc = torchrun.node_layout(content)
        if node is not None and nproc is not None:
            self.node_layout = (node, nproc)

    def _rank_list(self, source: Source, which: str, ranks: list[int]) -> None:
        if which == "global":
            self.agent_places.setdefault(source, torchrun.AgentPlace()).ranks = frozenset(ranks)
        if which == "local":
            self.local_ranks[source] = ranks
        elif source in self.local_ranks:
            mapping = dict(zip(self.local_ranks.pop(source), ranks, strict=False))
            maps = self.rank_maps.setdefault(source, [])
            if mapping not in maps:
                maps.append(mapping)

    def global_rank(self, local: int | None, source: Source, guess: bool = True) -> int | None:
        """A worker's global rank from its local one: the launcher's own rendezvous result
        (when the log holds one map for it), else its failure tables (the rank they gave the
        local rank), else ``--node_rank`` x ``--nproc_per_node``, else (with ``guess``) the
        local rank itself (right on a single node; taken without ``guess`` only where the
        ``--tee`` prefixes name as many local ranks as the world has, and with it only where
        the ranks the log's prefixes and NCCL's init lines show include it: a node whose
        workers are ranks 4-7 has no rank 0)."""
        if local is None:
            return None
        if (stated := self.ctx.stated_ranks.get(source, {}).get(local)) is not None:
            return stated
        maps = self.rank_maps.get(source, [])
        if len(maps) == 1 and local in maps[0]:
            return maps[0][local]
        if (tabled := self.tables.global_rank(source, local)) is not None:
            return tabled
        node, nproc = self.node_layout
        if node is not None and nproc is not None and not maps:
            return node * nproc + local
        if self.ctx.world_size and self.ctx.tee_locals == set(range(self.ctx.world_size)):
            return local  # the log's workers are the whole world: one node
        if (namesake := self._silent_namesake(local)) is not None:
            return namesake
        return (
            local if guess and (local in self.ctx.ranks_seen or not self.ctx.ranks_seen) else None
        )

    def _silent_namesake(self, local: int) -> int | None:
        """The rank a local rank is in a log of several nodes whose lines carry no node, where
        the rank numbered like it lost a peer itself (it was alive, a victim, after the end
        the report tells): of the ranks it can be on nodes of one size (``local + j * n``, n
        dividing the world and above ``local``), the only one that tells no end of its own."""
        world = self.ctx.world_size
        if not world or local >= world:
            return None
        own: dict[int, list[LineFact]] = {}
        for event in self.ctx.cycle.events.values():
            if event.rank is not None and not event.report:
                own.setdefault(event.rank, []).append(event.fact)
        waited = any(f.kind in VICTIM_KINDS and f.role != "origin" for f in own.get(local, ()))
        if not waited:
            return None
        sizes = [n for n in range(local + 1, world + 1) if world % n == 0]
        places = {local + j * n for n in sizes for j in range(world // n)}
        silent = [rank for rank in places if rank not in own]
        return silent[0] if len(silent) == 1 else None

    def _agent_failure(
        self, line_no: int, line: str, source: Source, code: int, local: int, pid: int
    ) -> None:
        """torchrun's first failed worker; its local rank is mapped to the global one at the
        end of the scan, unless a failure table names the process (with its global rank)."""
        event = Event(line_no, exit_fact(code, pid), line, local, report=True)
        event.root_cause = not self.agent_failures
        self.agent_failures.setdefault(pid, (event, source))

    def worker_group_start(self, line_no: int, line: PeeledLine) -> None:
        """A torchrun agent starts (``Starting elastic_operator``) or starts its worker group.
        A worker group opens a new cycle where no rendezvous result places it, where an agent
        of this cycle held its node's place (a restart, a requeue), or where a running agent
        said it restarts its group (its rendezvous may place it anew); the group of another
        node's agent (a group rank and worker ranks this cycle's agents do not hold: per-node
        logs one after the other, or interleaved) joins the cycle. The cycle starts at the
        agent's own start, where it printed one."""
        if torchrun.AGENT_START in line.content:
            self.agent_start = self.agent_start or line_no
            self.new_agents.add(line.source)
            return
        start, self.agent_start = self.agent_start or line_no, None
        place = self.agent_places.pop(line.source, None)
        restarted = self.restart_announced and line.source not in self.new_agents
        self.new_agents.discard(line.source)
        joins = not restarted and bool(self.cycle_agents)
        if place is not None and joins and not any(map(place.same_node, self.cycle_agents)):
            self.cycle_agents.append(place)
            return
        self.ctx.new_cycle(start)
        self.cycle_agents = [place] if place is not None else []

    def cycle_started(self) -> None:
        """A new cycle: its agents and failure tables are its own."""
        self.restart_announced = False
        self.cycle_agents = []
        self.tables.clear()

    def end(self) -> None:
        """The log is read: an agent that never started its workers opens the last cycle; the
        tables still open close, and the agents' failed workers no table reported stand."""
        if self.agent_start is not None:  # an agent that never started its workers
            self.ctx.new_cycle(self.agent_start)
        self.tables.close_all(self.ctx.cycle)
        for pid, (event, source) in self.agent_failures.items():
            if pid not in self.tables.pids:
                event.rank = self.global_rank(event.rank, source)
                self.ctx.cycle.add(event)

    def covered(self) -> set[int] | None:
        """The ranks the log can show, where it holds fewer nodes' rendezvous results than
        the job has nodes (one node's log: the other nodes' ranks are not silent, only
        absent); None where nothing says the log is partial."""
        groups = {tuple(sorted(m.values())) for maps in self.rank_maps.values() for m in maps}
        if not self.group_world or not groups or len(groups) >= self.group_world:
            return None
        return {rank for group in groups for rank in group}
