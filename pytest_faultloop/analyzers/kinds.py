"""The analyzer kinds a setting names, parsed in one place: ``builtin``, ``naive``, ``llm`` and
``cmd:COMMAND {log}`` analyze a job's log; ``builtin`` and ``cmd:COMMAND {fr_dir}`` its
flight-recorder dumps. A kind is one class (how it analyzes, which sources its fingerprint
hashes, how the header shows it) and one line in ``LOG_KINDS`` or ``FR_KINDS``."""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

from pydantic import SecretStr

from pytest_faultloop.analyzers.external.commands import (
    COMMAND_PREFIX,
    run_fr_command,
    run_log_command,
)
from pytest_faultloop.analyzers.fr.fr_analyzer import analyze_fr
from pytest_faultloop.analyzers.log.llm_analyzer import analyze_log_llm
from pytest_faultloop.analyzers.log.log_analyzer import analyze_log
from pytest_faultloop.analyzers.log.naive_analyzer import analyze_log_naive
from pytest_faultloop.analyzers.log.no_logs import no_log_analysis
from pytest_faultloop.models import FrAnalysis, LogAnalysis

_HERE = Path(__file__).resolve().parent
_LOG_SOURCES = (
    _HERE / "log",
    _HERE / "cause_policy.py",
    _HERE / "failure.py",
    _HERE / "rank_ranges.py",
    _HERE / "analyzer_policy.toml",
)
"""The built-in log analyzer's own sources and the shared modules it uses."""
_EXTERNAL_SOURCES = (_HERE / "external", _HERE / "failure.py")
"""What reads a command's output."""


@dataclass(frozen=True)
class AnalyzerRun:
    """What an analysis may need besides its input: the time a command or an LLM may take,
    the FR analyzer's worker processes, and an LLM analyzer's endpoint (its key resolved)."""

    timeout: float
    fr_jobs: int | None = None
    """Processes decoding FR dumps (None: one per core for a large set)."""
    llm_model: str = ""
    llm_base_url: str = ""
    llm_key: SecretStr | None = None


class AnalyzerKind(ABC):
    """One kind of analyzer, as its setting names it."""

    name: ClassVar[str]
    """The setting's word (``builtin``), or a command's prefix (``cmd:``)."""
    needs_llm: ClassVar[bool] = False
    """It asks an LLM endpoint (the run checks it before any job)."""
    placeholder: ClassVar[str]
    """Where a command analyzer of its stage takes its input's path."""

    def __init__(self, spec: str) -> None:
        self.spec = spec

    def sources(self) -> tuple[Path, ...]:
        """The files its fingerprint hashes (a directory: its ``*.py`` files)."""
        return ()

    @property
    def label(self) -> str:
        """How the report header names it."""
        return self.spec

    @property
    def answers_as(self) -> str:
        """The analyzer name its answer carries where there was nothing to analyze."""
        return self.spec


class LogKind(AnalyzerKind):
    placeholder = "{log}"

    @abstractmethod
    def analyze(self, log: Path, run: AnalyzerRun) -> LogAnalysis: ...


class FrKind(AnalyzerKind):
    placeholder = "{fr_dir}"

    @abstractmethod
    def analyze(self, fr_dir: Path, run: AnalyzerRun) -> FrAnalysis: ...


class BuiltinLog(LogKind):
    """The rule-based log analyzer (its signature catalogue and readers)."""

    name = "builtin"

    def sources(self) -> tuple[Path, ...]:
        return _LOG_SOURCES

    def analyze(self, log: Path, run: AnalyzerRun) -> LogAnalysis:
        return analyze_log(log)


class NaiveLog(LogKind):
    """The one-regex baseline."""

    name = "naive"

    def sources(self) -> tuple[Path, ...]:
        return (_HERE / "log" / "naive_analyzer.py", _HERE / "cause_policy.py")

    def analyze(self, log: Path, run: AnalyzerRun) -> LogAnalysis:
        return analyze_log_naive(log)


