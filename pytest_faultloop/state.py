"""The run's state, kept in ``config.stash``: settings, pools, session, scheduler and runner."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_faultloop.cases import CASE_FILE, CaseError, load_case
from pytest_faultloop.collect import POOL_OVERRIDE_NAME, entry_to_experiment
from pytest_faultloop.errors import ConfigError, PoolError
from pytest_faultloop.models import Experiment, ExperimentResult
from pytest_faultloop.pool import (
    POOL_SUFFIX,
    PooledEntry,
    PoolRules,
    available_pools,
    parse_pool,
    read_pool_file,
    resolve_pool_names,
)
from pytest_faultloop.progress import ProgressPrinter, start_progress
from pytest_faultloop.reanalysis import check_requested, stored_experiments
from pytest_faultloop.rundir import agreed_session, recorded_session, run_dir
from pytest_faultloop.report.outcome import PassRule
from pytest_faultloop.session import EVENTS_NAME
from pytest_faultloop.signals import interrupt_on_sigterm
from pytest_faultloop.settings import Resolved, Settings, resolve
from pytest_faultloop.workloads import WORKLOADS_NAME, Workload, builtin_workloads, load_workloads

if TYPE_CHECKING:
    from pytest_faultloop.collect import DimensionItem
    from pytest_faultloop.runner import Runner
    from pytest_faultloop.scheduler import Scheduler
    from pytest_faultloop.session import Session

FAULTLOOP_KEY = pytest.StashKey["Faultloop"]()


class Faultloop:
    """One per process: created at configure time when the run collects pools or cases, else
    when a Python test first asks for the ``faultloop`` fixture."""

    def __init__(self, config: pytest.Config, resolved: Resolved, pool_dir: Path) -> None:
        self.config = config
        self.pool_dir = pool_dir
        self.settings: Settings = resolved.settings
        self.sources = resolved.sources
        self.workloads = self._registry()
        self.workload = self.chosen_workload(self.settings.workload, self.sources.get("workload"))
        self.rules = PoolRules(self.settings.gpus_per_node, self.workload.min_nodes,
                               self.workload.name)
        self.stop = threading.Event()
        self.order: list[str] = []
        """Experiment keys of this run in start (pool) order; set after collection."""
        self._priorities: dict[str, int] = {}
        self.replays_only = replays_only(config)
        """No pools asked for: the run replays stored cases only."""
        self._cases: dict[Path, Experiment] = {}
        self._parsed: dict[str, list[PooledEntry]] = {}
        self._experiments: list[Experiment] = []
        self._run_results: list[ExperimentResult] = []
        self._summary: list[str] = []
        self._progress: ProgressPrinter | None = None
        self.stamp: Callable[[ExperimentResult], ExperimentResult] = lambda result: result
        self.is_worker = getattr(config, "workerinput", None) is not None

    @classmethod
    def create(cls, config: pytest.Config, pool_dir: Path, *, check: bool = True) -> Faultloop:
        """The run's state; ``check``: resolve a given session now (a bad one, or a
        re-analysis of experiments the session never ran, stops start-up before anything is
        written). Raises ConfigError."""
        from pytest_faultloop.builtin import install_builtin_stages

        state = cls(config, resolve(config), pool_dir)
        state.stamp = install_builtin_stages(state)
        if check and not state.is_worker and (state.settings.session or state.settings.reanalyze):
            state.check_reanalysis()
            state.session  # noqa: B018
        return state

    @property
    def registry_file(self) -> Path:
        path = self.settings.workloads_file
        if path is None:
            return self.pool_dir / WORKLOADS_NAME
        return path if path.is_absolute() else self.config.rootpath / path

    def _registry(self) -> dict[str, Workload]:
        path = self.registry_file
        if self.settings.workloads_file is None and not path.is_file():
            return builtin_workloads()
        return load_workloads(path)

    def chosen_workload(self, name: str, source: str | None) -> Workload:
        """A registered workload the backend can run; ConfigError naming ``source`` if not."""
        if name not in self.workloads:
            raise ConfigError(
                f"WORKLOAD={name!r} (from {source or 'default'}): unknown workload; "
                f"registered in {self.registry_file}: {', '.join(self.workloads)}"
            )
        workload = self.workloads[name]
        if self.settings.backend == "local" and not workload.local:
            raise ConfigError(
                f"WORKLOAD={workload.name!r} cannot run on the local backend (it needs "
                f"{workload.script.name} on a GPU cluster); use --faultloop-backend=slurm "
                "or WORKLOAD=tiny_gloo"
            )
        return workload

    # -- pools --------------------------------------------------------------------------------

    @property
    def pools_named(self) -> bool:
        """Whether the pools were chosen explicitly (option, POOL, a ``.pool`` argument)."""
        return (
            "pools" in self.sources
            or self.settings.pool_override is not None
            or bool(self._pool_args())
        )

    def _pool_args(self) -> list[Path]:
        return [Path(a.split("::", 1)[0]) for a in self.config.args
                if Path(a.split("::", 1)[0]).suffix == POOL_SUFFIX]

    @cached_property
    def stored(self) -> dict[str, list[Experiment]] | None:
        """A re-analysis of the session's own experiments: pool -> stored experiments."""
        if not self.settings.reanalyze or self.pools_named:
            return None
        return stored_experiments(self.session_path)

    def check_reanalysis(self) -> None:
        """Refuse a session with nothing stored, or explicitly named pools that list
        experiments the session never ran."""
        if not self.settings.reanalyze:
            return
        if not self.pools_named:
            self.stored  # noqa: B018 - a session with nothing stored stops start-up
            return
        try:
            selected = [(p.stem, p if p.is_absolute() else self.config.invocation_params.dir / p)
                        for p in self._pool_args()]
            if "pools" in self.sources or self.settings.pool_override is not None:
                selected += self.selected_pool_files(self.pool_dir)
            requested = [pooled.entry.key for name, path in selected
                         for pooled in self._entries(name, path)]
        except PoolError:
            return  # collection reports the bad pool itself
        named = ", ".join(sorted({name for name, _ in selected}))
        check_requested(requested, stored_experiments(self.session_path), self.session_path,
                        f"pool {named}")

    def selected_pool_files(self, directory: Path) -> list[tuple[str, Path]]:
        if self.replays_only:
            return []
        if self.stored is not None:
            return [(name, directory / (name if name == POOL_OVERRIDE_NAME else
                                        f"{name}{POOL_SUFFIX}")) for name in self.stored]
        if self.settings.pool_override is not None:
            return [(POOL_OVERRIDE_NAME, directory / POOL_OVERRIDE_NAME)]
        available = available_pools(directory)
        names = resolve_pool_names(self.settings.pools, available)
        return [(name, available[name]) for name in names]

    def _entries(self, pool_name: str, path: Path) -> list[PooledEntry]:
        """A pool's validated entries, parsed once per run (header and collection share them)."""
        if pool_name not in self._parsed:
            if pool_name == POOL_OVERRIDE_NAME and self.settings.pool_override is not None:
                entries = parse_pool(self.settings.pool_override, "POOL (environment)", self.rules)
            else:
                entries = read_pool_file(path, self.rules, self._display(path))
            self._parsed[pool_name] = entries
        return self._parsed[pool_name]

    def case_experiment(self, directory: Path) -> Experiment:
        """The replayed experiment of a case directory (loaded once; ids unique in the run)."""
        if directory not in self._cases:
            experiment = load_case(
                directory, directory.parent.name,
                default_gpus_per_node=self.settings.gpus_per_node,
                priority=self.priority_of(str(directory)),
                display=self._display(directory / CASE_FILE),
            )
            clash = next((d for d, e in self._cases.items() if e.key == experiment.key), None)
            if clash is not None:
                raise CaseError(f"{self._display(directory / CASE_FILE)}: case id "
                                f"{experiment.key!r} is already used by {self._display(clash)}")
            self._cases[directory] = experiment
        return self._cases[directory]

    def priority_of(self, key: str) -> int:
        """Start-order position of an experiment (pool order, then first asked)."""
        return self._priorities.setdefault(key, len(self._priorities))

    def experiments_of(self, pool_name: str, path: Path) -> list[Experiment]:
        if self.stored is not None and pool_name in self.stored:
            return self.stored[pool_name]
        entries = self._entries(pool_name, path)
        experiments = []
        for pooled in entries:
            priority = self.priority_of(pooled.entry.key)
            experiments.append(entry_to_experiment(
                pooled, workload=self.workload.name, gpus_per_node=self.settings.gpus_per_node,
                pool=pool_name, priority=priority,
            ))
        return experiments

    def _display(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.config.rootpath))
        except ValueError:
            return str(path)

    def header(self) -> list[str]:
        s = self.settings
        pools = "POOL (environment)" if s.pool_override is not None else ",".join(s.pools)
        if self.stored is not None:
            pools = ",".join(self.stored)
        if self.replays_only:
            pools = "none"
        count = self._count_experiments()
        return [
            f"faultloop: backend={s.backend} workload={self.workload.name} pools={pools} "
            f"({count}) gpus_per_node={s.gpus_per_node} batch_size={s.batch_size} "
            f"schedule={s.schedule}",
            f"faultloop: judge={s.judge} log_analyzer={_public(s.log_analyzer)} "
            f"fr_analyzer={_public(s.fr_analyzer)} fr_scope={s.fr_scope}"
            + (" reanalyze" if s.reanalyze else "")
            + (f" session={s.session}" if s.session else ""),
        ]

    def _count_experiments(self) -> str:
        if self.replays_only:
            return "stored cases: replay, no jobs"
        if self.stored is not None:
            count = sum(len(experiments) for experiments in self.stored.values())
            return f"{count} experiments stored in the session"
        try:
            keys = {pooled.entry.key
                    for name, path in self.selected_pool_files(self.pool_dir)
                    for pooled in self._entries(name, path)}
        except PoolError:
            return "invalid pool: see the collection error"
        return f"{len(keys)} experiments"

    # -- session, scheduler, runner -----------------------------------------------------------

    @property
    def lockdir(self) -> Path:
        return run_dir(self.config)

    @cached_property
    def session_path(self) -> Path:
        """The session directory the run's processes agreed on: given, found (``last``), or
        created for this run by the first process that needed one."""
        return agreed_session(self.lockdir, self._choose_session)

    def _choose_session(self) -> Path:
        from pytest_faultloop.session import create_session, find_session

        if self.settings.session:
            return find_session(self.settings.base_experiments_dir, self.settings.session)
        if self.settings.reanalyze:
            raise ConfigError(
                "--faultloop-reanalyze needs a session to re-analyze: add "
                "--faultloop-session last (or a session directory)"
            )
        return create_session(self.settings.base_experiments_dir)

    @cached_property
    def session(self) -> Session:
        from pytest_faultloop.report.markdown import report_header
        from pytest_faultloop.session import Session

        path = self.session_path
        session = Session(path, report_header())
        if not self.is_worker and not self.is_controller:
            self._progress = start_progress(self.config, lambda: path / EVENTS_NAME)
        return session

    def scheduler(self, order: list[str]) -> Scheduler:
        from pytest_faultloop.scheduler import Scheduler

        return Scheduler(self.lockdir, self.settings.batch_size, self.settings.schedule, order,
                         self.stop)

    @cached_property
    def runner(self) -> Runner:
        from pytest_faultloop.runner import Runner

        return Runner(self.config, self.settings, self.workloads, self.session,
                      self.scheduler(self.order), self.stamp, self._on_result)

    def _on_result(self, result: ExperimentResult) -> None:
        from pytest_faultloop.report.markdown import render_rows

        for row in render_rows(result.experiment.priority + 1, result):
            self.session.append_report_row(row)
        self.config.hook.pytest_faultloop_experiment_finished(config=self.config, result=result)

    # -- items --------------------------------------------------------------------------------

    @cached_property
    def pass_rule(self) -> PassRule:
        return PassRule(accept_partial=self.settings.accept_partial,
                        fr_scope=self.settings.fr_scope)

    def passes(self, dimension: str, value: str) -> bool | None:
        return self.pass_rule.passes(dimension, value)

    def describe(self, item: DimensionItem) -> None:
        """Attach the verdict to the item: properties (JUnit), a report section, plain data."""
        result = item.result
        assert result is not None
        verdict = result.verdict
        value = verdict.value(item.dimension) if verdict and result.broken is None else "N/A"
        notes = verdict.notes if verdict and result.broken is None else (
            f"{result.broken}: {result.reason}"
        )
        job_id = result.job.job_id if result.job else ""
        item.user_properties.extend([("value", value), ("job_id", job_id), ("notes", notes)])
        item.faultloop_info = {
            "key": item.experiment.key, "dimension": item.dimension, "value": value,
            "job_id": job_id, "notes": notes, "broken": result.broken or "",
            "experiment_dir": str(self.session.experiment_dir(item.experiment)),
        }
        item.add_report_section("call", "faultloop", section_text(result, item.dimension, value))

    def set_order(self, items: list[DimensionItem]) -> None:
        experiments = {i.experiment.key: i.experiment for i in items}
        ordered = sorted(experiments.values(), key=lambda e: e.priority)
        self.order = [e.key for e in ordered]
        self._experiments = ordered

    def start_prefetch(self) -> None:
        """Single process: queue every selected experiment now, so slots stay busy while
        earlier items are reported. (xdist workers run experiments as their items come.)"""
        if self.is_worker or self.is_controller or not self._experiments:
            return
        self.runner.prefetch(self._experiments)

    def attach(self, item: DimensionItem, report: pytest.TestReport) -> None:
        """Copy the verdict's plain data onto the report, plus pytest-html extras."""
        if not item.faultloop_info or report.when == "teardown":
            return
        if report.when == "setup" and report.passed:
            return
        info = dict(item.faultloop_info, outcome=report.outcome)
        report.faultloop = info  # type: ignore[attr-defined]
        if self.config.pluginmanager.hasplugin("html") and item.result is not None:
            from pytest_faultloop.html_hooks import html_extra
            from pytest_faultloop.report.html import item_extras

            extras = list(getattr(report, "extras", []))
            extras.append(html_extra(item_extras(item.result, self.pass_rule)))
            report.extras = extras  # type: ignore[attr-defined]

    # -- end of run ---------------------------------------------------------------------------

    @property
    def is_controller(self) -> bool:
        return not self.is_worker and self.config.getoption("dist", "no") != "no"

    def finish(self) -> None:
        """Stop background work; on the controller, re-render the report and record history
        for the experiments this run produced (in any process)."""
        self.stop_background()
        if self.is_worker or recorded_session(self.lockdir) is None:
            return
        done = self.scheduler(self.order).done_keys()
        if not done:
            return
        from pytest_faultloop.report.history import (
            append_history,
            history_path,
            read_history,
            record_from_results,
        )
        from pytest_faultloop.report.markdown import write_session_report
        from pytest_faultloop.report.results import load_results

        path, unreadable = write_session_report(self.session.path, self.pass_rule)
        self._summary.append(f"faultloop: report {path}")
        self._summary.extend(f"faultloop: unreadable result {u}" for u in unreadable)
        results = [r for r in load_results(self.session.path) if r.experiment.key in done]
        self._run_results = results
        fingerprints = {r.fingerprint for r in results if r.fingerprint}
        if not results or not fingerprints:
            return
        record = record_from_results(str(self.session.path), results,
                                     fingerprint=sorted(fingerprints)[0])
        history_file = history_path(self.settings.base_experiments_dir)
        append_history(history_file, record)
        self._summary.extend(self._loop_lines(read_history(history_file), record))

    def _loop_lines(self, history: list[Any], record: Any) -> list[str]:
        from pytest_faultloop.report.history import (
            compare,
            find_record,
            previous_record,
            stop_condition,
        )

        lines: list[str] = []
        if self.settings.compare:
            wanted = self.settings.compare
            earlier = history[:-1]
            previous = (previous_record(earlier, record.session) if wanted == "last"
                        else find_record(earlier, wanted))
            if previous is None:
                lines.append(f"faultloop: --faultloop-compare {wanted}: no such session in "
                             "the history")
            else:
                lines.append("faultloop: " + compare(record, previous, self.pass_rule).describe())
        lines.append("faultloop: stop condition: "
                     + stop_condition(history, self.pass_rule).describe())
        return lines

    def summary_lines(self) -> list[str]:
        if "session" not in self.__dict__ or self.is_worker:
            return []
        results = self._run_results
        broken = [r for r in results if r.broken]
        kinds = sorted({r.broken for r in broken if r.broken})
        counts = ", ".join(f"{sum(r.broken == k for r in broken)} {k}" for k in kinds)
        lines = [f"faultloop: session {self.session.path}",
                 f"faultloop: {len(results)} experiment(s): {len(results) - len(broken)} scored"
                 + (f", {len(broken)} without a valid score ({counts})" if broken else "")]
        agreement = judge_agreement(results)
        if agreement:
            lines.append(f"faultloop: {agreement}")
        return lines + self._summary

    def summary_matrix_html(self) -> str:
        if not self._run_results:
            return ""
        from pytest_faultloop.report.html import summary_matrix

        return summary_matrix(self._run_results, self.pass_rule)

    def stop_background(self) -> None:
        self.stop.set()
        if "runner" in self.__dict__:
            self.runner.join(timeout=120)
        if self._progress is not None:
            self._progress.close()
            self._progress = None

    def close(self) -> None:
        self.stop_background()


