"""Files the session writes follow the umask, like every other file the run writes; no job
starts where they could not be written."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.full_disk import release, small_filesystem
from support.report_samples import make_result

from pytest_faultloop.models.faults import FaultType
from pytest_faultloop.store.session_dir import (
    MIN_FREE_BYTES,
    SessionDir,
    SessionUnwritable,
    current_umask,
    write_atomic,
)


@pytest.fixture(params=[0o022, 0o002, 0o077])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def test_atomic_writes_get_the_mode_a_plain_write_gets(tmp_path: Path, umask: int) -> None:
    assert current_umask() == umask
    write_atomic(tmp_path / "result.json", "{}")
    (tmp_path / "plain").write_text("{}")
    mode = stat.S_IMODE((tmp_path / "result.json").stat().st_mode)
    assert mode == stat.S_IMODE((tmp_path / "plain").stat().st_mode) == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_no_job_starts_on_a_filesystem_with_less_free_space_than_a_run_needs(
    tmp_path: Path,
) -> None:
    """``prepare_job`` checks the 64 MB a job's logs and dumps need before the job starts (a
    real small tmpfs): the run stops naming what is free, and no experiment directory is made;
    writing the session's own small files still works there."""
    session = tmp_path / "session"
    small_filesystem(session, size_mb=MIN_FREE_BYTES // 2 >> 20)
    try:
        stops: list[str] = []
        sessions = SessionDir(session, "# report\n", on_unwritable=lambda: stops.append("stop"))
        experiment = make_result(FaultType.SIGKILL, 1).experiment
        with pytest.raises(
            SessionUnwritable, match=r"\d+ MB free on its filesystem, under the 64 MB"
        ):
            sessions.prepare_job(experiment)
        assert stops == ["stop"]
        assert not sessions.experiment_dir(experiment).exists()
        assert (session / "experiments.tsv").exists()
    finally:
        release(session)
