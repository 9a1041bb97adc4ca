"""What surrounds a message on a log line, peeled off before any rule reads it.

A line reaches the analyzer through tools that each put their marks in front of it, in any
number and order: collectors (Docker's json-file records, ``{"log":"...\\n",...}``, whose
message is a JSON string; ``docker logs -t`` and ``kubectl logs --timestamps`` RFC 3339 times,
``kubectl logs --prefix``'s ``[pod/NAME/CONTAINER]``, journald and syslog's ``Mar 04 12:00:01
host prog[pid]:``, the CRI log files' ``<time> stderr F``, ``docker compose``'s
``service-1  |``, pdsh/clush's ``host:``, Loki's ``{pod="x"}``, Ray's and SkyPilot's
``(Worker pid=N, ip=A)``), loggers (Python's asctime and levels, glog and c10's ``[E1014
12:00:01.123 file.cpp:12]``, DeepSpeed's ``[date] [INFO] [file:line:func]``, NVIDIA
nvidia-resiliency-ext's ``[host] [workload:R(L) infra:I(IL)] file.py:N`` and its rank
monitors' ``[RankMonServerPID@host:R]``), terminals (ANSI colour anywhere, a tqdm bar left on
the line by ``\\r``), and the launchers (mpirun's
``[1,0]<stderr>:``, srun's ``0:``, torchrun's ``[default0]:`` and ``[rank3]:``).

``peel_line`` removes the leading run of all of them by their shape — a grammar of token kinds
(``_TOKENS``), not a list of tools — and keeps what carries meaning: the launchers' rank and
task labels, the host and the innermost log level. Peeling stops at the first token
that reads as the message's own: an exception's type (``RuntimeError:``), a program's name
(``srun: error:``), a table's heading (``Failures:``), and PyTorch's labels that rules read
(``[Rank 3]``, ``[PG 0 ...]``, a desync report's ``[3]``).
"""

from __future__ import annotations

import html
import json
import re
import re._constants as sre  # type: ignore[import-not-found]  # digit_blind walks parsed forms
import re._parser as sre_parse  # type: ignore[import-not-found]
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from pytest_faultloop.analyzers.log.line_memo import MEMO_CHARS, MEMO_LINES