def activate(config: pytest.Config, pool_dir: Path, *, check: bool = True) -> Faultloop:
    """Create the run's state in this process and wire it in (raises ConfigError)."""
    state = Faultloop.create(config, pool_dir, check=check)
    config.stash[FAULTLOOP_KEY] = state
    if config.pluginmanager.hasplugin("html") and not state.is_worker:
        from pytest_faultloop.html_hooks import HtmlHooks

        config.pluginmanager.register(HtmlHooks(state), "faultloop-html")
    interrupt_on_sigterm(config)
    return state


def run_state(config: pytest.Config) -> Faultloop:
    """The run's state, created on first use when no pool or case was collected (a Python
    test asked for the ``faultloop`` fixture, or the controller finishes such a run)."""
    state = config.stash.get(FAULTLOOP_KEY, None)
    if state is None:
        state = activate(config, project_dir(config), check=False)
    return state


def project_dir(config: pytest.Config) -> Path:
    """Where a run without pools looks for ``workloads.toml``: ``experiments/`` under the
    root directory when it has one, else the root directory."""
    experiments = config.rootpath / "experiments"
    return experiments if experiments.is_dir() else config.rootpath


def judge_agreement(results: list[ExperimentResult]) -> str | None:
    """When both judges ran (hybrid), how often their labels agreed."""
    agreed = total = 0
    for result in results:
        ratio = result.verdict.extra.get("agreement") if result.verdict else None
        if ratio:
            same, of = ratio.split("/")
            agreed, total = agreed + int(same), total + int(of)
    if not total:
        return None
    return f"judges agreed on {agreed} of {total} labels ({100 * agreed // total}%)"


