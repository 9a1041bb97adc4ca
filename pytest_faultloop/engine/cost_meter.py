"""Metering the analysis stages: wall seconds, timeouts and LLM usage into ``AnalysisCosts``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from pytest_faultloop.models import AnalysisCosts, CostStage, Usage


class CostMeter:
    """Adds each metered stage to ``costs`` (one meter per experiment and pipeline stage)."""

    def __init__(self, costs: AnalysisCosts | None = None) -> None:
        self.costs = costs if costs is not None else AnalysisCosts()

    @contextmanager
    def stage(self, stage: CostStage) -> Iterator[None]:
        """Time the block with ``time.monotonic``, also when it raises; an exception whose
        ``timed_out`` is true marks the stage as timed out."""
        start = time.monotonic()
        try:
            yield
        except BaseException as exc:
            if getattr(exc, "timed_out", False) is True:
                self._add(timed_out=[*self.costs.timed_out, stage])
            raise
        finally:
            self._add(**{f"{stage}_s": round(time.monotonic() - start, 4)})

    def usage(self, stage: CostStage, usage: Usage | None) -> None:
        """Record the LLM usage an analysis or verdict reported (``None``: no LLM ran)."""
        if usage is not None and stage != "fr":
            self._add(**{f"{stage}_usage": usage})

    def _add(self, **update: object) -> None:
        self.costs = self.costs.model_copy(update=update)
