"""External analyzers run as commands: ``cmd:python tool.py --log {log}``, ``cmd:... {fr_dir}``."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from pytest_faultloop.analyzers.external.formats import (
    parse_fr_output,
    parse_log_output,
)
from pytest_faultloop.analyzers.failure import AnalyzerError
from pytest_faultloop.analyzers.log.no_logs import no_log_analysis
from pytest_faultloop.models import FrAnalysis, LogAnalysis

COMMAND_PREFIX = "cmd:"


def run_log_command(template: str, log_path: Path, timeout: float) -> LogAnalysis:
    """Run a log analyzer on ``log_path`` and parse what it prints on stdout. A log that is not
    there (a stored path since removed) is NO LOGS, as for a job without one: not run."""
    command = render_command(template, "log", Path(log_path))
    if not Path(log_path).exists():
        return no_log_analysis(_name(template), f"{log_path}: no such file")
    output = _run(command, timeout)
    return parse_log_output(output.stdout, analyzer=_name(template))


def run_fr_command(template: str, fr_dir: Path, timeout: float) -> FrAnalysis:
    """Run an FR analyzer on ``fr_dir``; torchfrtrace reports on stderr, so both are read. No
    ``fr_dir`` (a case without dumps) is no dumps, as the built-in analyzer answers: not run."""
    command = render_command(template, "fr_dir", Path(fr_dir))
    if not Path(fr_dir).exists():
        return FrAnalysis(analyzer=_name(template), unreadable=[f"{fr_dir}: no such directory"])
    output = _run(command, timeout)
    found = sum(1 for p in Path(fr_dir).iterdir() if p.is_file()) if Path(fr_dir).is_dir() else 0
    return parse_fr_output(
        output.stdout + output.stderr, analyzer=_name(template), dumps_found=found
    )


def render_command(template: str, placeholder: str, path: Path) -> str:
    """The template with ``{placeholder}`` replaced by the shell-quoted path."""
    body = template.removeprefix(COMMAND_PREFIX).strip()
    marker = "{" + placeholder + "}"
    if marker not in body:
        raise AnalyzerError(f"analyzer command {template!r} has no {marker} placeholder")
    return body.replace(marker, shlex.quote(str(path)))


def _name(template: str) -> str:
    return COMMAND_PREFIX + template.removeprefix(COMMAND_PREFIX).strip()


def _run(command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(
            ["/bin/sh", "-c", command],
            capture_output=True,
            check=False,
            text=True,
            errors="replace",
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        raise AnalyzerError(
            f"analyzer command {command!r} timed out after {timeout:g} s", timed_out=True
        ) from None
    except OSError as exc:
        raise AnalyzerError(f"analyzer command {command!r} could not start: {exc}") from None
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise AnalyzerError(
            f"analyzer command {command!r} exited with status {result.returncode}: "
            f"{' / '.join(tail)}"
        )
    return result
