"""The seed's session directory: ``fault_injection/<YYYYMMDD_HHMMSS>/`` with the tracking TSV,
one directory per experiment holding ``result.json``, the report and a progress log."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock

from pytest_faultloop.models import (
    Attempt,
    Experiment,
    ExperimentResult,
    Job,
    JobState,
    UnreadableResult,
)
from pytest_faultloop.models.errors import ConfigError, SessionUnwritable
from pytest_faultloop.models.layout import MISSING_RESULT, RESULT, ExperimentLayout
from pytest_faultloop.store.results import read_result_file

TSV_NAME = "experiments.tsv"
TSV_HEADER = "JOB_ID\tFAULT_TYPE\tRANK\tITER\tNODES\tEXPERIMENT_DIR\tTRIAL\n"
"""The seed's six columns, then the trial (1 unless the experiment is repeated)."""
REBUILT_NAME = "experiments.tsv.rebuilt"
"""Beside a TSV that ``rebuild-tsv`` wrote from the result.json files: which of its lines."""
REPORT_NAME = "experiments_report.md"
EVENTS_NAME = "events.log"
SEQUENCE_NAME = ".sequence"
"""In a session directory: its number in the order the base directory's sessions were made."""
SEQUENCE_LOCK = ".sessions.lock"
UNREADABLE_ID = "unreadable-"
"""How the id starts that a set-aside unreadable result gets where the TSV names no job."""
MIN_FREE_BYTES = 64 << 20
"""Free space the session's filesystem must have before a job starts: a job that runs out of
space leaves a damaged run (truncated logs, no dumps, no exit status) that is no evidence."""


TSV_UNFIT = (
    "holds a tab, a line break or a byte that is not UTF-8, which experiments.tsv (one "
    "tab-separated row per job, its directory in a column) cannot hold; choose a directory "
    "without them"
)


def fits_the_tsv(path: Path) -> bool:
    """Whether the TSV's EXPERIMENT_DIR column can hold paths under ``path``: the seed's
    format, which other tools read, has no escapes, so such a path is refused, not escaped."""
    text = str(path)
    try:
        text.encode()  # a lone surrogate: a byte os.fsdecode could not decode
    except UnicodeEncodeError:
        return False
    return "\t" not in text and text.splitlines() == [text]


def sessions_root(base_experiments_dir: Path) -> Path:
    return base_experiments_dir / "fault_injection"


def create_session(base_experiments_dir: Path) -> Path:
    """A new, empty session directory named by the current time (suffixed when taken), with
    the next number of the base directory's sequence (``last`` is the highest)."""
    root = sessions_root(base_experiments_dir)
    stamp = datetime.now().strftime("%Y%m%d_%H%M%S")
    try:
        root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(root / SEQUENCE_LOCK)):
            number = max((n for n, _ in _numbered(root) if n is not None), default=0) + 1
            for attempt in range(1000):
                path = root / (stamp if attempt == 0 else f"{stamp}_{attempt}")
                try:
                    path.mkdir()
                except FileExistsError:
                    continue
                (path / SEQUENCE_NAME).write_text(f"{number}\n")
                return path
    except OSError as exc:
        raise ConfigError(unwritable_base(base_experiments_dir, exc)) from None
    raise ConfigError(f"{root}: cannot find a free session directory name for {stamp}")


def _numbered(root: Path) -> list[tuple[int | None, Path]]:
    """The session directories under ``root`` with their sequence numbers (None: a session
    made before sessions were numbered, or whose number cannot be read)."""
    found: list[tuple[int | None, Path]] = []
    for path in root.glob("[0-9]*_[0-9]*"):
        try:
            number: int | None = int((path / SEQUENCE_NAME).read_text())
        except (OSError, ValueError):
            number = None
        found.append((number, path))
    return found


def newest_session(root: Path) -> Path | None:
    """The session created last under ``root``: the highest sequence number, whatever the
    clocks and time zones of the runs that made them (a name is local time, so a run under
    another TZ, a daylight-saving fall-back or a host with a skewed clock would sort wrong).
    Sessions made before the numbering come before every numbered one, in name order. One
    whose TSV was lost but whose results are kept counts (it is refused with how to rebuild
    it, never passed over for an older one)."""
    sessions = [(n, p) for n, p in _numbered(root) if (p / TSV_NAME).is_file() or _has_results(p)]
    if not sessions:
        return None
    return max(sessions, key=lambda s: (s[0] is not None, s[0] or 0, s[1].name))[1]


