"""``python -m pytest_faultloop SUBCOMMAND``: the analyzers on their own, and reports.

Subcommands register in ``SUBCOMMANDS`` (name -> :class:`Subcommand`); add one by adding an entry.
Exit status 0 for an answer, whatever was found (a log without errors, an empty log, a directory
without dumps); 2 with one ``error:`` line naming the path and the fix when an input is missing
or unreadable or an output cannot be written.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args, get_origin

from pytest_faultloop.analyzers import (
    analyze_fr,
    analyze_log,
    analyze_log_naive,
    catalogue_table,
    dump_files,
    five_field_text,
)
from pytest_faultloop.engine.leaderboard import (
    configurations,
    decision_table,
    leaderboard_table,
    score_session,
    stability_table,
    workload_table,
)
from pytest_faultloop.inputs.freeze import freeze_session
from pytest_faultloop.inputs.perturb.catalogue import CATALOGUE, compositions
from pytest_faultloop.inputs.perturb.copies import perturbed_copy
from pytest_faultloop.inputs.settings import BY_FIELD, Settings
from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.models.errors import ConfigError, FaultloopError
from pytest_faultloop.models.layout import CHECKPOINTS
from pytest_faultloop.report.decision_errors import DecisionErrors
from pytest_faultloop.report.history import HistoryRecord, record_from_results
from pytest_faultloop.report.markdown import write_session_report
from pytest_faultloop.report.paired import mixed_line, paired_by_version
from pytest_faultloop.scoring.pass_rule import PassRule
from pytest_faultloop.store.revisions import (
    SessionRevisions,
    revision_results,
    session_path,
    split_target,
)
from pytest_faultloop.store.session_dir import (
    TSV_NAME,
    find_session,
    rebuild_tsv,
    sessions_root,
    tsv_rebuild_hint,
)

DESCRIPTION = (
    "The plugin's log and flight-recorder analyzers on their own, and the tools for stored "
    "sessions: reports, comparisons, leaderboards, frozen cases."
)
"""The help's description, in plain words (the docstring above is for readers of the code)."""


@dataclass(frozen=True)
class Subcommand:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    needs: str
    """What it reads and writes: the fix an I/O error's message names."""


def _log_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, help="the training log (any size)")
    parser.add_argument(
        "--analyzer",
        choices=("builtin", "naive"),
        default="builtin",
        help="builtin (default) or naive, the baseline (Root Cause rank, else the first rank "
        "on an error line)",
    )
    parser.add_argument("--json", action="store_true", help="print the analysis as one JSON object")


def _run_analyze_log(args: argparse.Namespace) -> int:
    with open(args.path, "rb"):  # a missing or unreadable log is an error here, not NO LOGS
        pass
    analysis = (analyze_log_naive if args.analyzer == "naive" else analyze_log)(args.path)
    if args.json:
        print(analysis.model_dump_json(indent=2, exclude={"raw_output"}))
    else:
        print(five_field_text(analysis))
    return 0


def _fr_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, help="directory of dumps, or a dump file prefix")
    parser.add_argument(
        "-p",
        "--pattern",
        default="_dump_*",
        help="glob for dump files (default: _dump_*)",
    )
    parser.add_argument("--json", action="store_true", help="print the analysis as one JSON object")
    row = BY_FIELD["fr_jobs"]
    parser.add_argument(
        "-j",
        "--jobs",
        type=_jobs,
        default=None,
        metavar=row.metavar,
        help=f"{row.help}; without it, {row.env} when set",
    )


