"""Shared fixtures: pytester for the plugin's own runs.

The plugin's modules are imported here once: pytester's in-process runs drop every module a
run imported, so without this each run would import pydantic models and langchain afresh.
"""

import pytest

import pytest_faultloop.builtin
import pytest_faultloop.judges
import pytest_faultloop.report.html
import pytest_faultloop.report.markdown
import pytest_faultloop.runner
import pytest_faultloop.state  # noqa: F401

pytest_plugins = ["pytester"]

QUIET_PLUGINS = "-p no:langsmith_plugin -p no:hypothesispytest"


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester whose runs skip the environment's slow, unrelated plugins (as pyproject does)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", QUIET_PLUGINS)
    return pytester
