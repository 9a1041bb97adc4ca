"""The project's promises about itself: README commands, CI, pool files, the configuration
reference, a test suite whose every test can run."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pytest_faultloop.inputs.settings import SETTINGS

REPO = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    return re.findall(r"^`([^`]+)`$", (REPO / "README.md").read_text(), flags=re.M)[:2]


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    main_job, tests = readme_commands()
    assert "pytest experiments/" in main_job
    assert "pytest tests/" in tests
    assert tests in (REPO / ".ci" / "run").read_text()


def test_the_configuration_reference_lists_every_setting() -> None:
    reference = (REPO / "docs" / "configuration.md").read_text()
    for setting in SETTINGS:
        name = setting.option or setting.env
        assert f"`{name}`" in reference, name


def test_no_test_function_is_defined_inside_another_function() -> None:
    """pytest collects only module- and class-level tests: one indented into another test's
    body never runs (and nothing says so)."""
    nested = []
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        for outer in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(outer):
                named_test = isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef)
                if inner is not outer and named_test and inner.name.startswith("test"):
                    nested.append(f"{path.relative_to(REPO)}:{inner.lineno} {inner.name}")
    assert not nested, "tests defined inside a function never run: " + ", ".join(nested)
