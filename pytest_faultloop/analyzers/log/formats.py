"""What lines of real training logs mean: PyTorch, NCCL, gloo, torchrun/elastic, Slurm.

One function per source of lines; each returns a :class:`LineFact` or ``None``. The streaming
scanner (``log_scan``) decides which lines reach them and keeps the state across lines.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field
from enum import StrEnum


class Kind(StrEnum):
    """What a line says happened."""

    GPU_ERROR = "gpu_error"
    CRASH = "crash"
    EXCEPTION = "exception"
    SIGNAL = "signal"
    """A rank ended by a signal (``signal_name`` says which); the launcher's own SIGTERMs too."""
    EXIT = "exit"
    """A rank exited non-zero and nothing more is known."""
    TIMEOUT = "timeout"
    PEER_LOST = "peer_lost"
    WATCHDOG_STUCK = "watchdog_stuck"
    NAMED = "named"
    """Another rank's message names ranks as the faulty ones (``named``)."""
    PROGRESS = "progress"
    SCHEDULER = "scheduler"
    JOB_SIGNAL = "job_signal"
    """The whole job or launcher was cancelled or signalled."""
    NETWORK = "network"
    """The interconnect itself reported an error (InfiniBand completion errors)."""
    ERROR_LINE = "error_line"
    """An error-level line no other rule explains (the fallback's evidence)."""


@dataclass(slots=True)
class LineFact:
    kind: Kind
    detail: str
    rank: int | None = None
    node: str | None = None
    named: tuple[int, ...] = ()
    signal_name: str | None = None
    pid: int | None = None
    pg: str | None = None
    enqueued: int | None = None
    completed: int | None = None
    by_launcher: bool = False
    """A signal the launcher (torchrun, srun) sent to stop a rank after another one failed."""
    extra: dict[str, str] = field(default_factory=dict)


# --- prefixes ----------------------------------------------------------------------------------

_PREFIX = re.compile(
    r"^(?:\[\d+,(?P<mpi>\d+)\]<std(?:out|err)>: ?)?"  # mpirun --tag-output: [job,rank]
    r"(?:(?P<label>\d+): ?)?"  # srun --label
    r"(?:\[(?!rank\d)[A-Za-z_]+\d+\]:)?"  # torchrun --tee role prefix, e.g. [default0]:
    r"(?:\[rank(?P<rank>\d+)\]:)?"  # torchrun rank prefix
    r"\s*"
)
_MESSAGE_RANK = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]")
_PG_LABEL = re.compile(r"\[PG (?:ID )?(?P<pg>[^\]]*?) ?Rank \d+\]")


@dataclass(slots=True)
class Prefix:
    label: int | None
    rank: int | None
    content: str


def split_prefix(line: str) -> Prefix:
    """Separate the launcher prefixes (srun label, ``[default0]:``, ``[rank3]:``) from a line."""
    match = _PREFIX.match(line)
    assert match is not None  # every part is optional
    label, rank = match.group("label"), match.group("rank") or match.group("mpi")
    return Prefix(
        int(label) if label is not None else None,
        int(rank) if rank is not None else None,
        line[match.end() :],
    )


def message_rank(content: str) -> int | None:
    """The rank a PyTorch/NCCL message names as its own: ``[Rank 3]``, ``[PG ID 0 ... Rank 3]``."""
    match = _MESSAGE_RANK.search(content)
    return int(match.group(1)) if match else None


# --- PyTorch, NCCL, gloo -------------------------------------------------------------------------

