"""train-nb's budget allocation (dpcli.algorithms.nb_allocation): a rule of public facts.

The rule reads no record (it is given a schema, n and ε only), so it has no
sensitivity to test; what is tested is that it is the rule it claims to be: the
Lagrange optimum of Σ (c_i/ε_i)², shares that add up to ε exactly, the public-variance and
smooth-fallback switches on the right side of their public bounds, the spec override and
the threshold's share.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpcli.algorithms import naive_bayes as nb
from dpcli.algorithms import nb_allocation as na
from dpcli.budget import Budget
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Label,
    NumericColumn,
    Schema,
)

SCHEMA = Schema(columns=(NumericColumn("x", lower=0.0, upper=10.0),
                         NumericColumn("y", lower=-5.0, upper=5.0),
                         CategoricalColumn("c", categories=tuple("abcdefg")),
                         BinaryColumn("b")),
                label=Label("label", ("0", "1")))
COLUMNS = ("x", "y", "c", "b")


def _alloc(n: int, eps: float, **kw) -> na.Allocation:
    # the Gaussian rules (mean and variance) unless a test asks for the histogram
    args = {"method": "global", "trim": 0.05, "gamma": 4.0, "split": None, "threshold": True,
            "numeric": "gaussian"}
    return na.allocate(SCHEMA, COLUMNS, n=n, epsilon=eps, **{**args, **kw})


def test_shares_add_up_exactly_and_follow_c_to_the_two_thirds() -> None:
    a = _alloc(100_000, 1.0)
    total = sum(a.weights.values(), Fraction(0)) + na.threshold_share(100_000, 1.0)
    assert total == 1
    k, n = 2, 100_000
    # the prior is every global numeric statistic's denominator: two means and two variances
    c = {"prior": 2 * k / n * (1 + 2 * (1 + math.sqrt(2))), "mean:x": 6 * k / n,
         "variance:x": 9 * k / (math.sqrt(2) * n),
         "counts:c": 2 * k * 8 / n, "counts:b": 2 * k * 2 / n}
    for name, weight in c.items():
        ratio = float(a.weights[name] / a.weights["prior"])
        assert ratio == pytest.approx((weight / c["prior"]) ** (2 / 3), rel=1e-3), name
    assert a.weights["mean:x"] == a.weights["mean:y"]   # scale-free: the bounds cancel


def test_the_rule_is_the_minimum_of_the_squared_error() -> None:
    """Σ (c_i/ε_i)² at the rule's split is below that of every random split of the same ε."""
    a = _alloc(100_000, 1.0, threshold=False)
    names = list(a.weights)
    c = np.array([na.error_weight(SCHEMA, name.split(":")[-1] if ":" in name else "",
                                  name.split(":")[0] if ":" in name else "prior", 100_000, 2)
                  for name in names])
    c[names.index("prior")] *= na.prior_coupling(SCHEMA, COLUMNS, a.methods, a.public_variance)
    eps = np.array([float(a.weights[name]) for name in names])

    def loss(e: np.ndarray) -> float:
        return float(np.sum((c / e) ** 2))

    best = loss(eps)
    rng = np.random.default_rng(0)
    for _ in range(2000):
        other = eps * np.exp(rng.normal(0, 0.3, eps.size))
        assert loss(other / other.sum()) >= best * (1 - 1e-6)


def test_variance_is_public_when_its_noise_would_exceed_the_typical_variance() -> None:
    small = _alloc(300, 0.1)
    assert set(small.public_variance) == {"x", "y"}
    assert not any(k.startswith("variance:") for k in small.weights)
    assert "variance not released" in " ".join(small.reasons)
    big = _alloc(1_000_000, 1.0)
    assert big.public_variance == ()
    # the switch is the public bound: noise scale h²·K/(n·ε_var) against ((U−L)/6)²
    for a, n, eps in ((small, 300, 0.1), (big, 1_000_000, 1.0)):
        kept = _alloc(n, eps, split={"prior": 1, "categorical": 1, "mean": 1, "variance": 1})
        assert kept.public_variance == ()   # an explicit split releases every variance
        if a is big:
            eps_var = eps * float(a.weights["variance:x"])
            assert 25 * 2 / (n * eps_var) <= (10 / 6) ** 2


def test_smooth_falls_back_to_global_where_its_noise_cannot_win() -> None:
    small = _alloc(2_000, 1.0, method="smooth")
    assert small.fallback == ("x", "y") and set(small.methods.values()) == {"global"}
    huge = _alloc(50_000_000, 2.0, method="smooth")
    assert huge.fallback == () and set(huge.methods.values()) == {"smooth"}
    explicit = _alloc(2_000, 1.0, method="smooth",
                      split={"prior": 1, "categorical": 1, "mean": 1, "variance": 1})
    assert explicit.fallback == () and explicit.rule == "spec"


