"""Old import path of ``analyze_log_llm``, kept only while ``builtin.py`` still imports it here.

Delete this module once ``builtin.py`` imports ``analyze_log_llm`` from
:mod:`pytest_faultloop.analyzers`.
"""

from __future__ import annotations

from pytest_faultloop.analyzers.log.llm_analyzer import analyze_log_llm

__all__ = ["analyze_log_llm"]
