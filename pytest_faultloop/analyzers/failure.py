"""The error an analyzer raises when it cannot produce an analysis at all."""

from __future__ import annotations

from pytest_faultloop.errors import FaultloopError


class AnalyzerError(FaultloopError):
    """An external analyzer failed (did not start, timed out, exited non-zero, unparseable output).

    The built-in analyzers never raise it: bad input gives them a result that says so.
    """
