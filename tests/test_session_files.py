"""Files the session writes follow the umask, like every other file the run writes."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_faultloop.session_dir import current_umask, write_atomic


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
