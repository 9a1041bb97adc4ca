"""The ``local`` backend: runs a job on this machine, one launcher process per emulated node.

The job script names the module its Slurm tasks run with a directive line, e.g.
``# faultloop-local-launcher: pytest_faultloop.jobs.workload.launcher``; this backend runs that module
directly, once per node, with the environment Slurm would give the task (``SLURM_JOB_ID``,
``SLURM_NODEID``, ``SLURM_NNODES``, ``SLURMD_NODENAME``, ...) plus ``MASTER_ADDR``/``MASTER_PORT``
on a port leased for the job's life (:mod:`pytest_faultloop.jobs.backends.ports`). Each launcher runs
in its own session, so the job can be ended by process group. As the job script's
``srun ... >>LOG 2>&1`` would, each launcher's stdout and stderr are appended to the workload log
(``logs/slurm/<JOB_ID>.0.1.main_workload.log``); its own messages go to
``logs/slurm/<JOB_ID>.launcher.err`` (``FAULTLOOP_LAUNCHER_NOTES``), the backend's to
``logs/slurm/<JOB_ID>.launch.out`` / ``.launch.err``.

Job ids are numeric and unique on the host (a counter file under the temp directory, locked,
shared by every user's runs: :mod:`pytest_faultloop.jobs.backends.host_files`).
End states as Slurm names them: COMPLETED, FAILED (``code:signal`` of the first launcher that
failed), TIMEOUT (past ``time_limit_s``), CANCELLED. Ending a job sends SIGTERM (and SIGCONT) to
every launcher's process group, then SIGKILL after a grace period, and waits for the groups to
empty: nothing the job started survives it.

Signals reach only this job's processes (:mod:`pytest_faultloop.jobs.backends.process_groups`).

Each launcher runs under a shepherd that records how it ended
(:mod:`pytest_faultloop.jobs.backends.shepherd`), and the job's shepherds, the port and the deadline
are recorded in ``logs/slurm/<JOB_ID>.local.json``. Polling a job this backend did not submit
(one an earlier pytest run left running with ``--faultloop-keep-jobs``, or was killed beside)
adopts it from that record and follows it to its end, as if it had submitted it.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path
from typing import IO

from pytest_faultloop.jobs.backends.host_files import host_directory, open_shared
from pytest_faultloop.jobs.backends.local_record import (
    LocalJobRecord,
    NodeRecord,
    exit_file,
    note_stopped,
    start_ticks,
)
from pytest_faultloop.jobs.backends.ports import PortLease, lease_port
from pytest_faultloop.jobs.backends.process_groups import Launcher, RunningJob
from pytest_faultloop.jobs.backends.protocol import JobSpec
from pytest_faultloop.models import Job, JobState
from pytest_faultloop.models.layout import ExperimentLayout

DIRECTIVE = "# faultloop-local-launcher:"
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_FIRST_JOB_ID = 1000
JOB_ID_COUNTER = "local-job-id"


class LocalBackend:
    """Runs jobs as local processes; safe to use from several threads."""

    name = "local"

    def __init__(
        self,
        python: str = sys.executable,
        *,
        kill_grace_s: float = 5.0,
        job_id_file: Path | None = None,
    ) -> None:
        self.python = python
        self.kill_grace_s = kill_grace_s
        """Seconds between SIGTERM and SIGKILL when the backend ends a job (Slurm's KillWait)."""
        self.job_id_file = job_id_file
        self._jobs: dict[str, RunningJob] = {}
        self._lock = threading.Lock()

    # --- the Backend protocol ------------------------------------------------------------------

    def submit(self, spec: JobSpec) -> Job:
        now = time.time()
        job_id = allocate_job_id(self.job_id_file or job_id_counter())
        job = Job(
            job_id=job_id,
            backend=self.name,
            state=JobState.RUNNING,
            experiment_dir=spec.experiment_dir,
            submitted_at=now,
            started_at=now,
        )
        try:
            module = launcher_module(spec.script)
            self._check(spec)
        except ValueError as exc:
            return _refused(job, str(exc))
        layout = ExperimentLayout(spec.experiment_dir)
        paths = (
            layout.launch_out(job_id),
            layout.launch_err(job_id),
            layout.workload_log(job_id, 0),
        )
        try:
            layout.logs.mkdir(parents=True, exist_ok=True)
            # kept open for the job's life (the launchers write to them); closed by _watch
            streams: list[IO[bytes]] = [open(path, "ab") for path in paths]  # noqa: SIM115
        except OSError as exc:
            return _refused(job, f"cannot write the job's files in {layout.logs}: {exc.strerror}")
        try:
            port = lease_port()
        except OSError as exc:
            for stream in streams:
                stream.close()
            return _refused(job, str(exc))
        running = RunningJob(job, [], port, time.monotonic() + spec.time_limit_s, streams)
        try:
            streams[0].write(
                f">>> START local job {job_id}: {spec.nodes} node(s) x {spec.gpus_per_node} "
                f"rank(s), rendezvous 127.0.0.1:{port.port}, {_stamp()}\n".encode()
            )
            streams[0].flush()
            for node in range(spec.nodes):
                running.launchers.append(
                    Launcher.start(
                        [self.python, "-m", module],
                        exit_file(spec.experiment_dir, job_id, node),
                        self._node_env(spec, job_id, node, port.port),
                        streams[2],
                        streams[2],
                        spec.experiment_dir,
                    )
                )
            LocalJobRecord(
                job_id=job_id,
                nodes=[
                    NodeRecord(pid=launcher.pid, start_ticks=start_ticks(launcher.pid) or 0,
                               exit_file=launcher.exit_file)
                    for launcher in running.launchers
                ],
                port=port.port,
                deadline_epoch=now + spec.time_limit_s,
                submitted_at=now,
            ).write(spec.experiment_dir)  # fmt: skip
        except OSError as exc:  # nothing may run that a later run could not adopt
            self._terminate(running)
            running.reap()
            port.release()
            running.close_streams()
            return _refused(job, f"cannot start {self.python} -m {module}: {exc}")
        self._follow(running)
        return job.model_copy()

    def _follow(self, running: RunningJob) -> None:
        with self._lock:
            self._jobs[running.job.job_id] = running
        threading.Thread(
            target=self._watch, args=(running,), name=f"local-job-{running.job.job_id}", daemon=True
        ).start()

    def poll(self, job: Job) -> Job:
        with self._lock:
            running = self._jobs.get(job.job_id)
        if running is None:
            adopted = self._adopt(job)
            if adopted is None:
                return job.model_copy(
                    update={
                        "state": JobState.UNKNOWN,
                        "reason": f"job {job.job_id} was not submitted here and left no "
                        f"record to adopt it by",
                    }
                )
            running = adopted
        with self._lock:
            return running.job.model_copy()

    def _adopt(self, job: Job) -> RunningJob | None:
        """A job an earlier run submitted (and left running, or was killed beside): followed
        from its record to its end, never submitted again."""
        record = LocalJobRecord.read(job.experiment_dir, job.job_id)
        if record is None:
            return None
        layout = ExperimentLayout(job.experiment_dir)
        streams: list[IO[bytes]] = [
            open(path, "ab")  # noqa: SIM115 - closed by _watch
            for path in (
                layout.launch_out(job.job_id),
                layout.launch_err(job.job_id),
                layout.workload_log(job.job_id, 0),
            )
        ]
        running = RunningJob(
            job.model_copy(update={"state": JobState.RUNNING, "backend": self.name}),
            [Launcher.adopt(node) for node in record.nodes],
            PortLease(record.port, None),
            time.monotonic() + record.deadline_epoch - time.time(),
            streams,
            stop_reason=record.stopped,
        )
        with self._lock:
            if job.job_id in self._jobs:  # adopted by another thread meanwhile
                for stream in streams:
                    stream.close()
                return self._jobs[job.job_id]
        self._follow(running)
        if record.stopped is not None:  # the earlier run was ending it: finish that
            self._terminate(running)
        return running

    def cancel(self, job: Job) -> Job:
        self.poll(job)  # adopts a job an earlier run left, so that it can be cancelled here
        with self._lock:
            running = self._jobs.get(job.job_id)
            cancelling = (
                running is not None
                and running.stop_reason is None
                and not running.finished.is_set()
            )
            if cancelling and running is not None:
                running.stop_reason = JobState.CANCELLED
        if running is None or running.finished.is_set():
            return self.poll(job)
        if cancelling:
            note_stopped(job.experiment_dir, job.job_id, JobState.CANCELLED)
            self._note_end(running, "CANCELLED AT")
        self._terminate(running)
        running.finished.wait(timeout=self.kill_grace_s + 10)
        return self.poll(job)

    # --- internals ------------------------------------------------------------------------------

    @staticmethod
    def _check(spec: JobSpec) -> None:
        if spec.nodes < 1 or spec.gpus_per_node < 1:
            raise ValueError(
                f"a job needs at least one node and one rank per node, not "
                f"{spec.nodes} x {spec.gpus_per_node}"
            )
        if not spec.experiment_dir.is_dir():
            raise ValueError(f"experiment directory {spec.experiment_dir} does not exist")
        if spec.time_limit_s <= 0:
            raise ValueError(f"time limit must be positive, not {spec.time_limit_s} s")

    def _node_env(self, spec: JobSpec, job_id: str, node: int, port: int) -> dict[str, str]:
        env = dict(os.environ)
        for name in [n for n in env if n.startswith("SLURM") or n == "FAULT_TYPE"]:
            del env[name]  # nothing of an enclosing job (or an earlier experiment) leaks in
        env.update(spec.env)
        env.update(
            SLURM_JOB_ID=job_id,
            SLURM_JOBID=job_id,
            SLURM_JOB_NAME=spec.experiment.workload,
            SLURM_NNODES=str(spec.nodes),
            SLURM_JOB_NUM_NODES=str(spec.nodes),
            SLURM_JOB_NODELIST=f"n[1-{spec.nodes}]" if spec.nodes > 1 else "n1",
            SLURM_NODEID=str(node),
            SLURMD_NODENAME=f"n{node + 1}",
            SLURM_PROCID=str(node),
            SLURM_LOCALID="0",
            SLURM_NTASKS=str(spec.nodes),
            SLURM_RESTART_COUNT="0",
            SLURM_SUBMIT_DIR=os.getcwd(),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            GPUS_PER_NODE=str(spec.gpus_per_node),
            PYTHONUNBUFFERED="1",
            FAULTLOOP_LAUNCHER_NOTES=str(
                ExperimentLayout(spec.experiment_dir).launcher_notes(job_id)
            ),
        )
        env.setdefault("EXPERIMENT_DIR", str(spec.experiment_dir))
        return env

    def _watch(self, running: RunningJob) -> None:
        for launcher in running.launchers:
            if not launcher.wait_exited(max(0.0, running.deadline - time.monotonic())):
                with self._lock:
                    if running.stop_reason is None:
                        running.stop_reason = JobState.TIMEOUT
                        timed_out = True
                    else:
                        timed_out = False
                if timed_out:
                    note_stopped(running.job.experiment_dir, running.job.job_id, JobState.TIMEOUT)
                    self._note_end(running, "CANCELLED AT", " DUE TO TIME LIMIT")
                self._terminate(running)
                break
        for launcher in running.launchers:
            launcher.wait_exited(None)
        self._kill_leftovers(running)
        running.reap()
        running.port.release()
        running.close_streams()
        with self._lock:
            running.job = running.job.model_copy(update=running.end_state())
        running.finished.set()

    def _terminate(self, running: RunningJob) -> None:
        """SIGTERM (and SIGCONT) to every process group, SIGKILL after the grace period."""
        if not running.terminating.acquire(blocking=False):
            return
        running.signal_groups(signal.SIGTERM)
        running.signal_groups(signal.SIGCONT)
        deadline = time.monotonic() + self.kill_grace_s
        while time.monotonic() < deadline and running.groups_alive():
            time.sleep(0.1)
        self._kill_leftovers(running)

    @staticmethod
    def _kill_leftovers(running: RunningJob) -> None:
        running.signal_groups(signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and running.groups_alive():
            time.sleep(0.05)

    @staticmethod
    def _note_end(running: RunningJob, what: str, why: str = "") -> None:
        """The line slurmstepd writes to a job's stderr when it ends the job."""
        stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
        line = f"slurmstepd: error: *** JOB {running.job.job_id} ON n1 {what} {stamp}{why} ***\n"
        try:
            running.streams[1].write(line.encode())
            running.streams[1].flush()
        except (ValueError, OSError):  # closed (the job ended meanwhile), or a full disk
            pass


def _refused(job: Job, reason: str) -> Job:
    """The job as never started: SUBMIT_FAILED, with why."""
    update = {"state": JobState.SUBMIT_FAILED, "reason": reason, "started_at": None}
    return job.model_copy(update=update | {"ended_at": time.time()})


def launcher_module(script: Path) -> str:
    """The module a job script's tasks run, from its ``# faultloop-local-launcher:`` line."""
    try:
        text = script.read_text()
    except OSError as exc:
        raise ValueError(f"cannot read job script {script}: {exc.strerror}") from None
    for line in text.splitlines():
        if line.startswith(DIRECTIVE):
            module = line[len(DIRECTIVE) :].strip()
            if not _MODULE.fullmatch(module):
                raise ValueError(
                    f"{script}: {DIRECTIVE} names {module!r}, which is not a module name"
                )
            return module
    raise ValueError(
        f"{script} cannot run on the local backend: it has no '{DIRECTIVE} MODULE' line. "
        "The local backend does not run the script: it runs 'python -m MODULE' once per "
        f"emulated node. Add a line '{DIRECTIVE} MODULE' naming the module the script's srun "
        f"tasks run (tiny_gloo.sh has '{DIRECTIVE} pytest_faultloop.jobs.workload.launcher'), "
        "or use the slurm backend (--faultloop-backend=slurm), which submits the script "
        "with sbatch"
    )


def job_id_counter() -> Path:
    """The host's job-id counter, shared by every user's runs (PermissionError, one line, where
    its directory is closed to this user)."""
    return host_directory() / JOB_ID_COUNTER


def allocate_job_id(counter_file: Path) -> str:
    """The next job id on this host (a locked counter file shared by every process)."""
    counter_file.parent.mkdir(parents=True, exist_ok=True)
    with os.fdopen(open_shared(counter_file, os.O_RDWR, 0o666), "r+b") as counter:
        # bytes: a damaged counter is no number
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        text = counter.read().strip()
        job_id = int(text) + 1 if text.isdigit() else _FIRST_JOB_ID
        counter.seek(0)
        counter.truncate()
        counter.write(str(job_id).encode())
        counter.flush()
    return str(job_id)


def _stamp() -> str:
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
