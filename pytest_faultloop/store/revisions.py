"""A session's revisions: each scoring of its jobs, kept side by side.

The session's own ``*/result.json`` files are always its latest published scoring (every
reader — the report, a continued run, the leaderboard, freeze — reads them). A re-analysis
first keeps them as they are as a revision (``revisions/<NAME>/<experiment>/result.json``,
unless the newest revision already holds exactly those), then writes what it re-scores aside,
into ``revisions/.<NAME>.partial/``, never into the session. Once it ends it publishes: the
results it did not re-score are added to the revision, the revision is renamed into place and
listed, and its results are copied over the session's. A journal (``revisions/.publishing``)
says which revision is being published, so a publication cut short by a kill is finished by
whoever opens the session next; a re-analysis killed before it published leaves the session
as it was, and its re-scored results are kept in ``revisions/abandoned/<time>/``. Only the
results are kept per revision: the jobs' artifacts stay where they are, shared by every
revision. ``revisions/revisions.jsonl`` lists them in order; ``SESSION@NAME`` names one
(``compare``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, ValidationError

from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.models.errors import ConfigError, SessionUnwritable
from pytest_faultloop.models.layout import RESULT, REVISIONS_DIR
from pytest_faultloop.store.results import load_results
from pytest_faultloop.store.stored_files import copy_file, read_bytes

REVISIONS = REVISIONS_DIR
INDEX = "revisions.jsonl"
JOURNAL = ".publishing"
ABANDONED = "abandoned"


class Revision(BaseModel):
    """One line of ``revisions.jsonl``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    time: datetime
    rescored: str | None = None
    """The revision this one re-scored; None for the results of the session's own runs."""


@dataclass(frozen=True)
class Reanalysis:
    """The two revisions of one re-analysis: the one it re-scores and the one it writes."""

    rescored: str
    writes: str

    def encoded(self) -> str:
        return f"{self.rescored}\t{self.writes}"

    @classmethod
    def decoded(cls, text: str) -> Reanalysis:
        rescored, writes = text.split("\t")
        return cls(rescored=rescored, writes=writes)


