"""A session's revisions: each scoring of its jobs, kept side by side.

The session's own ``*/result.json`` files are always its latest scoring (every reader — the
report, a continued run, the leaderboard, freeze — reads them). A re-analysis first keeps
them as they are as a revision (``revisions/<NAME>/<experiment>/result.json``, unless the
newest revision already holds exactly those), re-scores, then keeps what it wrote as the next
revision, naming the one it re-scored. Only the results are kept per revision: the jobs'
artifacts stay where they are, shared by every revision. ``revisions/revisions.jsonl`` lists
them in order; ``SESSION@NAME`` names one (``compare``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, ValidationError

from pytest_faultloop.errors import ConfigError
from pytest_faultloop.layout import RESULT, REVISIONS_DIR
from pytest_faultloop.models import ExperimentResult
from pytest_faultloop.report.results import load_results

REVISIONS = REVISIONS_DIR
INDEX = "revisions.jsonl"


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
    def __init__(self, session: Path) -> None:
        self.session = session
        self.root = session / REVISIONS

    def all(self) -> list[Revision]:
        """The revisions in order (an unreadable line of the index is skipped)."""
        index = self.root / INDEX
        if not index.is_file():
            return []
        found = []
        for line in index.read_text().splitlines():
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

    def begin_reanalysis(self) -> Reanalysis:
        """Keep the session's results as they are now (unless the newest revision holds
        exactly them) and name the revision the re-analysis will write."""
        with FileLock(str(self.session / f".{REVISIONS}.lock")):
            revisions = self.all()
            newest = revisions[-1] if revisions else None
            if newest is None or not self._holds_current(newest.name):
                newest = self._keep(_next_name(revisions), rescored=None)
                revisions.append(newest)
            return Reanalysis(rescored=newest.name, writes=_next_name(revisions))

    def finish_reanalysis(self, reanalysis: Reanalysis) -> Revision:
        """Keep what the re-analysis wrote as its revision."""
        with FileLock(str(self.session / f".{REVISIONS}.lock")):
            existing = self.named(reanalysis.writes)
            if existing is not None:
                return existing
            return self._keep(reanalysis.writes, rescored=reanalysis.rescored)

    def _current(self) -> dict[str, bytes]:
        return {p.parent.name: p.read_bytes() for p in self.session.glob(f"*/{RESULT}")}

    def _holds_current(self, name: str) -> bool:
        kept = {p.parent.name: p.read_bytes() for p in (self.root / name).glob(f"*/{RESULT}")}
        return kept == self._current()

    def _keep(self, name: str, rescored: str | None) -> Revision:
        """Copy the session's results into ``revisions/<name>/`` (whole or not at all), then
        list the revision."""
        target = self.root / name
        staging = self.root / f".{name}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        for directory, data in self._current().items():
            (staging / directory).mkdir(parents=True)
            (staging / directory / RESULT).write_bytes(data)
        staging.mkdir(parents=True, exist_ok=True)
        staging.rename(target)
        revision = Revision(name=name, time=datetime.now(UTC), rescored=rescored)
        with (self.root / INDEX).open("a") as index:
            index.write(revision.model_dump_json() + "\n")
        return revision


def _next_name(revisions: list[Revision]) -> str:
    return f"r{len(revisions)}"


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
