"""PyTorch, NCCL, gloo and Python messages: GPU errors, collective timeouts, lost peers,
watchdog counters, crashes, exceptions, and error-level lines no other rule explains."""

from __future__ import annotations

import re

from pytest_faultloop.analyzers.log.exit_codes import signal_name
from pytest_faultloop.analyzers.log.line_facts import Kind, LineFact

_PG_LABEL = re.compile(r"\[PG (?:ID )?(?P<pg>[^\]]*?) ?Rank \d+\]")
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
_GLOO_TIMEOUT = re.compile(r"Timed out waiting (?P<ms>\d+)ms for (?P<op>send|recv) operation")
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
_SIGNAL_EXCEPTION = re.compile(r"SignalException: Process (?P<pid>\d+) got signal: (?P<sig>\d+)")


_RANK_WORD = re.compile(r"\b(?:rank|RANK|Rank)[ =:]*(\d+)\b(?! ?\(?local)")
_MESSAGE_RANK = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]")


def message_rank(content: str) -> int | None:
    """The rank a PyTorch/NCCL message names as its own: ``[Rank 3]``, ``[PG ID 0 ... Rank 3]``."""
    match = _MESSAGE_RANK.search(content)
    return int(match.group(1)) if match else None


def error_line(content: str, error_level: bool) -> LineFact | None:
    """A line its logger marked error-level (glog ``E1130``, ``[E ...]``, ``ERROR:``: the
    level its wrappers carried), with the rank it names."""
    if not error_level:
        return None
    rank = _RANK_WORD.search(content)
    return LineFact(Kind.ERROR_LINE, content.strip()[:200], named=(int(rank[1]),) if rank else ())


def classify_message(content: str) -> LineFact | None:
    """A PyTorch/NCCL/gloo/Python message (prefixes already removed)."""
    if match := _GPU_ERROR.search(content):
        return LineFact(Kind.GPU_ERROR, _gpu_detail(match))
    if match := _NCCL_TIMEOUT.search(content):
        return LineFact(Kind.TIMEOUT, _nccl_timeout_detail(match))
    if match := _GLOO_TIMEOUT.search(content):
        return LineFact(Kind.TIMEOUT, f"gloo {match['op']} timed out after {match['ms']} ms")
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
        return LineFact(
            Kind.EXIT,
            "a Python traceback (its exception line is not in the log)",
            extra={"traceback": "started"},
        )
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
    if "signal" in kind_name.lower() or re.search(r"\bsignal\b|\bSIG[A-Z]{2,}", message):
        return LineFact(Kind.SIGNAL, detail)
    return LineFact(Kind.EXCEPTION, detail)


def _gpu_detail(match: re.Match[str]) -> str:
    if match["what"]:
        return f"CUDA error: {match['what'].strip()}"
    return (match["ecc"] or match["xid"] or match["misc"]).strip()


def _work_fields(work: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in work.replace(" ", "").split(",") if "=" in part)


def _nccl_timeout_detail(match: re.Match[str]) -> str:
    fields = _work_fields(match["work"])
    op, seq = fields.get("OpType", "?"), fields.get("SeqNum", "?")
    took = f" after {match['ms']} ms" if match["ms"] else ""
    return f"NCCL {op} (SeqNum={seq}) timed out{took}"