class LlmLog(LogKind):
    """An LLM given the log and the rule-based analyzer's evidence."""

    name = "llm"
    needs_llm = True

    def sources(self) -> tuple[Path, ...]:
        return (*_LOG_SOURCES, _HERE / "llm_client.py")

    def analyze(self, log: Path, run: AnalyzerRun) -> LogAnalysis:
        assert run.llm_key is not None  # resolved when the run's stages were built
        return analyze_log_llm(
            log,
            model=run.llm_model,
            base_url=run.llm_base_url,
            api_key=run.llm_key,
            evidence=analyze_log(log),
            timeout=run.timeout,
        )


class BuiltinFr(FrKind):
    """The flight-recorder analyzer."""

    name = "builtin"

    def sources(self) -> tuple[Path, ...]:
        return (_HERE / "fr", _HERE / "rank_ranges.py")

    def analyze(self, fr_dir: Path, run: AnalyzerRun) -> FrAnalysis:
        return analyze_fr(fr_dir, jobs=run.fr_jobs)


class _Command(AnalyzerKind):
    """A command of the user's: its output parsed (``analyzers/external``)."""

    name = COMMAND_PREFIX

    @property
    def template(self) -> str:
        return self.spec.removeprefix(COMMAND_PREFIX)

    def sources(self) -> tuple[Path, ...]:
        return (*_EXTERNAL_SOURCES, *command_files(self.spec))

    @property
    def label(self) -> str:
        """Only the names of the files it runs (``cmd:my_analyzer.py``), never its arguments."""
        return COMMAND_PREFIX + (",".join(p.name for p in command_files(self.spec)) or "…")

    @property
    def answers_as(self) -> str:
        return "cmd"


class CommandLog(_Command, LogKind):
    def analyze(self, log: Path, run: AnalyzerRun) -> LogAnalysis:
        return run_log_command(self.template, log, run.timeout)


class CommandFr(_Command, FrKind):
    def analyze(self, fr_dir: Path, run: AnalyzerRun) -> FrAnalysis:
        return run_fr_command(self.template, fr_dir, run.timeout)


Kind = TypeVar("Kind", bound=AnalyzerKind)

LOG_KINDS: tuple[type[LogKind], ...] = (BuiltinLog, NaiveLog, LlmLog, CommandLog)
FR_KINDS: tuple[type[FrKind], ...] = (BuiltinFr, CommandFr)


def log_kind(spec: str) -> LogKind:
    """The log analyzer ``spec`` names; ValueError naming the choices."""
    return _parse(spec, LOG_KINDS, CommandLog)


def fr_kind(spec: str) -> FrKind:
    """The FR analyzer ``spec`` names; ValueError naming the choices."""
    return _parse(spec, FR_KINDS, CommandFr)


def _parse(spec: str, kinds: tuple[type[Kind], ...], command: type[Kind]) -> Kind:
    if spec.startswith(COMMAND_PREFIX):
        return command(spec)
    for kind in kinds:
        if kind.name == spec:
            return kind(spec)
    words = ", ".join(kind.name for kind in kinds if kind is not command)
    raise ValueError(f"expected {words} or '{COMMAND_PREFIX}COMMAND {command.placeholder}'")


def command_files(spec: str) -> list[Path]:
    """The existing files a ``cmd:`` analyzer's command names (``--opt=FILE`` too)."""
    body = spec.removeprefix(COMMAND_PREFIX)
    try:
        words = shlex.split(body)
    except ValueError:
        words = body.split()
    found: list[Path] = []
    for word in words:
        for candidate in (word, word.partition("=")[2]):
            path = Path(candidate) if candidate else None
            if path is not None and path.is_file() and path not in found:
                found.append(path)
    return found


def no_log(kind: LogKind) -> LogAnalysis:
    """The answer of ``kind`` where the job left no log."""
    return no_log_analysis(kind.answers_as)