def section_text(result: ExperimentResult, dimension: str, value: str) -> str:
    """The report section: what the analyzers said, in a few lines."""
    lines = [f"{dimension}: {value}"]
    if result.job is not None:
        lines.append(f"job {result.job.job_id}: {result.job.state.value}"
                     + (f" (exit {result.job.exit_code})" if result.job.exit_code else ""))
    if result.broken is not None:
        lines.append(f"{result.broken}: {result.reason}")
    if result.log_analysis is not None:
        lines.append(f"log analyzer ({result.log_analysis.analyzer}): "
                     f"{result.log_analysis.decision_text}")
        lines.append(f"  {result.log_analysis.attribution_text}")
    if result.fr_analysis is not None:
        fr = result.fr_analysis
        lines.append(f"FR analyzer ({fr.analyzer}): suspects {fr.suspects or 'none'}, "
                     f"{fr.dumps_read} dump(s) read")
    if result.verdict is not None:
        lines.append(f"judge ({result.verdict.judge}): {result.verdict.notes}")
    return "\n".join(lines)


def _public(spec: str) -> str:
    """Analyzer specs may embed commands; show only their kind in headers."""
    return "cmd:…" if spec.startswith("cmd:") else spec


def _arg_paths(config: pytest.Config) -> list[Path]:
    paths = []
    for arg in config.args:
        path = Path(arg.split("::", 1)[0])
        if not path.is_absolute():
            path = Path(config.invocation_params.dir) / path
        paths.append(path)
    return paths


def _names_pools(path: Path) -> bool:
    return (path.suffix == POOL_SUFFIX or path.name == POOL_OVERRIDE_NAME
            or (path.is_dir() and any(path.glob(f"*{POOL_SUFFIX}"))))


def _holds_cases(path: Path) -> bool:
    return path.is_dir() and ((path / CASE_FILE).is_file() or any(path.rglob(CASE_FILE)))


def find_pool_dir(config: pytest.Config) -> Path | None:
    """The experiments directory when the run collects pools (an argument is a ``.pool`` file
    or a directory holding some) or stored cases (a directory holding ``case.toml`` files: the
    nearest directory above with pools, else the argument); else None: the plugin then stays
    out of the way."""
    for path in _arg_paths(config):
        if _names_pools(path):
            return path.parent if not path.is_dir() else path
    for path in _arg_paths(config):
        if _holds_cases(path):
            return next((d for d in path.parents if any(d.glob(f"*{POOL_SUFFIX}"))), path)
    return None


def replays_only(config: pytest.Config) -> bool:
    """No argument names pools: the run replays stored cases only."""
    return not any(_names_pools(path) for path in _arg_paths(config))
