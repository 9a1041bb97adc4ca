"""Log rewrites: what the tools between a training job and an analyzer do to every line.

Each imitates one real tool's documented output (the source named in its entry); none adds,
drops or reorders the job's own lines (``progress`` adds a progress bar's lines between them, as
a terminal capture holds them), so the failure, its ranks and its order are the same.
Timestamps come from a fixed clock (2025-03-04 12:00:01 UTC, +13.579 ms a line): the same log
always gives the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from itertools import count

from pytest_faultloop.inputs.perturb.perturbation import LogPerturbation

_START = datetime(2025, 3, 4, 12, 0, 1, 123456, tzinfo=UTC)
_STEP = timedelta(microseconds=13579)
HOST = "gpu-node-017"
POD = "trainer-worker-0"
_ERRORISH = re.compile(rb"(?i)error|warn|traceback|exception|fail|killed|timed? ?out|signal")
_CRI_MAX_LINE = 16 * 1024
"""containerd's ``MaxContainerLogLineSize``: longer lines are split into ``P`` records."""


def _times() -> Iterator[tuple[int, datetime]]:
    for index in count():
        yield index, _START + index * _STEP


def _prefixed(
    prefix: Callable[[int, datetime], bytes],
) -> Callable[[Iterator[bytes]], Iterator[bytes]]:
    """A rewrite that puts ``prefix(line index, time)`` in front of every line."""

    def rewrite(lines: Iterator[bytes]) -> Iterator[bytes]:
        for (index, time), line in zip(_times(), lines, strict=False):
            yield prefix(index, time) + line

    return rewrite


def _rfc3339_nano_fixed(index: int, time: datetime) -> str:
    """Go's ``2006-01-02T15:04:05.000000000Z07:00``: nine digits always."""
    return f"{time:%Y-%m-%dT%H:%M:%S}.{time.microsecond:06d}{index * 7 % 1000:03d}Z"


def _rfc3339_nano(index: int, time: datetime) -> str:
    """Go's ``time.RFC3339Nano``: trailing zeros of the fraction trimmed, none when zero."""
    fraction = f"{time.microsecond:06d}{index * 7 % 1000:03d}".rstrip("0")
    return f"{time:%Y-%m-%dT%H:%M:%S}" + (f".{fraction}" if fraction else "") + "Z"


def _stream(line: bytes) -> bytes:
    """Which stream a line most likely came from (the CRI and mpirun formats name it)."""
    return b"stderr" if _ERRORISH.search(line) or line.startswith((b" ", b"\t")) else b"stdout"


def _cri(lines: Iterator[bytes]) -> Iterator[bytes]:
    for (index, time), line in zip(_times(), lines, strict=False):
        stamp, stream = _rfc3339_nano(index, time).encode(), _stream(line)
        pieces = [line[i : i + _CRI_MAX_LINE] for i in range(0, len(line), _CRI_MAX_LINE)]
        for number, piece in enumerate(pieces or [b""], start=1):
            tag = b"F" if number == max(len(pieces), 1) else b"P"
            yield b" ".join((stamp, stream, tag, piece))


def _asctime(time: datetime) -> str:
    """Python logging's default ``%(asctime)s``: ``%Y-%m-%d %H:%M:%S,mmm``."""
    return f"{time:%Y-%m-%d %H:%M:%S},{time.microsecond // 1000:03d}"


_CONTROL = re.compile(rb"[\x00-\x1f]")


def _rsyslog(lines: Iterator[bytes]) -> Iterator[bytes]:
    """RSYSLOG_TraditionalFileFormat: ``%TIMESTAMP% %HOSTNAME% %syslogtag%`` and the message
    with a space in front unless it has one; control characters escaped as ``#ooo``."""
    for (_, time), line in zip(_times(), lines, strict=False):
        stamp = f"{time:%b} {time.day:2d} {time:%H:%M:%S}".encode()
        message = _CONTROL.sub(lambda m: b"#%03o" % m[0][0], line.rstrip(b"\r"))
        space = b"" if message.startswith(b" ") else b" "
        yield stamp + b" " + HOST.encode() + b" python3[12345]:" + space + message


_ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]")


def _journald(lines: Iterator[bytes]) -> Iterator[bytes]:
    """``journalctl`` (``-o short``): ``%b %d %H:%M:%S host ident[pid]: message``; without
    ``--all`` it shows tabs as 8 spaces, drops ANSI escapes and a trailing carriage return."""
    for (_, time), line in zip(_times(), lines, strict=False):
        message = _ANSI.sub(b"", line.rstrip(b"\r")).replace(b"\t", b" " * 8)
        yield f"{time:%b %d %H:%M:%S} {HOST} python3[12345]: ".encode() + message