_ANSI = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78DEHM])"
)
"""Terminal escapes: CSI (colours, ``ESC[K``), OSC (titles, links), charset and keypad."""

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_CLOCK = r"\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?(?:\s?[AP]M)?"
_ZONE = r"(?:\s?(?:Z|UTC|GMT|[+-]\d{2}(?::?\d{2})?)\b)?"
_SYSLOG_TIME = (
    rf"(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun),?\s)?{_MONTH}\s{{1,2}}\d{{1,2}},?(?:\s\d{{4}})?"
    rf"\s{_CLOCK}(?:\s(?:[A-Z]{{3,4}}\s)?\d{{4}}\b)?"
)
"""syslog, journald, ctime and date(1): ``Mar  4 12:00:01``, ``Mon Mar  4 12:00:01 UTC 2025``."""
_TIMESTAMP = (
    rf"(?:\d{{4}}-\d{{2}}-\d{{2}}(?:[T _]{_CLOCK})?{_ZONE}"  # ISO 8601 / RFC 3339, asctime
    rf"|\d{{4}}/\d{{2}}/\d{{2}}(?:[ T-]{_CLOCK})?"  # Go's log package, many shells
    rf"|\d{{1,2}}/\d{{1,2}}/\d{{2,4}}(?:,?\s{_CLOCK})?"  # day-first and month-first dates
    rf"|{_SYSLOG_TIME}"
    rf"|{_CLOCK}{_ZONE}"  # a time of day alone
    r"|\d{10}\.\d{1,9})"  # seconds since the epoch, with a fraction
)
_LEVEL_WORDS = {
    "TRACE": "TRACE",
    "DEBUG": "DEBUG",
    "INFO": "INFO",
    "NOTICE": "INFO",
    "WARN": "WARNING",
    "WARNING": "WARNING",
    "ERROR": "ERROR",
    "ERR": "ERROR",
    "SEVERE": "ERROR",
    "CRITICAL": "CRITICAL",
    "CRIT": "CRITICAL",
    "ALERT": "CRITICAL",
    "EMERG": "CRITICAL",
    "PANIC": "CRITICAL",
    "FATAL": "FATAL",
}
_LEVEL = "(?:" + "|".join(sorted(_LEVEL_WORDS, key=len, reverse=True)) + ")"
_LETTER_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL", "D": "DEBUG"}
ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL"})
_HOST = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?"
_HOSTLIKE = re.compile(r"localhost$|.*\d|[A-Za-z0-9]+-[A-Za-z0-9-]*[A-Za-z0-9]$")
"""A host name carries a digit or a hyphen (``gpu-node-017``, ``n1``, ``ip-10-0-0-1``) or is
``localhost``; a bare word before a colon (``srun``, ``Failures``) is the message's own."""
_MESSAGE_WORD = re.compile(
    r"(?:[A-Za-z_][\w.]*\.)?[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning)$"
    r"|(?i:rank)[\d_]"
)
"""Words before a colon that are the message: an exception's type, a rank's own label."""
_MESSAGE_BRACKET = re.compile(r"(?i:rank)\b|PG\b|\d+$|.*\s|.*=")
"""Bracketed text of the message: PyTorch's ``[Rank 3]`` and ``[PG 0 ...]``, a desync
report's ``[3]``, words (``[after training is done]``, a list ``[a, b]``), key=value text."""
_POD = re.compile(r"pod/(?P<pod>[^/\]]+)")
_BRACKETED_TIME = re.compile(_TIMESTAMP + r"(?:\s+\d+)?")
"""A bracketed timestamp, with a thread's or process's number after it."""
_BRACKETED_HOST = re.compile(r"(?=.*\d)[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+(?:\.[A-Za-z0-9-]+)*")
"""``[gpu-node-017]``: a bracketed host has hyphens and a digit (``[c10d]`` is a component)."""
_SUFFIX = re.compile(
    r"\s{2,}[\w.-]+\.py:\d+\s*$"
    r"|\s\[repeated \d+x across cluster\](?: \(Ray deduplicates logs by default\..*)?$"
)
"""Marks at a line's end: rich's RichHandler puts the caller's ``file.py:line`` at the right
edge; Ray's log deduplication appends how often a line repeated."""
_SYSLOG_ESCAPE = re.compile(r"#0([0-3][0-7])")
"""rsyslog writes a control character as ``#`` and three octal digits (a tab: ``#011``)."""
_KEY_VALUE = re.compile(r"(\w+)=\"?([^,()\s\"}]+)")
_WHERE_KEYS = ("host", "hostname", "node", "nodename", "instance", "ip", "pod")
_TQDM_RESET = "\r"
_MESSAGE_KEYS = ("MESSAGE", "message", "textPayload", "msg", "line", "log", "content")
"""Where collectors' JSON records keep the line: journald's export (``journalctl -o json``),
Elastic Common Schema and Datadog (``message``), Cloud Logging's LogEntry (``textPayload``),
Loki's and Grafana's exports (``line``)."""
_HOST_KEYS = ("_HOSTNAME", "hostname", "host", "pod_name", "pod")
_LEVEL_KEYS = ("level", "levelname", "severity", "status", "PRIORITY")
"""The record's level: structlog's and Elastic's, python-json-logger's, Cloud Logging's,
Datadog's, journald's (a syslog number: 3 is err)."""
_SYSLOG_PRIORITY = {"0": "CRITICAL", "1": "CRITICAL", "2": "CRITICAL", "3": "ERROR"}
"""journald's PRIORITY field: syslog's numbers (emerg, alert, crit, err)."""
_TRACE_KEYS = ("exception", "exc_info", "stack_trace", "error.stack_trace", "stack")
_STAMPED_JSON = re.compile(rf"({_TIMESTAMP}(?:\s+(?:stdout|stderr)\s+[PF])?\s+)\{{")
"""A JSON record behind a collector's timestamp (and the CRI log file's stream and tag)."""
_DOCKER_JSON = re.compile(r'\s*\{\s*"log"\s*:\s*"(?P<log>(?:[^"\\]|\\.)*)')
"""Docker's json-file log driver: ``{"log":"<line>\\n","stream":"stderr","time":"..."}``, the
log field written first (moby daemon/logger/jsonfilelog/jsonlog); the line is a JSON string
(escaped quotes, ``\\t``, ``\\u003c`` for ``<``). A line cut short inside an escape keeps its
escapes as written."""


