"""The docs site's promises: its generated sections are the tables the code reads, and the README
is a short door whose links into the site resolve. (`mkdocs build --strict` in .ci/run checks
the links between pages; tests/test_readme_commands.py runs the commands they show.)"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from support.docs import REPO

README = REPO / "README.md"


def gen_docs(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "scripts" / "gen_docs.py"), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_generated_sections_are_fresh() -> None:
    """The option reference, the job knobs and the signature catalogue as their tables render
    them: a change to a setting, a knob or a catalogue entry regenerates its page in the same
    commit."""
    done = gen_docs(REPO, "--check")
    assert done.returncode == 0, done.stderr


def test_a_stale_section_is_named_with_the_fix_and_rewritten(tmp_path: Path) -> None:
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copytree(REPO / "scripts", tmp_path / "scripts")
    page = tmp_path / "docs" / "configuration.md"
    fresh = page.read_text()
    page.write_text(fresh.replace("| `--faultloop-pool` |", "| `--faultloop-pools` |", 1))

    stale = gen_docs(tmp_path, "--check")
    assert stale.returncode == 1
    assert stale.stderr == (
        "error: docs/configuration.md: a generated section is stale; "
        "run `python scripts/gen_docs.py`\n"
    )

    assert gen_docs(tmp_path).returncode == 0
    assert page.read_text() == fresh
    assert gen_docs(tmp_path, "--check").returncode == 0


def test_a_generated_section_without_its_page_is_named(tmp_path: Path) -> None:
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copytree(REPO / "scripts", tmp_path / "scripts")
    (tmp_path / "docs" / "analyzers" / "signatures.md").unlink()
    done = gen_docs(tmp_path, "--check")
    assert done.returncode == 1
    assert done.stderr == (
        "error: no page under docs/ holds the generated section(s) ['signatures']\n"
    )


def heading_anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as MkDocs (Python-Markdown's toc) and GitHub make
    them: lower case, punctuation dropped, spaces as hyphens."""
    anchors = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(), flags=re.M):
        words = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
        anchors.add(re.sub(r"[-\s]+", "-", words))
    return anchors


def test_the_readmes_relative_links_resolve() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    relative = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert len(relative) > 10
    broken = []
    for link in relative:
        path, _, anchor = link.partition("#")
        target = REPO / path
        if not target.is_file():
            broken.append(f"{link} (no file {path})")
        elif anchor and anchor not in heading_anchors(target):
            broken.append(f"{link} (no heading #{anchor} in {path})")
    assert not broken, "README.md links to nothing: " + ", ".join(broken)


def test_the_readme_is_a_door() -> None:
    """The two commands first, a short tour, links into the site: at most 250 lines."""
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move the detail into docs/"
    assert "](docs/index.md)" in README.read_text()
