"""Print the session's progress lines (written by any process) on the controller's terminal."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

_PERIOD = 0.25


class ProgressPrinter:
    """Tails ``events.log`` in a thread and writes this run's new lines through ``write_line``.

    ``locate`` gives the file's path, or None while no process of the run has chosen the
    session yet (asked again at every look). Lines of other runs (a continued or re-analysed
    session's earlier runs) are never shown as this run's: one note counts them. A line that
    is no progress line (damaged on disk) is skipped, and a note counts those.

    Registered as a plugin, it holds its lock around pytest's own reporting of a test (start,
    result, progress percentage), so a line never lands inside ``path::test PASSED``."""

    def __init__(
        self,
        locate: Callable[[], Path | None],
        write_line: Callable[[str], None],
        run: str,
        plugins: pytest.PytestPluginManager | None = None,
    ) -> None:
        self.locate = locate
        self.path: Path | None = None
        self.write_line = write_line
        self.run = run
        self.earlier = 0
        """Lines of other runs seen (not printed)."""
        self._offset = 0
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._plugins = plugins
        """Where it registers while it runs (None: not a plugin)."""
        self._thread = threading.Thread(target=self._run, name="faultloop-progress", daemon=True)

    def start(self) -> None:
        if self._plugins is not None:
            self._plugins.register(self, f"faultloop-progress-{self.run}")
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._drain()
        if self._plugins is not None and self._plugins.is_registered(self):
            self._plugins.unregister(self)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logstart(self) -> Generator[None, None, None]:
        with self._lock:
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self) -> Generator[None, None, None]:
        with self._lock:
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logfinish(self) -> Generator[None, None, None]:
        with self._lock:
            return (yield)

    def _run(self) -> None:
        while not self._stop.wait(_PERIOD):
            try:
                self._drain()
            except ValueError:  # the terminal closed under it as the run ended: every line
                return  # is still in the session's events.log

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
        lines, earlier, unreadable = [], 0, 0
        for raw in data[:complete].splitlines():
            event = _progress_line(raw)
            if event is None:
                unreadable += 1
            elif event.get("run") == self.run:
                lines.append(f"[{event.get('t', '')}] {event['line']}")
            else:
                earlier += 1
        if earlier and not self.earlier:
            lines.insert(
                0,
                f"(not repeated: {earlier} progress line(s) of earlier runs of this session, "
                f"in {self.path})",
            )
        if unreadable:
            lines.insert(
                0, f"(skipped: {unreadable} unreadable line(s) in {self.path}, kept as they are)"
            )
        self.earlier += earlier
        with self._lock:
            for line in lines:
                self.write_line(line)


def _progress_line(raw: bytes) -> dict[str, Any] | None:
    """One line of ``events.log`` as written (``{"t", "run", "line"}``); None for anything else
    (bytes a damaged disk changed, a line cut short)."""
    try:
        event = json.loads(raw)
    except ValueError:  # UnicodeDecodeError included
        return None
    if not isinstance(event, dict) or not isinstance(event.get("line"), str):
        return None
    return event


def start_progress(
    config: pytest.Config, locate: Callable[[], Path | None], run: str
) -> ProgressPrinter | None:
    """A started printer writing to the terminal past any test's output capture (like pytest's
    live logging), each line on a line of its own; None without a terminal reporter."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return None

    def write_line(line: str) -> None:
        if capture is None:
            _own_line(reporter, line)
            return
        with capture.global_and_fixture_disabled():
            _own_line(reporter, line)

    printer = ProgressPrinter(locate, write_line, run, config.pluginmanager)
    printer.start()
    return printer


def _own_line(reporter: Any, line: str) -> None:
    """``line`` on a line of its own: pytest's reporter ends the line it writes a test file's
    results on (``ensure_newline``), but not the letters of ``-q`` or xdist runs or the
    ``[100%]`` after them, so the terminal writer's current line decides."""
    reporter.ensure_newline()
    if reporter.config.get_terminal_writer().width_of_current_line:
        reporter.line("")
    reporter.write_line(line)