Source = tuple[str | None, int | None]
"""Which launcher printed a line, as far as its prefixes tell: (host, srun label)."""


@dataclass(slots=True)
class PeeledLine:
    """A log line without its wrappers, and what the wrappers said."""

    text: str
    """The whole line as a terminal shows it (escapes removed): what evidence quotes."""
    content: str = ""
    """The message: what the rules read."""
    rank: int | None = None
    """The rank a launcher's prefix names: torchrun's ``[rank3]:``, mpirun's ``[1,3]``."""
    local_rank: int | None = None
    """The local rank torchrun's ``--tee`` prefix names (``[default1]:``, a role's name and
    the worker's local rank)."""
    host: str | None = None
    """The host (or pod, container, service) a collector's prefix names."""
    level: str | None = None
    """The innermost log level the wrappers carry (``ERROR``, ``WARNING`` ...)."""
    labels: list[int] = field(default_factory=list)
    """srun's task labels, in order (a Horovod stall entry's rank reads as one too)."""
    after_label: str = ""
    """What follows the last numeric label (a stall entry's tensor list)."""
    pid: int | None = None
    """The process a prefix names (Ray's ``(RayTrainWorker pid=1, ip=a)``, NCCL's
    ``host:pid:tid``)."""

    @property
    def label(self) -> int | None:
        """srun's task label (the outermost, when launchers nest)."""
        return self.labels[0] if self.labels else None

    @property
    def source(self) -> Source:
        return self.host, self.label

    @property
    def error_level(self) -> bool:
        return self.level in ERROR_LEVELS


Accept = Callable[[re.Match[str], PeeledLine], bool]
"""Record what a token says on the line; False when the token is the message's own."""


def _nothing(match: re.Match[str], line: PeeledLine) -> bool:
    return True  # timestamps, dmesg times, tqdm bars, file positions: nothing to keep


def _mpirun(match: re.Match[str], line: PeeledLine) -> bool:
    line.rank = int(match["rank"])
    line.host = line.host or match["host"]
    return True


def _torchrun(match: re.Match[str], line: PeeledLine) -> bool:
    if match["role"] == "rank":
        line.rank = int(match["index"])
    else:  # [default0]: is a local rank; the global one comes from the launcher's maps
        line.local_rank = int(match["index"])
    return True


def _label(match: re.Match[str], line: PeeledLine) -> bool:
    line.labels.append(int(match["label"]))
    line.after_label = line.text[match.end() :].lstrip()
    return True


def _nvrx(match: re.Match[str], line: PeeledLine) -> bool:
    """nvidia-resiliency-ext's loggers name the process's rank: the workload's global rank, else
    its local one (a rank monitor is started with ``LOCAL_RANK`` alone), or the rank a rank
    monitor watches (``<none>`` before one connects)."""
    groups = match.groupdict()
    rank, local = groups.get("rank") or "", groups.get("local") or ""
    if rank.isdigit():
        line.rank = int(rank)
    elif local.isdigit():
        line.local_rank = int(local)
    line.host = groups.get("host") or line.host
    return True


