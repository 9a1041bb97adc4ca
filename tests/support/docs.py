"""The project's documentation as the tests read it: the README (the door) and the pages of the
docs site under ``docs/``."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def doc_pages() -> list[Path]:
    """The README, then every page of the site, in path order."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def docs_text() -> str:
    """Every page's text, one after another."""
    return "\n".join(page.read_text() for page in doc_pages())
