"""Markdown table primitives shared by the report's sections."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def escape_cell(text: object) -> str:
    """One table cell: pipes escaped, line breaks turned into ``<br>``."""
    value = str(text).replace("\\", "\\\\").replace("|", "\\|")
    lines = value.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "<br>".join(line.strip() for line in lines if line.strip())


def table_row(cells: Iterable[object]) -> str:
    return "| " + " | ".join(escape_cell(cell) for cell in cells) + " |"


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """Header, separator and rows, one line each."""
    return [table_row(header), "|" + "|".join("---" for _ in header) + "|"] + [
        table_row(row) for row in rows
    ]