def _glog(match: re.Match[str], line: PeeledLine) -> bool:
    line.level = _LETTER_LEVELS[match["letter"]]
    return True


def _syslog(match: re.Match[str], line: PeeledLine) -> bool:
    if match["ident"].upper() in _LEVEL_WORDS:
        return False  # "time host LEVEL:" is a logger's line, not syslog's
    if not match["pid"] and not re.match(_SYSLOG_TIME, match[0]) and not _is_host(match["host"]):
        return False
    line.host = match["host"]
    return True


def _level(match: re.Match[str], line: PeeledLine) -> bool:
    line.level = _LEVEL_WORDS[match["level"].upper()]
    return True


def _key_values(match: re.Match[str], line: PeeledLine) -> bool:
    """Ray's ``(RayTrainWorker pid=1, ip=10.0.0.1)``, SkyPilot's ``(worker1, rank=1, pid=2,
    ip=...)``, Loki's ``{pod="x", host="y"}``: where the line came from."""
    pairs = {key.lower(): value for key, value in _KEY_VALUE.findall(match[0])}
    where = next((pairs[key] for key in _WHERE_KEYS if pairs.get(key)), None)
    line.host = where or line.host
    if (pid := pairs.get("pid", "")).isdigit():
        line.pid = int(pid)
    return True


def _bracket(match: re.Match[str], line: PeeledLine) -> bool:
    """A bracketed tag: a timestamp, a level, a pod, a host, a file position or a name."""
    body = match["body"].strip()
    if _BRACKETED_TIME.fullmatch(body):
        return True
    if (level := _LEVEL_WORDS.get(body.split("|")[0].upper())) is not None:
        line.level = level  # [ERROR], transformers' [INFO|trainer.py:2345]
        return True
    if pod := _POD.match(body):
        line.host = pod["pod"]
        return True
    if _MESSAGE_BRACKET.match(body):
        return False
    if _BRACKETED_HOST.fullmatch(body):
        line.host = body
    return True


def _host(match: re.Match[str], line: PeeledLine) -> bool:
    host = match["host"]
    if _MESSAGE_WORD.match(host) or not _is_host(host):
        return False
    line.host = host
    if (pid := match.groupdict().get("pid")) is not None:
        line.pid = int(pid)  # NCCL's host:pid:tid
    return True


def _is_host(word: str) -> bool:
    """A host name's shape; a pid (all digits) or a thread's name (``Thread-3``) is none."""
    other = word.isdigit() or word.lower().endswith(".py") or word.startswith("Thread-")
    return bool(_HOSTLIKE.match(word)) and not other


