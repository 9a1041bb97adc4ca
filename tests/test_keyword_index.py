"""keyword_index.KeywordIndex: the items whose keywords a text holds, in order."""

from __future__ import annotations

from pytest_faultloop.analyzers.log.keyword_index import KeywordIndex

INDEX = KeywordIndex(
    [("oom", ["out of memory"]), ("any", []), ("nccl", ["NCCL WARN", "ncclSystemError"])],
    sample="NCCL INFO out of memory",
)


def test_a_text_without_keywords_gets_the_keywordless_items() -> None:
    assert INDEX.holders("NCCL INFO Connected all rings") == ["any"]
    assert INDEX.holders("") == ["any"]


def test_the_holders_in_the_items_order() -> None:
    assert INDEX.holders("ncclSystemError: CUDA out of memory") == ["oom", "any", "nccl"]


def test_text_that_is_not_ascii_is_searched_too() -> None:
    assert INDEX.holders("│ NCCL WARN │") == ["any", "nccl"]
    assert INDEX.holders("\udc80 out of memory") == ["oom", "any"]  # a lone surrogate (JSON)
