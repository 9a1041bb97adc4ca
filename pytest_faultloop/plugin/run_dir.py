"""This pytest run's directory in this process: the one the xdist controller handed over,
else created once (and removed when the run ends)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_faultloop.plugin.keys import RUNDIR_KEY, WORKERINPUT_KEY
from pytest_faultloop.store.rundir import create_run_dir


def run_dir(config: pytest.Config) -> Path:
    """This run's directory: the one the controller handed over, else created (once)."""
    path = config.stash.get(RUNDIR_KEY, None)
    if path is not None:
        return path
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and WORKERINPUT_KEY in workerinput:
        path = Path(workerinput[WORKERINPUT_KEY])
    else:
        path = create_run_dir()
        created = path
        config.add_cleanup(lambda: shutil.rmtree(created, ignore_errors=True))
    config.stash[RUNDIR_KEY] = path
    return path