_TOKENS: tuple[tuple[re.Pattern[str], Accept], ...] = tuple(
    (re.compile(pattern), accept)
    for pattern, accept in (
        # launchers: mpirun --tag-output (Open MPI 4 and 5, PMIx's detailed tag, Horovod's
        # gloo runner's [rank]<stream>:, SageMaker's [1,mpirank:3,algo-2]<stdout>: with the
        # host), torchrun --tee / --role, srun --label
        (
            r"\[(?:[\w.@-]+,)?(?:mpirank:)?(?P<rank>\d+)(?:,(?P<host>[\w.-]+))?\]"
            r"(?:\[[^\]\n]*\])?<std(?:out|err|diag)>:",
            _mpirun,
        ),
        (r"<std(?:out|err|diag)>:", _nothing),  # --timestamp-output alone: the stream
        (r"\[(?P<role>[A-Za-z_]+)(?P<index>\d+)\]:", _torchrun),
        (r"(?P<label>\d{1,6}):(?=\s|\[|$)", _label),
        (r"\d{1,7}\t(?=\S)", _nothing),  # cat -n's and editors' line numbers (a paste)
        # nvidia-resiliency-ext: its logger (shared_utils/log_manager.py, 0.5+: "[host]
        # [workload:R(L) infra:I(IL)] file.py:N", "?" where unset), its rank monitors' names
        # (fault_tolerance/rank_monitor_server.py RankMonitorLogger, 0.3-0.4; utils.py
        # create_logger's "[RankMonitorServer:R]", 0.1-0.2)
        (
            r"(?:\[(?P<host>[\w.-]+)\]\s)?\[workload:(?P<rank>\d+|\?)\((?P<local>\d+|\?)\)"
            r" infra:(?:\d+|\?)\((?:\d+|\?)\)\](?:\s[\w.-]+\.py:\d+)?",
            _nvrx,
        ),
        (r"\[RankMon(?:itor)?Server(?:\d+@(?P<host>[\w.-]+))?:(?P<rank>\d+|<none>)\]", _nvrx),
        # loggers' own headers: glog and c10 (with or without brackets), older c10
        (
            r"\[?(?P<letter>[IWEFD])\d{3,4}\s[\d:.]+(?:\s+\d+)?(?:\s+[\w./<>-]+:\d+)?\]",
            _glog,
        ),
        (r"(?P<letter>[IWEFD])\d{3,4}\s[\d:.]+\s+\d+\s+[\w./<>-]+:\d+\]", _glog),
        (r"\[(?P<letter>[IWEFD])\s[^\]\n]{1,120}\]", _glog),
        # SkyPilot's sky_logging: "E 07-06 19:18:16 controller.py:137]"
        (r"(?P<letter>[IWEFD]) \d{2}-\d{2} [\d:.]+ [\w./<>-]+:\d+\]", _glog),
        # syslog and journald: time host ident[pid]:
        (
            rf"{_TIMESTAMP}\s+(?P<host>{_HOST})\s+(?P<ident>[A-Za-z_][\w.@/-]*)"
            r"(?:\[(?P<pid>\d+)\])?:(?=\s)",
            _syslog,
        ),
        # time host, then a bracketed tag (rsyslog templates without a program tag)
        (rf"{_TIMESTAMP}\s+(?P<host>{_HOST})\s+(?=\[)", _host),
        # a timestamp (with the CRI log format's stream and tag, or a log stream's name as
        # aws logs tail prints it), dmesg's seconds
        (
            rf"{_TIMESTAMP}(?:\s+(?:stdout|stderr)\s+[PF](?=\s)|\s+[\w.-]+(?:/[\w.-]+)+(?=\s))?",
            _nothing,
        ),
        (r"\[\s*\d+\.\d+\]", _nothing),
        (r"[A-Za-z_][\w.@/-]*\[\d+\]:(?=\s)", _nothing),  # a syslog tag, prog[pid]:
        # levels: ERROR, [ERROR], Python's BASIC_FORMAT ERROR:logger:message
        (
            rf"(?P<level>{_LEVEL}|(?i:trace|debug|info|notice|warn|warning|error|critical"
            r"|fatal)):(?:[A-Za-z_][\w.]*:(?=\S))?",
            _level,
        ),
        (rf"(?P<level>{_LEVEL})\b(?!:)", _level),
        (rf"[A-Za-z_][\w.]*(?:\s+-)?\s+(?={_LEVEL}\b)", _nothing),  # a logger's name
        # Ray and SkyPilot: (Name pid=1, ip=a); Loki's label set {pod="x"}
        (r"\((?:[\w.:-]+,?\s)?(?:\w+=[^()\s,]+(?:,\s?)?)+\)", _key_values),
        (r"\{(?:\s*\w+=\"[^\"\n]*\",?)+\s*\}", _key_values),
        # any other bracketed tag: a pod, a host, a date, a level, a file:line:function
        (r"\[(?P<body>[^\[\]\n'\"]{1,160})\](?!:)", _bracket),
        # pdsh and clush's host: ; NCCL's own host:pid:tid
        (rf"(?P<host>{_HOST}):(?=\s)", _host),
        (rf"(?P<host>{_HOST}):(?P<pid>\d+):\d+:?(?=\s)", _host),
        # docker compose: service-1  | ; job-platform pod prefixes: master.0 --
        (rf"(?P<host>{_HOST})\s+(?:\||--)(?=\s)", _host),
        # a tqdm bar left on the line (its updates end in \r, not \n)
        (
            r"(?:[^|\r\n]{0,60}:)?\s*\d{1,3}%\|[^|\n]{0,120}\|[^\[\n]{0,40}\[[^\]\n]{0,80}\]",
            _nothing,
        ),
    )
)
_SEPARATOR = re.compile(r"[\s|\u2502]*(?:(?:-|>>?)(?=\s)\s*)*")
"""Between tokens: spaces, column bars, a dash between spaces (``time - LEVEL - msg``),
transformers' ``>>``, markdown's quote marks (``> > `` where a paste was quoted twice)."""
_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff"))
"""Characters that show as nothing (a copy from a rendered page, a byte-order mark)."""
_HTML_ENTITY = re.compile(r"&(?:lt|gt|amp|quot|#39|#x27|nbsp);")


