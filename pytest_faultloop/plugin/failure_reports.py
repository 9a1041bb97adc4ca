"""How a faultloop error reads in a test report: the one ``pytest_runtest_makereport`` wrapper
that turns errors into text, for pool and case items and Python tests alike."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

from pytest_faultloop.models.errors import FaultloopError, SessionUnwritable
from pytest_faultloop.plugin.items import DimensionFailed, DimensionItem


class FailureReports:
    """A pool item's error is its one-line message (and the item keeps its report for the
    run's tables); a Python test's faultloop error or failed dimension is that message and the
    test's line; a session that can no longer be written stops the run."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        excinfo = call.excinfo
        error = excinfo.value if excinfo is not None else None
        if isinstance(error, SessionUnwritable):
            item.session.shouldstop = str(error)  # nothing more could be recorded
        if isinstance(item, DimensionItem):
            if isinstance(error, FaultloopError):
                report.longrepr = str(error)
            item.attach(report)
        elif excinfo is not None and isinstance(error, (FaultloopError, DimensionFailed)):
            report.longrepr = clean_failure(item, excinfo)
        return report


def clean_failure(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """The message a pool item would show, and the test's line that raised it."""
    path = getattr(item, "path", None)
    for entry in reversed(excinfo.traceback):
        if path is not None and Path(entry.path) == path:
            root = item.config.rootpath
            shown = path.relative_to(root) if path.is_relative_to(root) else path
            return f"{excinfo.value}\n({shown}:{entry.lineno + 1}: {str(entry.statement).strip()})"
    return str(excinfo.value)
