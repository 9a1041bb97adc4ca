"""pytest-html integration: Fault/Rank/Iter/Nodes/Dimension columns, the run's settings in
the Environment table, a summary matrix and per-item extras (an experiment's log tail with its
first cell only). Registered only when pytest-html is active."""

from __future__ import annotations

from collections.abc import Generator
from html import escape
from typing import TYPE_CHECKING

import pytest
from pytest_html import extras
from pytest_metadata.plugin import metadata_key

from pytest_faultloop.plugin.items import DimensionItem
from pytest_faultloop.plugin.keys import is_crash_rerun
from pytest_faultloop.report.html import STYLE, item_extras

if TYPE_CHECKING:
    from pytest_faultloop.plugin.state import Faultloop

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

    def __init__(self, state: Faultloop) -> None:
        self.state = state
        self.summary = state.summary
        self.environment: dict[str, str] = {}
        self._first_cells: dict[str, str] = {}
        """Experiment key -> the node id of its first selected cell, which shows the log tail
        (the same in every xdist worker)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """The run's settings in the Environment table (pytest-html reads it after this; an
        xdist worker's table would replace the controller's)."""
        from pytest_faultloop.plugin.stage_hooks import stage_labels

        if hasattr(session.config, "workerinput"):
            return
        state, s = self.state, self.state.configuration.settings
        pools, count = state.collection.describe()
        labels = stage_labels(session.config)
        values = {
            "pools": f"{pools} ({count})",
            "backend": s.backend,
            "workload": state.configuration.workload.name,
            "launcher": state.configuration.launcher or "the job script's",
            "analyzers": f"log {labels['log_analyzer']}, FR {labels['fr_analyzer']}",
            "judge": labels["judge"],
            "session": s.session or "a new one",
        }
        self.environment.update({key: escape(value) for key, value in values.items()})
        session.config.stash[metadata_key]["faultloop"] = self.environment

    def pytest_sessionfinish(self) -> None:
        """The session's directory, known once the run has finished (before pytest-html
        writes the report)."""
        if self.summary.session is not None:
            self.environment["session"] = escape(str(self.summary.session))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """A pool item's verdict, analyses and judge notes as an HTML extra of its report."""
        report = yield
        wanted = report.when == "call" or (report.when == "setup" and not report.passed)
        if isinstance(item, DimensionItem) and wanted and item.result and item.rule:
            if not self._first_cells:
                for cell in item.session.items:
                    if isinstance(cell, DimensionItem):
                        self._first_cells.setdefault(cell.experiment.key, cell.nodeid)
            first = self._first_cells.get(item.experiment.key, item.nodeid)
            shown_with = None if first == item.nodeid else first
            added = extras.html(item_extras(item.result, item.rule, log_shown_with=shown_with))
            report.extras = [*getattr(report, "extras", []), added]  # type: ignore[attr-defined]
        return report

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        for offset, (title, _) in enumerate(COLUMNS):
            cells.insert(
                _AFTER + offset,
                f'<th class="sortable" data-column-type="{title.lower()}">{title}</th>',
            )

    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        if is_crash_rerun(report):
            cells.clear()  # no row: the item's run on another worker has its own
            return
        props = dict(report.user_properties)
        for offset, (title, key) in enumerate(COLUMNS):
            cells.insert(
                _AFTER + offset, f'<td class="col-{title.lower()}">{props.get(key, "")}</td>'
            )

    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: pytest.Session
    ) -> None:
        prefix.append(STYLE)
        matrix = self.summary.matrix_html()
        if matrix:
            prefix.append(matrix)
