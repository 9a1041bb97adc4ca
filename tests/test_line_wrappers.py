"""Peeling a log line's wrappers: collectors', loggers' and launchers' marks come off by their
shape, the message's own words never do.

The wrapped forms are the tools' documented output (the format strings their sources print);
several are not in the perturbation catalogue at all, so they check that the peeling is a
grammar of token kinds, not a list of the catalogue's formats.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_log
from pytest_faultloop.analyzers.log import line_wrappers, reader
from pytest_faultloop.analyzers.log.line_wrappers import (
    opening,
    opens_with,
    peel_line,
    strip_escapes,
)
from pytest_faultloop.analyzers.log.reader import iter_blocks, rejoin_hard_wraps
from pytest_faultloop.models import Decision
from pytest_faultloop.models.faults import Nature

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


@pytest.mark.parametrize(
    ("line", "host"),
    [
        # docker logs -t, kubectl logs --timestamps (RFC3339NanoFixed)
        (f"2025-03-04T12:00:01.123456789Z [rank2]: {OOM}", None),
        # kubectl logs --prefix --timestamps: the prefix first
        (
            f"[pod/train-worker-0/pytorch] 2025-03-04T12:00:01.123456789Z [rank2]: {OOM}",
            "train-worker-0",
        ),
        # containerd's CRI log file: RFC3339Nano (trimmed), stream, tag
        (f"2025-03-04T12:00:01.1234567Z stderr F [rank2]: {OOM}", None),
        # CRI-O's conmon: nine digits and a numeric offset
        (f"2025-03-04T12:00:01.123456700+00:00 stderr F [rank2]: {OOM}", None),
        # Python logging's asctime, and the cookbook format with a logger and a level
        (f"2025-03-04 12:00:01,123 [rank2]: {OOM}", None),
        (f"2025-03-04 12:00:01,123 - relay - INFO - [rank2]: {OOM}", None),
        # rsyslog's traditional file format and journalctl -o short / short-iso
        (f"Mar  4 12:00:01 gpu-node-017 python3[12345]: [rank2]: {OOM}", "gpu-node-017"),
        (f"Mar 04 12:00:01 gpu-node-017 python3[12345]: [rank2]: {OOM}", "gpu-node-017"),
        (f"2025-03-04T12:00:01+00:00 gpu-node-017 python3[12345]: [rank2]: {OOM}", "gpu-node-017"),
        # an rsyslog template of time and host without a program tag
        (f"2025-03-04T12:00:01Z gpu-node-017 [rank2]: {OOM}", "gpu-node-017"),
        # pdsh / clush, docker compose logs
        (f"gpu-node-017: [rank2]: {OOM}", "gpu-node-017"),
        (f"localhost: [rank2]: {OOM}", "localhost"),
        (f"trainer-1  | [rank2]: {OOM}", "trainer-1"),
        # Ray (a worker on another node), SkyPilot, Loki's logcli, aws logs tail
        (f"(RayTrainWorker pid=1234, ip=10.0.0.2) [rank2]: {OOM}", "10.0.0.2"),
        (f"(worker1, rank=1, pid=5678, ip=10.0.0.3) [rank2]: {OOM}", "10.0.0.3"),
        (f'2025-03-04T12:00:01Z {{app="trainer", pod="train-0"}} [rank2]: {OOM}', "train-0"),
        (f"2025-03-04T12:00:01.123000+00:00 ecs/trainer/abc123 [rank2]: {OOM}", None),
        # Open MPI 5's bracketed timestamp before its tag (rank from the tag)
        (f"[Mon Mar  4 12:00:01 2024][1,2]<stderr>: {OOM}", None),
        # one JSON record per line: journalctl -o json (MESSAGE, _HOSTNAME), Elastic Common
        # Schema (message, host.name), Cloud Logging's LogEntry (textPayload)
        (
            f'{{"__CURSOR" : "s=1;i=2", "_HOSTNAME" : "gpu-node-017", "MESSAGE" : "[rank2]: {OOM}"}}',
            "gpu-node-017",
        ),
        (
            f'{{"@timestamp": "2025-03-04T12:00:01Z", "host": {{"name": "gpu-node-017"}},'
            f' "message": "[rank2]: {OOM}"}}',
            "gpu-node-017",
        ),
        (f'{{"textPayload": "[rank2]: {OOM}\\n", "severity": "ERROR"}}', None),
        # SageMaker's mpirun tag (sagemaker-training-toolkit's tests): rank and host
        (f"[1,mpirank:2,algo-2]<stderr>:{OOM}", "algo-2"),
        # rich's RichHandler: a date-time column, a padded level, the caller at the right
        (f"[03/04/25 12:00:01] INFO     [rank2]: {OOM}        train.py:17", None),
        # colour (colorlog, grep --color=always) and a tqdm bar left on the line
        (f"\x1b[31m[rank2]: \x1b[01;31m\x1b[K{OOM}\x1b[m\x1b[K\x1b[0m", None),
        (f"\rtrain:  45%|████▌     | 45/100 [00:10<00:12,  4.50it/s][rank2]: {OOM}", None),
    ],
)
def test_a_wrapped_line_gives_the_message_and_the_rank(line: str, host: str | None) -> None:
    peeled = peel_line(line)
    assert peeled.content == OOM
    assert peeled.rank == 2
    assert peeled.host == host


@pytest.mark.parametrize(
    ("line", "level", "content"),
    [
        # glog and c10's own headers: PyTorch writes month*100+day, unpadded (W304)
        ("[rank0]:[W304 12:00:01.123456789 ProcessGroupNCCL.cpp:1117] Warning: x", "WARNING", "x"),
        (
            "[rank3]:[E1014 12:00:01.123 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog",
            "ERROR",
            "[Rank 3] Watchdog",
        ),
        ("E0820 14:27:21.486436 4030959 ProcessGroupNCCL.cpp:915] boom", "ERROR", "boom"),
        (
            "[W socket.cpp:663] [c10d] The client socket has failed",
            "WARNING",
            "The client socket has failed",
        ),
        # DeepSpeed's logger and transformers'
        (
            "[2024-01-01 10:00:00,000] [ERROR] [launch.py:321:sigkill_handler] exits with return code = -9",
            "ERROR",
            "exits with return code = -9",
        ),
        (
            "[INFO|trainer.py:2345] 2025-03-04 12:00:01,123 >> ***** Running training *****",
            "INFO",
            "***** Running training *****",
        ),
        # Python's BASIC_FORMAT: LEVEL:logger:message
        (
            "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9)",
            "ERROR",
            "failed (exitcode: -9)",
        ),
        # the innermost level wins: a relay's INFO outside the job's own ERROR
        ("2025-03-04 12:00:01,123 INFO ERROR: boom", "ERROR", "boom"),
        # dmesg's seconds since boot
        (
            "[  123.456789] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
            None,
            "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
        ),
    ],
)
def test_loggers_headers_give_their_level(line: str, level: str | None, content: str) -> None:
    peeled = peel_line(line)
    assert (peeled.level, peeled.content) == (level, content)


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970",
        "srun: error: n1: task 0: Killed",
        "slurmstepd: error: *** JOB 123 ON n1 CANCELLED AT 2024-01-01T00:00:00 ***",
        "Failures:",
        "------------------------------------------------------------",
        "[3] finished collective #12, but didn't join collective #13",
        "[Rank 0] step=10",
        "[after training is done] datetime: 2026-11-29 21:10:00",
        "[0]:",
        "Traceback (most recent call last):",
        "['/usr/bin/python', '-u', 'train.py'] exits with return code = -9",
    ],
)
def test_the_messages_own_words_stay(line: str) -> None:
    assert peel_line(line).content == line


def test_a_json_records_level_says_whether_its_traceback_field_is_a_failure() -> None:
    """structlog and python-json-logger keep a logged exception's traceback in a field: at
    error level its exception line is read (behind kubectl's --timestamps too); a warning's
    (a caught and retried error) is not."""
    trace = 'Traceback (most recent call last):\n  File "a.py", line 1\nRuntimeError: boom'
    error = peel_line(json.dumps({"level": "error", "message": "step failed", "exception": trace}))
    assert error.content == "step failed RuntimeError: boom" and error.level == "ERROR"
    record = {"level": "warning", "message": "retrying", "exception": trace}
    warned = peel_line("2025-05-01T10:00:00.000Z " + json.dumps(record))
    assert warned.content == "retrying" and warned.level is None
    journald = peel_line(json.dumps({"PRIORITY": "3", "MESSAGE": "[rank1]: boom"}))
    assert (journald.content, journald.rank, journald.level) == ("boom", 1, "ERROR")


def test_launcher_prefixes_nest_behind_wrappers() -> None:
    """srun --label pads its label; the torchrun table keeps its indentation."""
    peeled = peel_line("2025-03-04T12:00:01Z  3: [rank11]:   rank      : 11 (local_rank: 3)")
    assert (peeled.labels, peeled.rank, peeled.content) == (
        [3],
        11,
        "rank      : 11 (local_rank: 3)",
    )
    nccl = peel_line("node01:1234:1250 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2")
    assert (nccl.host, nccl.content.startswith("[0] NCCL WARN")) == ("node01", True)


def test_a_horovod_stall_entry_keeps_its_tensor_list() -> None:
    peeled = peel_line("[1,0]<stderr>:6: [HorovodAllreduce_grad_0]")
    assert peeled.labels == [6] and peeled.after_label == "[HorovodAllreduce_grad_0]"


def test_escapes_and_carriage_returns() -> None:
    assert strip_escapes("\x1b]0;title\x07\x1b[1;31mERROR\x1b[0m x") == "ERROR x"
    assert strip_escapes("step 10#011loss=0.5") == "step 10\tloss=0.5"  # rsyslog's #011
    assert strip_escapes(" 10%|#         |\r 20%|##        |\rdone") == "done"
    # Ray's deduplication note at a line's end
    assert peel_line("(pid=1) boom [repeated 7x across cluster]").content == "boom"


def test_a_docker_json_file_line_reads_as_its_log_field() -> None:
    # moby's json-file driver: the line as a JSON string (quotes, tabs and <> escaped)
    line = (
        '{"log":"[rank5]:   File \\"/workspace/train.py\\", line 212, in \\u003cmodule\\u003e\\n",'
        '"stream":"stderr","time":"2024-10-14T12:00:05.482113907Z"}'
    )
    peeled = peel_line(line)
    assert peeled.rank == 5
    assert peeled.content == 'File "/workspace/train.py", line 212, in <module>'
    assert peel_line('{"log":"\\tpid: 47316\\n","stream":"stderr"}').content == "pid: 47316"
    # cut inside an escape (a long line read only so far): the escapes stay as written
    assert peel_line('{"log":"[rank1]: boom \\u00').content == "boom \\u00"


@pytest.mark.parametrize(
    ("line", "rank", "local", "host"),
    [
        # shared_utils/log_manager.py (0.5+): the workload's global rank, else its local one,
        # "?" where unset
        (
            "2025-06-03 11:20:41,118 [INFO] [node1] [workload:13(5) infra:1(0)] x.py:12 ",
            13,
            None,
            "node1",
        ),
        (
            "2025-06-03 11:20:41,118 [WARNING] [node1] [workload:?(5) infra:1(0)] y.py:497 ",
            None,
            5,
            "node1",
        ),
        (
            "2025-06-03 11:20:41,118 [INFO] [node1] [workload:?(?) infra:1(0)] launcher.py:561 ",
            None,
            None,
            "node1",
        ),
        # rank_monitor_server.py's RankMonitorLogger (0.3-0.4), utils.create_logger (0.1-0.2)
        ("[2025-03-01 11:20:41,118] [WARNING] [RankMonServer81299@node1:6] ", 6, None, "node1"),
        (
            "[2025-03-01 11:20:41,118] [INFO] [RankMonServer81299@node1:<none>] ",
            None,
            None,
            "node1",
        ),
        ("[2024-10-01 11:20:41,118] [WARNING] [RankMonitorServer:5] ", 5, None, None),
    ],
)
def test_nvidia_resiliency_exts_loggers_name_the_rank(
    line: str, rank: int | None, local: int | None, host: str | None
) -> None:
    peeled = peel_line(line + "Did not get subsequent heartbeat. Waited 600.00 seconds.")
    assert peeled.content == "Did not get subsequent heartbeat. Waited 600.00 seconds."
    assert (peeled.rank, peeled.local_rank, peeled.host) == (rank, local, host)


@pytest.mark.parametrize("word", ["48211", "Thread-3"])
def test_a_pid_or_a_threads_name_before_a_tag_is_no_host(word: str) -> None:
    assert peel_line(f"2024-10-14 11:04:10,123 {word} [ERROR] {OOM}").host is None


@pytest.mark.parametrize(
    "line",
    [
        f"> > [rank2]: {OOM}",  # markdown quoting, twice (a quoted reply)
        f"\u200b[rank2]\u200b: {OOM}",  # zero-width spaces from a rendered page
        f"   123\t[rank2]: {OOM}",  # cat -n's line number
    ],
)
def test_what_a_paste_adds_is_peeled(line: str) -> None:
    peeled = peel_line(line)
    assert (peeled.rank, peeled.content) == (2, OOM)


def test_a_rendered_pages_html_entities_are_decoded() -> None:
    """``[1,3]<stderr>:`` copied from a rendered page arrives as ``&lt;stderr&gt;``."""
    assert peel_line(f"[1,3]&lt;stderr&gt;: {OOM}").rank == 3


def test_trailing_blanks_are_not_the_messages() -> None:
    """A formatter's or a paste's trailing blanks: patterns anchored at a message's end
    (Ray Train's ``Worker 0 has failed.``) read the line as without them."""
    assert peel_line("Worker 0 has failed.   \r").content == "Worker 0 has failed."


class _CountedKind:
    """A token kind of the grammar that counts the places it is tried at and does not match."""

    misses = 0

    def __init__(self, compiled: re.Pattern[str]) -> None:
        self.compiled = compiled
        self.pattern = compiled.pattern

    def match(self, text: str, begin: int) -> re.Match[str] | None:
        match = self.compiled.match(text, begin)
        _CountedKind.misses += match is None
        return match


@pytest.mark.parametrize(
    "line",
    [OOM, f"[rank3]: {OOM}", f"2026-11-29 10:00:01 node-7: [rank3]: [Rank 3] {OOM}"],
)
def test_peeling_tries_no_kind_where_it_does_not_match(
    monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    """Issue 44, item 16: each wrapper, and the message after the last, was tried against
    every kind of the grammar one by one (26 tries at the message of every line read). One
    alternation of the kinds says which is the first that matches (its accept may still
    decline: ``torch.OutOfMemoryError:`` has a host's shape), or that none does."""
    counted = [(_CountedKind(pattern), accept) for pattern, accept in line_wrappers._TOKENS]
    monkeypatch.setattr(line_wrappers, "_TOKENS", tuple(counted))
    _CountedKind.misses = 0
    assert peel_line(line).content.endswith(OOM)
    assert _CountedKind.misses == 0


def hard_wrapped(lines: list[str], width: int) -> str:
    """``lines`` as a terminal, a mailer or ``fold -w`` cuts them: every ``width`` characters."""
    pieces = [line[at : at + width] for line in lines for at in range(0, len(line), width) or [0]]
    return "".join(f"{piece}\n" for piece in pieces)


def rejoined(text: str, block_bytes: int = 1 << 20) -> str:
    blocks = iter_blocks(io.BytesIO(text.encode()), block_bytes)
    return b"".join(rejoin_hard_wraps(blocks)).decode()


SLURM_TIME_LIMIT = [  # src/slurmd/slurmstepd/req.c, src/api/step_launch.c
    *(
        f"{task}: step {step} | loss 2.3000 | lr 3.0e-04 | tokens/s 41250"
        for step in (100, 200)
        for task in range(4)
    ),
    "slurmstepd: error: *** JOB 4812733 ON gpu-node01 CANCELLED AT 2024-05-14T03:12:07 DUE TO TIME LIMIT ***",
    "slurmstepd: error: *** STEP 4812733.0 ON gpu-node01 CANCELLED AT 2024-05-14T03:12:07 DUE TO TIME LIMIT ***",
    "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
]
CLEAN_RUN = [  # torch/csrc/distributed/c10d/socket.cpp, ProcessGroupNCCL.cpp's exit warning
    "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot assign requested address).",
    *(
        f"[rank{rank}]: step {step}/5000 loss=2.3141 lr=3.0e-04 tok/s=51234"
        for step in (100, 5000)
        for rank in (0, 1)
    ),
    "[rank0]: Training finished. Saved checkpoint to ckpt/final.pt",
    "[rank0]:[W601 10:00:00.123456789 ProcessGroupNCCL.cpp:1250] Warning: WARNING: process group has NOT been destroyed before we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to ensure that any pending NCCL operations have finished in this process. In rare cases this process can exit before this point and block the progress of another member of the process group. This constraint has always been present,  but this warning has only recently been added. For more info, please see https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())",
]


@pytest.mark.parametrize("width", [80, 72])
def test_a_hard_wrapped_logs_lines_are_rejoined(width: int, tmp_path: Path) -> None:
    """slurmstepd's time-limit line cut before ``DUE TO TIME LIMIT ***`` is the job's end
    again; c10d's connect warning cut before its errno is the warning again, not a failure."""
    log = tmp_path / "job.log"
    log.write_text(hard_wrapped(SLURM_TIME_LIMIT, width))
    analysis = analyze_log(log)
    assert (analysis.decision, analysis.primary[0].nature) == (Decision.RESTART, Nature.SCHEDULER)
    log.write_text(hard_wrapped(CLEAN_RUN, width))
    assert analyze_log(log).decision is Decision.CONTINUE


def test_a_rejoined_line_keeps_its_first_pieces_number() -> None:
    """The whole line stands where its first piece stood, blank lines where the others did."""
    text = hard_wrapped(SLURM_TIME_LIMIT, 80)
    lines = rejoined(text).split("\n")
    assert len(lines) == len(text.split("\n"))
    assert lines[8:12] == [SLURM_TIME_LIMIT[8], "", SLURM_TIME_LIMIT[9], ""]


def test_a_wrap_is_told_from_as_many_cut_lines_as_it_takes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 44, item 16: every cut line of the first block (4 MB: 20 000 lines of a folded
    log) was read for whether the next continues it, before its lines were rejoined and read
    again. Once half of all cut lines continue, and in two line shapes, the rest cannot undo
    it; nor, once too few are left to make half, can they make it."""
    tried = []
    continues = reader.HardWrap.continues

    def counted(wrap: reader.HardWrap, line: str, following: str) -> bool:
        tried.append(line)
        return continues(wrap, line, following)

    monkeypatch.setattr(reader.HardWrap, "continues", counted)
    steps = [
        f"[rank{r}]: step {s} | loss 2.3{s} | {'x' * 90} | done" for s in range(500) for r in (0, 1)
    ]
    lines = hard_wrapped(steps, 80).splitlines()
    wrap = reader.hard_wrap(lines)
    assert wrap is not None and wrap.width == 80
    assert len(tried) <= len(steps) // 2 + 1
    tried.clear()
    rules = ["=" * 80] * 3000  # a table's rules at the width: 4000 cut lines in all
    assert reader.hard_wrap(rules + lines) is None
    assert len(tried) <= 4000 // 2 + 1


def test_a_record_cut_across_blocks_is_rejoined() -> None:
    """The first block says whether the log is wrapped; a later block's boundary may fall
    inside a cut record."""
    text = hard_wrapped(CLEAN_RUN * 2, 80)
    block_bytes = len(hard_wrapped(CLEAN_RUN, 80)) + 200  # inside the second exit warning
    assert rejoined(text, block_bytes) == rejoined(text)
    assert rejoined(text).split("\n").count(CLEAN_RUN[-1]) == 2
    ending_in_a_run = hard_wrapped([*CLEAN_RUN, CLEAN_RUN[0] + "x" * 27], 80)
    assert rejoined(ending_in_a_run).split("\n")[-3:] == [CLEAN_RUN[0] + "x" * 27, "", ""]


TORCHRUN_TABLE = [  # torch/distributed/elastic/multiprocessing/errors/__init__.py: width 60
    "=" * 60,
    "train.py FAILED",
    "-" * 60,
    "Failures:",
    "  <NO_OTHER_FAILURES>",
    "-" * 60,
    "Root Cause (first observed failure):",
    "[0]:",
    "  time      : 2024-10-14_12:00:05",
    "  host      : node1",
    "  rank      : 5 (local_rank: 1)",
    "  exitcode  : 1 (pid: 4601)",
    "  error_file: <N/A>",
    "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors",
    "=" * 60,
]


BORDERLESS_TABLE = [
    line
    for epoch in range(1, 4)
    for line in (
        *(f"epoch {epoch} step {step} loss 2.0{step}" for step in range(3)),
        f"Epoch {epoch} summary:",
        *(
            f"{key:<100}{value:>20}"
            for key, value in (
                ("train_loss", "2.3100"),
                ("val_loss", "2.4100"),
                ("throughput_samples_per_sec", "1234.5"),
                ("optimizer", "adamw"),
                ("learning_rate", "0.0003"),
            )
        ),
    )
]


@pytest.mark.parametrize(
    "lines",
    [
        # torchrun's failure table in every restart: its 60-character rules are the longest
        [line[:60] for line in TORCHRUN_TABLE * 3],
        # tqdm bars of a fixed width (ncols=100), one per line where the output is no terminal
        [
            f"Epoch {epoch}: {pct:3d}%|{'#' * (pct // 5):<20}| {pct:3d}/100 [00:{pct % 100:02d}<00:10, 9.9it/s, loss=2.31]"
            for epoch in range(3)
            for pct in range(0, 101, 10)
        ],
        # every rank's watchdog message, of one length, each followed by the next rank's
        [
            f"[rank{rank}]:[E ProcessGroupNCCL.cpp:577] [Rank {rank}] Some NCCL operations have failed or timed out."
            for rank in range(8)
        ],
        # srun --label: every task's NCCL init line, of one length (init.cc's format)
        [
            f"{rank}: node1:{4600 + rank}:{4640 + rank} [{rank % 4}] NCCL INFO ncclCommInitRank"
            f" comm 0x55d5a0e50 rank {rank} nranks 8 cudaDev {rank % 4} - Init COMPLETE"
            for rank in range(8)
        ],
        # py-spy dump of every process (dump.rs): one templated header line, the longest,
        # each followed by the interpreter's line (a record of its own, not a continuation)
        [
            line
            for pid in range(41231, 41235)
            for line in (
                f"Process {pid}: /usr/bin/python3.10 -u train.py --config configs/gpt_350m.yaml",
                "Python v3.10.12 (/usr/bin/python3.10)",
                f'Thread {pid} (idle): "MainThread"',
            )
        ],
        # a borderless table (f"{key:<100}{value:>20}", a summary printed after each epoch)
        BORDERLESS_TABLE,
        # a drawn table (rich, tabulate) whose rows all have the table's width
        [
            "+" + "-" * 70 + "+",
            *(
                f"| rank {rank} | step 1000 | loss 2.31{rank} |".ljust(71) + "|"
                for rank in range(8)
            ),
            "+" + "-" * 70 + "+",
        ],
    ],
)
def test_lines_of_one_length_that_are_whole_records_stay(lines: list[str]) -> None:
    text = "".join(f"{line}\n" for line in ["starting", *lines, "done"])
    assert rejoined(text) == text


def test_an_exception_after_a_borderless_table_is_found(tmp_path: Path) -> None:
    """The table's rows, the log's longest lines, stay rows: the line after the last one is
    the exception's own, not the rest of a row."""
    log = tmp_path / "train.log"
    log.write_text(
        "".join(f"{line}\n" for line in [*BORDERLESS_TABLE, "AssertionError: loss is nan"])
    )
    analysis = analyze_log(log)
    assert (analysis.decision, analysis.primary[0].nature) == (Decision.STOP, Nature.EXCEPTION)


def test_opens_with_answers_as_opening_does() -> None:
    """The hard wrap's fast check of a line's first wrapper gives ``opening``'s answer for any
    set of kinds: whole lines and the pieces a wrap cuts them into."""
    records = [*SLURM_TIME_LIMIT, *CLEAN_RUN, *TORCHRUN_TABLE, *BORDERLESS_TABLE]
    lines = [*records, *hard_wrapped(records, 60).split("\n")]
    kinds = frozenset(opening(line) for line in lines)
    for among in [*(frozenset({kind}) for kind in kinds), kinds, kinds - {None}]:
        for line in lines:
            kind = opening(line)
            assert opens_with(line, among) is (kind is not None and kind in among), line


# --- peeling once per shape ------------------------------------------------------------------


def test_the_grammar_reads_digits_only_as_a_class() -> None:
    """What makes peeling once per shape exact: no token kind, and no separator, reads a
    digit's value (a literal digit, a range of some digits, a back-reference)."""
    assert all(line_wrappers.digit_blind(pattern) for pattern, _ in line_wrappers._TOKENS)
    assert line_wrappers.digit_blind(line_wrappers._SEPARATOR)


@pytest.mark.parametrize(
    ("pattern", "blind"),
    [
        (r"\d{4}-\d{2}", True),
        (r"[A-Za-z0-9_.-]+:(?=\s)", True),
        (r"\[rank\d+\]:", True),
        (r"exit code 1", False),
        (r"[0-3][0-7]", False),
        (r"(\d)\1", False),
        (r"(?:a|[^0])", False),
        (r"x(?=.*[5-9])", False),
    ],
)
def test_digit_blind_tells_a_digit_class_from_a_digits_value(pattern: str, blind: bool) -> None:
    assert line_wrappers.digit_blind(re.compile(pattern)) is blind


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            "[rank3]: [2026-11-29 10:00:00,000] [INFO] [metrics.py:88] step 1 | loss 0.12",
            "[rank5]: [2026-12-01 17:42:09,512] [INFO] [metrics.py:91] step 7 | loss 9.87",
        ),
        (
            "[1,3]<stderr>:n17-gpu: RuntimeError: boom",
            "[1,5]<stderr>:n42-gpu: RuntimeError: boom",
        ),
        (
            "12: Dec 07 10:00:01 node-3 trainer[4412]: ok",
            "34: Dec 19 23:59:59 node-8 trainer[9981]: ok",
        ),
    ],
)
def test_a_line_peels_alike_after_another_of_its_shape(first: str, second: str) -> None:
    line_wrappers._PEELINGS.clear()
    alone = peel_line(second)
    line_wrappers._PEELINGS.clear()
    peel_line(first)  # the shape's peeling is worked out on the first line, replayed on the second
    assert peel_line(second) == alone
    assert len(line_wrappers._PEELINGS) == 1  # one shape: the second line was replayed
    assert alone.rank is not None or alone.labels
