"""``python -m pytest_faultloop perturb`` (copies for tools outside pytest) and the
leaderboard's robustness column, run as a user runs them: a real process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.sessions import only_session

from pytest_faultloop.analyzers import analyze_fr
from pytest_faultloop.inputs.perturb.catalogue import CATALOGUE
from pytest_faultloop.inputs.perturb.fr_rewrites import rank_files

REPO = Path(__file__).resolve().parents[1]
CASE = REPO / "experiments" / "corpus" / "public" / "pt152623_desync_rank7"
FROZEN = REPO / "tests" / "fixtures" / "frozen" / "smoke"


def cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_faultloop", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_perturbed_copy_of_a_log_and_of_a_case(tmp_path: Path) -> None:
    (log,) = (CASE / "logs").iterdir()
    done = cli("perturb", log, "--with", "kubectl", "-o", tmp_path / "k.log")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "k.log").read_text().startswith("[pod/trainer-worker-0/pytorch] ")
    done = cli(
        "perturb", FROZEN / "n2_GPU_SLEEP_r1_i5", "--with", "ts,fr-missing", "-o", tmp_path / "c"
    )
    assert done.returncode == 0, done.stderr
    assert "ts: " in done.stdout and "fr-missing: " in done.stdout
    assert (tmp_path / "c" / "ts" / "case.toml").is_file()
    assert sorted(rank_files(tmp_path / "c" / "fr-missing" / "checkpoints")) == list(range(7))
    assert analyze_fr(tmp_path / "c" / "fr-missing" / "checkpoints").suspects == [1]


def test_an_experiment_directory_takes_its_culprit_from_its_fault_markers(tmp_path: Path) -> None:
    """A live run's experiment directory carries no case.toml: its fault_injection.json names
    the culprit, so a rewrite that needs an innocent rank applies to it."""
    experiment = tmp_path / "n2_GPU_SLEEP_r1_i5"
    shutil.copytree(FROZEN / experiment.name, experiment)
    (experiment / "case.toml").unlink()
    done = cli("perturb", experiment, "--with", "fr-missing", "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    dumps = tmp_path / "out" / "checkpoints"
    assert sorted(rank_files(dumps)) == list(range(7))  # rank 7 lost its dump, not culprit 1
    assert analyze_fr(dumps).suspects == [1]


def test_a_fault_marker_off_its_node_names_the_option_to_fix(tmp_path: Path) -> None:
    experiment = tmp_path / "n2_GPU_SLEEP_r1_i5"
    shutil.copytree(FROZEN / experiment.name, experiment)
    (experiment / "case.toml").unlink()
    done = cli(
        "perturb", experiment, "--with", "fr-missing", "-o", tmp_path / "out", "--gpus-per-node", 1
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"error: {experiment / 'fault_injection.json'}: rank 1 ran on node 0, not on node 1 as "
        "--gpus-per-node 1 places it; pass the job's --gpus-per-node\n"
    )


def test_a_corpus_copy_skips_the_cases_a_perturbation_cannot_apply_to(tmp_path: Path) -> None:
    done = cli("perturb", FROZEN, "--with", "fr-culprit-truncated", "-o", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "skipped" in done.stderr and "no culprit left a dump" in done.stderr
    assert (tmp_path / "out" / "n2_GPU_SLEEP_r1_i5" / "checkpoints").is_dir()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("x", "--with", "tss", "-o", "y"),
            "error: --with='tss': unknown perturbation 'tss'; choose from ts, ",
        ),
        ((CASE, "--with", "fr-missing", "-o", "y"), "fr-missing: no flight-recorder dumps"),
        (("nowhere", "--with", "ts", "-o", "y"), "error: nowhere: no such file or directory"),
        ((CASE,), "perturb needs SOURCE, --with NAMES and -o OUT"),
    ],
)
def test_bad_input_is_one_error_line(
    args: tuple[object, ...], message: str, tmp_path: Path
) -> None:
    done = cli("perturb", *args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_catalogue_lists_every_entry_with_its_tool_and_why() -> None:
    done = cli("perturb", "--list")
    assert done.returncode == 0
    for name, entry in CATALOGUE.items():
        assert f"{name} " in done.stdout and entry.imitates[:40] in done.stdout
    assert done.stdout.count("keeps the truth:") == len(CATALOGUE)


def test_the_leaderboard_gets_a_robustness_column(tmp_path: Path) -> None:
    replay = subprocess.run(
        [sys.executable, "-m", "pytest", str(FROZEN), "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "BASE_EXPERIMENTS_DIR": str(tmp_path)},
        cwd=REPO,
    )
    assert replay.returncode == 0, replay.stdout[-2000:]
    session = only_session(tmp_path)
    done = cli("leaderboard", session, "--perturb", "pdsh,fr-truncated")
    assert done.returncode == 0, done.stderr
    header, _, row = done.stdout.splitlines()[1:4]
    assert header.endswith("| robustness |")
    assert row.startswith("| builtin | 5 |") and row.endswith("| lost 0 of 45 cells |")