def test_smooth_lower_bound_is_below_the_real_smooth_noise() -> None:
    """The fallback's public bound never exceeds the noise the smooth mechanism really uses:
    on data concentrated at one point (the smallest local sensitivity there is)."""
    from dpcli.mechanisms.smooth import smooth_beta
    from dpcli.mechanisms.smooth_stats import smooth_sensitivity_trimmed_mean, trim_count

    col = NumericColumn("x", lower=0.0, upper=10.0)
    for n_c, eps in ((200, 1.0), (2_000, 0.5), (20_000, 0.1)):
        m = trim_count(n_c, 0.05)
        beta = smooth_beta(eps / 2, 4.0)
        values = np.full(n_c, 5.0)
        s = smooth_sensitivity_trimmed_mean(values, m=m, beta=beta, lower=0.0, upper=10.0)
        bound = math.exp(-beta * m) * col.width / (n_c - 3 * m - 1)
        assert bound <= s * (1 + 1e-9)


def test_threshold_share_is_a_tenth_until_n_eps_is_large() -> None:
    assert na.threshold_share(4_000, 1.0) == Fraction(1, 10)
    assert na.threshold_share(30_162, 0.1) == Fraction(1, 10)     # Adult at ε = 0.1: kept
    assert na.threshold_share(10_000_000, 1.0) < Fraction(1, 100)
    assert _alloc(400, 1.0, threshold=False).weights.keys().isdisjoint({"threshold"})
    p = nb.plan(SCHEMA, COLUMNS, Budget(1.0), nb.NBConfig(), n=4_000)
    # the threshold's share: 3/4 choose the cut, 1/4 checks the rows predicted positive
    assert p.step("threshold").budget.eps == pytest.approx(0.075)
    assert p.step("threshold").mechanism == "exponential"
    assert p.step("threshold_check").budget.eps == pytest.approx(0.025)
    assert p.step("threshold_check").mechanism == "discrete_laplace"


def test_threshold_share_rises_to_the_prior_quantiles_need_at_small_n_eps() -> None:
    """Below n·ε ≈ 2,090 the share is the quantile's need 20·(ln C + 3)/((3/4)·n·ε), at
    most 1/4: at that share the quantile's ε·(n/10)/2 reaches ln C + 3."""
    need = na.quantile_need(1_258, 1.0)
    assert need == pytest.approx(20 * (math.log(128) + 3) / (0.75 * 1_258))
    assert float(na.threshold_share(1_258, 1.0)) == pytest.approx(need, rel=1e-3)
    eps_q = float(na.threshold_share(1_258, 1.0) * (1 - na.CHECK_PART))
    assert eps_q * (1_258 / 10) / 2 == pytest.approx(math.log(128) + 3, rel=1e-3)
    assert na.threshold_share(398, 1.0) == na.QUANTILE_MAX_SHARE       # breast_cancer: capped
    assert na.threshold_share(1_258, 0.5) == na.QUANTILE_MAX_SHARE
    shares = [na.threshold_share(n, 1.0) for n in (100, 500, 1_000, 2_000, 4_000, 10**6)]
    assert shares == sorted(shares, reverse=True)                       # never rises with n
    assert all(Fraction(1, 10) <= s <= Fraction(1, 4) for s in shares[:-1])
    p = nb.plan(SCHEMA, COLUMNS, Budget(1.0), nb.NBConfig(), n=400)
    assert p.step("threshold").budget.eps == pytest.approx(0.25 * 0.75)
    assert float(p.total.eps) == pytest.approx(1.0, abs=1e-15)
    p = nb.plan(SCHEMA, COLUMNS, Budget(1.0), nb.NBConfig(threshold="none"), n=400)
    assert {"threshold", "threshold_check"}.isdisjoint({s.name for s in p})


def test_without_n_the_plan_is_the_papers_equal_split() -> None:
    p = nb.plan(SCHEMA, COLUMNS, Budget(0.7), nb.NBConfig())
    assert {s.name for s in p} == {"prior", "mean:x", "variance:x", "mean:y", "variance:y",
                                   "counts:c", "counts:b"}
    assert all(s.budget.eps == pytest.approx(0.1) for s in p)


# ------------------------------------------------------------ numeric histograms


