"""The error an analyzer raises when it cannot produce an analysis at all."""

from __future__ import annotations

from pytest_faultloop.models.errors import FaultloopError


class AnalyzerError(FaultloopError):
    """An external analyzer failed (did not start, timed out, exited non-zero, unparseable output).

    The built-in analyzers never raise it: bad input gives them a result that says so.
    ``timed_out`` marks a failure by timeout (counted apart in the costs).
    """

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out