_GPU_ERROR = re.compile(
    r"CUDA error: (?!out of memory)(?P<what>[^.\n]{1,120})"
    r"|(?P<ecc>uncorrectable ECC error[^.\n]{0,80})"
    r"|(?P<xid>NVRM: Xid[^\n]{0,120}|\bXid \d+)"
    r"|(?P<misc>device-side assert triggered|GPU has fallen off the bus|CUDA_ERROR_\w+"
    r"|unspecified launch failure|unhandled cuda error)"
)
_NCCL_TIMEOUT = re.compile(
    r"Watchdog caught collective operation timeout: WorkNCCL\((?P<work>[^)]*)\)"
    r"(?: ran for (?P<ms>\d+) milliseconds)?"
)
_GLOO_TIMEOUT = re.compile(
    r"Timed out waiting (?P<ms>\d+)ms for (?P<op>send|recv) operation"
)
_OTHER_TIMEOUT = re.compile(
    r"Timeout at NCCL work: \d+|collective operation timeout"
    r"|Timed out initializing process group in store based barrier"
    r"|DistStoreError: [^\n]*?(?:[Tt]imeout|timed out)"
)
_PROGRESS = re.compile(
    r"(?:at work: (?P<work>\d+), )?last enqueued (?:NCCL )?work: (?P<enq>-?\d+), "
    r"last completed (?:NCCL )?work: (?P<done>-?\d+)"
)
_WATCHDOG_STUCK = re.compile(
    r"watchdog got stuck for (?P<s>\d+) seconds|Heartbeat monitor timed out"
)
_PEER_LOST = re.compile(
    r"Connection closed by (?:remote )?peer|Connection reset by peer|Broken pipe"
    r"|remote process exited|NCCL communicator was aborted|ncclRemoteError|Connection refused"
    r"|Software caused connection abort"
)
_NETWORK_ERROR = re.compile(
    r"NET/IB ?: ?Got completion from peer (?P<peer>\S+) with (?:error|status)[ =](?P<code>\d+)"
    r"(?:[^\n]*?vendor err (?P<vendor>\d+))?"
    r"|NET/IB ?: ?(?P<ib>[^\n]{0,80}(?:failed|error)[^\n]{0,60})"
)
_NAMED = re.compile(
    r"Ranks? (?P<ranks>\d+(?:, ?\d+)*) failed to pass monitoredBarrier"
    r"|Please check rank (?P<check>\d+) logs"
    r"|^\s*\[(?P<desync>\d+)\] (?:finished collective #\d+, but didn't join collective"
    r"|joined but didn't finish collective|completed \d+ collectives but is stuck)"
    r"|missing ranks: (?P<missing>\d+(?:, ?\d+)*)"
)
_CRASH = re.compile(
    r"Fatal Python error: (?P<fatal>[A-Za-z][\w ]{0,40})"
    r"|(?P<what>Segmentation fault|Bus error|Illegal instruction|Floating point exception"
    r"|Aborted \(core dumped\)|oom[-_]kill)"
)
_EXCEPTION = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*(?:Error|Exception)|KeyboardInterrupt|SystemExit))"
    r"(?::\s?(?P<msg>.*))?$"
)
_LAUNCHER_EXCEPTIONS = (
    "ChildFailedError",
    "RendezvousClosedError",
    "RendezvousTimeoutError",
)
_SIGNAL_EXCEPTION = re.compile(
    r"SignalException: Process (?P<pid>\d+) got signal: (?P<sig>\d+)"
)


_ERROR_LINE = re.compile(
    r"^(?:E\d{4} [\d:.]+|\[E [^\]]*\]|\[?(?:ERROR|FATAL|CRITICAL)\]?[: ]"
    r"|[\d\-/ :,.\[\]]*(?:ERROR|FATAL|CRITICAL)\b)"
)
_RANK_WORD = re.compile(r"\b(?:rank|RANK|Rank)[ =:]*(\d+)\b(?! ?\(?local)")


def error_line(content: str) -> LineFact | None:
    """An error-level line (glog ``E1130``, ``[E ...]``, ``ERROR:``) with the rank it names."""
    if not _ERROR_LINE.match(content):
        return None
    rank = _RANK_WORD.search(content)
    return LineFact(Kind.ERROR_LINE, content.strip()[:200],
                    named=(int(rank[1]),) if rank else ())


