"""The project's promises about itself: README commands, CI, pool files, options table, a test
suite whose every test can run."""

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


def test_readme_options_table_lists_every_setting() -> None:
    readme = (REPO / "README.md").read_text()
    for setting in SETTINGS:
        name = setting.option or setting.env
        assert f"`{name}`" in readme, name


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


def options_tables() -> str:
    """The README's option tables as the settings' rows render them, one per help group."""
    from pytest_faultloop.inputs.settings import GROUPS

    parts = []
    for group, title in GROUPS.items():
        heading = title.removeprefix("faultloop: ")
        lines = [
            f"*{heading[0].upper()}{heading[1:]}*",
            "",
            "| option | environment / user.env | ini key | what |",
            "|---|---|---|---|",
        ]
        for row in (s for s in SETTINGS if s.group == group):
            option = f"`{row.option}`" if row.option else "—"
            env = f"`{row.env}`" if row.env else "—"
            ini = "—" if row.field == "env_file" else f"`{row.dest}`"
            lines.append(f"| {option} | {env} | {ini} | {row.help} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def test_readme_options_tables_are_the_rows_as_pytest_help_shows_them() -> None:
    """The README tells each setting exactly as ``pytest --help`` does (same rows, same help and
    default), so the two cannot drift apart."""
    readme = (REPO / "README.md").read_text()
    assert options_tables() in readme, "README option tables differ from the rows:\n" + (
        options_tables()
    )
