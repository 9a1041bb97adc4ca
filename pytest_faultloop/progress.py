"""Print the session's progress lines (written by any process) on the controller's terminal."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

_PERIOD = 0.25


class ProgressPrinter:
    """Tails ``events.log`` in a thread and writes each new line through ``write_line``."""

    def __init__(self, path: Path, write_line: Callable[[str], None]) -> None:
        self.path = path
        self.write_line = write_line
        self._offset = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="faultloop-progress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._drain()

    def _run(self) -> None:
        while not self._stop.wait(_PERIOD):
            self._drain()

    def _drain(self) -> None:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return
        complete = data.rfind(b"\n") + 1
        self._offset += complete
        for raw in data[:complete].splitlines():
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            self.write_line(f"[{event['t']}] {event['line']}")