def without_colour(text: str) -> str:
    """``text`` without its terminal escapes (colours, titles, charset switches)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def unwrap_json_log(line: str) -> str:
    """The message of a Docker json-file log line (its ``log`` field, JSON escapes decoded and
    its newline dropped), of another collector's one-record-per-line JSON (``_json_record``);
    any other line as it is."""
    record = _DOCKER_JSON.match(line)
    if record is None:
        if line.lstrip().startswith("{"):
            return _json_record(line)
        stamped = _STAMPED_JSON.match(line)  # kubectl logs --timestamps, the CRI file's stream
        return stamped[1] + _json_record(line[stamped.end(1) :]) if stamped else line
    try:
        message = json.loads(f'"{record["log"]}"')
    except ValueError:  # cut inside an escape (a long line read only so far)
        message = record["log"]
    return str(message).rstrip("\r\n")


def _json_record(line: str) -> str:
    """A whole JSON object on one line whose message field is a string, as ``host: message``
    (the host a prefix the peeling reads), else the line: ``journalctl -o json``'s MESSAGE and
    _HOSTNAME, Elastic's and Datadog's ``message`` and ``host``, Cloud Logging's
    ``textPayload``, Loki's ``line``."""
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if not isinstance(record, dict):
        return line
    message = next((record[k] for k in _MESSAGE_KEYS if isinstance(record.get(k), str)), None)
    if message is None:
        return line
    host = next((_host_field(record[k]) for k in _HOST_KEYS if k in record), None)
    message = message.rstrip("\r\n")
    said = str(next((record[k] for k in _LEVEL_KEYS if k in record), "")).upper()
    level = _LEVEL_WORDS.get(said) or _SYSLOG_PRIORITY.get(said)
    if level in ERROR_LEVELS:
        # an error record's traceback field ends in the exception line; a lower level's is a
        # caught and logged one (a retry), no failure
        trace = next((record[k] for k in _TRACE_KEYS if isinstance(record.get(k), str)), "")
        last = trace.strip().rsplit("\n", 1)[-1]
        message = f"[{level}] {message}" + (f" {last}" if last else "")
    return f"{host}: {message}" if host else message


def _host_field(value: object) -> str | None:
    """A host field's name: a string, or Elastic's ``{"name": ...}`` object."""
    if isinstance(value, dict):
        value = value.get("name") or value.get("hostname")
    return value if isinstance(value, str) and _BRACKETED_HOST.fullmatch(value) else None


