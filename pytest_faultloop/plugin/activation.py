"""The run's objects in one pytest process, built by one factory (:func:`activate`) in a fixed
order: the run configuration (pure), the session choice, the collection (a plugin object
carrying the collection hooks) and the run itself (``state.Faultloop``), registered with the
built-in stages and the pytest-html hooks, the run kept in ``config.stash`` like pytest's
``LFPlugin``. They exist once the run collects pools or cases, or a Python test asks for the
``faultloop`` fixture."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pytest_faultloop.engine.run_session import SessionChoice
from pytest_faultloop.inputs.run_config import RunConfiguration
from pytest_faultloop.plugin.collection import RunCollection
from pytest_faultloop.plugin.keys import RUN_KEY
from pytest_faultloop.plugin.options import ConfigValues
from pytest_faultloop.plugin.run_dir import run_dir
from pytest_faultloop.plugin.signals import interrupt_on_stop_signals
from pytest_faultloop.plugin.stage_hooks import install_builtin_stages
from pytest_faultloop.plugin.state import Faultloop
from pytest_faultloop.store.revisions import check_compare_target


def activate(config: pytest.Config, pool_dir: Path, *, check: bool = True) -> Faultloop:
    """Build the run's objects in this process, in order, and register them with the built-in
    stages and the pytest-html hooks. ``check``: a given session is resolved now (a bad one,
    or a re-analysis of experiments it never ran, stops start-up before anything is written).
    Raises ConfigError."""
    configuration = RunConfiguration.load(ConfigValues(config), pool_dir)
    settings = configuration.settings
    sessions = SessionChoice(
        lambda: run_dir(config), settings, threading.Event(), config.add_cleanup
    )
    collection = RunCollection(config, configuration, sessions)
    run = Faultloop(config, configuration, sessions, collection)
    if check and not run.is_worker:
        collection.check_pool_files()
    if check and not run.is_worker and (settings.session or settings.reanalyze):
        collection.check_reanalysis()
        run.start()
    if check and not run.is_worker and settings.compare:
        session = sessions.path if settings.session else None
        check_compare_target(
            settings.compare, settings.base_experiments_dir, session, settings.reanalyze
        )
    install_builtin_stages(config, settings, run.stop, sessions)
    collection.run = run
    config.stash[RUN_KEY] = run
    config.pluginmanager.register(collection, "faultloop-collection")
    config.pluginmanager.register(run, "faultloop-state")
    if config.pluginmanager.hasplugin("html"):
        from pytest_faultloop.plugin.html_report import HtmlHooks

        config.pluginmanager.register(HtmlHooks(run), "faultloop-html")
    interrupt_on_stop_signals(config)
    return run


def run_state(config: pytest.Config) -> Faultloop:
    """The run's state, created on first use when no pool or case was collected (a Python
    test asked for the ``faultloop`` fixture, or the controller finishes such a run)."""
    state = config.stash.get(RUN_KEY, None)
    if state is None:
        state = activate(config, project_dir(config), check=False)
    return state


def project_dir(config: pytest.Config) -> Path:
    """Where a run without pools looks for ``workloads.toml``: ``experiments/`` under the
    root directory when it has one, else the root directory."""
    experiments = config.rootpath / "experiments"
    return experiments if experiments.is_dir() else config.rootpath