def classify_message(content: str) -> LineFact | None:
    """A PyTorch/NCCL/gloo/Python message (prefixes already removed)."""
    if match := _GPU_ERROR.search(content):
        return LineFact(Kind.GPU_ERROR, _gpu_detail(match))
    if match := _NCCL_TIMEOUT.search(content):
        return LineFact(
            Kind.TIMEOUT, _nccl_timeout_detail(match), extra=_work_fields(match["work"])
        )
    if match := _GLOO_TIMEOUT.search(content):
        return LineFact(
            Kind.TIMEOUT, f"gloo {match['op']} timed out after {match['ms']} ms"
        )
    if match := _PROGRESS.search(content):
        pg = _PG_LABEL.search(content)
        return LineFact(
            Kind.PROGRESS,
            match.group(0),
            pg=pg["pg"] if pg else None,
            enqueued=int(match["enq"]),
            completed=int(match["done"]),
        )
    if match := _OTHER_TIMEOUT.search(content):
        return LineFact(Kind.TIMEOUT, match.group(0))
    if match := _WATCHDOG_STUCK.search(content):
        return LineFact(Kind.WATCHDOG_STUCK, match.group(0))
    if match := _NETWORK_ERROR.search(content):
        if match["code"]:
            vendor = f", vendor error {match['vendor']}" if match["vendor"] else ""
            what = f"InfiniBand completion error {match['code']}{vendor} from {match['peer']}"
        else:
            what = f"InfiniBand: {match['ib'].strip()}"
        return LineFact(Kind.NETWORK, what)
    if match := _PEER_LOST.search(content):
        return LineFact(Kind.PEER_LOST, f"lost a peer: {match.group(0)}")
    if match := _NAMED.search(content):
        ranks = match["ranks"] or match["check"] or match["desync"] or match["missing"]
        named = tuple(int(r) for r in re.findall(r"\d+", ranks))
        return LineFact(Kind.NAMED, match.group(0), named=named)
    if match := _CRASH.search(content):
        what = match["fatal"] or match["what"]
        return LineFact(Kind.CRASH, f"crashed: {what.strip()}")
    if match := _SIGNAL_EXCEPTION.search(content):
        name = signal_name(int(match["sig"]))
        return LineFact(
            Kind.JOB_SIGNAL,
            f"launcher got {name}",
            signal_name=name,
            pid=int(match["pid"]),
        )
    return _exception(content)


def _exception(content: str) -> LineFact | None:
    if content.startswith("Traceback (most recent call last)"):
        return LineFact(Kind.EXIT, "a Python traceback (its exception line is not in the log)",
                        extra={"traceback": "started"})
    match = _EXCEPTION.match(content)
    if match is None:
        return None
    kind_name = match["type"].rsplit(".", 1)[-1]
    if kind_name in _LAUNCHER_EXCEPTIONS:
        return None
    message = (match["msg"] or "").strip()
    detail = f"{kind_name}: {message}"[:200] if message else kind_name
    if kind_name == "KeyboardInterrupt":
        return LineFact(Kind.SIGNAL, "KeyboardInterrupt (SIGINT)", signal_name="SIGINT")
    if "signal" in kind_name.lower() or re.search(
        r"\bsignal\b|\bSIG[A-Z]{2,}", message
    ):
        return LineFact(Kind.SIGNAL, detail)
    return LineFact(Kind.EXCEPTION, detail)


def _gpu_detail(match: re.Match[str]) -> str:
    if match["what"]:
        return f"CUDA error: {match['what'].strip()}"
    return (match["ecc"] or match["xid"] or match["misc"]).strip()


def _work_fields(work: str) -> dict[str, str]:
    return dict(
        part.split("=", 1) for part in work.replace(" ", "").split(",") if "=" in part
    )


def _nccl_timeout_detail(match: re.Match[str]) -> str:
    fields = _work_fields(match["work"])
    op, seq = fields.get("OpType", "?"), fields.get("SeqNum", "?")
    took = f" after {match['ms']} ms" if match["ms"] else ""
    return f"NCCL {op} (SeqNum={seq}) timed out{took}"


# --- torchrun / elastic ------------------------------------------------------------------------

_TABLE_FIELD = re.compile(
    r"^\s*(?P<key>time|host|rank|exitcode|error_file|traceback)\s*: ?(?P<value>.*)$"
)
_TABLE_RANK = re.compile(r"(?P<rank>\d+) \(local_rank: (?P<local>\d+)\)")
_TABLE_EXIT = re.compile(r"(?P<code>-?\d+) \(pid: (?P<pid>\d+)\)")
_TABLE_SIGNAL = re.compile(
    r"Signal (?P<num>\d+) \((?P<name>SIG\w+)\) received by PID (?P<pid>\d+)"
)
ROOT_CAUSE = "Root Cause (first observed failure)"
TABLE_START = "Failures:"
_CLOSING_SIGNAL = re.compile(
    r"Sending process (?P<pid>\d+) closing signal (?P<sig>SIG\w+)"
)
_DEATH_SIGNAL = re.compile(r"Received (?:Signals\.)?(?P<sig>SIG\w+) death signal")
_AGENT_FAILED = re.compile(
    r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+) \(pid: (?P<pid>\d+)\)"
)
CYCLE_START = re.compile(r"\] Starting worker group|Starting elastic_operator")


