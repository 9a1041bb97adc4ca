"""The FR perturbations on real dump sets (a frozen smoke run of this package's gloo job, and
the gloo fixtures): what each rewrite does to the files, which rank it hits, where it does not
apply, and that the built-in FR analyzer names the same culprits afterwards."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest

from pytest_faultloop.analyzers import analyze_fr
from pytest_faultloop.analyzers.fr.safe_pickle import load_plain
from pytest_faultloop.inputs.cases import load_case
from pytest_faultloop.inputs.perturb.catalogue import CATALOGUE, compositions
from pytest_faultloop.inputs.perturb.copies import not_applicable, perturb_dumps, perturbed_copy
from pytest_faultloop.inputs.perturb.fr_rewrites import FR_PERTURBATIONS, dump_subject, rank_files
from pytest_faultloop.inputs.perturb.perturbation import NotApplicable, Subject

HERE = Path(__file__).parent
FROZEN = HERE / "fixtures" / "frozen" / "smoke"
GLOO = HERE / "fixtures" / "fr"
WITH_DUMPS = ("n2_GPU_SLEEP_r1_i5", "n2_SIGKILL_r1_i5", "n2_SIGTERM_r3_i5", "n2_WORKLOAD_EXC_r0_i5")
CULPRIT = {
    "n2_GPU_SLEEP_r1_i5": 1,
    "n2_SIGKILL_r1_i5": 1,
    "n2_SIGTERM_r3_i5": 3,
    "n2_WORKLOAD_EXC_r0_i5": 0,
}


def _perturbed(case: str, name: str, tmp_path: Path) -> Path:
    return perturb_dumps(
        FROZEN / case / "checkpoints",
        tmp_path / name,
        compositions(name)[0],
        (CULPRIT[case],),
        4,
    )


@pytest.mark.parametrize("case", WITH_DUMPS)
@pytest.mark.parametrize("name", [p.name for p in FR_PERTURBATIONS])
def test_the_culprit_survives_every_fr_perturbation_that_applies(
    case: str, name: str, tmp_path: Path
) -> None:
    experiment = load_case(FROZEN / case, "smoke", default_gpus_per_node=4)
    if not_applicable(compositions(name)[0], experiment, FROZEN / case / "checkpoints"):
        with pytest.raises(NotApplicable):
            _perturbed(case, name, tmp_path)
        return
    before = analyze_fr(FROZEN / case / "checkpoints")
    after = analyze_fr(_perturbed(case, name, tmp_path))
    assert before.suspects == after.suspects == [CULPRIT[case]]


def test_the_bystander_is_the_last_rank_off_the_culprits_nodes() -> None:
    assert Subject(frozenset(range(8)), (1,), 4).bystander == 7
    assert Subject(frozenset(range(8)), (5,), 4).bystander == 3
    assert Subject(frozenset(range(4)), (3,), 4).bystander == 2  # one node: the last other
    with pytest.raises(NotApplicable):
        Subject(frozenset({1}), (1,), 4).bystander  # noqa: B018


def test_what_each_rewrite_does_to_the_files(tmp_path: Path) -> None:
    case = "n2_GPU_SLEEP_r1_i5"  # rank 1 hung; every rank dumped
    source = rank_files(FROZEN / case / "checkpoints")
    missing = rank_files(_perturbed(case, "fr-missing", tmp_path))
    assert sorted(missing) == [0, 1, 2, 3, 4, 5, 6]
    truncated = rank_files(_perturbed(case, "fr-truncated", tmp_path))
    assert truncated[7].stat().st_size == source[7].stat().st_size // 2
    empty = rank_files(_perturbed(case, "fr-empty", tmp_path))
    with empty[7].open("rb") as stream:
        assert load_plain(stream)["entries"] == []
    unsafe = rank_files(_perturbed(case, "fr-unsafe", tmp_path))
    assert b"collections" in unsafe[7].read_bytes()
    assert pickle.loads(unsafe[7].read_bytes()) == pickle.loads(source[7].read_bytes())
    culprit = rank_files(_perturbed(case, "fr-culprit-truncated", tmp_path))
    assert culprit[1].stat().st_size == source[1].stat().st_size // 2
    named = sorted(p.name for p in _perturbed(case, "fr-hostnames", tmp_path).iterdir())
    assert named[0] == "_dump_gpu-node-000_0" and named[-1] == "_dump_gpu-node-001_7"
    assert analyze_fr(tmp_path / "fr-hostnames", pattern="_dump_*").dumps_read == 8


def test_where_the_fr_rewrites_do_not_apply() -> None:
    killed = dump_subject(FROZEN / "n2_SIGKILL_r1_i5" / "checkpoints", (1,), 4)
    assert 1 not in killed.dump_ranks  # the SIGKILLed rank wrote no dump
    why = CATALOGUE["fr-missing"].applies(killed)  # type: ignore[union-attr]
    assert why and "a second missing dump is ambiguous" in why
    assert CATALOGUE["fr-culprit-truncated"].applies(killed) == "no culprit left a dump"  # type: ignore[union-attr]
    assert (
        compositions("fr-missing")[0].not_applicable(None) == "fr-missing: no flight-recorder dumps"
    )
    unknown = dump_subject(GLOO / "gloo_tp_hang", None, 2)
    assert "culprit is unknown" in (CATALOGUE["fr-truncated"].applies(unknown) or "")  # type: ignore[union-attr]


def test_perturbed_copy_of_a_case_and_of_a_dump_directory(tmp_path: Path) -> None:
    copy = perturbed_copy(
        FROZEN / "n2_GPU_SLEEP_r1_i5", tmp_path / "case", compositions("ts+fr-missing")[0], None, 4
    )
    assert (tmp_path / "case" / "case.toml").is_file()
    assert sorted(rank_files(tmp_path / "case" / "checkpoints")) == [0, 1, 2, 3, 4, 5, 6]
    assert any(p.suffix == ".log" for p in copy.written)
    shutil.copytree(GLOO / "gloo_tp_hang", tmp_path / "dumps")
    perturbed_copy(tmp_path / "dumps", tmp_path / "out", compositions("fr-truncated")[0], (1,), 2)
    assert analyze_fr(tmp_path / "out").suspects == [1]
    with pytest.raises(NotApplicable, match="no dump directory here"):
        perturbed_copy(
            FROZEN / "n2_GPU_SLEEP_r1_i5" / "logs",
            tmp_path / "x",
            compositions("fr-empty")[0],
            (1,),
            4,
        )


def test_spoiling_a_culprits_dump_and_an_innocents_at_once_never_applies() -> None:
    """GPU_ERROR-like: the culprit's dump truncated and an innocent's lost leave two ranks no
    dump tells apart (their groups finished the same collectives): not truth-preserving."""
    subject = dump_subject(FROZEN / "n2_GPU_SLEEP_r1_i5" / "checkpoints", (1,), 4)
    for bystander in ("fr-missing", "fr-truncated", "fr-empty", "fr-unsafe"):
        (both,) = compositions(f"{bystander}+fr-culprit-truncated")
        assert "spoils a culprit's dump and an innocent's at once" in (
            both.not_applicable(subject) or ""
        )
    assert compositions("fr-hostnames+fr-culprit-truncated")[0].not_applicable(subject) is None