def strip_escapes(line: str) -> str:
    """The line as a terminal shows it: escapes removed (rsyslog's control-character escapes
    decoded, a rendered page's HTML entities and zero-width characters); of text that a
    carriage return overwrote (tqdm's updates), the last part written."""
    line = without_colour(line)
    if "\u200b" in line or "\ufeff" in line or "\u200c" in line or "\u200d" in line:
        line = line.translate(_ZERO_WIDTH)
    if "&" in line and "<" not in line and _HTML_ENTITY.search(line):
        line = html.unescape(line)  # copied from a rendered page: &lt;stderr&gt;
    if "#0" in line:
        line = _SYSLOG_ESCAPE.sub(lambda m: chr(int(m[1], 8)), line)
    if _TQDM_RESET in line:
        parts = [part for part in line.split(_TQDM_RESET) if part.strip()]
        line = parts[-1] if parts else ""
    return line


def opening(line: str) -> re.Pattern[str] | None:
    """The kind of wrapper ``line`` starts with (a timestamp, a launcher's prefix, a log level
    ...: one of the grammar's token kinds), None where it starts with none."""
    separator = _SEPARATOR.match(line)
    return _opening(line, separator.end() if separator else 0, _TOKENS)


def opens_with(line: str, kinds: frozenset[re.Pattern[str] | None]) -> bool:
    """Whether the kind of wrapper ``line`` starts with (``opening``) is one of ``kinds``.

    Much faster than ``opening`` for most lines: unless one of ``kinds`` matches, no kind is
    tried; then only those up to the last of ``kinds`` (a line that starts with a later kind
    or with none starts with none of them)."""
    separator = _SEPARATOR.match(line)
    begin = separator.end() if separator else 0
    candidates, tokens = _candidates(kinds)
    if candidates is None or candidates.match(line, begin) is None:
        return False
    kind = _opening(line, begin, tokens)
    return kind is not None and kind in kinds


def _opening(
    line: str, begin: int, tokens: tuple[tuple[re.Pattern[str], Accept], ...]
) -> re.Pattern[str] | None:
    """The first of ``tokens`` that matches ``line`` at ``begin`` and accepts the match."""
    probe = PeeledLine(line)
    for pattern, accept in tokens:
        match = pattern.match(line, begin)
        if match is not None and match.end() > begin and accept(match, probe):
            return pattern
    return None


@cache
def _candidates(
    kinds: frozenset[re.Pattern[str] | None],
) -> tuple[re.Pattern[str] | None, tuple[tuple[re.Pattern[str], Accept], ...]]:
    """For ``opens_with``: one alternation of ``kinds`` (None where they hold no token kind),
    and the grammar's token kinds up to the last of them."""
    places = [place for place, (pattern, _) in enumerate(_TOKENS) if pattern in kinds]
    if not places:
        return None, ()
    alternatives = (_NAMED_GROUP.sub("(?:", _TOKENS[place][0].pattern) for place in places)
    return re.compile("|".join(alternatives)), _TOKENS[: places[-1] + 1]


_NAMED_GROUP = re.compile(r"\(\?P<\w+>")
"""Where kinds' patterns are joined, their groups (of one name in several) capture nothing."""


@cache
def _kinds_from(start: int) -> re.Pattern[str]:
    """The token kinds from ``start`` on in one alternation, each kind one group, in the
    grammar's order (an alternation tries its branches in order, as peeling does)."""
    return re.compile(
        "|".join(f"({_NAMED_GROUP.sub('(?:', p.pattern)})" for p, _ in _TOKENS[start:])
    )


def _first_kind(text: str, begin: int, start: int = 0) -> int | None:
    """The first kind from ``start`` on that matches at ``begin`` (None: none does), found in
    one call where trying each kind costs a call of its own."""
    if start >= len(_TOKENS):
        return None
    first = _kinds_from(start).match(text, begin)
    return None if first is None or first.lastindex is None else start + first.lastindex - 1