def table_field(content: str) -> tuple[str, str] | None:
    """A ``key : value`` field of torchrun's failure table."""
    match = _TABLE_FIELD.match(content)
    return (match["key"], match["value"].strip()) if match else None


def table_rank(value: str) -> int | None:
    match = _TABLE_RANK.match(value)
    return int(match["rank"]) if match else None


def table_exit(value: str) -> tuple[int, int] | None:
    """``exitcode : -9 (pid: 123)`` -> (code, pid)."""
    match = _TABLE_EXIT.match(value)
    return (int(match["code"]), int(match["pid"])) if match else None


def table_signal(value: str) -> str | None:
    match = _TABLE_SIGNAL.search(value)
    return match["name"] if match else None


def closing_signal(content: str) -> tuple[int, str] | None:
    """torchrun stopping a worker after another one failed: (pid, signal)."""
    match = _CLOSING_SIGNAL.search(content)
    return (int(match["pid"]), match["sig"]) if match else None


def death_signal(content: str) -> str | None:
    """torchrun itself received a signal and shuts its workers down."""
    match = _DEATH_SIGNAL.search(content)
    return match["sig"] if match else None


def agent_failure(content: str) -> tuple[int, int, int] | None:
    """``failed (exitcode: -9) local_rank: 3 (pid: 123)`` -> (code, local rank, pid)."""
    match = _AGENT_FAILED.search(content)
    return (int(match["code"]), int(match["local"]), int(match["pid"])) if match else None


_MPIRUN_RANK = re.compile(
    r"process rank (?P<rank>\d+) with PID (?P<pid>\d+) on node (?P<node>\S+) "
    r"exited on signal (?P<num>\d+)"
)
_DEEPSPEED_EXIT = re.compile(r"exits with return code = (?P<code>-?\d+)")
_READY_RANKS = re.compile(r"ready ranks: (?P<ranks>\d+(?:, ?\d+)*)")
_PREEMPTED = re.compile(r"(?i)\bjob (?:is|was|has been) preempted|\bpreempted by\b")


_RANK_LIST = re.compile(r"(?<![\w])(?P<which>local|global)_ranks=\[(?P<ranks>[\d, ]*)\]")
_NODE_RANK = re.compile(r"--node[_-]rank[= ](?P<node>\d+)")
_NPROC = re.compile(r"--nproc[_-]per[_-]node[= ](?P<n>\d+)")


def rank_list(content: str) -> tuple[str, list[int]] | None:
    """torchrun's rendezvous result fields ``local_ranks=[0, 1]`` / ``global_ranks=[4, 5]``."""
    match = _RANK_LIST.search(content)
    if match is None:
        return None
    return match["which"], [int(r) for r in re.findall(r"\d+", match["ranks"])]


def node_layout(content: str) -> tuple[int | None, int | None]:
    """``--node_rank N`` and ``--nproc_per_node M`` from a launch command line."""
    node, nproc = _NODE_RANK.search(content), _NPROC.search(content)
    return (int(node["node"]) if node else None, int(nproc["n"]) if nproc else None)


def launcher_report(content: str) -> tuple[int | None, int, int | None, str | None] | None:
    """A launcher's word on how a rank ended, for launchers other than torchrun: mpirun's
    ``process rank N with PID P on node H exited on signal S`` and DeepSpeed's ``exits with
    return code = C`` (its line names the last command started, not the rank that failed).
    Returns (rank, exit code, pid, node)."""
    if match := _MPIRUN_RANK.search(content):
        return int(match["rank"]), -int(match["num"]), int(match["pid"]), match["node"]
    if match := _DEEPSPEED_EXIT.search(content):
        return None, int(match["code"]), None, None
    return None