_LEVEL_COLOURS = (
    (re.compile(rb"CRITICAL|FATAL"), b"\x1b[1;31m"),
    (re.compile(rb"ERROR|Traceback \(most recent call last\)"), b"\x1b[31m"),
    (re.compile(rb"WARNING"), b"\x1b[33m"),
    (re.compile(rb"\bINFO\b"), b"\x1b[32m"),
)
"""colorlog's default colours: CRITICAL bold red, ERROR red, WARNING yellow, INFO green."""
_GREP_MATCH = re.compile(
    rb"Error|error|ERROR|[Ff]ailed|FAILED|Traceback|Exception|Killed|[Tt]imed out|[Tt]imeout"
    rb"|SIG[A-Z]{2,}"
)


def _ansi(lines: Iterator[bytes]) -> Iterator[bytes]:
    """colorlog's level colours around a whole record, then ``grep --color=always``'s match
    highlighting (``ESC[01;31mESC[K`` ... ``ESC[mESC[K``) on the failure words."""
    for line in lines:
        colour = next((c for pattern, c in _LEVEL_COLOURS if pattern.search(line)), None)
        coloured = colour + line + b"\x1b[0m" if colour else line
        yield _GREP_MATCH.sub(lambda m: b"\x1b[01;31m\x1b[K" + m[0] + b"\x1b[m\x1b[K", coloured)


def _mpirun_timestamps(lines: Iterator[bytes]) -> Iterator[bytes]:
    for (_, time), line in zip(_times(), lines, strict=False):
        yield time.ctime().encode() + b"<" + _stream(line) + b">:" + line


def _crlf(lines: Iterator[bytes]) -> Iterator[bytes]:
    for line in lines:
        yield line if line.endswith(b"\r") else line + b"\r"


_BAR_EVERY = 5
_BAR_ALONE_EVERY = 3
"""Every fifth line a tqdm bar is left in front of the line; every third bar ends its own line."""