def peel_line(line: str) -> PeeledLine:
    """Peel the leading run of wrappers off ``line`` (see the module's docstring).

    Which tokens are peeled depends on the line's shape, not on its digits' values (every
    token kind and its acceptance read digits as ``\\d``: ``digit_blind``), so the peeling of a
    line is worked out once per shape — its digits all read as 0 — and replayed on the next line
    of that shape (a timestamp's, a rank's, a step's digits differ from line to line, which
    defeats a memo by the exact text)."""
    peeled = PeeledLine(strip_escapes(unwrap_json_log(line)))
    text = peeled.text
    shape = text.translate(_DIGITS_AS_ZERO) if len(text) <= MEMO_CHARS else None
    peeling = _PEELINGS.get(shape) if shape is not None else None
    if peeling is None or not _replayed(peeling, peeled):
        peeled = PeeledLine(peeled.text)
        peeling = _peeling(peeled)
        if shape is not None:
            if len(_PEELINGS) >= MEMO_LINES:
                _PEELINGS.clear()
            _PEELINGS[shape] = peeling
    content = text[peeling[1] :].rstrip()  # trailing blanks (a formatter's, a paste's) say nothing
    peeled.content = _SUFFIX.sub("", content) if "py:" in content or "x ac" in content else content
    return peeled


Peeling = tuple[tuple[tuple[int, int], ...], int]
"""How a line of one shape is peeled: each accepted token's kind and where it starts, and
where the message starts."""
_PEELINGS: dict[str, Peeling] = {}
"""The peeling of each shape seen (at most ``MEMO_LINES``)."""
_DIGITS_AS_ZERO = str.maketrans("123456789", "000000000")


def _peeling(peeled: PeeledLine) -> Peeling:
    """Peel ``peeled``'s text token by token (recording on it what each token says)."""
    text, begin, steps = peeled.text, 0, []
    while True:
        separator = _SEPARATOR.match(text, begin)
        begin = separator.end() if separator else begin
        kind = _first_kind(text, begin)
        while kind is not None:
            pattern, accept = _TOKENS[kind]
            match = pattern.match(text, begin)
            if match is not None and match.end() > begin and accept(match, peeled):
                steps.append((kind, begin))
                begin = match.end()
                break
            kind = _first_kind(text, begin, kind + 1)  # declined, or matched nothing
        else:
            return tuple(steps), begin


def _replayed(peeling: Peeling, peeled: PeeledLine) -> bool:
    """Peel ``peeled`` as another line of its shape was peeled; False where a token does not
    match or accept as it did there (never, while the grammar is digit-blind)."""
    text = peeled.text
    for kind, begin in peeling[0]:
        pattern, accept = _TOKENS[kind]
        match = pattern.match(text, begin)
        if match is None or not accept(match, peeled):
            return False
    return True


def digit_blind(pattern: re.Pattern[str]) -> bool:
    """Whether ``pattern`` matches a text as it matches the text with every ASCII digit made 0:
    it reads digits only as a class (``\\d``, ``\\w``, ``[A-Za-z0-9]``), never as a literal,
    a partial range or a back-reference."""
    return _blind(sre_parse.parse(pattern.pattern, pattern.flags))


def _blind(items: Iterable[tuple[Any, Any]]) -> bool:
    for op, value in items:
        if op in (sre.LITERAL, sre.NOT_LITERAL):
            if chr(value) in _DIGITS:
                return False
        elif op is sre.RANGE:
            low, high = value
            some = low <= ord("9") and high >= ord("0")
            if some and not (low <= ord("0") and high >= ord("9")):
                return False
        elif op in (sre.GROUPREF, sre.GROUPREF_EXISTS):
            return False
        elif op is sre.IN:
            if not _blind(value):
                return False
        elif not all(_blind(part) for part in _subpatterns(value)):
            return False
    return True


def _subpatterns(value: Any) -> Iterator[sre_parse.SubPattern]:
    """The parts of a parsed item's value that are patterns of their own (a group's body, a
    repeat's, an alternation's branches, a look-around's)."""
    for part in value if isinstance(value, tuple | list) else ():
        if isinstance(part, sre_parse.SubPattern):
            yield part
        elif isinstance(part, list):
            yield from (branch for branch in part if isinstance(branch, sre_parse.SubPattern))


_DIGITS = "0123456789"
