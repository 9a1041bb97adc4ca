"""pytest-html integration: Fault/Rank/Iter/Nodes/Dimension columns, a summary matrix and
per-item extras. Registered only when pytest-html is active."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_faultloop.state import Faultloop

COLUMNS = (("Fault", "fault_type"), ("Rank", "rank"), ("Iter", "iter"), ("Nodes", "nodes"),
           ("Dimension", "dimension"))
_AFTER = 2
"""Insert after pytest-html's Result and Test columns."""


class HtmlHooks:
    def __init__(self, state: Faultloop) -> None:
        self.state = state

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        for offset, (title, _) in enumerate(COLUMNS):
            cells.insert(_AFTER + offset, f'<th class="sortable" data-column-type="{title.lower()}">{title}</th>')

    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        props = dict(report.user_properties)
        for offset, (title, key) in enumerate(COLUMNS):
            cells.insert(_AFTER + offset, f'<td class="col-{title.lower()}">{props.get(key, "")}</td>')

    def pytest_html_results_summary(self, prefix: list[str], summary: list[str],
                                    postfix: list[str], session: pytest.Session) -> None:
        matrix = self.state.summary_matrix_html()
        if matrix:
            prefix.append(matrix)


def html_extra(content: str) -> dict[str, Any]:
    from pytest_html import extras

    return extras.html(content)