def _tqdm_bar(step: int, total: int = 400) -> bytes:
    """tqdm's default ``{l_bar}{bar}{r_bar}`` as one refresh writes it to a file: ``\\r`` first."""
    done = step % (total + 1)
    filled = done * 10 // total
    bar = (
        "█" * filled + ("▌" if done * 20 // total % 2 else " ") * (filled < 10) + " " * (9 - filled)
    )
    return (
        f"\rtrain: {done * 100 // total:3d}%|{bar[:10]}| {done}/{total} "
        f"[00:{done // 10:02d}<01:{(total - done) // 10 % 60:02d},  4.71it/s]"
    ).encode()


def _progress(lines: Iterator[bytes]) -> Iterator[bytes]:
    """A tqdm bar writing to the same stream: its refreshes end in ``\\r``, never ``\\n``, so
    the job's next line starts right after the bar (as a captured terminal holds it), and a
    closed bar's line stands between the job's lines."""
    for index, line in enumerate(lines):
        if index % _BAR_EVERY == _BAR_EVERY - 1:
            step = index // _BAR_EVERY
            refreshes = _tqdm_bar(step * 3) + _tqdm_bar(step * 3 + 1) + _tqdm_bar(step * 3 + 2)
            if step % _BAR_ALONE_EVERY == 0:
                yield refreshes
            else:
                yield refreshes + line
                continue
        yield line


def _strip(lines: Iterator[bytes]) -> Iterator[bytes]:
    return (line.strip() for line in lines)


def _rstrip(lines: Iterator[bytes]) -> Iterator[bytes]:
    return (line.rstrip() for line in lines)


def _then(
    first: Callable[[Iterator[bytes]], Iterator[bytes]],
    second: Callable[[Iterator[bytes]], Iterator[bytes]],
) -> Callable[[Iterator[bytes]], Iterator[bytes]]:
    return lambda lines: second(first(lines))


_KEEPS_WORDS = "only the line's start changes; the job's lines, their order and words are kept"

LOG_PERTURBATIONS: tuple[LogPerturbation, ...] = (
    LogPerturbation(
        "ts",
        "docker logs --timestamps / kubectl logs --timestamps: RFC 3339 with nine fraction "
        "digits (Go's RFC3339NanoFixed) and a space before the line (moby "
        "api/server/httputils/write_log_stream.go; kubelet kuberuntime/logs/logs.go)",
        _KEEPS_WORDS,
        _prefixed(lambda i, t: _rfc3339_nano_fixed(i, t).encode() + b" "),
    ),
    LogPerturbation(
        "cri",
        "the CRI container log files kubelet reads (/var/log/pods, containerd "
        "internal/cri/io/logger.go): '<RFC3339Nano> <stdout|stderr> <P|F> <line>', lines over "
        "16 KiB split into P records",
        _KEEPS_WORDS + " (a line over 16 KiB is split, as containerd splits it)",
        _cri,
    ),
    LogPerturbation(
        "asctime",
        "a relay that logs each line with Python logging's '%(asctime)s %(message)s' "
        "(asctime: '%Y-%m-%d %H:%M:%S,mmm', Lib/logging/__init__.py)",
        _KEEPS_WORDS,
        _prefixed(lambda i, t: _asctime(t).encode() + b" "),
    ),
    LogPerturbation(
        "pylog",
        "the logging cookbook's '%(asctime)s - %(name)s - %(levelname)s - %(message)s', each "
        "line logged at INFO by a relay named 'relay' (docs.python.org logging-cookbook)",
        _KEEPS_WORDS + "; the relay's INFO is outside the job's own level words",
        _prefixed(lambda i, t: _asctime(t).encode() + b" - relay - INFO - "),
    ),
    LogPerturbation(
        "syslog",
        "rsyslog's RSYSLOG_TraditionalFileFormat ('Mar  4 12:00:01 host python3[12345]: ', "
        "day space-padded, control characters such as a tab written '#011'; rsyslog "
        "tools/smtradfile.c, runtime/parser.c)",
        _KEEPS_WORDS + "; control characters are escaped, not removed",
        _rsyslog,
    ),
    LogPerturbation(
        "journald",
        "journalctl -o short ('Mar 04 12:00:01 host python3[12345]: '; tabs shown as spaces, "
        "ANSI escapes dropped; systemd src/shared/logs-show.c)",
        _KEEPS_WORDS + "; tabs become spaces, colour codes go",
        _journald,
    ),
    LogPerturbation(
        "pdsh",
        "pdsh and clush's per-line host label 'host: ' (chaos/pdsh src/pdsh/dsh.c "
        "'%S: %s'; ClusterShell CLI/Display.py)",
        _KEEPS_WORDS,
        _prefixed(lambda i, t: HOST.encode() + b": "),
    ),
    LogPerturbation(
        "kubectl",
        "kubectl logs --prefix: '[pod/NAME/CONTAINER] ' (kubectl pkg/cmd/logs/logs.go "
        "addPrefixIfNeeded)",
        _KEEPS_WORDS,
        _prefixed(lambda i, t: f"[pod/{POD}/pytorch] ".encode()),
    ),
    LogPerturbation(
        "compose",
        "docker compose logs: the service name padded to the longest plus one, then ' | ' "
        "(docker/compose cmd/formatter/logs.go)",
        _KEEPS_WORDS,
        _prefixed(lambda i, t: b"trainer-1  | "),
    ),
    LogPerturbation(
        "ray",
        "Ray's driver output of a worker on another node: cyan '(RayTrainWorker pid=N, "
        "ip=A) ' (ray python/ray/_private/worker.py print_worker_logs)",
        _KEEPS_WORDS,
        _prefixed(lambda i, t: b"\x1b[36m(RayTrainWorker pid=12345, ip=10.0.0.2)\x1b[0m "),
    ),
    LogPerturbation(
        "skypilot",
        "SkyPilot's multi-node job output: '(worker1, rank=1, pid=N, ip=A) ', rank being the "
        "node's (sky/backends/task_codegen.py)",
        _KEEPS_WORDS + "; the node rank it names is not a global rank",
        _prefixed(lambda i, t: b"(worker1, rank=1, pid=5678, ip=10.0.0.2) "),
    ),
    LogPerturbation(
        "loki",
        "Grafana Loki's logcli query: '<RFC3339> {labels} <line>' with each line's surrounding "
        "white space trimmed (grafana/loki pkg/logcli/output/default.go)",
        _KEEPS_WORDS + "; indentation goes, as logcli trims it",
        _then(
            _strip,
            _prefixed(
                lambda i, t: (
                    f'{t:%Y-%m-%dT%H:%M:%SZ} {{container="pytorch", pod="{POD}"}} '.encode()
                )
            ),
        ),
    ),
    LogPerturbation(
        "aws",
        "aws logs tail (CloudWatch): '<ISO 8601, microseconds, +00:00> <log stream> <line>', "
        "trailing white space stripped (aws-cli awscli/customizations/logs/tail.py)",
        _KEEPS_WORDS,
        _then(
            _rstrip,
            _prefixed(
                lambda i, t: (
                    f"{t.isoformat(timespec='microseconds')} trainer/pytorch/0a1b2c3d ".encode()
                )
            ),
        ),
    ),
    LogPerturbation(
        "mpirun-ts",
        "Open MPI 4's mpirun --timestamp-output without --tag-output: ctime, then the stream "
        "('Tue Mar  4 12:00:01 2025<stdout>:'; orte/mca/iof/base/iof_base_output.c)",
        _KEEPS_WORDS + "; no rank is added",
        _mpirun_timestamps,
    ),
    LogPerturbation(
        "ansi",
        "colour: colorlog's level colours around a record (ERROR red, WARNING yellow, INFO "
        "green) and "
        "GNU grep --color=always's ESC[01;31mESC[K...ESC[mESC[K around failure words",
        "escape codes are added around words; no character of the line changes",
        _ansi,
    ),
    LogPerturbation(
        "crlf",
        "CRLF line endings, as Windows-side tools and some collectors write them",
        "a carriage return is added at each line's end",
        _crlf,
    ),
    LogPerturbation(
        "progress",
        "a tqdm progress bar on the same stream: refreshes start with '\\r' and end without "
        "'\\n' (tqdm/std.py), so the next line starts behind the bar; closed bars stand alone",
        "the bar's lines come between the job's lines; the job's lines are all there, in order",
        _progress,
    ),
)
