"""The corpus's dev/test split: fixed by a hash of each case's source thread, recomputed here
so that no case can move, and refused on load when a case.toml records another side."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pytest_faultloop.inputs.case_split import source_thread, split_of
from pytest_faultloop.inputs.cases import CaseError, load_case

PUBLIC = Path(__file__).resolve().parents[1] / "experiments" / "corpus" / "public"
CASES = sorted(p.parent for p in PUBLIC.glob("*/case.toml"))


def test_the_public_corpus_has_its_cases() -> None:
    assert len(CASES) >= 150


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_case_records_the_split_its_source_thread_gives(case: Path) -> None:
    data = tomllib.loads((case / "case.toml").read_text())
    assert data.get("split") == split_of(data["source"]), f"{case.name}: split moved or missing"


def test_both_sides_are_large_enough_to_measure() -> None:
    sides = [split_of(tomllib.loads((c / "case.toml").read_text())["source"]) for c in CASES]
    assert min(sides.count("dev"), sides.count("test")) >= 0.35 * len(sides)


@pytest.mark.parametrize(
    ("url", "thread"),
    [
        (
            "https://github.com/pytorch/pytorch/issues/152623#issuecomment-2851234",
            "github.com/pytorch/pytorch/issues/152623",
        ),
        ("https://github.com/NVIDIA/nccl/issues/1405/", "github.com/nvidia/nccl/issues/1405"),
        (
            "https://github.com/facebookincubator/submitit/pull/1701/files",
            "github.com/facebookincubator/submitit/pull/1701",
        ),
        (
            "https://discuss.pytorch.org/t/nccl-timeout-on-rank-3/181234/7?u=x",
            "discuss.pytorch.org/t/181234",
        ),
        ("https://stackoverflow.com/questions/1234/a-title", "stackoverflow.com/questions/1234"),
    ],
)
def test_the_thread_ignores_anchors_pages_and_case(url: str, thread: str) -> None:
    assert source_thread(url) == thread


def test_two_cases_of_one_thread_fall_on_one_side() -> None:
    base = "https://github.com/horovod/horovod/issues/457"
    assert split_of(base) == split_of(base + "#issuecomment-1") == split_of(base.upper())


def test_a_case_that_records_the_other_side_is_refused_with_the_fix(tmp_path: Path) -> None:
    source = "https://github.com/pytorch/pytorch/issues/152623"
    wrong = "test" if split_of(source) == "dev" else "dev"
    case = tmp_path / "c1"
    (case / "logs").mkdir(parents=True)
    (case / "logs" / "a.log").write_text("x\n")
    (case / "case.toml").write_text(
        f'source = "{source}"\nsplit = "{wrong}"\n[truth]\nnature = ["hang"]\n'
    )
    with pytest.raises(CaseError, match=rf"case.toml:2: split '{wrong}' .*write split = "):
        load_case(case, "public", default_gpus_per_node=8)


def test_an_unknown_launcher_is_refused(tmp_path: Path) -> None:
    case = tmp_path / "c1"
    (case / "logs").mkdir(parents=True)
    (case / "logs" / "a.log").write_text("x\n")
    (case / "case.toml").write_text(
        'source = "https://x.org/1"\nlauncher = "slurmrun"\n[truth]\nnature = ["hang"]\n'
    )
    with pytest.raises(CaseError, match=r"case.toml:2: unknown launcher 'slurmrun' \(one of: "):
        load_case(case, "public", default_gpus_per_node=8)
