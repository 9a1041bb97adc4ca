"""Stored cases: case.toml parsing, every bad-case message, and scoring against acceptable sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_faultloop.inputs.cases import CaseError, load_case
from pytest_faultloop.models import (
    Decision,
    FrAnalysis,
    Issue,
    LogAnalysis,
    Truth,
)
from pytest_faultloop.models.faults import FaultType, Nature
from pytest_faultloop.scoring.judges import JudgeCase
from pytest_faultloop.scoring.judges.deterministic import DeterministicJudge
from pytest_faultloop.scoring.restart_policy import load_policy

GOOD = """\
id = "pt1_ecc_rank12"
source = "https://example.invalid/thread/1"
notes = "the maintainer's diagnosis"
[job]
world_size = 16
gpus_per_node = 8
[truth]
culprit = [12]
nature = ["gpu_error"]
decision = "STOP"
"""


def make_case(
    root: Path,
    toml: str,
    *,
    log: str | None = "[rank12]: boom\n",
    dumps: bool = False,
    name: str = "case1",
) -> Path:
    directory = root / "corpus" / name
    (directory / "logs").mkdir(parents=True)
    (directory / "case.toml").write_text(toml)
    if log is not None:
        (directory / "logs" / "job.log").write_text(log)
    if dumps:
        (directory / "checkpoints").mkdir()
        (directory / "checkpoints" / "_dump_0").write_bytes(b"x")
    return directory


def load(directory: Path):  # type: ignore[no-untyped-def]
    return load_case(directory, "corpus", default_gpus_per_node=4)


def test_a_real_incident_case_becomes_a_replayed_experiment(tmp_path: Path) -> None:
    experiment = load(make_case(tmp_path, GOOD, dumps=True))
    case = experiment.case
    assert case is not None and experiment.entry is None
    assert (experiment.key, experiment.dirname, case.corpus) == ("pt1_ecc_rank12",) * 2 + (
        "corpus",
    )
    assert case.truth == Truth(
        culprit=[12], natures=[Nature.GPU_ERROR], decision=Decision.STOP, fr_culprit=[12]
    )
    assert experiment.gpus_per_node == 8 and experiment.world_size == 16
    assert experiment.columns == ("REAL", "2", "12", "-")
    assert [p.name for p in case.logs] == ["job.log"]


def test_without_dumps_fr_is_not_scored_and_the_id_defaults_to_the_directory(
    tmp_path: Path,
) -> None:
    toml = GOOD.replace('id = "pt1_ecc_rank12"\n', "")
    experiment = load(make_case(tmp_path, toml, name="from_dir"))
    assert experiment.key == "from_dir"
    assert experiment.case is not None and experiment.case.truth is not None
    assert experiment.case.truth.fr_culprit is None


def test_a_frozen_injected_case_keeps_its_pool_entry(tmp_path: Path) -> None:
    toml = (
        'source = "session s, job 1"\n[job]\ngpus_per_node = 2\n'
        '[injected]\nfault_type = "SIGKILL"\nrank = 3\niter = 5\nnodes = 2\n'
    )
    experiment = load(make_case(tmp_path, toml))
    assert experiment.entry is not None and experiment.entry.fault is FaultType.SIGKILL
    assert experiment.case is not None and experiment.case.truth is None
    assert experiment.world_size == 4 and experiment.columns == ("SIGKILL", "2", "3", "5")


@pytest.mark.parametrize(
    ("toml", "log", "message"),
    [
        (GOOD + "colour = 1\n", "x\n", "case.toml:11: unknown key 'colour' in [truth]"),
        (
            GOOD.replace("[job]", "oops = 2\n[job]"),
            "x\n",
            "case.toml:4: unknown key 'oops' in the top level",
        ),
        ('source = "s"\nnotes = "no truth"\n', "x\n", "no [truth] and no [injected] table"),
        (
            GOOD.replace('["gpu_error"]', '["gpu_fire"]'),
            "x\n",
            "case.toml:9: unknown nature 'gpu_fire'",
        ),
        (GOOD.replace('nature = ["gpu_error"]\n', ""), "x\n", "case.toml:7: [truth] needs nature"),
        (
            GOOD.replace('"STOP"', '"REBOOT"'),
            "x\n",
            "case.toml:10: decision 'REBOOT' must be one of",
        ),
        (
            GOOD.replace("[12]", "[16]"),
            "x\n",
            "case.toml:8: culprit [16] lies outside the job's 16 ranks",
        ),
        (
            GOOD.replace("[12]", '["12"]'),
            "x\n",
            "case.toml:8: culprit must be a list of global ranks",
        ),
        (
            GOOD.replace('source = "https://example.invalid/thread/1"\n', ""),
            "x\n",
            "'source' is required for a real incident",
        ),
        (GOOD, None, "no log: put the log file(s) under"),
        (GOOD.replace("pt1_ecc_rank12", "bad id!"), "x\n", "case.toml:1: id 'bad id!' must be"),
        ("[truth\n", "x\n", "not valid TOML"),
        (
            '[injected]\nfault_type = "GPU_MELT"\nrank = 1\niter = 5\nnodes = 2\n',
            "x\n",
            "case.toml:2: unknown fault type 'GPU_MELT'",
        ),
        ('[injected]\nfault_type = "SIGKILL"\n', "x\n", "[injected] needs rank, iter, nodes"),
    ],
)
def test_bad_cases_name_the_file_line_and_key(
    tmp_path: Path, toml: str, log: str | None, message: str
) -> None:
    directory = make_case(tmp_path, toml, log=log)
    with pytest.raises(CaseError) as caught:
        load(directory)
    assert message in str(caught.value)
    assert str(directory / "case.toml") in str(caught.value) or "logs" in str(caught.value)


def test_a_checkpoints_file_instead_of_a_directory_is_refused(tmp_path: Path) -> None:
    directory = make_case(tmp_path, GOOD)
    (directory / "checkpoints").write_text("not a dir")
    with pytest.raises(CaseError, match="checkpoints: not a directory"):
        load(directory)


# --- scoring against acceptable sets -------------------------------------------------------------


def judge(
    tmp_path: Path,
    truth: str,
    primary: list[Issue],
    *,
    text: str = "",
    secondary: list[Issue] | None = None,
    suspects: list[int] | None = None,
    dumps: bool = True,
    decision: Decision = Decision.STOP,
) -> dict[str, str]:
    toml = f'source = "s"\n[job]\nworld_size = 32\ngpus_per_node = 4\n[truth]\n{truth}\n'
    experiment = load(make_case(tmp_path, toml, dumps=dumps))
    analysis = LogAnalysis(
        analyzer="t",
        decision=decision,
        decision_text=decision.value,
        primary=primary,
        secondary=secondary or [],
        attribution_text=text,
    )
    fr = FrAnalysis(analyzer="t", suspects=suspects or [], dumps_read=3 if dumps else 0)
    case = JudgeCase(
        experiment=experiment,
        log_analysis=analysis,
        fr_analysis=fr,
        log_tail="",
        gpus_per_node=4,
        segment_size=16,
    )
    verdict = DeterministicJudge(load_policy()).judge(case)
    return {
        d: verdict.value(d)
        for d in (
            "restart_correct",
            "rank_primary",
            "rank_any",
            "fault_described",
            "fr_rank_correct",
        )
    }


def issue(rank: int | None, nature: Nature = Nature.HANG, node: str | None = None) -> Issue:
    return Issue(rank=rank, nature=nature, node=node)


TWO = 'culprit = [9, 14]\nnature = ["hang"]\ndecision = "RESTART"'


def test_rank_primary_true_when_the_first_named_rank_is_acceptable(tmp_path: Path) -> None:
    got = judge(tmp_path, TWO, [issue(14), issue(3)], suspects=[9], decision=Decision.RESTART)
    assert got == {
        "restart_correct": "true",
        "rank_primary": "true",
        "rank_any": "true",
        "fault_described": "true",
        "fr_rank_correct": "rank",
    }


def test_rank_primary_partial_when_an_acceptable_rank_is_primary_but_not_first(
    tmp_path: Path,
) -> None:
    got = judge(tmp_path, TWO, [issue(3), issue(9)], suspects=[8, 9])
    assert (got["rank_primary"], got["rank_any"], got["fr_rank_correct"]) == (
        "partial",
        "true",
        "node",
    )
    assert got["restart_correct"] == "false"


def test_rank_primary_partial_for_the_culprits_node_and_false_for_another_rank(
    tmp_path: Path,
) -> None:
    on_node = judge(tmp_path, TWO, [issue(None, node="node3")])
    assert on_node["rank_primary"] == "partial" and on_node["rank_any"] == "false"
    other = judge(tmp_path / "b", TWO, [issue(5)], secondary=[issue(14)], suspects=[20])
    assert (other["rank_primary"], other["rank_any"], other["fr_rank_correct"]) == (
        "false",
        "true",
        "false",
    )


def test_no_single_culprit_passes_when_no_rank_is_blamed(tmp_path: Path) -> None:
    truth = 'culprit = []\nnature = ["scheduler"]\ndecision = "RESTART"'
    job_level = judge(
        tmp_path, truth, [issue(None, Nature.SCHEDULER, node="n1")], decision=Decision.RESTART
    )
    assert job_level == {
        "restart_correct": "true",
        "rank_primary": "true",
        "rank_any": "N/A",
        "fault_described": "true",
        "fr_rank_correct": "rank",
    }
    blamed = judge(tmp_path / "b", truth, [issue(3, Nature.SCHEDULER)], suspects=[3])
    assert (blamed["rank_primary"], blamed["fr_rank_correct"]) == ("false", "false")


def test_unknown_culprit_and_missing_data_skip(tmp_path: Path) -> None:
    got = judge(tmp_path, 'nature = ["network", "hang"]', [issue(2, Nature.NETWORK)], dumps=False)
    assert got == {
        "restart_correct": "N/A",
        "rank_primary": "N/A",
        "rank_any": "N/A",
        "fault_described": "true",
        "fr_rank_correct": "N/A",
    }


def test_fault_described_against_acceptable_natures(tmp_path: Path) -> None:
    truth = 'culprit = [9]\nnature = ["gpu_error", "exception"]'
    assert judge(tmp_path, truth, [issue(9, Nature.EXCEPTION)])["fault_described"] == "true"
    generic = judge(tmp_path / "b", truth, [issue(9, Nature.NONE)])["fault_described"]
    wrong = judge(tmp_path / "c", truth, [issue(9, Nature.HANG)])["fault_described"]
    assert (generic, wrong) == ("partial", "false")


def test_a_clean_case_is_a_control(tmp_path: Path) -> None:
    truth = 'culprit = []\nnature = ["none"]\ndecision = "CONTINUE"'
    quiet = judge(tmp_path, truth, [], decision=Decision.CONTINUE)
    assert quiet == {
        "restart_correct": "true",
        "rank_primary": "true",
        "rank_any": "true",
        "fault_described": "true",
        "fr_rank_correct": "rank",
    }
    alarm = judge(tmp_path / "b", truth, [issue(1, Nature.CRASH)])
    assert (alarm["rank_primary"], alarm["rank_any"], alarm["fault_described"]) == (
        "false",
        "false",
        "false",
    )
