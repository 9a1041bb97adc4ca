"""The docs' commands run as written: every command of a ``bash`` block in the README or a page of
the docs site is run here (pytest runs with ``--collect-only`` against a real smoke session, the
CLI for real) or is on the short list of commands another test or CI runs; a new command without
either fails this test, naming its page. Blocks of other languages (``text``, ``sh``,
``python``) are shown, not run."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.docs import REPO, doc_pages
from support.sessions import only_session

COVERED_ELSEWHERE = {
    "cp scripts/user.env.example scripts/user.env": "test_user_env_example_exists",
    'eval "$(sbatch/local-cluster/start.sh 4)"': ".ci/run and test_local_cluster_option.py",
    "sbatch/local-cluster/stop.sh": ".ci/run and test_local_cluster_option.py",
    "python scripts/gen_docs.py": "test_docs.py (the same script with --check, and on a copy)",
    "mkdocs build --strict": ".ci/run",
    "pip install -e '.[torch,frameworks]'": ".ci/run (the frameworks extra, before the tests)",
}
"""Commands this module does not run, and what does."""

PLACEHOLDER_ARG = re.compile(r"\.\.\.")


def page_commands(text: str) -> list[str]:
    """Every command of a page's ``bash`` blocks: continuations joined, comments and
    ``[optional]`` parts dropped."""
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```$", text, flags=re.M | re.S):
        for raw in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s\[[^]]*\]", "", raw)
            words = shlex.split(line, comments=True)
            if words:
                commands.append(shlex.join(words) if words[0] != "eval" else line.split("#")[0])
    return [c.strip() for c in commands]


def documented_commands() -> dict[str, str]:
    """Each command the docs show, once, with the first page (relative to the repository) that
    shows it."""
    shown: dict[str, str] = {}
    for page in doc_pages():
        for command in page_commands(page.read_text()):
            shown.setdefault(command, str(page.relative_to(REPO)))
    return shown


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A copy of experiments/ with one real smoke session in its base directory."""
    root = tmp_path_factory.mktemp("readme")
    shutil.copytree(REPO / "experiments", root / "experiments")
    env = {k: v for k, v in os.environ.items() if k not in ("POOL", "WORKLOAD", "PYTEST_ADDOPTS")}
    env["BASE_EXPERIMENTS_DIR"] = str(root / "out")
    smoke = subprocess.run(
        [sys.executable, "-m", "pytest", "experiments/", "--faultloop-pool=smoke", "-p",
         "no:cacheprovider", "-q"],
        check=False, cwd=root, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert smoke.returncode == 0, smoke.stdout[-3000:]
    return root, env


def session_of(root: Path) -> Path:
    session = only_session(root / "out")
    return session


def concrete(command: str, root: Path) -> list[str]:
    """The command's words with the docs' placeholders filled from the smoke session."""
    session = session_of(root)
    experiment = session / "n2_SIGKILL_r1_i5"
    fill = {
        "SESSION": str(session),
        "SESSION_DIR": str(session),
        "SESSION_A": str(session),
        "SESSION_B": str(session),
        "PATH": str(next((experiment / "logs" / "slurm").glob("*.main_workload.log"))),
        "DIR_OR_PREFIX": str(experiment / "checkpoints"),
        "~/nvrx-attr-experiments/fault_injection/20261130_120000": str(session),
        "DIR": str(root / "frozen-elsewhere"),
        "OUT": str(root / "perturbed" / f"{len(list(root.glob('perturbed/*')))}"),
        "NAMES": "ts,cri",
    }
    words: list[str] = []
    for word in shlex.split(command):
        if PLACEHOLDER_ARG.search(word):  # `--log-analyzer 'cmd:...'`: the option goes too
            if words and words[-1].startswith("--"):
                words.pop()
            continue
        words.append(fill.get(word, word))
    return words


def run(words: list[str], root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    assignments = {}
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        name, value = words.pop(0).split("=", 1)
        assignments[name] = value
    if words[0] == "pytest":
        words = [sys.executable, "-m", "pytest", *words[1:], "--collect-only", "-q"]
    elif words[0] == "python":
        words = [sys.executable, *words[1:]]
    return subprocess.run(
        words,
        check=False,
        cwd=root,
        env={**env, **assignments},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_documented_command_is_run_or_covered(project: tuple[Path, dict[str, str]]) -> None:
    root, env = project
    commands = documented_commands()
    assert len(commands) > 20
    ran = []
    # freeze first: the frozen corpus is then there for the commands that replay it
    ordered = sorted(commands, key=lambda c: "freeze" not in c)
    for command in ordered:
        if command in COVERED_ELSEWHERE:
            continue
        words = shlex.split(command)
        first = next(w for w in words if not re.fullmatch(r"[A-Z_]+=.*", w))
        assert first in ("pytest", "python"), (
            f"{commands[command]}: command not run by any test: {command} (run it as pytest or "
            "python, show it in a text block, or add it to COVERED_ELSEWHERE with what runs it)"
        )
        done = run(concrete(command, root), root, env)
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{command}\n{output[-2000:]}"
        assert "Traceback" not in output and "INTERNALERROR" not in output, command
        if first == "pytest":
            assert re.search(
                r"\d+ tests? collected|collected \d+ item|workers \[\d+ item", output
            ), command
        ran.append(command)
    assert len(ran) + len(COVERED_ELSEWHERE) == len(commands)


def test_user_env_example_exists() -> None:
    assert (REPO / "scripts" / "user.env.example").is_file()


def test_the_blocks_are_read_whole() -> None:
    commands = documented_commands()
    assert commands["pytest experiments/ --faultloop-pool=gpu"] == "docs/getting-started.md"
    assert any(c.startswith("python -m pytest_faultloop freeze ") for c in commands)
    assert not any("#" in c for c in commands if not c.startswith("eval"))
