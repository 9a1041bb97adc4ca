"""Stored files that are symbolic links are never followed: a real session (one real job on the
local backend) gets one stored file or directory replaced by a link to a private copy (mode
0600, holding a secret); re-analysis, a continued run, freeze, perturb and report each name the
link in one line, read nothing through it, copy nothing through it, and lose nothing. Stored
cases (a frozen corpus) are held to the same rule, and copies keep their files' permissions."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FROZEN_CASE = REPO / "tests" / "fixtures" / "frozen" / "smoke" / "n2_GPU_SLEEP_r1_i5"
POOL = "SIGKILL:1:5:1"
EXPERIMENT = "n1_SIGKILL_r1_i5"
SECRET = "PRIVATE-7f3c9e1d-not-for-the-session"
LINKED = "a symbolic link; stored files are read only as themselves"


def _pytest(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORKLOAD", "PYTEST_ADDOPTS")}
    env.update(BASE_EXPERIMENTS_DIR=str(root / "out"), POOL=POOL, GPUS_PER_NODE="2")
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_faultloop", *map(str, args)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project and its base directory holding one finished session (one real job)."""
    root = tmp_path_factory.mktemp("project")
    shutil.copytree(REPO / "experiments", root / "experiments")
    done = _pytest(root, "experiments/", "-q")
    assert done.returncode == 0, done.stdout[-3000:]
    return root


