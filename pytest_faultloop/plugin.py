"""pytest-faultloop plugin: options, hooks and wiring. The work lives in the other modules."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from pytest_faultloop import hookspecs
from pytest_faultloop.cases import CASE_FILE
from pytest_faultloop.collect import CaseDir, DimensionItem, ExperimentsDir, regroup
from pytest_faultloop.errors import FaultloopError
from pytest_faultloop.settings import add_options
from pytest_faultloop.state import FAULTLOOP_KEY, Faultloop, find_pool_dir


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    pool_dir = find_pool_dir(config)
    if pool_dir is None:
        return
    state = Faultloop.create(config, pool_dir)
    config.stash[FAULTLOOP_KEY] = state
    config.pluginmanager.register(state, "faultloop-state")
    if config.pluginmanager.hasplugin("xdist") and not state.is_worker:
        config.pluginmanager.register(XdistHooks(state), "faultloop-xdist")
    if config.pluginmanager.hasplugin("html") and not state.is_worker:
        from pytest_faultloop.html_hooks import HtmlHooks

        config.pluginmanager.register(HtmlHooks(state), "faultloop-html")
    state.install_sigterm_handler()


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(FAULTLOOP_KEY, None)
    if state is not None:
        state.close()
        state.restore_sigterm_handler()


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = config.stash.get(FAULTLOOP_KEY, None)
    return state.header() if state is not None else None


def pytest_collect_directory(path: Any, parent: pytest.Collector) -> pytest.Collector | None:
    state = parent.config.stash.get(FAULTLOOP_KEY, None)
    if state is None:
        return None
    if (path / CASE_FILE).is_file():
        return CaseDir.from_parent(parent, path=path)
    if any(path.glob("*.pool")):
        return ExperimentsDir.from_parent(parent, path=path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    state = session.config.stash.get(FAULTLOOP_KEY, None)
    if state is not None:
        regroup(session.items)
        state.set_order([i for i in session.items if isinstance(i, DimensionItem)])


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> None:
    state = session.config.stash.get(FAULTLOOP_KEY, None)
    collection_failed = session.testsfailed and not session.config.option.continue_on_collection_errors
    if state is not None and not session.config.option.collectonly and not collection_failed:
        state.start_prefetch()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if isinstance(item, DimensionItem):
        if call.excinfo is not None and isinstance(call.excinfo.value, FaultloopError):
            report.longrepr = str(call.excinfo.value)
        item.config.stash[FAULTLOOP_KEY].attach(item, report)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(FAULTLOOP_KEY, None)
    if state is not None:
        state.finish()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    state = terminalreporter.config.stash.get(FAULTLOOP_KEY, None)
    if state is not None:
        for line in state.summary_lines():
            terminalreporter.write_line(line)


class XdistHooks:
    """Hand the session and lock directories to every worker (controller only)."""

    def __init__(self, state: Faultloop) -> None:
        self.state = state

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["faultloop_session"] = str(self.state.session.path)
        node.workerinput["faultloop_lockdir"] = str(self.state.lockdir)
