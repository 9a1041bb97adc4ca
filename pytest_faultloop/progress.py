"""Print the session's progress lines (written by any process) on the controller's terminal."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

_PERIOD = 0.25


class ProgressPrinter:
    """Tails ``events.log`` in a thread and writes each new line through ``write_line``.

    ``locate`` gives the file's path, or None while no process of the run has chosen the
    session yet (asked again at every look)."""

    def __init__(
        self, locate: Callable[[], Path | None], write_line: Callable[[str], None]
    ) -> None:
        self.locate = locate
        self.path: Path | None = None
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
        if self.path is None:
            self.path = self.locate()
            if self.path is None:
                return
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


def start_progress(
    config: pytest.Config, locate: Callable[[], Path | None]
) -> ProgressPrinter | None:
    """A started printer writing to the terminal past any test's output capture (like pytest's
    live logging); None without a terminal reporter."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return None

    def write_line(line: str) -> None:
        if capture is None:
            reporter.write_line(line)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    printer = ProgressPrinter(locate, write_line)
    printer.start()
    return printer