def _jobs(text: str) -> int:
    """A number of processes: a whole number, at least 1 (argparse names the option)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a number of processes (at least 1)")
    return value


def _fr_jobs(args: argparse.Namespace) -> int | None:
    """``--jobs``, else the ``FAULTLOOP_FR_JOBS`` setting from the environment, else None."""
    if args.jobs is not None:
        return int(args.jobs)
    env = BY_FIELD["fr_jobs"].env or ""
    given = os.environ.get(env, "")
    if not given:
        return None
    try:
        return _jobs(given)
    except argparse.ArgumentTypeError as exc:
        raise FaultloopError(f"{env}={given!r} (from environment variable {env}): {exc}") from None


def _run_analyze_fr(args: argparse.Namespace) -> int:
    dumps, missing = dump_files(args.path, args.pattern)
    if missing is not None:
        raise FaultloopError(
            f"{missing}; pass the directory holding the dumps (…/checkpoints) or a dump file prefix"
        )
    if not dumps and (args.path / CHECKPOINTS).is_dir():
        raise FaultloopError(
            f"{args.path}: no dumps matching {args.pattern!r} here; an experiment directory "
            f"keeps them in {CHECKPOINTS}/: pass {args.path / CHECKPOINTS}"
        )
    analysis = analyze_fr(args.path, args.pattern, _fr_jobs(args))
    if args.json:
        print(analysis.model_dump_json(indent=2, exclude={"raw_output", "table"}))
    else:
        print(analysis.table)
    return 0


def _setting_argument(parser: argparse.ArgumentParser, field: str) -> None:
    """The setting's pytest row as a CLI argument (``--fr-scope``): the same help, metavar,
    type, choices and default."""
    row = BY_FIELD[field]
    name = "--" + field.replace("_", "-")
    if row.kind == "flag":
        parser.add_argument(name, action="store_true", help=row.help)
        return
    info = Settings.model_fields[field]
    choices = get_args(info.annotation) if get_origin(info.annotation) is Literal else None
    parser.add_argument(
        name,
        metavar=None if choices else row.metavar,
        choices=choices,
        default=info.default,
        type={"int": int, "float": float}.get(row.kind, str),
        help=row.help,
    )


def _rule_arguments(parser: argparse.ArgumentParser) -> None:
    _setting_argument(parser, "accept_partial")
    _setting_argument(parser, "fr_scope")


SESSION_HELP = (
    "a session: its directory (…/fault_injection/<stamp>), its <stamp> under --base-dir, or "
    "'last' (the newest session there)"
)


def _session_arguments(parser: argparse.ArgumentParser) -> None:
    """The session argument and the base directory it is found under."""
    parser.add_argument("session", help=SESSION_HELP)
    _base_dir_argument(parser)


def _base_dir_argument(parser: argparse.ArgumentParser) -> None:
    row = BY_FIELD["base_experiments_dir"]
    parser.add_argument(
        "--base-dir",
        type=Path,
        metavar=row.metavar,
        help=f"BASE_EXPERIMENTS_DIR, as {row.option}: a session given as 'last' or <stamp> is "
        f"found under <base-dir>/fault_injection/ (default: ${row.env}, else {_default_base()})",
    )


def _default_base() -> Path:
    default = Settings.model_fields["base_experiments_dir"].default
    assert isinstance(default, Path)
    return default


def _base_dir(args: argparse.Namespace) -> Path:
    """``--base-dir``, else ``BASE_EXPERIMENTS_DIR`` from the environment, else the pytest
    option's default: the same base directory a pytest run in this shell writes to."""
    if args.base_dir is not None:
        return Path(args.base_dir).expanduser()
    given = os.environ.get(BY_FIELD["base_experiments_dir"].env or "", "")
    return (Path(given) if given else _default_base()).expanduser()


def _session_dir(given: str, base_dir: Path) -> Path:
    """A session named on the command line: ``last`` (the newest under the base directory),
    its ``<stamp>`` there, or its directory."""
    if given != "last":
        return session_path(given, base_dir)
    try:
        return find_session(base_dir, "last")
    except ConfigError:
        raise FaultloopError(
            f"last: no session under {sessions_root(base_dir)}; give --base-dir (or "
            f"{BY_FIELD['base_experiments_dir'].env}) the base directory the runs wrote to, or "
            "the session's directory"
        ) from None


def _report_arguments(parser: argparse.ArgumentParser) -> None:
    _session_arguments(parser)
    _rule_arguments(parser)


def _holding_tsv(session: Path) -> Path:
    """``session``, unless it is no session directory: FaultloopError naming the fix (a
    missing TSV with the results there: how to rebuild it)."""
    if not (session / TSV_NAME).is_file():
        raise FaultloopError(
            tsv_rebuild_hint(session)
            or f"{session}: not a session directory (no {TSV_NAME}); pass "
            "…/fault_injection/<stamp>, its <stamp> or 'last'"
        )
    return session


