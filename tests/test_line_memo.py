"""line_memo.by_line: per-line work done once per distinct line, in bounded memory."""

from __future__ import annotations

from collections.abc import Callable

from pytest_faultloop.analyzers.log.line_memo import MEMO_CHARS, MEMO_LINES, by_line


def _counting() -> tuple[list[str], Callable[[str], tuple[str, ...]]]:
    calls: list[str] = []

    @by_line
    def words(line: str) -> tuple[str, ...]:
        """The line's words."""
        calls.append(line)
        return tuple(line.split())

    return calls, words


def test_a_repeated_line_is_read_once() -> None:
    calls, words = _counting()
    first = words("NCCL INFO Connected all rings")
    again = words("NCCL INFO Connected all rings")
    assert again is first
    assert calls == ["NCCL INFO Connected all rings"]


def test_lines_that_differ_are_read_each() -> None:
    calls, words = _counting()
    assert words("rank 1") == ("rank", "1")
    assert words("rank 2") == ("rank", "2")
    assert calls == ["rank 1", "rank 2"]


def test_a_long_line_is_never_kept() -> None:
    calls, words = _counting()
    bar = "#" * (MEMO_CHARS + 1)
    words(bar)
    words(bar)
    assert calls == [bar, bar]


def test_the_memo_is_bounded() -> None:
    calls, words = _counting()
    for at in range(MEMO_LINES + 1):
        words(f"line {at}")
    words("line 0")  # the least recently used went first
    assert calls.count("line 0") == 2


def test_the_wrapper_keeps_the_functions_name_and_doc() -> None:
    _, words = _counting()
    assert words.__name__ == "words"
    assert words.__doc__ == "The line's words."