def _private_copy(original: Path, private: Path, spoil: Callable[[Path], None]) -> None:
    """Move ``original`` to ``private`` (mode 0600, the secret put in) and link it back."""
    private.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(original, private)
    spoil(private)
    for path in [private, *private.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    original.symlink_to(private)


def _secret_line(path: Path) -> None:
    with path.open("a") as out:
        out.write(f"[rank1]:RuntimeError: {SECRET}\n")


def _secret_field(field: str) -> Callable[[Path], None]:
    def spoil(path: Path) -> None:
        data = json.loads(path.read_text())
        data[field] = SECRET
        path.write_text(json.dumps(data))

    return spoil


def _secret_beside(directory: Path) -> None:
    (directory / "notes.txt").write_text(SECRET)


def _secret_appended(path: Path) -> None:
    path.write_bytes(path.read_bytes() + SECRET.encode())


LINKS: dict[str, tuple[str, Callable[[Path], None]]] = {
    # name: (the stored path replaced by a link (a glob), how its private copy holds the secret)
    "result": ("result.json", _secret_field("reason")),
    "experiment": (".", _secret_beside),
    "log": ("logs/slurm/*.main_workload.log", _secret_line),
    "dump": ("checkpoints/_dump_0", _secret_appended),
    "checkpoints": ("checkpoints", _secret_beside),
    "marker": ("fault_injection.json", _secret_field("host")),
}


def _linked(finished: Path, tmp_path: Path, name: str) -> tuple[Path, Path, Path]:
    """A copy of the finished project with the named stored path linked to a private copy:
    (project root, the link, its private target)."""
    root = tmp_path / "project"
    shutil.copytree(finished, root, symlinks=True)
    (session,) = (root / "out" / "fault_injection").glob("2*")
    pattern, spoil = LINKS[name]
    (link,) = [session / EXPERIMENT] if pattern == "." else (session / EXPERIMENT).glob(pattern)
    private = tmp_path / "private" / link.name
    _private_copy(link, private, spoil)
    return root, link, private


def _leaked(root: Path) -> list[Path]:
    """Files under ``root`` holding the secret."""
    return [
        p
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink()
        if SECRET.encode() in p.read_bytes()
    ]


def _untouched(link: Path, private: Path) -> None:
    assert link.is_symlink() and link.readlink() == private
    assert stat.S_IMODE(private.stat().st_mode) in (0o600, 0o700)


@pytest.mark.parametrize("name", list(LINKS))
def test_a_reanalysis_names_a_linked_stored_file_and_reads_nothing_through_it(
    finished: Path, tmp_path: Path, name: str
) -> None:
    root, link, private = _linked(finished, tmp_path, name)
    done = _pytest(
        root, "experiments/", "--faultloop-reanalyze", "--faultloop-session", "last",
        "-rA", "--html=report.html",
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert f"{link}: {LINKED}" in output, output[-3000:]
    assert done.returncode != 0 and "ERROR" in output and "Traceback" not in output
    assert SECRET not in output
    assert _leaked(root) == []
    _untouched(link, private)


@pytest.mark.parametrize("name", ["result", "experiment"])
def test_a_continued_run_sets_a_linked_result_aside_and_runs_again(
    finished: Path, tmp_path: Path, name: str
) -> None:
    """The link is kept under attempts/ as the link it is; the experiment runs again in a
    directory of its own (nothing is written through the link)."""
    root, link, private = _linked(finished, tmp_path, name)
    done = _pytest(root, "experiments/", "--faultloop-session", "last", "-v")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert f"{link}: {LINKED}" in output, output[-3000:]
    assert SECRET not in output and _leaked(root) == []
    experiment = link.parent if name == "result" else link
    (kept,) = [p for p in (experiment / "attempts").rglob("*") if p.is_symlink()]
    _untouched(kept, private)
    assert not experiment.is_symlink() and not (experiment / "result.json").is_symlink()
    assert json.loads((experiment / "result.json").read_text())["verdict"] is not None
    assert sorted(p.name for p in private.parent.rglob("*")) == sorted(
        p.name for p in [private, *private.rglob("*")]
    )


@pytest.mark.parametrize("name", list(LINKS))
def test_freeze_and_perturb_refuse_a_linked_stored_file_in_one_line(
    finished: Path, tmp_path: Path, name: str
) -> None:
    """A linked result.json (or experiment directory) is an unreadable result, which freeze
    skips naming it (nothing is read or copied through it); any other linked file stops freeze
    before it writes a case, and the leaderboard (which reads no marker: the result holds
    them) before it analyses anything."""
    root, link, private = _linked(finished, tmp_path, name)
    (session,) = (root / "out" / "fault_injection").glob("2*")
    commands: list[tuple[object, ...]] = [
        ("freeze", session, "--into", tmp_path / "frozen"),
        ("perturb", session / EXPERIMENT, "--with", "ts", "-o", tmp_path / "perturbed"),
    ]
    if name in ("log", "dump", "checkpoints"):
        commands.append(("leaderboard", session, "--perturb", "ts"))
    for args in commands:
        done = _cli(*args)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        if name in ("result", "experiment") and args[0] == "freeze":
            assert done.returncode == 0 and lines[0].startswith("skipped unreadable: ")
            assert f"{link}: {LINKED}" in lines[0]
        else:
            assert done.returncode == 2 and lines[0].startswith(f"error: {link}: {LINKED}")
        assert not (tmp_path / "frozen").exists() and not (tmp_path / "perturbed").exists()
    _untouched(link, private)


def test_report_and_compare_skip_a_linked_result_naming_it(finished: Path, tmp_path: Path) -> None:
    root, link, private = _linked(finished, tmp_path, "result")
    (session,) = (root / "out" / "fault_injection").glob("2*")
    done = _cli("report", session)
    assert done.returncode == 0, done.stderr
    assert f"skipped unreadable result {link}: {LINKED}" in done.stderr
    done = _cli("compare", session, session)
    assert done.returncode == 2 and f"{link}: {LINKED}" in done.stderr
    assert SECRET not in done.stdout + done.stderr and _leaked(root) == []
    _untouched(link, private)


@pytest.mark.parametrize("linked", ["logs", "checkpoints/_dump_0", "case.toml"])
def test_a_stored_case_with_a_link_fails_its_collection_naming_it(
    pytester: pytest.Pytester, tmp_path: Path, linked: str
) -> None:
    corpus = pytester.path / "corpus"
    case = corpus / FROZEN_CASE.name
    shutil.copytree(FROZEN_CASE, case)
    link = case / linked
    private = tmp_path / "private" / link.name
    _private_copy(link, private, _secret_beside if link.is_dir() else _secret_appended)
    result = pytester.runpytest_subprocess("corpus/", "-p", "no:cacheprovider", timeout=300)
    output = result.stdout.str() + result.stderr.str()
    assert f"{link}: {LINKED}" in output, output[-3000:]
    assert result.ret != 0 and "Traceback" not in output and SECRET not in output
    done = _cli("perturb", corpus, "--with", "ts", "-o", tmp_path / "perturbed")
    assert done.returncode == 2 and f"error: {link}: {LINKED}" in done.stderr, done.stderr
    assert not (tmp_path / "perturbed").exists()
    _untouched(link, private)


def test_a_linked_dump_is_unusable_to_the_fr_analyzer(tmp_path: Path) -> None:
    dumps = tmp_path / "checkpoints"
    shutil.copytree(FROZEN_CASE / "checkpoints", dumps)
    _private_copy(dumps / "_dump_3", tmp_path / "private" / "_dump_3", _secret_appended)
    done = _cli("analyze-fr", dumps, "--json")
    assert done.returncode == 0, done.stderr
    assert f"{dumps / '_dump_3'}: {LINKED}" in done.stdout
    assert SECRET not in done.stdout + done.stderr


def test_copies_keep_the_permissions_of_the_files_they_copy(finished: Path, tmp_path: Path) -> None:
    """A private (0600) log and dump stay private in a frozen case and a perturbed copy."""
    root = tmp_path / "project"
    shutil.copytree(finished, root)
    (session,) = (root / "out" / "fault_injection").glob("2*")
    experiment = session / EXPERIMENT
    private = [*experiment.glob("logs/slurm/*.log"), experiment / "checkpoints" / "_dump_0"]
    for path in private:
        path.chmod(0o600)
    assert _cli("freeze", session, "--into", tmp_path / "frozen").returncode == 0
    done = _cli("perturb", experiment, "--with", "ts", "-o", tmp_path / "perturbed")
    assert done.returncode == 0, done.stderr
    for copy in (tmp_path / "frozen" / EXPERIMENT, tmp_path / "perturbed"):
        for path in private:
            found = next(copy.rglob(path.name))
            assert stat.S_IMODE(found.stat().st_mode) == 0o600, found