def test_histogram_bins_follow_n_eps_and_stay_in_range() -> None:
    # B = round(√(n·ε/(2√2·K·m))): 30,162·0.1/(2√2·2·14) = 38.1 → 6
    assert na.histogram_bins(30_162, 0.1, 2, 14) == 6
    assert na.histogram_bins(1_258, 1.0, 2, 64) == na.MIN_BINS   # √3.5 = 1.9 → 2
    assert na.histogram_bins(10_000_000, 10.0, 2, 3) == na.MAX_BINS
    assert na.histogram_bins(10, 0.01, 2, 100) == na.MIN_BINS
    for n in (100, 5_000, 200_000):
        for eps in (0.1, 1.0, 4.0):
            b = na.histogram_bins(n, eps, 2, 4)
            raw = math.sqrt(n * eps / (2 * math.sqrt(2) * 2 * 4))
            assert b == min(na.MAX_BINS, max(na.MIN_BINS, round(raw)))


def test_auto_releases_numeric_columns_as_histograms_with_c_to_the_two_thirds() -> None:
    n, eps, k = 100_000, 1.0, 2
    a = _alloc(n, eps, numeric="auto", threshold=False)
    b = na.histogram_bins(n, eps, k, len(COLUMNS))
    assert a.bins == {"x": b, "y": b}
    assert a.methods == {"x": "histogram", "y": "histogram"}
    assert not any(s.startswith(("mean:", "variance:")) for s in a.weights)
    assert sum(a.weights.values(), Fraction(0)) == 1
    # no Gaussian column: the prior carries no coupling; a histogram is a table of B cells
    c = {"prior": 2 * k / n, "bins:x": 2 * k * b / n, "bins:y": 2 * k * b / n,
         "counts:c": 2 * k * 8 / n, "counts:b": 2 * k * 2 / n}
    for name, weight in c.items():
        ratio = float(a.weights[name] / a.weights["prior"])
        assert ratio == pytest.approx((weight / c["prior"]) ** (2 / 3), rel=2e-3)
    assert a.to_json()["bins"] == {"x": b, "y": b}


def test_histogram_noise_weight_beats_mean_and_variance_up_to_eight_bins() -> None:
    # the rule's claim: one table of B ≤ 8 cells has a lower Σ c^(2/3) than a mean and variance
    k, n = 2, 10_000
    gauss = (na.error_weight(SCHEMA, "x", "mean", n, k) ** (2 / 3)
             + na.error_weight(SCHEMA, "x", "variance", n, k) ** (2 / 3))
    for bins in range(2, 9):
        assert na.error_weight(SCHEMA, "x", "bins", n, k, bins) ** (2 / 3) < gauss
    assert na.error_weight(SCHEMA, "x", "bins", n, k, 9) ** (2 / 3) > gauss


def test_auto_keeps_the_gaussian_where_the_bins_rule_falls_below_two() -> None:
    """numeric: auto at n·ε too small for two bins (the rule's unclamped B < 2): a mean and
    variance per class (breast_cancer: 30 numeric columns, 398 rows); from B ≥ 2 on the
    histogram. Public facts only: n, ε, K, the columns; bins: B or numeric: histogram keep
    the histogram."""
    k, m = 2, len(COLUMNS)
    # the boundary: √(n·ε/(2√2·K·m)) = 2 ⟺ n·ε = 4·2√2·K·m
    edge = 4 * 2 * math.sqrt(2) * k * m
    below, above = _alloc(int(edge * 0.9), 1.0, numeric="auto"), _alloc(int(edge * 1.1) + 1,
                                                                          1.0, numeric="auto")
    assert below.bins == {} and "mean:x" in below.weights
    assert any("fewer than 2 bins" in r for r in below.reasons)
    assert not any("fewer than" in r for r in _alloc(int(edge * 1.1) + 1, 1.0,
                                                      numeric="auto").reasons)
    assert na.raw_bins(int(edge * 0.9), 1.0, k, m) < na.GAUSSIAN_BELOW
    assert above.bins == {"x": 2, "y": 2} and "bins:x" in above.weights
    assert _alloc(int(edge * 0.9), 1.0, numeric="auto", bins=3).bins == {"x": 3, "y": 3}
    assert _alloc(int(edge * 0.9), 1.0, numeric="histogram").bins == {"x": 2, "y": 2}
    assert _alloc(30_162, 0.1, numeric="auto").bins                      # Adult: histograms
    assert na.raw_bins(398, 1.0, 2, 30) < 2 <= na.raw_bins(30_162, 0.1, 2, 14)


