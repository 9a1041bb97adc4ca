"""The project's promises about itself: README commands, CI, pool files, options table."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_faultloop.options import SETTINGS

REPO = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    return re.findall(r"^`([^`]+)`$", (REPO / "README.md").read_text(), flags=re.M)[:2]


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    main_job, tests = readme_commands()
    assert "pytest experiments/" in main_job
    assert "pytest tests/" in tests
    assert tests in (REPO / ".ci" / "run").read_text()


def test_readme_options_table_lists_every_setting() -> None:
    readme = (REPO / "README.md").read_text()
    for setting in SETTINGS:
        name = setting.option or setting.env
        assert f"`{name}`" in readme, name
