"""What one pytest run has recorded about each experiment, shared by all its processes (xdist
workers included): the markers in the run directory and the job rows in the session's TSV.

Every transition goes through :class:`RunLedger`, so what one process did is what every other
reads: an experiment is *started* (announced, numbered), its job *ended* (pairs batches wait
for that), it is *done* (a final result is stored: another process takes it as it is), and
each job it ran has its TSV row, written once per job id.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock

from pytest_faultloop.models import Attempt, Experiment, ExperimentResult, Job
from pytest_faultloop.store.rundir import agreed, recorded
from pytest_faultloop.store.session_dir import SessionDir


class RunLedger:
    def __init__(self, run_dir: Path, session: SessionDir) -> None:
        self.run_dir = run_dir
        """The run directory the controller hands to every worker."""
        self.session = session

    def experiment_lock(self, key: str) -> FileLock:
        """Held while one process produces the experiment's result."""
        return FileLock(str(self.run_dir / f"{_safe(key)}.lock"))

    # -- started ------------------------------------------------------------------------------

    @contextmanager
    def started(self, key: str, among: set[str]) -> Iterator[int | None]:
        """Mark the experiment started and say how many of ``among`` (the run's pool
        experiments) have started, this one included, every process counted; None when it
        started before in this run (a resubmission). Held under a lock: lines written inside
        appear in number order."""
        with FileLock(str(self.run_dir / "starts.lock")):
            marker = self._marker(key, "started")
            if marker.exists():
                yield None
                return
            marker.write_text(key)
            yield len(started_keys(self.run_dir) & among)

    # -- ended --------------------------------------------------------------------------------

    def mark_ended(self, key: str) -> None:
        """The experiment's job has ended, or will not run, in this run."""
        self._marker(key, "ended").write_text(key)

    def has_ended(self, key: str) -> bool:
        return self._marker(key, "ended").exists()

    # -- done ---------------------------------------------------------------------------------

    def mark_done(self, key: str) -> None:
        """A final result of the experiment is stored for this run."""
        self._marker(key, "done").write_text(key)

    def is_done(self, key: str) -> bool:
        return self._marker(key, "done").exists()

    # -- jobs ---------------------------------------------------------------------------------

    def job_submitted(
        self, job: Job, experiment: Experiment, attempts: Sequence[Attempt] = ()
    ) -> None:
        """The job has an id: its TSV row, once per job id, and (the first time) the
        experiment's ``result.json`` holding the job and the experiment's earlier
        ``attempts``, so a run that stops now can re-attach to it and loses no attempt. Safe
        to call again for the same job."""
        if self.session.record_submission(job, experiment):
            self.session.write_result(
                ExperimentResult(experiment=experiment, job=job, attempts=list(attempts))
            )

    def _marker(self, key: str, state: str) -> Path:
        return self.run_dir / f"{_safe(key)}.{state}"


def started_keys(run_dir: Path) -> set[str]:
    """The experiments the run started (submitted or re-scored), from every process."""
    return {path.read_text() for path in run_dir.glob("*.started")}


def done_keys(run_dir: Path) -> set[str]:
    """The experiments the run has a final result for, from every process."""
    return {path.read_text() for path in run_dir.glob("*.done")}


def record_selection(run_dir: Path, cells: Mapping[str, Sequence[str]]) -> None:
    """The cells (experiment base key -> dimensions) the run selected, as the first process
    to collect saw them (xdist workers collect alike)."""
    agreed(run_dir, _SELECTION, lambda: json.dumps({k: list(v) for k, v in cells.items()}))


def selected_cells(run_dir: Path) -> dict[str, set[str]]:
    """The cells the run selected (empty when no process collected any pool or case)."""
    text = recorded(run_dir, _SELECTION)
    return {k: set(v) for k, v in json.loads(text).items()} if text else {}


_SELECTION = "selection.json"


def record_worker_crash(run_dir: Path, scope: str, note: str) -> None:
    """An xdist worker went down while running an item of ``scope`` (its experiment's node
    id): ``note`` says so, for the item that runs it again."""
    with FileLock(str(run_dir / f"{_CRASHES}.lock")), (run_dir / _CRASHES).open("a") as out:
        out.write(json.dumps({"scope": scope, "note": note}) + "\n")


def worker_crashes(run_dir: Path, scope: str) -> list[str]:
    """What ``record_worker_crash`` noted for ``scope``, in order."""
    try:
        lines = (run_dir / _CRASHES).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [row["note"] for row in map(json.loads, lines) if row["scope"] == scope]


_CRASHES = "worker-crashes.jsonl"


def _safe(key: str) -> str:
    """A file name for the key: readable, and distinct for distinct keys."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", key)[:80]
    return f"{readable}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"
