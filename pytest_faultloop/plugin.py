"""pytest-faultloop plugin: options, hooks and wiring. The work lives in the other modules."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from pytest_faultloop import hookspecs
from pytest_faultloop.cases import CASE_FILE
from pytest_faultloop.cluster import (  # noqa: F401 - slurm_cluster: a fixture
    CLUSTER_KEY,
    cluster_for_run,
    slurm_cluster,
)
from pytest_faultloop.collect import (
    CaseDir,
    DimensionFailed,
    DimensionItem,
    ExperimentsDir,
    regroup,
)
from pytest_faultloop.errors import ConfigError, FaultloopError
from pytest_faultloop.fixtures import (  # noqa: F401 - fixtures, found here by pytest
    CURRENT_ITEM_KEY,
    MARKER_HELP,
    faultloop,
    faultloop_result,
    parametrize_marked,
)
from pytest_faultloop.progress import ProgressPrinter, start_progress
from pytest_faultloop.rundir import RUNDIR_KEY, WORKERINPUT_KEY, recorded_session, run_dir
from pytest_faultloop.session import EVENTS_NAME
from pytest_faultloop.settings import add_options, resolve_one
from pytest_faultloop.signals import interrupt_on_sigterm
from pytest_faultloop.state import FAULTLOOP_KEY, activate, find_pool_dir, run_state


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    is_worker = hasattr(config, "workerinput")
    if config.pluginmanager.hasplugin("xdist") and not is_worker:
        config.pluginmanager.register(XdistHooks(config), "faultloop-xdist")
    pool_dir = find_pool_dir(config)
    try:
        if not is_worker and not config.option.help:
            _start_cluster(config)
        if pool_dir is not None:  # else inert until a Python test asks for the fixture
            activate(config, pool_dir)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _start_cluster(config: pytest.Config) -> None:
    """``--faultloop-local-cluster N``: the run's cluster (workers inherit ``SLURM_CONF``)."""
    found = resolve_one(config, "local_cluster")
    if found is not None:
        interrupt_on_sigterm(config)
        config.stash[CLUSTER_KEY] = cluster_for_run(config, found[0])


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_marked(metafunc)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(FAULTLOOP_KEY, None)
    if state is not None:
        state.close()


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    state = config.stash.get(FAULTLOOP_KEY, None)
    lines = state.header() if state is not None else []
    cluster = config.stash.get(CLUSTER_KEY, None)
    if cluster is not None:
        how = "started for this run" if cluster.started else "already running, used as is"
        lines.append(f"faultloop: Slurm cluster {how}: {cluster.nodes} node(s) "
                     f"({','.join(cluster.node_names)}), SLURM_CONF={cluster.conf}")
    return lines or None


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
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None]:
    item.config.stash[CURRENT_ITEM_KEY] = item
    try:
        return (yield)
    finally:
        del item.config.stash[CURRENT_ITEM_KEY]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    error = call.excinfo.value if call.excinfo is not None else None
    if isinstance(item, DimensionItem):
        if isinstance(error, FaultloopError):
            report.longrepr = str(error)
        item.config.stash[FAULTLOOP_KEY].attach(item, report)
    elif isinstance(error, (FaultloopError, DimensionFailed)) and call.excinfo is not None:
        report.longrepr = clean_failure(item, call.excinfo)
    return report


def clean_failure(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """The message a pool item would show, and the test's line that raised it."""
    path = getattr(item, "path", None)
    for entry in reversed(excinfo.traceback):
        if path is not None and Path(entry.path) == path:
            return (f"{excinfo.value}\n({_shown(item, path)}:{entry.lineno + 1}: "
                    f"{str(entry.statement).strip()})")
    return str(excinfo.value)


def _shown(item: pytest.Item, path: Path) -> str:
    try:
        return str(path.relative_to(item.config.rootpath))
    except ValueError:
        return str(path)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    state = config.stash.get(FAULTLOOP_KEY, None)
    rundir = config.stash.get(RUNDIR_KEY, None)
    if state is None and rundir is not None and not hasattr(config, "workerinput"):
        if recorded_session(rundir) is not None:  # workers ran experiments for Python tests
            state = run_state(config)
    if state is not None:
        state.finish()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    state = terminalreporter.config.stash.get(FAULTLOOP_KEY, None)
    if state is not None:
        for line in state.summary_lines():
            terminalreporter.write_line(line)


class XdistHooks:
    """Controller only: hand the run directory to every worker, and print the session's
    progress lines whichever worker writes them."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.progress: ProgressPrinter | None = None

    def pytest_configure_node(self, node: Any) -> None:
        rundir = run_dir(self.config)
        state = self.config.stash.get(FAULTLOOP_KEY, None)
        if state is not None:
            state.session  # noqa: B018 - pools: the controller chooses the session first
        node.workerinput[WORKERINPUT_KEY] = str(rundir)
        if self.progress is None:
            self.progress = start_progress(self.config, lambda: _events(rundir))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        if self.progress is not None:
            self.progress.close()
            self.progress = None


def _events(rundir: Path) -> Path | None:
    session = recorded_session(rundir)
    return session / EVENTS_NAME if session is not None else None