def ready_ranks(content: str) -> list[int] | None:
    """Horovod's stall report of the ranks that did submit a tensor: the others did not."""
    match = _READY_RANKS.search(content)
    return [int(r) for r in re.findall(r"\d+", match["ranks"])] if match else None


def preempted(content: str) -> bool:
    return bool(_PREEMPTED.search(content))


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_signal(code: int) -> str | None:
    """The signal behind an exit code: ``-9`` (Python's view) or ``137`` (a shell's view)."""
    if code < 0:
        return signal_name(-code)
    if 128 < code < 160:
        return signal_name(code - 128)
    return None


# --- Slurm -------------------------------------------------------------------------------------

_SLURM_CANCELLED = re.compile(
    r"\*\*\* (?P<what>JOB|STEP) (?P<id>\S+)(?: ON (?P<node>\S+))? CANCELLED AT (?P<at>\S+)"
    r"(?: DUE TO (?P<why>[A-Z][A-Z ]*?))?(?: on (?P<node2>\S+))? \*\*\*"
)
_SRUN_TASKS = re.compile(
    r"srun: error: (?P<node>\S+): tasks? (?P<tasks>[\d,\-]+): (?P<what>.+)$"
)
_SLURM_OOM = re.compile(r"Detected \d+ oom[-_]kill event")
STEP_TERMINATING = re.compile(
    r"srun: (?:Terminating|Job step aborted|Force Terminated)"
)


def classify_slurm(content: str) -> LineFact | None:
    """slurmstepd's cancellation banner, srun's per-task verdicts, OOM kills."""
    if match := _SLURM_CANCELLED.search(content):
        node = match["node"] or match["node2"]
        why = match["why"]
        if why:
            return LineFact(
                Kind.SCHEDULER,
                f"Slurm {match['what'].lower()} cancelled due to {why.lower()}",
                node=node,
            )
        return LineFact(
            Kind.JOB_SIGNAL, f"Slurm {match['what'].lower()} cancelled", node=node
        )
    if match := _SRUN_TASKS.search(content):
        return LineFact(
            Kind.EXIT,
            match["what"].strip(),
            node=match["node"],
            extra={"tasks": match["tasks"]},
        )
    if _SLURM_OOM.search(content):
        return LineFact(Kind.CRASH, "killed by the out-of-memory killer")
    return None


def expand_tasks(tasks: str) -> list[int]:
    """srun's task list ``0-1,3,6`` -> [0, 1, 3, 6]."""
    ranks: list[int] = []
    for part in tasks.split(","):
        first, _, last = part.partition("-")
        if first.isdigit():
            ranks.extend(
                range(int(first), int(last) + 1 if last.isdigit() else int(first) + 1)
            )
    return ranks


def srun_task_verdict(what: str) -> tuple[Kind, str | None]:
    """srun's words for how a task ended -> (kind, signal)."""
    if what.startswith("Killed"):
        return Kind.SIGNAL, "SIGKILL"
    if what.startswith("Terminated"):
        return Kind.SIGNAL, "SIGTERM"
    if what.startswith(("Segmentation fault", "Aborted", "Bus error", "Out Of Memory")):
        return Kind.CRASH, None
    code = re.search(r"exit code (\d+)", what)
    if code and (name := exit_signal(int(code.group(1)))):
        return Kind.SIGNAL, name
    return Kind.EXIT, None


# --- the rest of a log -------------------------------------------------------------------------

_WORLD_SIZE = re.compile(
    r"(?i:world[_ ]size)\W{1,4}(\d+)|\bnranks (\d+)|world_sizes=\[(\d+)"
    r"|\b(?:mpirun|mpiexec|horovodrun)\b[^\n]*?\s-(?:np|n)\s+(\d+)"
)
_NCCL_RANK = re.compile(r"\brank (\d+) nranks (\d+)")
TRAINING_DONE = re.compile(r"after training is done")
CHECKPOINT_SAVED = re.compile(r"(?i)saved checkpoint|checkpoint saved")


def world_size(content: str) -> int | None:
    sizes = [int(g) for m in _WORLD_SIZE.finditer(content) for g in m.groups() if g]
    return max(sizes) if sizes else None


def nccl_init_rank(content: str) -> int | None:
    match = _NCCL_RANK.search(content)
    return int(match.group(1)) if match else None