def _run_report(args: argparse.Namespace) -> int:
    session = _holding_tsv(_session_dir(args.session, _base_dir(args)))
    rule = PassRule(accept_partial=args.accept_partial, fr_scope=args.fr_scope)
    path, unreadable = write_session_report(session, rule)
    for problem in unreadable:
        print(f"skipped unreadable result {problem}", file=sys.stderr)
    print(path)
    return 0


def _compare_arguments(parser: argparse.ArgumentParser) -> None:
    for name, when in (("before", "earlier"), ("after", "later")):
        parser.add_argument(
            name,
            help=f"the {when} session: its directory, its <stamp> under --base-dir, 'last' (the "
            "newest session there), each optionally @REVISION (a re-analysis' revision: "
            "SESSION@r0)",
        )
    _base_dir_argument(parser)
    _rule_arguments(parser)


def _session_record(given: str, base_dir: Path) -> tuple[HistoryRecord, list[ExperimentResult]]:
    """The session's (or its revision's) stored results, and as a history record;
    FaultloopError naming the fix."""
    target, revision = split_target(given)
    session = _session_dir(target, base_dir)
    if not session.is_dir():
        raise FaultloopError(
            f"{session}: no such session directory; pass …/fault_injection/<stamp> "
            "(or <stamp> with --base-dir)"
        )
    if revision is not None:
        results = revision_results(session, revision, given)
        return record_from_results(f"{session}@{revision}", results), results
    unreadable: list[str] = []
    results = SessionRevisions(session).current(unreadable=unreadable)
    for problem in unreadable:
        print(f"skipped unreadable result {problem}", file=sys.stderr)
    if not results:
        raise FaultloopError(
            f"{session}: no readable */result.json in this session; run it first or pick "
            "another session"
        )
    return record_from_results(str(session), results), results


def _run_compare(args: argparse.Namespace) -> int:
    rule = PassRule(accept_partial=args.accept_partial, fr_scope=args.fr_scope)
    (before, before_results), (after, after_results) = (
        _session_record(s, _base_dir(args)) for s in (args.before, args.after)
    )
    for record in (before, after):
        if line := mixed_line(record):
            print(line)
    for comparison in paired_by_version(before, after, rule):
        print(
            f"compared {comparison.before} -> {comparison.after}: "
            f"{comparison.paired} cell(s) paired"
        )
        print("\n".join(comparison.table()))
        print(comparison.overall.describe())
    for name, results in ((before.session, before_results), (after.session, after_results)):
        decisions = DecisionErrors.of(results)
        if decisions.matrix:
            print(f"restart decisions of {name}:")
            print("\n".join(decisions.markdown()))
    return 0


def _freeze_arguments(parser: argparse.ArgumentParser) -> None:
    _session_arguments(parser)
    parser.add_argument(
        "--into", type=Path, required=True, help="the corpus directory to write the cases into"
    )
    parser.add_argument(
        "--only",
        choices=("ALL", "FAILED"),
        default="ALL",
        help="every valid experiment (default) or only those with a failing dimension",
    )


def _run_freeze(args: argparse.Namespace) -> int:
    session = _holding_tsv(_session_dir(args.session, _base_dir(args)))
    frozen = freeze_session(session, args.into, args.only)
    for skipped in frozen.skipped:
        print(f"skipped {skipped}", file=sys.stderr)
    print(
        f"froze {len(frozen.written)} case(s) of {session} into {args.into}; replay them with: "
        f"pytest {args.into}"
    )
    return 0


def _rebuild_tsv_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "session", type=Path, help="a session directory (…/fault_injection/<stamp>) without its TSV"
    )


def _run_rebuild_tsv(args: argparse.Namespace) -> int:
    if not args.session.is_dir():
        raise FaultloopError(
            f"{args.session}: no such session directory; pass …/fault_injection/<stamp>"
        )
    unreadable: list[str] = []
    results = SessionRevisions(args.session).current(unreadable=unreadable)
    if not results:
        raise FaultloopError(
            f"{args.session}: no readable */result.json to rebuild {TSV_NAME} from"
        )
    rows = rebuild_tsv(args.session, results)
    for problem in unreadable:
        print(f"no row for the job of unreadable result {problem}", file=sys.stderr)
    print(
        f"rebuilt {args.session / TSV_NAME}: {rows} row(s) from {len(results)} result.json "
        "file(s), marked rebuilt"
    )
    return 0


