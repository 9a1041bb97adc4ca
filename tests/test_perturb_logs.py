"""Each log perturbation on a real excerpt (cases of the public corpus, copied verbatim from
their threads): the tool's documented line format, the same bytes every time, every line of the
job kept in order, and the built-in analyzer's answer unchanged."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_log
from pytest_faultloop.analyzers.log.line_wrappers import strip_escapes
from pytest_faultloop.inputs.perturb.catalogue import CATALOGUE, compositions
from pytest_faultloop.inputs.perturb.copies import perturb_log
from pytest_faultloop.inputs.perturb.log_rewrites import LOG_PERTURBATIONS
from pytest_faultloop.inputs.perturb.perturbation import Composition
from pytest_faultloop.models.errors import ConfigError

CORPUS = Path(__file__).resolve().parents[1] / "experiments" / "corpus" / "public"
EXCERPTS = {
    "pt152623_desync_rank7": "a PyTorch desync report (c10 headers, indented lines)",
    "ms6301_oom_rank11": "an OOM traceback behind [rank11]: prefixes",
    "hvd1442_stall_rank6": "mpirun --tag-output tags and Horovod's stall list",
    "egovlp21_sigkill_rank3": "torchrun's worker failure line",
}
FORMATS = {
    "ts": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ",
    "cri": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z std(?:out|err) [PF] ",
    "asctime": r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ",
    "pylog": r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - relay - INFO - ",
    "syslog": r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d gpu-node-017 python3\[12345\]:",
    "journald": r"[A-Z][a-z]{2} \d\d \d\d:\d\d:\d\d gpu-node-017 python3\[12345\]: ",
    "pdsh": r"gpu-node-017: ",
    "kubectl": r"\[pod/trainer-worker-0/pytorch\] ",
    "compose": r"trainer-1  \| ",
    "ray": r"\x1b\[36m\(RayTrainWorker pid=12345, ip=10\.0\.0\.2\)\x1b\[0m ",
    "skypilot": r"\(worker1, rank=1, pid=5678, ip=10\.0\.0\.2\) ",
    "loki": r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \{container="pytorch", pod="trainer-worker-0"\} ',
    "aws": r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00 trainer/pytorch/0a1b2c3d ",
    "mpirun-ts": r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}<std(?:out|err)>:",
}


def _log(case: str) -> Path:
    (log,) = sorted((CORPUS / case / "logs").iterdir())
    return log


def _answer(path: Path) -> tuple[object, ...]:
    analysis = analyze_log(path)
    return (
        analysis.decision,
        analysis.cause,
        [(i.rank, i.nature) for i in analysis.primary],
        [(i.rank, i.nature) for i in analysis.secondary],
    )


@pytest.mark.parametrize("case", EXCERPTS)
@pytest.mark.parametrize("perturbation", [p.name for p in LOG_PERTURBATIONS])
def test_a_perturbed_real_log_gets_the_same_answer(
    case: str, perturbation: str, tmp_path: Path
) -> None:
    source = _log(case)
    composition = Composition((CATALOGUE[perturbation],))
    first = perturb_log(source, tmp_path / "a.log", composition)
    again = perturb_log(source, tmp_path / "b.log", composition)
    assert first.read_bytes() == again.read_bytes()  # deterministic
    assert first.read_bytes() != source.read_bytes()
    assert _answer(first) == _answer(source)


@pytest.mark.parametrize(("name", "pattern"), FORMATS.items())
def test_each_prefix_is_the_tools_documented_format(
    name: str, pattern: str, tmp_path: Path
) -> None:
    source = _log("ms6301_oom_rank11")
    out = perturb_log(source, tmp_path / "out.log", Composition((CATALOGUE[name],)))
    original = source.read_bytes().decode().splitlines()
    lines = out.read_bytes().decode().splitlines()
    assert len(lines) == len(original)
    for before, after in zip(original, lines, strict=True):
        prefix = re.match(pattern, after)
        assert prefix, (name, after[:120])
        kept = after[prefix.end() :]
        if name == "loki":
            assert kept == before.strip()  # logcli trims each line
        elif name == "aws":
            assert kept == before.rstrip()
        else:
            assert kept.lstrip() == before.lstrip()


def test_syslog_escapes_control_characters_and_journald_expands_tabs(tmp_path: Path) -> None:
    source = tmp_path / "tabs.log"
    source.write_bytes(b"step 10\tloss=0.5\r\n\x1b[31mERROR\x1b[0m x\n")
    syslog = perturb_log(source, tmp_path / "s.log", compositions("syslog")[0]).read_bytes()
    assert b"python3[12345]: step 10#011loss=0.5\n" in syslog
    assert b"#033[31mERROR#033[0m x" in syslog
    journald = perturb_log(source, tmp_path / "j.log", compositions("journald")[0]).read_bytes()
    assert b"python3[12345]: step 10        loss=0.5\n" in journald
    assert b"python3[12345]: ERROR x\n" in journald


def test_colour_crlf_and_progress_keep_every_character(tmp_path: Path) -> None:
    source = _log("pt152623_desync_rank7")
    original = source.read_bytes().splitlines()
    coloured = perturb_log(source, tmp_path / "c.log", compositions("ansi")[0])
    assert b"\x1b[01;31m\x1b[KTimeout\x1b[m\x1b[K" in coloured.read_bytes()
    plain = [strip_escapes(line.decode()).encode() for line in coloured.read_bytes().splitlines()]
    assert plain == original
    crlf = perturb_log(source, tmp_path / "r.log", compositions("crlf")[0]).read_bytes()
    assert crlf.split(b"\r\n")[:-1] == original
    progress = perturb_log(source, tmp_path / "p.log", compositions("progress")[0]).read_bytes()
    kept = [
        line.rsplit(b"]", 1)[-1] if b"it/s]" in line else line for line in progress.split(b"\n")
    ]
    assert all(line in kept or line in progress for line in original)
    assert b"\rtrain:" in progress and progress.count(b"\n") > len(original)


def test_a_line_over_16_kib_becomes_cri_partial_records(tmp_path: Path) -> None:
    source = tmp_path / "long.log"
    source.write_bytes(b"x" * 40000 + b"\nend\n")
    lines = (
        perturb_log(source, tmp_path / "o.log", compositions("cri")[0]).read_bytes().splitlines()
    )
    tags = [line.split(b" ")[2] for line in lines]
    assert tags == [b"P", b"P", b"F", b"F"]
    assert b"".join(line.split(b" ", 3)[3] for line in lines[:3]) == b"x" * 40000


def test_compositions_apply_left_to_right_and_bad_names_list_the_catalogue() -> None:
    (composition,) = compositions("ts+kubectl")
    lines = list(composition.rewrite_lines(iter([b"[rank0]: boom"])))
    assert re.match(rb"\[pod/trainer-worker-0/pytorch\] \d{4}-\d\d-\d\dT", lines[0])
    assert [c.name for c in compositions("ts,ansi+crlf,ts")] == ["ts", "ansi+crlf"]
    assert len(compositions("all")) == len(CATALOGUE)
    with pytest.raises(ConfigError, match=r"unknown perturbation 'tss'; choose from ts, cri"):
        compositions("tss")
    with pytest.raises(ConfigError, match="names a perturbation twice"):
        compositions("ts+ts")
    with pytest.raises(ConfigError, match="empty"):
        compositions("ts,")


@pytest.mark.parametrize("perturbation", ["ts", "pdsh", "journald", "cri"])
def test_srun_labels_behind_a_collectors_prefix_still_name_the_ranks(
    perturbation: str, tmp_path: Path
) -> None:
    """srun --label output (a synthetic edge case: the corpus holds no real one) whose labels
    are the only rank marks: behind a timestamp or host they are found as before."""
    source = Path(__file__).parent / "fixtures/logs/synthetic/srun_label_segfault_rank3.log"
    out = perturb_log(source, tmp_path / "o.log", compositions(perturbation)[0])
    assert _answer(out) == _answer(source)
    assert analyze_log(out).primary[0].rank == 3
