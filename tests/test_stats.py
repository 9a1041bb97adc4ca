"""report/stats.py against published worked examples and hand calculations."""

from __future__ import annotations

import math

import pytest

from pytest_faultloop.report.stats import (
    clustered_rate,
    cohen_kappa,
    mcnemar_exact,
    pass_all,
    wilson,
)


# Newcombe RG (1998), "Two-sided confidence intervals for the single proportion: comparison of
# seven methods", Stat Med 17:857-872, Table I, method 3 (score / Wilson, no continuity
# correction): 81/263, 15/148, 0/20 and 1/29.
@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_matches_newcombe_1998(k: int, n: int, low: float, high: float) -> None:
    assert wilson(k, n) == pytest.approx((low, high), abs=5e-5)


def test_wilson_edges() -> None:
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(20, 20)[1] == 1.0 and wilson(0, 20)[0] == 0.0
    # all-pass by hand: low = n / (n + z^2) for k = n
    assert wilson(10, 10)[0] == pytest.approx(10 / (10 + 1.959964**2), abs=1e-12)


def test_clustered_rate_equals_wilson_when_each_experiment_ran_once() -> None:
    clusters = [(1, 1)] * 81 + [(0, 1)] * 182
    assert clustered_rate(clusters) == (81 / 263, *wilson(81, 263))
    assert clustered_rate([(1, 1), (0, 1), (1, 1)]) == (2 / 3, *wilson(2, 3))


def test_clustered_rate_widens_for_correlated_trials() -> None:
    # 4 experiments x 3 trials, each experiment all-pass or all-fail: perfectly correlated, so
    # the 12 trials carry the information of 4 (hand: p = 0.75, cluster variance
    # (3 * 0.75^2 + 2.25^2) / 144 = 0.046875, binomial 0.1875 / 12, design effect 3).
    rate, low, high = clustered_rate([(3, 3), (0, 3), (3, 3), (3, 3)])
    assert rate == 0.75
    assert (low, high) == pytest.approx(wilson(3, 4), abs=1e-12)
    assert (low, high) == pytest.approx((0.3006, 0.9544), abs=5e-5)
    # mixed outcomes (hand: residuals 0.75, -0.25, 0.75, -1.25; variance 2.75 / 144; design
    # effect 1.2222, n_eff = 12 / 1.2222 = 9.818): wider than Wilson on the 12 trials
    _, low, high = clustered_rate([(3, 3), (2, 3), (3, 3), (1, 3)])
    n_eff = 12 / ((2.75 / 144) / (0.1875 / 12))
    assert (low, high) == pytest.approx(wilson(0.75 * n_eff, n_eff), abs=1e-12)
    assert low < wilson(9, 12)[0] and high > wilson(9, 12)[1]
    # every trial passed: the conservative bound (one trial's worth per experiment)
    assert clustered_rate([(5, 5)] * 4) == (1.0, *wilson(4, 4))
    assert clustered_rate([]) == (0.0, 0.0, 1.0)


# Exact McNemar = two-sided binomial test on the discordant pairs, p = 0.5. Fagerland,
# Lydersen & Laake (2013), BMC Med Res Methodol 13:91, Table 1 (Bentur et al. 2009): b = 1,
# c = 7, exact conditional p = 0.070 (hand: 2 * (C(8,0) + C(8,1)) / 2^8 = 18/256 = 0.0703125).
@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (1, 7, 18 / 256),
        (7, 1, 18 / 256),
        (0, 5, 2 / 32),  # 0.0625: five improvements alone are not enough at 0.05
        (0, 6, 2 / 64),  # 0.03125
        (1, 9, 2 * 11 / 1024),  # 2 * (1 + 10) / 2^10 = 0.021484375
        (3, 3, 1.0),  # tail sum 42/64 doubled is over 1
        (0, 0, 1.0),
    ],
)
def test_mcnemar_exact(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(p, abs=1e-12)


def test_mcnemar_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="negative"):
        mcnemar_exact(-1, 2)


def _table(yy: int, yn: int, ny: int, nn: int) -> list[tuple[str, str]]:
    return [("y", "y")] * yy + [("y", "n")] * yn + [("n", "y")] * ny + [("n", "n")] * nn


def test_cohen_kappa_wikipedia_50_readers() -> None:
    # Wikipedia "Cohen's kappa", simple example: 50 applications, 20 yes/yes, 5 yes/no,
    # 10 no/yes, 15 no/no: p_o = 0.7, p_e = 0.5, kappa = 0.4. Interval by hand with Cohen's
    # (1960) SE: sqrt(0.7 * 0.3 / (50 * 0.5^2)) = 0.129615, 0.4 -/+ 1.959964 * SE.
    kappa = cohen_kappa(_table(20, 5, 10, 15))
    assert kappa.n == 50
    assert kappa.value == pytest.approx(0.4, abs=1e-4)
    assert (kappa.low, kappa.high) == pytest.approx((0.1460, 0.6540), abs=5e-5)


@pytest.mark.parametrize(
    ("cells", "value"),
    # Wikipedia "Cohen's kappa", "same percentages but different numbers": 0.1304 and 0.2593
    [((45, 15, 25, 15), 0.1304), ((25, 35, 5, 35), 0.2593)],
)
def test_cohen_kappa_wikipedia_same_agreement_different_kappa(
    cells: tuple[int, int, int, int], value: float
) -> None:
    assert cohen_kappa(_table(*cells)).value == pytest.approx(value, abs=5e-5)


def test_cohen_kappa_undefined_and_perfect() -> None:
    assert math.isnan(cohen_kappa([]).value)
    assert math.isnan(cohen_kappa([("a", "a")] * 3).value)  # chance agreement is 1
    perfect = cohen_kappa([("a", "a"), ("b", "b")] * 5)
    assert (perfect.value, perfect.high) == (1.0, 1.0)


def test_pass_all() -> None:
    assert pass_all(3, 3) and not pass_all(2, 3) and not pass_all(0, 0)