def _run_signatures(args: argparse.Namespace) -> int:
    print("\n".join(catalogue_table()))
    return 0


def _perturb_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "source",
        type=Path,
        nargs="?",
        help="a log file, a case directory (case.toml), a corpus of cases, a dump directory "
        "or an experiment directory",
    )
    parser.add_argument(
        "--with",
        dest="names",
        metavar="NAMES",
        help="the perturbation(s): catalogue names, + to compose (ts+ansi), comma-separated "
        "(each its own copy under OUT), or all",
    )
    parser.add_argument("-o", "--output", type=Path, help="where the perturbed copy goes")
    parser.add_argument(
        "--culprit",
        type=int,
        action="append",
        default=None,
        help="a culprit rank, for FR perturbations of dumps that carry no truth (repeatable)",
    )
    _setting_argument(parser, "gpus_per_node")
    parser.add_argument("--list", action="store_true", help="print the catalogue and exit")


def _run_perturb(args: argparse.Namespace) -> int:
    if args.list:
        for entry in CATALOGUE.values():
            print(f"{entry.name:22} {entry.imitates}")
            print(f"{'':22} keeps the truth: {entry.keeps_truth}")
        return 0
    if args.source is None or args.names is None or args.output is None:
        raise FaultloopError(
            "perturb needs SOURCE, --with NAMES and -o OUT (or --list for the catalogue)"
        )
    chosen = compositions(args.names, "--with")
    if not args.source.exists():
        raise FaultloopError(f"{args.source}: no such file or directory; give a log or directory")
    culprits = tuple(args.culprit) if args.culprit else None
    for composition in chosen:
        target = args.output if len(chosen) == 1 else args.output / composition.name
        copy = perturbed_copy(args.source, target, composition, culprits, args.gpus_per_node)
        for skipped in copy.skipped:
            print(f"{composition.name}: skipped {skipped}", file=sys.stderr)
        print(f"{composition.name}: {args.source} -> {target} ({len(copy.written)} rewritten)")
    return 0


def _count(value: str) -> int:
    """A positive whole number (``3``), for argparse."""
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive whole number (e.g. 3)")
    return int(value)


def _share(value: str) -> float:
    """A share between 0 and 1 (``0.1``), for argparse."""
    try:
        share = float(value)
    except ValueError:
        share = -1.0
    if not 0 <= share <= 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a share between 0 and 1 (e.g. 0.1)")
    return share


def _leaderboard_arguments(parser: argparse.ArgumentParser) -> None:
    _session_arguments(parser)
    for field in ("log_analyzer", "fr_analyzer", "judge"):
        what = BY_FIELD[field].help  # the pytest option's row: one help for both
        parser.add_argument(
            "--" + field.replace("_", "-"),
            action="append",
            default=[],
            help=f"{what}; the Nth of each option forms the Nth configuration",
        )
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    parser.add_argument(
        "--repeat",
        type=_count,
        default=1,
        metavar="K",
        help="analyze the session K times per configuration and report the cases whose "
        "restart decision flipped (an LLM's or a command's; a deterministic analyzer shows 0)",
    )
    parser.add_argument(
        "--max-false-stop",
        type=_share,
        metavar="RATE",
        help=BY_FIELD["max_false_stop"].help.replace("the run", "(exit 1)")
        + "; every configuration is held to it",
    )
    parser.add_argument(
        "--perturb",
        metavar="NAMES",
        help="also score each experiment under these perturbations (catalogue names, + to "
        "compose, comma-separated, or all): a robustness column with the cells they lose",
    )
    _rule_arguments(parser)


