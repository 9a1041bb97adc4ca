"""The documentation's generated sections, written from the tables they show.

A page holds a section between ``<!-- generated: NAME (scripts/gen_docs.py) -->`` and
``<!-- end generated: NAME -->``; this script replaces what lies between with the table NAME
renders from its source, so the docs cannot drift from the code. ``python scripts/gen_docs.py``
rewrites the pages; ``--check`` writes nothing and exits 1, naming each stale page and the fix.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from pytest_faultloop.analyzers import catalogue_table
from pytest_faultloop.inputs.settings import GROUPS, SETTINGS
from pytest_faultloop.jobs.workload.job_knobs import knobs_table

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"

SECTION = re.compile(
    r"(?P<start><!-- generated: (?P<name>[a-z-]+) \(scripts/gen_docs\.py\) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<end><!-- end generated: (?P=name) -->)",
    re.DOTALL,
)


def options_tables() -> list[str]:
    """Every setting's row as ``pytest --help`` tells it (same help, same default), one table per
    help group."""
    parts: list[str] = []
    for group, title in GROUPS.items():
        heading = title.removeprefix("faultloop: ")
        lines = [
            f"*{heading[0].upper()}{heading[1:]}*",
            "",
            "| option | environment / user.env | ini key | what |",
            "|---|---|---|---|",
        ]
        for row in (s for s in SETTINGS if s.group == group):
            option = f"`{row.option}`" if row.option else "—"
            env = f"`{row.env}`" if row.env else "—"
            ini = "—" if row.field == "env_file" else f"`{row.dest}`"
            lines.append(f"| {option} | {env} | {ini} | {row.help} |")
        parts += [*lines, ""]
    return parts[:-1]


def markdown_lines(lines: list[str]) -> str:
    """Table lines as Markdown shows them: a ``<`` outside a code span is written ``&lt;``, or
    the browser takes ``<node>`` for a tag and shows nothing."""
    shown = []
    for line in lines:
        spans = line.split("`")
        shown.append("`".join(s if i % 2 else s.replace("<", "&lt;") for i, s in enumerate(spans)))
    return "\n".join(shown) + "\n"


GENERATORS: dict[str, Callable[[], str]] = {
    "options": lambda: markdown_lines(options_tables()),
    "job-knobs": lambda: markdown_lines(knobs_table()),
    "signatures": lambda: markdown_lines(catalogue_table()),
}
"""Section name -> its text, rendered from the table the code reads."""


def regenerated(text: str, page: Path, seen: dict[str, Path]) -> str:
    """``text`` with each generated section rendered afresh."""

    def render(section: re.Match[str]) -> str:
        name = section["name"]
        if name not in GENERATORS:
            raise SystemExit(
                f"error: {page}: unknown generated section {name!r}; name one of {sorted(GENERATORS)}"
            )
        if name in seen:
            raise SystemExit(
                f"error: {page}: section {name!r} is generated in {seen[name]} already; keep one"
            )
        seen[name] = page
        return section["start"] + GENERATORS[name]() + section["end"]

    return SECTION.sub(render, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when a page is stale"
    )
    args = parser.parse_args(argv)
    seen: dict[str, Path] = {}
    stale = []
    for page in sorted(p.relative_to(REPO) for p in DOCS.rglob("*.md")):
        text = (REPO / page).read_text()
        fresh = regenerated(text, page, seen)
        if fresh == text:
            continue
        stale.append(page)
        if not args.check:
            (REPO / page).write_text(fresh)
    missing = sorted(set(GENERATORS) - set(seen))
    if missing:
        print(
            f"error: no page under docs/ holds the generated section(s) {missing}", file=sys.stderr
        )
        return 1
    for page in stale:
        if args.check:
            print(
                f"error: {page}: a generated section is stale; run `python scripts/gen_docs.py`",
                file=sys.stderr,
            )
        else:
            print(f"rewrote {page}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
