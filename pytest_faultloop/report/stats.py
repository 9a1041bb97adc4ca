"""Small-sample statistics for pass rates and run-over-run changes (pure functions).

- :func:`wilson`: the Wilson score interval of a binomial proportion.
- :func:`clustered_rate`: a pass rate over experiments each run several times, with an
  interval that treats the trials of one experiment as correlated.
- :func:`mcnemar_exact`: whether paired pass/fail changes are distinguishable from chance.
- :func:`cohen_kappa`: agreement of two labellers (e.g. two judges) beyond chance.
- :func:`pass_all`: pass^N, every trial of an experiment passed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.959964
"""The two-sided 95 % normal quantile."""


def rate_text(k: int, n: int, interval: tuple[float, float] | None = None) -> str:
    """``k/n (rate%, low–high)``: the rate with its 95 % interval (Wilson's unless given);
    ``—`` where n is 0."""
    if n <= 0:
        return "—"
    low, high = interval if interval is not None else wilson(k, n)
    return f"{k}/{n} ({round(100 * k / n)}%, {100 * low:.0f}–{100 * high:.0f})"


def wilson(k: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval ``(low, high)`` for ``k`` passes of ``n``; ``(0, 1)`` when n is 0.

    ``k`` and ``n`` may be fractional (an effective sample size, see :func:`clustered_rate`).
    """
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(max(p * (1 - p) / n + z2 / (4 * n * n), 0.0))
    low = 0.0 if k <= 0 else max(0.0, centre - half)
    high = 1.0 if k >= n else min(1.0, centre + half)
    return low, high


def clustered_rate(clusters: Sequence[tuple[int, int]]) -> tuple[float, float, float]:
    """``(rate, low, high)``: the pass rate of ``(k_i, n_i)`` clusters (k_i passes in n_i
    trials of experiment i) with a 95 % interval robust to correlation within a cluster.

    Method: Wilson on the effective sample size (Korn & Graubard 1998, Survey Methodology
    24:193-201). The rate is the ratio estimator p = sum k / sum n; its cluster (linearization)
    variance is ``sum (k_i - p n_i)^2 / N^2``; the design effect is that variance over the
    binomial ``p (1 - p) / N``, kept within ``[1, N / m]`` (no correlation .. perfect
    correlation, m clusters); Wilson is then applied to ``p n_eff`` of ``n_eff = N / deff``.
    Chosen over a normal interval on the ratio estimator because pass rates sit near 0 or 1,
    where that interval leaves [0, 1] or collapses to a point. When every rate is 0 or 1 the
    variance says nothing about correlation, so the conservative bound ``N / m`` is used. With
    every n_i == 1 the design effect is exactly 1 and the result is :func:`wilson`.
    """
    clusters = [(k, n) for k, n in clusters if n > 0]
    total = sum(n for _, n in clusters)
    if total == 0:
        return 0.0, 0.0, 1.0
    passes = sum(k for k, _ in clusters)
    p = passes / total
    largest = total / len(clusters)
    if p in (0.0, 1.0):
        deff = largest
    else:
        variance = sum((k - p * n) ** 2 for k, n in clusters) / total**2
        deff = min(max(variance / (p * (1 - p) / total), 1.0), largest)
    if deff == 1.0:
        return (p, *wilson(passes, total))
    n_eff = total / deff
    return (p, *wilson(p * n_eff, n_eff))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: the binomial test of ``b`` against ``b + c``
    discordant pairs with p = 0.5 (twice the smaller tail, at most 1; 1.0 when b = c = 0)."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must not be negative (b={b}, c={c})")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / (1 << n))


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa with its 95 % interval over ``n`` labelled items (nan when undefined)."""

    value: float
    low: float
    high: float
    n: int


def cohen_kappa(pairs: Sequence[tuple[str, str]], z: float = Z95) -> Kappa:
    """Cohen's kappa of two labellers' ``(first, second)`` labels, with a 95 % interval.

    The interval is ``kappa ± z SE`` with Cohen's (1960) large-sample standard error
    ``SE = sqrt(p_o (1 - p_o) / (N (1 - p_e)^2))`` (p_o observed, p_e chance agreement),
    clipped to [-1, 1]. Undefined (nan) without pairs or when chance agreement is 1 (both
    labellers always gave one and the same label).
    """
    n = len(pairs)
    nan = math.nan
    if n == 0:
        return Kappa(nan, nan, nan, 0)
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    chance = sum(first[label] * second[label] for label in first) / (n * n)
    if chance >= 1.0:
        return Kappa(nan, nan, nan, n)
    value = (observed - chance) / (1 - chance)
    se = math.sqrt(observed * (1 - observed) / (n * (1 - chance) ** 2))
    return Kappa(value, max(-1.0, value - z * se), min(1.0, value + z * se), n)


def pass_all(k: int, n: int) -> bool:
    """pass^N: all ``n`` trials passed (False when nothing ran)."""
    return n > 0 and k == n