def unwritable_base(base_experiments_dir: Path, exc: OSError) -> str:
    """The one-line error for a base directory the run cannot write in."""
    return (
        f"BASE_EXPERIMENTS_DIR={base_experiments_dir}: cannot write "
        f"{sessions_root(base_experiments_dir)} ({exc.strerror or exc}); point "
        "BASE_EXPERIMENTS_DIR (--faultloop-base-dir) at a writable directory"
    )


def find_session(base_experiments_dir: Path, given: str) -> Path:
    """``last`` -> the newest session under the base directory; else the directory given."""
    if given == "last":
        root = sessions_root(base_experiments_dir)
        newest = newest_session(root)
        if newest is None:
            raise ConfigError(
                f"--faultloop-session last: no session with an {TSV_NAME} under {root}; "
                "run once without --faultloop-session first"
            )
        path = newest
    else:
        path = Path(given).expanduser()
    if not (path / TSV_NAME).is_file() and (hint := tsv_rebuild_hint(path)):
        raise ConfigError(f"--faultloop-session {given}: {hint}")
    if not (path / TSV_NAME).is_file():
        raise ConfigError(
            f"--faultloop-session {given}: {path} is not a session directory "
            f"(no {TSV_NAME}); give a directory under .../fault_injection/ or 'last'"
        )
    if not fits_the_tsv(path):
        raise ConfigError(f"--faultloop-session {given!r}: {TSV_UNFIT}")
    return path


def _has_results(session: Path) -> bool:
    return any(session.glob(f"*/{RESULT}"))


def tsv_rebuild_hint(session: Path) -> str | None:
    """How to recover a session's missing TSV from its experiments' result.json files; None
    when it has none (then it is no session)."""
    count = sum(1 for _ in session.glob(f"*/{RESULT}")) if session.is_dir() else 0
    if not count:
        return None
    return (
        f"{session} has no {TSV_NAME}, but {count} experiment(s) keep their result.json: "
        f"rebuild it from them with: python -m pytest_faultloop rebuild-tsv {session}"
    )


def rebuild_tsv(session: Path, results: Sequence[ExperimentResult]) -> int:
    """Write the session's missing TSV from its stored ``results``: one row per job they
    name (earlier attempts included), in submission order; a job whose result is lost has
    none. A note beside it (``REBUILT_NAME``) says which lines were rebuilt, and every run's
    end repeats it. Returns the number of rows."""
    tsv = session / TSV_NAME
    if tsv.exists():
        raise ConfigError(f"{tsv} exists: rebuild-tsv only writes a missing one")
    jobs: dict[str, tuple[Job, Experiment]] = {}
    for result in results:
        if result.experiment.perturbation is not None:
            continue  # a perturbed copy names its experiment's job
        named = [a.job for a in result.attempts if not a.job.job_id.startswith(UNREADABLE_ID)]
        for job in [*named, *([result.job] if result.job else [])]:
            jobs.setdefault(job.job_id, (job, result.experiment))
    ordered = sorted(jobs.values(), key=lambda j: j[0].submitted_at or float("inf"))
    rows = [tsv_row(job, experiment, trial_column=True) for job, experiment in ordered]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    write_atomic(
        session / REBUILT_NAME,
        f"lines 2-{len(rows) + 1} were rebuilt from the result.json files on {stamp} by "
        "python -m pytest_faultloop rebuild-tsv, in submission order, not written as their "
        "jobs were submitted (a job whose result.json was lost has no row)\n",
    )
    write_atomic(tsv, TSV_HEADER + "".join(rows))
    return len(rows)


def tsv_row(job: Job, experiment: Experiment, trial_column: bool) -> str:
    """The job's TSV row, its newline included; RANK is the exported FAULT_RANK."""
    fault, nodes, rank, iteration = experiment.columns
    if experiment.entry is not None:
        rank = experiment.entry.rank_text
    cells = [job.job_id, fault, rank, iteration, nodes, str(job.experiment_dir)]
    if trial_column:
        cells.append(str(experiment.trial or 1))
    return "\t".join(cells) + "\n"


