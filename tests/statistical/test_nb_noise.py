"""Naive Bayes releases follow their claimed noise (docs/design.md rule 4), through nb's own code.

Each goodness-of-fit assertion below passes when p > ALPHA = 1e-4, so a
correct implementation fails it with probability 1e-4 per assertion (seeds
are fixed: the outcome is reproducible). Every test also runs a power check:
the same test applied with a noise scale 30% off (or a plausible
mis-calibration: ε instead of ε/2 per class, sensitivity 1 instead of 2) must
give p < ALPHA. With the sample sizes used (10,000-12,000 draws per KS test),
the KS distance under a 30% scale error is 0.048 (Laplace) or 0.067 (γ = 4),
2-3 times the 1e-4 critical distance (0.022 at n = 10,000); the p-values
measured with these seeds are below 1e-19 (KS) and 1e-169 (chi-square),
against 0.08-0.61 for the correct scales. The one extra check, the
correlation of the two classes' noise, fails by chance with probability
2.6e-5 (|r| > 0.06 at n = 5,000 is 4.2 standard errors).

The values are taken *before* post-processing (clipping into the declared
bounds or at 0): ``_smooth_numeric`` and ``_global_numeric`` return the raw
released quantities, and the count tests use counts far from 0.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from dpcli.algorithms import naive_bayes as nb
from dpcli.budget import Budget
from dpcli.data.encode import EncodedBatch, TokenSets
from dpcli.data.schema import CategoricalColumn, Label, NumericColumn, Schema, TokensColumn
from dpcli.mechanisms import (
    discrete_laplace_cdf,
    discrete_laplace_pmf,
    heavy_tailed_cdf,
    laplace_cdf,
    smooth_beta,
    smooth_sensitivity_trimmed_mean,
    smooth_sensitivity_trimmed_variance,
    trim_count,
    trimmed_stats,
)
from dpcli.stats import StatsRequest, compute_batches

pytestmark = pytest.mark.slow

ALPHA = 1e-4  # per-assertion false-failure rate of every goodness-of-fit test
GAMMA = 4.0
L, U = 0.0, 100.0
COL = NumericColumn("x", L, U)
VOCAB = ("a", "b", "c", "d", "e", "f")
R = 2
SCHEMA = Schema(
    columns=(COL, CategoricalColumn("c", ("p", "q", "r")),
             TokensColumn("t", VOCAB, Path("v.txt"), max_per_row=R)),
    label=Label("y", ("0", "1")),
)


def ks(samples: np.ndarray, cdf) -> float:
    return float(stats.kstest(samples, cdf).pvalue)


def class_samples() -> list[np.ndarray]:
    rng = np.random.default_rng(11)
    return [np.sort(rng.uniform(40, 60, 200)), np.sort(rng.uniform(30, 55, 150))]


# ------------------------------------------------------------------- smooth


@pytest.fixture(scope="module")
def smooth_releases() -> tuple[np.ndarray, np.ndarray, dict]:
    """6,000 calls of nb._smooth_numeric on two fixed class samples: 12,000 draws each
    of the standardised trimmed-mean and trimmed-variance noise."""
    values = class_samples()
    public = np.array([200.0, 150.0])  # already released class counts (fixed)
    config = nb.NBConfig(method="smooth", trim=0.05, gamma=GAMMA)
    eps_mean, eps_var = 0.8, 1.3  # the steps' ε; each class release uses half
    rng = np.random.default_rng(2024)
    calls = 6000
    means = np.empty((calls, 2))
    variances = np.empty((calls, 2))
    for i in range(calls):
        means[i], variances[i] = nb._smooth_numeric(values, COL, public, eps_mean, eps_var,
                                                    config, rng)
    truth: dict = {"mean": [], "variance": [], "s_mean": [], "s_var": [],
                   "s_mean_full_eps": [], "s_var_full_eps": []}
    for sample, count in zip(values, public, strict=True):
        kw = {"m": trim_count(count, config.trim), "lower": L, "upper": U}
        t = trimmed_stats(sample, **kw)
        truth["mean"].append(t.mean)
        truth["variance"].append(t.variance)
        truth["s_mean"].append(smooth_sensitivity_trimmed_mean(
            sample, beta=smooth_beta(eps_mean / 2, GAMMA), **kw))
        truth["s_var"].append(smooth_sensitivity_trimmed_variance(
            sample, beta=smooth_beta(eps_var / 2, GAMMA), **kw))
        truth["s_mean_full_eps"].append(smooth_sensitivity_trimmed_mean(
            sample, beta=smooth_beta(eps_mean, GAMMA), **kw))
        truth["s_var_full_eps"].append(smooth_sensitivity_trimmed_variance(
            sample, beta=smooth_beta(eps_var, GAMMA), **kw))
    truth["eps_mean"], truth["eps_var"] = eps_mean, eps_var
    return means, variances, truth


def _standardised(released: np.ndarray, truth: list[float], scale: np.ndarray) -> np.ndarray:
    return ((released - np.asarray(truth)[None, :]) / scale[None, :]).ravel()


@pytest.mark.parametrize("statistic", ["mean", "variance"])
def test_smooth_release_is_heavy_tailed_at_half_epsilon_per_class(smooth_releases,
                                                                  statistic: str) -> None:
    """(released − T) / (2(γ+1)·S/(ε/2)) ~ h_γ, γ = 4, with S the β-smooth bound at
    β = ε/2 / (2(γ+1)): the calibration of docs/design.md rule 7 at ε_step/2 per class."""
    means, variances, truth = smooth_releases
    released = means if statistic == "mean" else variances
    eps = truth["eps_mean" if statistic == "mean" else "eps_var"]
    s = np.asarray(truth["s_mean" if statistic == "mean" else "s_var"])
    assert (s > 0).all()
    scale = 2 * (GAMMA + 1) * s / (eps / 2)
    z = _standardised(released, truth[statistic], scale)
    cdf = lambda v: heavy_tailed_cdf(v, gamma=GAMMA)  # noqa: E731
    assert ks(z, cdf) > ALPHA
    # power: a scale 30% off either way, and the calibration at ε (not ε/2) per class
    for factor in (1.3, 1 / 1.3):
        assert ks(z / factor, cdf) < ALPHA, factor
    s_full = np.asarray(truth["s_mean_full_eps" if statistic == "mean" else "s_var_full_eps"])
    z_full = _standardised(released, truth[statistic], 2 * (GAMMA + 1) * s_full / eps)
    assert ks(z_full, cdf) < ALPHA


# ------------------------------------------------------------------- global


def test_global_class_sums_carry_laplace_noise() -> None:
    """Per class Σ(x − mid) + Laplace((U−L)/ε_mean) and Σ((x − mid)² − h²/2) +
    Laplace(h²/ε_var), read back from _global_numeric's (pre-clip) outputs with the
    public counts set to 1 so that the division is exact."""
    values = class_samples()
    label = np.concatenate([np.full(v.size, k, dtype=np.int32) for k, v in enumerate(values)])
    x = np.concatenate(values)
    batch = EncodedBatch(n=x.size, label=label, columns={"x": x})
    st = compute_batches(SCHEMA, StatsRequest(moments=("x",)), [batch])
    mid, h = (L + U) / 2, (U - L) / 2
    centred = np.array([np.sum(v - mid) for v in values])
    squares = np.array([np.sum((v - mid) ** 2 - h * h / 2) for v in values])
    eps_mean, eps_var = 0.7, 1.1
    ones = np.ones(2)
    rng = np.random.default_rng(99)
    calls = 5000
    noise_c = np.empty((calls, 2))
    noise_s = np.empty((calls, 2))
    for i in range(calls):
        mean, var = nb._global_numeric(st, "x", COL, ones, eps_mean, eps_var, rng)
        noisy_c = mean - mid
        noisy_s = var + (np.clip(mean, L, U) - mid) ** 2 - h * h / 2
        noise_c[i], noise_s[i] = noisy_c - centred, noisy_s - squares
    z_c = noise_c.ravel() / ((U - L) / eps_mean)
    z_s = noise_s.ravel() / (h * h / eps_var)
    cdf = lambda v: laplace_cdf(v, 1.0)  # noqa: E731
    assert ks(z_c, cdf) > ALPHA
    assert ks(z_s, cdf) > ALPHA
    for factor in (1.3, 1 / 1.3):
        assert ks(z_c / factor, cdf) < ALPHA
        assert ks(z_s / factor, cdf) < ALPHA
    # the two classes' noise is independent (one vector release, not one draw reused)
    assert abs(stats.pearsonr(noise_c[:, 0], noise_c[:, 1])[0]) < 0.06  # 4.2σ at n = 5,000


# ------------------------------------------------------------------- counts


def _chi2_discrete_laplace(noise: np.ndarray, scale: float) -> float:
    """Chi-square of integer noise against the discrete Laplace with ``scale``; cells with
    expected count >= 20 plus the two pooled tails."""
    n = noise.size
    k_max = math.floor(scale * math.log(n * discrete_laplace_pmf(0, scale) / 20.0))
    inner = np.arange(-k_max, k_max + 1)
    expected = np.concatenate([[discrete_laplace_cdf(-k_max - 1, scale)],
                               discrete_laplace_pmf(inner, scale),
                               [1.0 - discrete_laplace_cdf(k_max, scale)]]) * n
    cells = np.clip(noise, -k_max - 1, k_max + 1).astype(np.int64) + k_max + 1
    observed = np.bincount(cells, minlength=2 * k_max + 3)
    return float(stats.chisquare(observed, expected).pvalue)


def test_priors_and_tables_carry_discrete_laplace_noise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """nb.fit's class counts (Δ = 2), categorical table (Δ = 2) and tokens table
    (Δ = 2r = 4), each at its step's ε, minus the exact counts; all counts are
    >= 300, so clipping at 0 has probability < 1e-15 per draw."""
    rng = np.random.default_rng(5)
    n = 6000
    label = rng.integers(0, 2, n).astype(np.int32)
    codes = rng.integers(0, 4, n).astype(np.int32)
    rows = [np.sort(rng.choice(len(VOCAB), 2, replace=False)) for _ in range(n)]
    tokens = TokenSets(offsets=np.arange(0, 2 * n + 1, 2, dtype=np.int64),
                       indices=np.concatenate(rows).astype(np.int32))
    batch = EncodedBatch(n=n, label=label, columns={"c": codes, "t": tokens})
    config = nb.NBConfig()
    columns = ("c", "t")
    # the model's class sizes are pooled with the tables' row sums (post-processing); this
    # test reads the prior mechanism's own output
    monkeypatch.setattr(nb, "pool_class_counts", lambda model: False)
    st = compute_batches(SCHEMA, nb.request(SCHEMA, columns, config), [batch])
    assert st.class_counts.min() >= 300 and st.contingency["c"].min() >= 300
    assert st.contingency["t"].min() >= 300
    plan = nb.plan(SCHEMA, columns, Budget(1.5), config)  # three steps of ε = 0.5
    fit_rng = np.random.default_rng(6)
    fits = 8000
    prior = np.empty((fits, 2))
    table_c = np.empty((fits, 8))
    table_t = np.empty((fits, 12))
    for i in range(fits):
        model = nb.fit(st, SCHEMA, columns, plan, config, fit_rng)
        prior[i] = model.class_counts - st.class_counts
        table_c[i] = (model.tables["c"] - st.contingency["c"]).ravel()
        table_t[i] = (model.tables["t"] - st.contingency["t"]).ravel()
    for noise, sensitivity in ((prior, 2), (table_c, 2), (table_t, 2 * R)):
        scale = sensitivity / 0.5
        assert _chi2_discrete_laplace(noise.ravel(), scale) > ALPHA, sensitivity
        # power: the add/remove calibration (Δ halved) and a 30% larger scale
        assert _chi2_discrete_laplace(noise.ravel(), scale / 2) < ALPHA, sensitivity
        assert _chi2_discrete_laplace(noise.ravel(), scale * 1.3) < ALPHA, sensitivity


def test_numeric_histogram_carries_discrete_laplace_noise() -> None:
    """nb.fit's per-class histogram of a numeric column (Δ = 2) at its step's ε, minus the
    exact counts; every cell >= 300, so clipping at 0 has probability < 1e-15 per draw.
    Same α and power checks as the tables above (Δ halved, scale 30 % larger)."""
    rng = np.random.default_rng(8)
    n = 6000
    label = rng.integers(0, 2, n).astype(np.int32)
    x = rng.uniform(L, U, n)
    batch = EncodedBatch(n=n, label=label, columns={"x": x})
    config = nb.NBConfig(numeric="histogram", bins=3, threshold="none")
    plan = nb.plan(SCHEMA, ("x",), Budget(1.0), config, n=n)
    st = compute_batches(SCHEMA, nb.request(SCHEMA, ("x",), config, p=plan, bins={"x": 3}),
                         [batch])
    assert st.histograms["x"].min() >= 300
    eps = plan.step("bins:x").budget.eps
    fit_rng = np.random.default_rng(9)
    fits = 3000
    noise = np.empty((fits, 6))
    for i in range(fits):
        model = nb.fit(st, SCHEMA, ("x",), plan, config, fit_rng)
        noise[i] = (model.numeric["x"].bins - st.histograms["x"]).ravel()
    scale = 2 / eps
    assert _chi2_discrete_laplace(noise.ravel(), scale) > ALPHA
    assert _chi2_discrete_laplace(noise.ravel(), scale / 2) < ALPHA
    assert _chi2_discrete_laplace(noise.ravel(), scale * 1.3) < ALPHA
