"""pytest-html integration: Fault/Rank/Iter/Nodes/Dimension columns, a summary matrix and
per-item extras. Registered only when pytest-html is active."""

from __future__ import annotations

from collections.abc import Generator

import pytest
from pytest_html import extras

from pytest_faultloop.items import DimensionItem
from pytest_faultloop.report.html import item_extras
from pytest_faultloop.report.summary import RunSummary

COLUMNS = (
    ("Fault", "fault_type"),
    ("Rank", "rank"),
    ("Iter", "iter"),
    ("Nodes", "nodes"),
    ("Dimension", "dimension"),
)
_AFTER = 2
"""Insert after pytest-html's Result and Test columns."""


class HtmlHooks:
    """Registered on the controller (or single process) when pytest-html is active."""

    def __init__(self, summary: RunSummary) -> None:
        self.summary = summary

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """A pool item's verdict, analyses and judge notes as an HTML extra of its report."""
        report = yield
        wanted = report.when == "call" or (report.when == "setup" and not report.passed)
        if isinstance(item, DimensionItem) and wanted and item.result and item.rule:
            added = extras.html(item_extras(item.result, item.rule))
            report.extras = [*getattr(report, "extras", []), added]  # type: ignore[attr-defined]
        return report

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        for offset, (title, _) in enumerate(COLUMNS):
            cells.insert(
                _AFTER + offset,
                f'<th class="sortable" data-column-type="{title.lower()}">{title}</th>',
            )

    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        props = dict(report.user_properties)
        for offset, (title, key) in enumerate(COLUMNS):
            cells.insert(
                _AFTER + offset, f'<td class="col-{title.lower()}">{props.get(key, "")}</td>'
            )

    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: pytest.Session
    ) -> None:
        matrix = self.summary.matrix_html()
        if matrix:
            prefix.append(matrix)