def _run_leaderboard(args: argparse.Namespace) -> int:
    session = _session_dir(args.session, _base_dir(args))
    if not session.is_dir():
        raise FaultloopError(
            f"{session}: no such directory; give a session directory "
            "(…/fault_injection/<stamp>), its <stamp> or 'last'"
        )
    rule = PassRule(accept_partial=args.accept_partial, fr_scope=args.fr_scope)
    configs = configurations(args.log_analyzer, args.fr_analyzer, args.judge)
    perturbations = compositions(args.perturb, "--perturb") if args.perturb else []
    scored = score_session(session, configs, perturbations=perturbations)
    lines = leaderboard_table(scored, rule)
    by_workload = workload_table(scored, rule)
    if by_workload:
        lines += ["", "By workload (the framework each job ran on; median job s: start to end):"]
        lines += ["", *by_workload]
    if args.repeat > 1:
        runs = [scored] + [
            score_session(session, configs, perturbations=perturbations)
            for _ in range(args.repeat - 1)
        ]
        lines += ["", f"Decision stability ({args.repeat} analyses of the same artifacts each):"]
        lines += ["", *stability_table(runs)]
    if decisions := decision_table(scored):
        lines += ["", "Restart decisions (false STOP: a job killed that would have resumed; "]
        lines[-1] += "false RESTART: a restart loop):"
        lines += ["", *decisions]
    text = "\n".join(lines) + "\n"
    print(f"{session}: {len(configs)} configuration(s); p: exact McNemar against the first")
    print(text, end="")
    if args.markdown:
        args.markdown.write_text(text)
    failures = [
        f"{entry.configuration.name}: {failure}"
        for entry in scored
        if (failure := DecisionErrors.of(list(entry.results.values())).gate(args.max_false_stop))
    ]
    for failure in failures:
        print(f"FAILED the gate --max-false-stop: {failure}", file=sys.stderr)
    return 1 if failures else 0


SUBCOMMANDS: dict[str, Subcommand] = {
    "analyze-log": Subcommand(
        "attribute the failure in a training log (seed's five-field text or --json)",
        _log_arguments,
        _run_analyze_log,
        "the path of a readable training log file",
    ),
    "analyze-fr": Subcommand(
        "find where collectives diverge in flight-recorder dumps (nvrx table or --json)",
        _fr_arguments,
        _run_analyze_fr,
        "readable flight-recorder dumps",
    ),
    "compare": Subcommand(
        "paired comparison of two sessions: per dimension improved/regressed/same, McNemar p",
        _compare_arguments,
        _run_compare,
        "two readable session directories",
    ),
    "freeze": Subcommand(
        "turn a session's stored experiments into cases that replay without jobs",
        _freeze_arguments,
        _run_freeze,
        "a readable session directory and a writable --into directory",
    ),
    "leaderboard": Subcommand(
        "re-analyze a stored session once per analyzer configuration; rates with 95 % intervals "
        "and McNemar p-values against the first",
        _leaderboard_arguments,
        _run_leaderboard,
        "a readable session directory (and a writable --markdown file)",
    ),
    "signatures": Subcommand(
        "print the log analyzer's signature catalogue (tools, versions, roles) as Markdown",
        lambda parser: None,
        _run_signatures,
        "nothing",
    ),
    "perturb": Subcommand(
        "write a copy of a log, case, corpus or dump directory rewritten as a real log "
        "pipeline would (for analyzers run outside pytest); --list shows the catalogue",
        _perturb_arguments,
        _run_perturb,
        "a readable source and a writable -o directory or file",
    ),
    "report": Subcommand(
        "re-render a session's experiments_report.md from its stored result.json files",
        _report_arguments,
        _run_report,
        "a session directory it can read and write its report in",
    ),
    "rebuild-tsv": Subcommand(
        "write a session's missing experiments.tsv anew from its result.json files (one row "
        "per job they name; the rows are marked rebuilt)",
        _rebuild_tsv_arguments,
        _run_rebuild_tsv,
        "a session directory it can read and write its experiments.tsv in",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_faultloop",
        description=DESCRIPTION,
        epilog="A subcommand's own options: python -m pytest_faultloop SUBCOMMAND --help",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")
    for name, subcommand in SUBCOMMANDS.items():
        help_text = subcommand.help.replace("%", "%%")  # argparse formats help with %
        sub = commands.add_parser(name, help=help_text, description=subcommand.help)
        subcommand.add_arguments(sub)
        sub.set_defaults(run=subcommand.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except FaultloopError as exc:
        print(f"error: {exc}", file=sys.stderr)
    except BrokenPipeError:
        # the reader went away (``| head``): not the input's fault; nothing more to write
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        needs = SUBCOMMANDS[args.command].needs
        print(f"error: {where}{exc.strerror or exc}; {args.command} needs {needs}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