def write_atomic(path: Path, text: str, mode_of: Path | None = None) -> None:
    """Replace ``path`` with ``text`` in one step. A file it replaces (or ``mode_of``, the file
    it stands in for) keeps its permission bits (someone made it private on purpose); a new one
    gets the mode a plain write would give it (0666 less the umask: teammates on a shared
    cluster can read what the run wrote)."""
    try:
        replaced = os.lstat(mode_of or path)
    except FileNotFoundError:
        mode = 0o666 & ~current_umask()
    else:
        regular = stat.S_ISREG(replaced.st_mode)
        mode = stat.S_IMODE(replaced.st_mode) if regular else 0o666 & ~current_umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def current_umask() -> int:
    """The process's umask, read without changing it (``/proc/self/status`` on Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # elsewhere: read by setting it, and put it back at once
    os.umask(mask)
    return mask


def tsv_problems(session: Path) -> list[str]:
    """What is wrong with the TSV as stored (a row cut short, a missing header, a row that is
    not UTF-8), and which rows were rebuilt rather than written as their jobs were submitted:
    it is kept as it is, and said."""
    tsv = session / TSV_NAME
    try:
        data = tsv.read_bytes()
    except FileNotFoundError:
        return [f"{tsv}: missing"]
    lines = data.splitlines()
    header = lines[0].split(b"\t") if lines else []
    if header[:6] != TSV_HEADER.encode().split(b"\t")[:6]:
        return [f"{tsv}: line 1 is not the header ({TSV_HEADER.strip()!r})"]
    problems = []
    with suppress(OSError):  # no note: no rebuilt rows
        rebuilt = (session / REBUILT_NAME).read_text(errors="replace").strip()
        problems.append(f"{tsv}: {rebuilt}")
    for number, row in enumerate(lines[1:], start=2):
        cells = row.split(b"\t")
        if row and len(cells) != len(header):
            problems.append(
                f"{tsv}: line {number} has {len(cells)} columns, the header {len(header)}"
            )
        if not _utf8(row):
            problems.append(f"{tsv}: line {number} is not UTF-8")
    return problems


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


class SessionDir:
    """One session directory shared by every process of the run (xdist workers included).

    A write that fails raises SessionUnwritable after calling ``on_unwritable`` (the run's
    stop: nothing more could be recorded); what was written before stays as it is.
    """

    def __init__(
        self,
        path: Path,
        report_header: str,
        run: str = "",
        on_unwritable: Callable[[], None] = lambda: None,
        results_aside: Path | None = None,
    ) -> None:
        self.path = path
        self.run = run
        """The pytest run writing through this object (its progress lines carry it)."""
        self.results_aside = results_aside
        """A re-analysis: where its results go until it publishes them (the session's own
        ``result.json`` files stay the published scoring meanwhile)."""
        self._on_unwritable = on_unwritable
        self._lock = FileLock(str(path / ".session.lock"))
        with self._writing(), self._lock:
            tsv = path / TSV_NAME
            if not tsv.exists():
                tsv.write_text(TSV_HEADER)
            report = path / REPORT_NAME
            if not report.exists():
                report.write_text(report_header)

    @contextmanager
    def _writing(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            self._on_unwritable()
            raise session_unwritable(self.path, exc) from None

    def experiment_dir(self, experiment: Experiment) -> Path:
        return self.path / experiment.dirname

    def prepare(self, experiment: Experiment) -> Path:
        with self._writing():
            return ExperimentLayout(self.experiment_dir(experiment)).create()

    def prepare_job(self, experiment: Experiment) -> Path:
        """The experiment's directory, laid out for a job; the run stops (SessionUnwritable)
        when the session's filesystem is nearly full."""
        with self._writing():
            self._check_room()
        return self.prepare(experiment)

    def _check_room(self) -> None:
        """OSError (ENOSPC) when the session's filesystem has less free space than a job needs."""
        stat = os.statvfs(self.path)
        free = stat.f_bavail * stat.f_frsize
        if free < MIN_FREE_BYTES:
            raise OSError(
                errno.ENOSPC,
                f"{free >> 20} MB free on its filesystem, under the "
                f"{MIN_FREE_BYTES >> 20} MB a job needs",
            )

    def set_aside(self, experiment: Experiment, job: Job) -> Path:
        """Move an earlier attempt's files to ``attempts/<JOB_ID>/`` inside the experiment
        directory (kept, never mixed with the next attempt's; a second set-aside of the same
        job id gets its own directory) and lay the directory out anew for the next attempt's
        job. Without room for that job nothing moves (SessionUnwritable): the attempt's
        ``result.json`` stays the experiment's. An experiment directory that is a symbolic link
        is moved there as the link it is: nothing is written through it."""
        layout = ExperimentLayout(self.experiment_dir(experiment))
        with self._writing():
            self._check_room()
            if layout.root.is_symlink():
                link = layout.root.rename(layout.root.with_name(f".{layout.root.name}.link"))
                layout.root.mkdir()
                moving = {link: layout.root.name}
            else:
                moving = {p: p.name for p in layout.root.iterdir() if p != layout.attempts}
            target = layout.attempts / job.job_id
            suffix = 1
            while target.exists():
                suffix += 1
                target = layout.attempts / f"{job.job_id}.{suffix}"
            target.mkdir(parents=True)
            for path, name in moving.items():
                path.rename(target / name)
        self.prepare(experiment)
        return target

    def set_aside_unreadable(self, experiment: Experiment, unreadable: UnreadableResult) -> Attempt:
        """Keep everything the earlier job left, whose ``result.json`` cannot be read, under
        ``attempts/<JOB_ID>/`` (the job id from its TSV row; ``unreadable-<time>`` when the
        session has none), before the experiment runs again."""
        directory = self.experiment_dir(experiment)
        job_id = self._last_job_id(directory) or time.strftime(f"{UNREADABLE_ID}%Y%m%d-%H%M%S")
        reason = f"its stored result was unreadable ({unreadable.path.name}: {unreadable.why})"
        job = Job(
            job_id=job_id,
            backend="unknown",
            state=JobState.UNKNOWN,
            reason=reason,
            experiment_dir=directory,
        )
        moved = self.set_aside(experiment, job)
        return Attempt(job=job, reason=reason, kind="unreadable_result", moved_to=moved)

    def _last_job_id(self, directory: Path) -> str | None:
        """The job id of the session's last TSV row for ``directory``."""
        with self._writing():
            # a damaged row (not UTF-8) is no row of this directory's: it is kept as it is
            lines = (self.path / TSV_NAME).read_text(errors="replace").splitlines()[1:]
        ids = [
            c[0]
            for c in (line.split("\t") for line in lines)
            if len(c) > 5 and c[5] == str(directory)
        ]
        return ids[-1] if ids else None

    def record_submission(self, job: Job, experiment: Experiment) -> bool:
        """Append the job's TSV row unless it has one (False then), under the session lock,
        flushed (without the trial column in a session begun before it existed); RANK is the
        exported FAULT_RANK. The run's ledger is its one caller."""
        with self._writing(), self._lock:
            tsv = self.path / TSV_NAME
            lines = tsv.read_text(errors="replace").splitlines()  # a damaged row stays as it is
            if any(line.split("\t", 1)[0] == job.job_id for line in lines[1:]):
                return False
            row = tsv_row(job, experiment, bool(lines) and lines[0].endswith("\tTRIAL"))
            if lines and not tsv.read_bytes().endswith(b"\n"):
                row = "\n" + row  # a row cut short stays as it was, the new one on its own line
            with tsv.open("a") as handle:
                handle.write(row)
                handle.flush()
                os.fsync(handle.fileno())
        return True

    def write_result(self, result: ExperimentResult) -> None:
        published = ExperimentLayout(self.experiment_dir(result.experiment)).result
        target = published
        if self.results_aside is not None:
            target = ExperimentLayout(self.results_aside / result.experiment.dirname).result
        with self._writing():
            target.parent.mkdir(parents=True, exist_ok=True)
            text = result.model_dump_json(indent=2)
            write_atomic(target, text, mode_of=published if published.exists() else None)

    def read_result(self, experiment: Experiment) -> ExperimentResult | None:
        """The experiment's stored result (a re-analysis: the one it wrote aside, else the
        published one), None when it has none; raises UnreadableResult when one is stored
        but cannot be used, or is missing beside the files a job left (those files are then
        still all there)."""
        if self.results_aside is not None:
            aside = ExperimentLayout(self.results_aside / experiment.dirname).result
            if aside.exists():
                return read_result_file(aside)
        layout = ExperimentLayout(self.experiment_dir(experiment))
        try:
            return read_result_file(layout.result)
        except FileNotFoundError:
            if layout.root.is_dir() and layout.holds_job_files():
                raise UnreadableResult(layout.result, MISSING_RESULT) from None
            return None

    def append_report_row(self, row: str) -> None:
        with self._writing(), self._lock, (self.path / REPORT_NAME).open("a") as handle:
            handle.write(row if row.endswith("\n") else row + "\n")

    def event(self, line: str) -> None:
        """One progress line of this run; the controller prints them as they arrive."""
        stamp = time.strftime("%H:%M:%S")
        with self._writing(), self._lock, (self.path / EVENTS_NAME).open("a") as handle:
            handle.write(json.dumps({"t": stamp, "run": self.run, "line": line}) + "\n")


def session_unwritable(session: Path, exc: OSError) -> SessionUnwritable:
    """The one line for a session directory that refused a write: which file, why, and the
    way on."""
    where = Path(exc.filename) if exc.filename else None
    if where is not None and where.is_relative_to(session):
        where = where.relative_to(session)
    why = f"{where}: {exc.strerror}" if where is not None else exc.strerror or str(exc)
    return SessionUnwritable(
        f"cannot write the session directory {session} ({why}); "
        "the run stops, what it recorded is kept: make the directory writable (or free "
        f"space), then continue with --faultloop-session {session}"
    )