def test_spec_bins_split_and_gaussian_override_the_rule() -> None:
    fixed = _alloc(100_000, 1.0, numeric="auto", bins=5)
    assert fixed.bins == {"x": 5, "y": 5}
    gauss = _alloc(100_000, 1.0, numeric="auto",
                   split={"prior": 1, "categorical": 1, "mean": 1, "variance": 1})
    assert gauss.bins == {} and "mean:x" in gauss.weights       # an explicit split: Gaussian
    hist = _alloc(100_000, 1.0, numeric="histogram", threshold=False,
                  split={"prior": 1, "categorical": 3, "mean": 1, "variance": 1})
    assert hist.weights["bins:x"] == hist.weights["counts:c"] == 3 * hist.weights["prior"]


def test_the_variance_switch_sits_at_its_limit_of_the_typical_variance() -> None:
    """Round 9: a variance is released only when its noise scale h²·K/(n·ε_var) is at most
    VARIANCE_NOISE_LIMIT (1/32) of ((U−L)/6)². Walk n up at ε = 1 (steps of 2 %): the first
    n that keeps the variances has its scale at the limit (within the step), not far below
    (the old limit, 1, would have kept them 32 times earlier)."""
    assert na.VARIANCE_NOISE_LIMIT == 1 / 32
    limit = na.VARIANCE_NOISE_LIMIT * (10 / 6) ** 2            # x: U − L = 10, h = 5
    for n in np.unique(np.geomspace(1_000, 2_000_000, 400).astype(int)):
        a = _alloc(int(n), 1.0)
        if "variance:x" in a.weights:
            scale = 25 * 2 / (int(n) * 1.0 * float(a.weights["variance:x"]))   # K = 2
            assert 0.9 * limit <= scale <= limit * (1 + 1e-9)
            assert n > 1_000
            break
    else:
        raise AssertionError("no n up to 2e6 released the variance")


def test_an_all_numeric_model_keeps_the_mean_where_two_bins_would_round() -> None:
    """numeric: auto, round 10: where the rule's B would round to 2 (unclamped B in
    [2, 2.5)), a model whose columns are all numeric keeps the mean and variance (two bins
    carry at most 1.2 times a mean's signal-to-noise and nothing when the rows sit on one
    side of the midpoint; the public variance only rescales an all-numeric model's
    log-odds); a model with a count table keeps the two-bin histogram. From B ≥ 2.5 both
    get the histogram. Public facts only: n, ε, K and the columns' kinds."""
    numeric = Schema(columns=(NumericColumn("x", lower=0.0, upper=10.0),
                              NumericColumn("y", lower=-5.0, upper=5.0)),
                     label=Label("label", ("0", "1")))
    k = 2

    def alloc(schema: Schema, columns: tuple[str, ...], n: int) -> na.Allocation:
        return na.allocate(schema, columns, n=n, epsilon=1.0, method="global", trim=0.05,
                           gamma=4.0, split=None, threshold=True, numeric="auto")

    def n_at(b: float, m: int) -> int:            # √(n·ε/(2√2·K·m)) = b
        return int(b * b * 2 * math.sqrt(2) * k * m)

    assert na.gaussian_below(2, 2) == na.GAUSSIAN_BELOW_ALL_NUMERIC == 2.5
    assert na.gaussian_below(2, 4) == na.GAUSSIAN_BELOW == 2.0
    # all numeric, B ≈ 2.2: the mean, said with its reason
    a = alloc(numeric, ("x", "y"), n_at(2.2, 2))
    assert 2 <= na.raw_bins(n_at(2.2, 2), 1.0, k, 2) < 2.5
    assert a.bins == {} and "mean:x" in a.weights and a.methods["x"] == "global"
    assert any("with every column numeric two bins" in r for r in a.reasons)
    # ... from B = 2.5 on, the histogram (3 bins)
    above = alloc(numeric, ("x", "y"), n_at(2.55, 2))
    assert above.bins == {"x": 3, "y": 3}
    # with a count table at the same B: two bins, as before
    mixed = alloc(SCHEMA, COLUMNS, n_at(2.2, len(COLUMNS)))
    assert mixed.bins == {"x": 2, "y": 2}
    assert not any("fewer than" in r for r in mixed.reasons)
    # the spec's bins or numeric: histogram keep the histogram
    assert na.allocate(numeric, ("x", "y"), n=n_at(2.2, 2), epsilon=1.0, method="global",
                       trim=0.05, gamma=4.0, split=None, numeric="auto", bins=2).bins \
        == {"x": 2, "y": 2}
    # breast_cancer's suite cell (398 rows, 30 numeric columns, ε = 2): B 2.17 → the mean
    assert 2 <= na.raw_bins(398, 2.0, 2, 30) < na.GAUSSIAN_BELOW_ALL_NUMERIC
