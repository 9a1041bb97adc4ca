"""Pool entries on several ranks (``GPU_ERROR:12+14@3:5:4``) and NODE_KILL: parsing, bad forms,
what is stored, frozen cases, and how reports and the TSV show them."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from support.fake_stages import make_project
from support.report_samples import make_result
from support.sessions import only_session
from support.verdicts import labels

from pytest_faultloop.inputs.cases import CaseError, load_case
from pytest_faultloop.inputs.freeze import freeze_session
from pytest_faultloop.inputs.pool import PoolRules, parse_pool
from pytest_faultloop.jobs.backends.protocol import job_environment
from pytest_faultloop.models import (
    Artifacts,
    Experiment,
    ExperimentResult,
    FaultMarker,
    Job,
    JobState,
    PoolEntry,
)
from pytest_faultloop.models.errors import PoolError
from pytest_faultloop.models.fault_ranks import FaultTarget, parse_fault_ranks
from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.report.markdown import render_row
from pytest_faultloop.store.session_dir import SessionDir

RULES = PoolRules(gpus_per_node=4, min_nodes=1, workload="tiny_gloo")


def entry(token: str) -> PoolEntry:
    (pooled,) = parse_pool(token, "t.pool", RULES)
    return pooled.entry


def test_several_ranks_with_offsets_parse_in_order() -> None:
    assert parse_fault_ranks("12+14@3") == (FaultTarget(rank=12), FaultTarget(rank=14, offset_s=3))
    e = entry("GPU_ERROR:12+14@3:5:4")
    assert (e.rank, e.ranks, e.rank_text) == (12, (12, 14), "12+14@3")
    assert e.key == "GPU_ERROR:12+14@3:5:4"
    assert e.dirname == "n4_GPU_ERROR_r12+14at3_i5"
    assert entry("GPU_ERROR:12@1.50+14:5:4").key == "GPU_ERROR:12@1.5+14:5:4"
    assert entry("SIGKILL:1+6:5:2").dirname == "n2_SIGKILL_r1+6_i5"


def test_one_rank_keeps_its_key_dirname_and_stored_form() -> None:
    e = entry("GPU_SLEEP:1:5:2")
    assert (e.key, e.dirname, e.rank_text, e.targets) == (
        "GPU_SLEEP:1:5:2",
        "n2_GPU_SLEEP_r1_i5",
        "1",
        (),
    )
    assert e.model_dump_json() == '{"fault":"GPU_SLEEP","rank":1,"iter":5,"nodes":2}'
    assert entry("GPU_SLEEP:1@0:5:2") == e  # a zero offset is no offset
    stored = '{"fault":"SIGKILL","rank":3,"iter":5,"nodes":4}'
    assert PoolEntry.model_validate_json(stored).model_dump_json() == stored
    several = entry("GPU_ERROR:12+14@3:5:4")
    assert PoolEntry.model_validate_json(several.model_dump_json()) == several


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("GPU_ERROR:12+12:5:4", "rank 12 is listed twice in '12+12': list each rank once"),
        ("GPU_ERROR:14+12:5:4", "rank 12 in '14+12' is out of order: list ranks in ascending"),
        ("GPU_ERROR:12+14@-3:5:4", "offset '-3' of rank 14 in '12+14@-3' must be a non-negative"),
        ("GPU_ERROR:12+14@soon:5:4", "offset 'soon' of rank 14 in '12+14@soon' must be"),
        ("GPU_ERROR:12++14:5:4", "rank '' in '12++14' is not a non-negative integer; write ranks"),
        ("GPU_ERROR:1+x:5:4", "rank 'x' in '1+x' is not a non-negative integer"),
        ("GPU_ERROR:12+16:5:4", "rank 16 is outside [0, 16) for 4 node(s) x GPUS_PER_NODE=4"),
        ("NODE_KILL:1+2:5:2", "NODE_KILL ranks 1+2 share a node (GPUS_PER_NODE=4): name one rank"),
        ("GPU_ERROR:x:5:4", "RANK must be a non-negative integer, got 'x'"),
    ],
)
def test_bad_rank_lists_name_the_place_the_value_and_the_fix(token: str, message: str) -> None:
    with pytest.raises(PoolError) as error:
        parse_pool(f"# comment\nGPU_SLEEP:1:5:4  {token}\n", "experiments/m.pool", RULES)
    assert str(error.value).startswith(f"experiments/m.pool:2: {token!r}: {message}")
    assert "\n" not in str(error.value)


def test_the_same_rank_list_twice_is_a_duplicate_entry() -> None:
    with pytest.raises(PoolError, match=r"m.pool:2: 'SIGKILL:1\+6:5:2': duplicate entry"):
        parse_pool("SIGKILL:1+6:5:2\nSIGKILL:1+6:5:2", "m.pool", RULES)


def test_the_shipped_multi_pool_is_valid() -> None:
    text = (Path(__file__).resolve().parents[1] / "experiments" / "multi.pool").read_text()
    keys = [p.entry.key for p in parse_pool(text, "multi.pool", RULES)]
    assert "GPU_ERROR:1+2:5:2" in keys and "NODE_KILL:1:5:2" in keys and "NODE_KILL:5:5:2" in keys
    assert any("@" in key for key in keys)


def test_the_job_gets_the_rank_list_as_fault_rank(tmp_path: Path) -> None:
    env = job_environment(entry("GPU_ERROR:12+14@3:5:4"), tmp_path, 4)
    assert (env["FAULT_TYPE"], env["FAULT_RANK"]) == ("GPU_ERROR", "12+14@3")
    assert job_environment(entry("SIGKILL:3:5:2"), tmp_path, 4)["FAULT_RANK"] == "3"


# --- reports ----------------------------------------------------------------------------------


def placed(token: str) -> Experiment:
    return Experiment(
        entry=entry(token), workload="tiny_gloo", gpus_per_node=4, pool="m", source="m", line=1
    )


def test_the_rank_column_shows_the_set_and_a_lost_node() -> None:
    assert placed("GPU_ERROR:12+14@3:5:4").columns == ("GPU_ERROR", "4", "12+14@3", "5")
    assert placed("NODE_KILL:5:5:2").columns == ("NODE_KILL", "2", "5 (node 1)", "5")
    assert placed("NODE_KILL:1+9:5:3").columns == ("NODE_KILL", "3", "1+9 (nodes 0+2)", "5")
    assert placed("SIGKILL:1:5:2").columns == ("SIGKILL", "2", "1", "5")
    result = make_result(FaultType.GPU_ERROR, 1, scores=labels(rank_primary="partial"))
    result = result.model_copy(update={"experiment": placed("GPU_ERROR:1+2:5:2")})
    assert render_row(1, result).startswith("| 1 | GPU_ERROR | 2 | 1+2 | 5 | 1850 | FAILED |")


def test_tsv_and_html_show_the_rank_list(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_project(pytester, monkeypatch, pools={"m": "SIGKILL:1+6:5:2\nNODE_KILL:5:5:2"})
    result = pytester.runpytest(
        "experiments/", "--faultloop-pool=m", "--html=report.html", "--self-contained-html"
    )
    result.assert_outcomes(passed=10)
    session = only_session(base)
    rows = [r.split("\t")[1:5] for r in (session / "experiments.tsv").read_text().splitlines()]
    assert sorted(rows[1:]) == [["NODE_KILL", "5", "5", "2"], ["SIGKILL", "1+6", "5", "2"]]
    report = (session / "experiments_report.md").read_text()
    assert "| SIGKILL | 2 | 1+6 | 5 |" in report and "| NODE_KILL | 2 | 5 (node 1) | 5 |" in report
    html = (pytester.path / "report.html").read_text()
    assert "1+6" in html and "5 (node 1)" in html
    assert (session / "n2_SIGKILL_r1+6_i5" / "result.json").is_file()


# --- stored results and frozen cases -----------------------------------------------------------


def test_a_frozen_multi_rank_run_keeps_its_rank_list_and_markers(tmp_path: Path) -> None:
    session = tmp_path / "fault_injection" / "20261201_120000"
    experiment = placed("SIGSTOP:1+6@1:5:2")
    directory = session / experiment.dirname
    (directory / "logs" / "slurm").mkdir(parents=True)
    log = directory / "logs" / "slurm" / "7.0.1.main_workload.log"
    log.write_text("[rank0]: boom\n")
    markers = [
        FaultMarker(fault=FaultType.SIGSTOP, rank=r, node=r // 4, iteration=5, armed_at=1, pid=r)
        for r in (1, 6)
    ]
    (directory / "fault_injection.json").write_text(markers[0].model_dump_json())
    (directory / "fault_injection.rank6.json").write_text(markers[1].model_dump_json())
    artifacts = Artifacts(
        experiment_dir=directory,
        log=log,
        fr_dir=directory / "checkpoints",
        marker=markers[0],
        rank_markers=markers[1:],
    )
    job = Job(job_id="7", backend="local", state=JobState.FAILED, experiment_dir=directory)
    result = ExperimentResult(experiment=experiment, job=job, artifacts=artifacts)
    SessionDir(session, "# report\n").write_result(result)
    stored = json.loads((directory / "result.json").read_text())
    assert [m["rank"] for m in stored["artifacts"]["rank_markers"]] == [6]

    (case,) = freeze_session(session, tmp_path / "frozen").written
    data = tomllib.loads((case / "case.toml").read_text())
    assert data["injected"]["rank"] == "1+6@1"
    assert sorted(p.name for p in case.glob("fault_injection*")) == [
        "fault_injection.json",
        "fault_injection.rank6.json",
    ]
    assert load_case(case, "frozen", default_gpus_per_node=4).entry == experiment.entry


def test_a_single_rank_result_stores_no_rank_markers(tmp_path: Path) -> None:
    artifacts = Artifacts(experiment_dir=tmp_path, fr_dir=tmp_path)
    assert "rank_markers" not in artifacts.model_dump_json()


def test_a_case_with_a_bad_rank_list_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "job.log").write_text("x\n")
    (tmp_path / "case.toml").write_text(
        '[injected]\nfault_type = "SIGKILL"\nrank = "6+1"\niter = 5\nnodes = 2\n'
    )
    with pytest.raises(CaseError, match=r"case.toml:3: rank 1 in '6\+1' is out of order"):
        load_case(tmp_path, "c", default_gpus_per_node=4)
