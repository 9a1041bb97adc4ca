"""Two users on one host: the local backend's port leases and job-id counter under the temp
directory serve both, whoever came first and whatever their umasks. The second user is real:
a forked child of the test (run as root, as CI runs it) that drops to uid/gid 65534 (nobody).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_faultloop.jobs.backends.local import allocate_job_id
from pytest_faultloop.jobs.backends.ports import lease_port
from pytest_faultloop.jobs.backends.registry import check_host_files
from pytest_faultloop.models.errors import ConfigError

NOBODY = 65534

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="acting as a second user (uid 65534) needs root; CI runs the tests as root",
)


@pytest.fixture
def temp_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp directory of the test's own, shared like /tmp (1777), for both users: the
    leases under it are the test's alone, not the host's."""
    path = Path(tempfile.mkdtemp(prefix="faultloop-two-users-", dir="/tmp"))
    path.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(path))
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.fixture
def strict_umask() -> Iterator[None]:
    """The first user's umask keeps everything it makes to itself (077)."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


def as_nobody(work: Callable[[], object]) -> dict[str, Any]:
    """``work``'s answer, or its exception as ``type: message``, run by uid/gid 65534 in a
    forked child (the interpreter under /root could not be started as that user)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            try:
                answer: dict[str, Any] = {"ok": work()}
            except BaseException as exc:  # reported to the parent
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            os.write(write, json.dumps(answer).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    answer: dict[str, Any] = json.loads(data)
    return answer


def _counter(temp_dir: Path) -> Path:
    return temp_dir / "pytest-faultloop" / "local-job-id"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_second_user_leases_ports_and_job_ids_beside_the_first(
    temp_dir: Path, strict_umask: None
) -> None:
    first = lease_port()
    first_id = int(allocate_job_id(_counter(temp_dir)))
    ports = temp_dir / "pytest-faultloop" / "ports"
    lock = ports / f"{first.port}.lock"

    def second_user() -> dict[str, object]:
        with os.fdopen(os.open(lock, os.O_RDONLY)) as held:
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                first_held = False
            except BlockingIOError:
                first_held = True
        lease = lease_port()
        return {
            "uid": os.getuid(),
            "port": lease.port,
            "job_id": int(allocate_job_id(_counter(temp_dir))),
            "first_held": first_held,
        }

    try:
        answer = as_nobody(second_user)
    finally:
        first.release()
    assert "error" not in answer, answer
    second = answer["ok"]
    assert (second["uid"], second["job_id"], second["first_held"]) == (NOBODY, first_id + 1, True)
    assert second["port"] != first.port
    assert (_mode(ports.parent), _mode(ports)) == (0o1777, 0o1777)
    assert (_mode(lock), _mode(_counter(temp_dir))) == (0o444, 0o666)


def test_a_lease_directory_an_older_version_left_closed_stops_with_one_line(
    temp_dir: Path,
) -> None:
    """Made 0755 by the first user's older version: the second user's run stops before any
    job with one line naming the directory and the fix; the owner's next run opens it up."""
    old = temp_dir / "pytest-faultloop"
    (old / "ports").mkdir(parents=True, mode=0o755)
    old.chmod(0o755)
    _counter(temp_dir).write_text("1041")
    _counter(temp_dir).chmod(0o644)
    (old / "ports" / "20001.lock").touch(mode=0o644)

    def refused() -> str:
        try:
            check_host_files()
        except ConfigError as exc:
            return str(exc)
        return "not refused"

    assert as_nobody(refused)["ok"] == (
        f"{old}: owned by root with mode 0755 (left by an older pytest-faultloop), closed to "
        f"other users' runs on this host; ask root to run 'chmod 1777 {old}', or to remove it"
    )
    lease_port().release()  # the owner's run
    assert allocate_job_id(_counter(temp_dir)) == "1042"
    modes = (_mode(old), _mode(old / "ports"), _mode(_counter(temp_dir)))
    assert modes == (0o1777, 0o1777, 0o666)

    def second_user() -> str:
        check_host_files()
        lease_port().release()
        return allocate_job_id(_counter(temp_dir))

    assert as_nobody(second_user) == {"ok": "1043"}
