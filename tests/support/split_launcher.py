"""A job whose first node's launcher exits at once while the others run until ended.

Run by the local backend through ``tests/fixtures/jobs/split_exit.sh``. Node 0 writes its pid to
``$EXPERIMENT_DIR/node0.pid`` and exits 0; every other node sleeps until it is signalled.
"""

import os
import time
from pathlib import Path

if os.environ["SLURM_NODEID"] == "0":
    pid_file = Path(os.environ["EXPERIMENT_DIR"]) / "node0.pid"
    tmp = pid_file.with_suffix(".tmp")
    tmp.write_text(str(os.getpid()))
    tmp.replace(pid_file)
else:
    time.sleep(3600)
