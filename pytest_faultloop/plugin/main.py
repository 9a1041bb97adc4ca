"""pytest-faultloop plugin: options, hook specifications, fixtures and the plugin objects that
carry the hooks. The work lives in the other modules."""

from __future__ import annotations

import pytest

from pytest_faultloop.inputs.pool import find_pool_dir
from pytest_faultloop.plugin import hookspecs
from pytest_faultloop.plugin.activation import activate
from pytest_faultloop.plugin.cluster import slurm_cluster, start_for_run
from pytest_faultloop.plugin.failure_reports import FailureReports
from pytest_faultloop.plugin.fixtures import (
    MARKER_HELP,
    PythonTestHooks,
    faultloop,
    faultloop_result,
)
from pytest_faultloop.plugin.options import add_options, invocation
from pytest_faultloop.plugin.preflight import usage_errors
from pytest_faultloop.plugin.workers import XdistHooks

FIXTURES = (faultloop, faultloop_result, slurm_cluster)
"""The plugin's fixtures: pytest finds them in this module's namespace."""


UNWANTED_PLUGINS = ("langsmith_plugin",)
"""Entry points of other packages that load into every pytest run and that no faultloop run
uses: langsmith's (it comes with langchain-openai) adds about 2 s to each start-up. Blocked
before it loads (or dropped, when it loaded first); ``-p langsmith.pytest_plugin`` keeps it."""


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)
    for name in UNWANTED_PLUGINS:
        pluginmanager.set_blocked(name)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Register the plugin objects; the run's state only when the run collects pools or
    cases (else a Python test creates it when it asks for the ``faultloop`` fixture)."""
    config.addinivalue_line("markers", MARKER_HELP)
    config.pluginmanager.register(PythonTestHooks(), "faultloop-python-tests")
    config.pluginmanager.register(FailureReports(), "faultloop-failure-reports")
    is_worker = hasattr(config, "workerinput")
    if config.pluginmanager.hasplugin("xdist") and not is_worker:
        config.pluginmanager.register(XdistHooks(config), "faultloop-xdist")
    with usage_errors():
        if not is_worker and not config.option.help:
            start_for_run(config)
        pool_dir = find_pool_dir(invocation(config))
        if pool_dir is not None:
            activate(config, pool_dir)
