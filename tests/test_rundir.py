"""The run directory every process of one pytest run shares."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pytest_faultloop.store.rundir import remove_abandoned


def test_a_run_directory_whose_creator_was_killed_is_removed_by_the_next_run(
    tmp_path: Path,
) -> None:
    """A pytest killed with SIGKILL cannot remove its run directory; the next run does, and
    leaves a live run's (and one still being created, without its pid yet) alone."""
    dead = subprocess.Popen(["true"])  # a pid that has ended
    dead.wait()
    abandoned, live, creating = (tmp_path / f"faultloop-run-{n}" for n in ("a", "b", "c"))
    for directory in (abandoned, live, creating):
        directory.mkdir()
    (abandoned / "owner.pid").write_text(str(dead.pid))
    (abandoned / "slot-0.lock").write_text("")
    (live / "owner.pid").write_text(str(os.getpid()))

    remove_abandoned(tmp_path)

    assert sorted(p.name for p in tmp_path.iterdir()) == ["faultloop-run-b", "faultloop-run-c"]