class SessionRevisions:
    """A session's revisions; every change to them (and every copy into the session's own
    results) is made under one lock, ``.revisions.lock``, which readers take too."""

    def __init__(self, session: Path) -> None:
        self.session = session
        self.root = session / REVISIONS
        self._lock = FileLock(str(session / f".{REVISIONS}.lock"))

    def all(self) -> list[Revision]:
        """The revisions in order (an unreadable line of the index is skipped)."""
        index = self.root / INDEX
        try:
            lines = index.read_bytes().splitlines()
        except FileNotFoundError:
            return []
        found = []
        for line in lines:
            try:
                found.append(Revision.model_validate_json(line))
            except ValidationError:
                continue
        return found

    def named(self, name: str) -> Revision | None:
        return next((r for r in self.all() if r.name == name), None)

    def results(self, name: str) -> list[ExperimentResult]:
        """The results a revision kept."""
        return load_results(self.root / name)

    def current(self, *, unreadable: list[str] | None = None) -> list[ExperimentResult]:
        """The session's published results: a publication a kill cut short is finished first,
        and none is read half-copied. A session this process cannot write is read as it is:
        it can finish no publication, and takes no lock."""
        try:
            self._lock.acquire()
        except OSError:
            return load_results(self.session, unreadable=unreadable)
        try:
            self._finish_publishing()
            return load_results(self.session, unreadable=unreadable)
        finally:
            self._lock.release()

    def staging(self, reanalysis: Reanalysis) -> Path:
        """Where the re-analysis writes what it re-scores until it publishes."""
        return self.root / f".{reanalysis.writes}.partial"

    def begin_reanalysis(self) -> tuple[Reanalysis, list[str]]:
        """Keep the session's results as they are now (unless the newest revision holds
        exactly them), name the revision the re-analysis will write and make its staging
        directory. Also returns what was found left by an earlier re-analysis that was killed
        (one line each). The caller holds the session alone (an exclusive claim).

        Raises SessionUnwritable when the revision cannot be written: nothing is left half
        written, the session's results are unchanged."""
        with self._lock:
            try:
                notes = [*self._finish_publishing(), *self._set_abandoned_aside()]
                revisions = self.all()
                newest = revisions[-1] if revisions else None
                if newest is None or not self._holds_current(newest.name):
                    newest = self._keep_current(self._next_name(), rescored=None)
                reanalysis = Reanalysis(rescored=newest.name, writes=self._next_name())
                self.staging(reanalysis).mkdir()
            except OSError as exc:
                raise SessionUnwritable(
                    f"cannot keep the scoring of session {self.session} as a revision before "
                    f"re-scoring it ({_why(exc, self.session)}); nothing was changed: make room "
                    "(or make the directory writable), then run the re-analysis again"
                ) from None
            return reanalysis, notes

    def publish(self, reanalysis: Reanalysis) -> Revision | None:
        """Make what the re-analysis wrote the session's newest revision and its results;
        None when it re-scored nothing (no revision is written then). Idempotent."""
        with self._lock:
            staging = self.staging(reanalysis)
            if not staging.is_dir():
                return self.named(reanalysis.writes)
            if not any(staging.glob(f"*/{RESULT}")):
                shutil.rmtree(staging)
                return None
            for result in self._current_files():  # what it did not re-score
                kept = staging / result.parent.name / RESULT
                if not kept.exists():
                    kept.parent.mkdir(exist_ok=True)
                    copy_file(result, kept)
            _write_replacing(
                self.root / JOURNAL,
                json.dumps({"name": reanalysis.writes, "rescored": reanalysis.rescored}).encode(),
            )
            self._finish_publishing()
            return self.named(reanalysis.writes)

    def _finish_publishing(self) -> list[str]:
        """Finish a publication the journal names (rename, list, copy into the session), each
        step done only if it was not; the journal goes last."""
        journal = self.root / JOURNAL
        try:
            entry = json.loads(journal.read_bytes())
        except FileNotFoundError:
            return []
        except ValueError:  # cut short while written: the publication had not begun
            journal.unlink()
            return []
        name, rescored = entry["name"], entry["rescored"]
        target = self.root / name
        staging = self.root / f".{name}.partial"
        if staging.is_dir() and not target.exists():
            staging.rename(target)
        if self.named(name) is None:
            self._list(Revision(name=name, time=datetime.now(UTC), rescored=rescored))
        for kept in target.glob(f"*/{RESULT}"):
            directory = self.session / kept.parent.name
            directory.mkdir(exist_ok=True)
            _copy_replacing(kept, directory / RESULT)
        journal.unlink()
        return [f"finished publishing revision {name} of {self.session} (a kill had cut it short)"]

    def _set_abandoned_aside(self) -> list[str]:
        """A staging directory without a live re-analysis (the caller holds the session
        alone) is one that was killed before it published: kept under ``abandoned/``."""
        notes = []
        for staging in sorted(self.root.glob(".r*.partial")):
            count = sum(1 for _ in staging.glob(f"*/{RESULT}"))
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            target = self.root / ABANDONED / f"{staging.name[1 : -len('.partial')]}-{stamp}"
            target.parent.mkdir(exist_ok=True)
            staging.rename(target)
            notes.append(
                f"an earlier re-analysis of {self.session} stopped before it published (it was "
                f"killed); the {count} result(s) it had re-scored are kept in {target}, the "
                "session's results are unchanged"
            )
        return notes

    def _current_files(self) -> list[Path]:
        """The session's ``result.json`` files; a link is none (readers refuse it, and it
        would carry whatever it points at into the revision)."""
        return [p for p in self.session.glob(f"*/{RESULT}") if not p.is_symlink()]

    def _current_bytes(self) -> dict[str, bytes]:
        return {p.parent.name: read_bytes(p) for p in self._current_files()}

    def _holds_current(self, name: str) -> bool:
        kept = {p.parent.name: read_bytes(p) for p in (self.root / name).glob(f"*/{RESULT}")}
        return kept == self._current_bytes()

    def _keep_current(self, name: str, rescored: str | None) -> Revision:
        """Copy the session's results into ``revisions/<name>/`` (whole or not at all, each
        file with its own permissions), then list the revision."""
        target = self.root / name
        staging = self.root / f".{name}.keeping"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        try:
            for result in self._current_files():
                (staging / result.parent.name).mkdir()
                copy_file(result, staging / result.parent.name / RESULT)
            staging.rename(target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        revision = Revision(name=name, time=datetime.now(UTC), rescored=rescored)
        self._list(revision)
        return revision

    def _list(self, revision: Revision) -> None:
        """Append the revision's line to the index (after a newline, should the last line
        have been cut short)."""
        index = self.root / INDEX
        with index.open("a+b") as out:
            out.seek(0, os.SEEK_END)
            if out.tell() > 0:
                out.seek(-1, os.SEEK_END)
                if out.read(1) != b"\n":
                    out.write(b"\n")
            out.write(revision.model_dump_json().encode() + b"\n")
            out.flush()
            os.fsync(out.fileno())

    def _next_name(self) -> str:
        """``r<N>``, N past every revision listed or lying there (an index line that cannot be
        read must not make a name taken twice)."""
        taken = [r.name for r in self.all()]
        taken += [p.name for p in self.root.glob("r*")] if self.root.is_dir() else []
        taken += [p.name[1:].split(".")[0] for p in self.root.glob(".r*.*")]
        numbers = [int(m.group(1)) for t in taken if (m := re.fullmatch(r"r(\d+)", t))]
        return f"r{max(numbers, default=-1) + 1}"


def _copy_replacing(source: Path, target: Path) -> None:
    """Replace ``target`` with a copy of ``source`` in one step (a reader never sees it half
    written)."""
    partial = target.with_name(f".{target.name}.publishing")
    copy_file(source, partial)
    os.replace(partial, target)


def _write_replacing(target: Path, data: bytes) -> None:
    partial = target.with_name(f".{target.name}.writing")
    partial.write_bytes(data)
    with partial.open("rb") as handle:
        os.fsync(handle.fileno())
    os.replace(partial, target)


def _why(exc: OSError, session: Path) -> str:
    where = Path(exc.filename) if exc.filename else None
    if where is not None and where.is_relative_to(session):
        where = where.relative_to(session)
    return f"{where}: {exc.strerror}" if where is not None else exc.strerror or str(exc)


def split_target(target: str) -> tuple[str, str | None]:
    """``SESSION@NAME`` -> (SESSION, NAME); anything else -> (target, None)."""
    session, at, name = target.rpartition("@")
    return (session, name) if at and session and name else (target, None)


def revision_results(session: Path, name: str, given: str) -> list[ExperimentResult]:
    """A revision's results; ConfigError naming the revisions the session has."""
    revisions = SessionRevisions(session)
    if revisions.named(name) is None:
        names = ", ".join(r.name for r in revisions.all()) or "none: no re-analysis yet"
        raise ConfigError(f"{given}: session {session} has no revision {name!r} (it has {names})")
    return revisions.results(name)


def session_path(given: str, base_experiments_dir: Path) -> Path:
    """A session given as its directory, or as its ``<stamp>`` under the base directory."""
    path = Path(given).expanduser()
    if path.is_dir():
        return path
    return base_experiments_dir / "fault_injection" / given


def check_compare_target(
    wanted: str, base_experiments_dir: Path, session: Path | None, reanalyze: bool
) -> None:
    """Refuse a ``--faultloop-compare`` target that cannot exist, before anything runs:
    ``last``; ``previous`` (a re-analysis: the revision it re-scores); ``SESSION@NAME``; a
    revision of the run's session; or a session directory."""
    given = f"--faultloop-compare {wanted}"
    if wanted == "last":
        return
    if wanted == "previous":
        if not reanalyze:
            raise ConfigError(
                f"{given}: pairs a re-analysis with the revision it re-scores; add "
                "--faultloop-reanalyze, or compare with 'last' or a session"
            )
        return
    target, name = split_target(wanted)
    if name is not None:
        revision_results(session_path(target, base_experiments_dir), name, given)
        return
    if session is not None and SessionRevisions(session).named(wanted) is not None:
        return
    if not session_path(wanted, base_experiments_dir).is_dir():
        raise ConfigError(
            f"{given}: not 'last', 'previous', a revision of the run's session (SESSION@NAME) "
            "nor a session directory; give one of those"
        )
