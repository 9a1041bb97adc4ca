"""Shared fixtures: pytester for the plugin's own runs.

The plugin's modules are imported here once: pytester's in-process runs drop every module a
run imported, so without this each run would import pydantic models and langchain afresh.
"""

import shutil
from pathlib import Path

import pytest

import pytest_faultloop.builtin
import pytest_faultloop.report.html
import pytest_faultloop.report.markdown
import pytest_faultloop.runner
import pytest_faultloop.scoring.judges.hybrid
import pytest_faultloop.state  # noqa: F401
from pytest_faultloop.settings import SETTINGS

pytest_plugins = ["pytester"]
collect_ignore = ["fixtures"]
"""The fixtures are inputs (``fixtures/frozen`` holds replayable cases), not tests."""

QUIET_PLUGINS = "-p no:langsmith_plugin -p no:hypothesispytest"


@pytest.fixture(autouse=True)
def no_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts from the defaults: no setting's environment variable of the calling
    shell (``POOL``, ``WORKLOAD``, ``FAULTLOOP_*`` ...) reaches it; a test sets what it needs."""
    for setting in SETTINGS:
        if setting.env:
            monkeypatch.delenv(setting.env, raising=False)


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester whose runs skip the environment's slow, unrelated plugins (as pyproject does)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    return pytester


@pytest.fixture
def experiments_copy(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the repository's experiments/ alone (the built-in workload's job script ships
    in the package) and a BASE_EXPERIMENTS_DIR of its own, returned."""
    shutil.copytree(
        Path(__file__).resolve().parents[1] / "experiments", pytester.path / "experiments"
    )
    base = pytester.path / "out"
    monkeypatch.setenv("BASE_EXPERIMENTS_DIR", str(base))
    return base
