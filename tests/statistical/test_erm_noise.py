"""Statistical tests of the private-ERM noise and of report-noisy-max with exponential noise.

Same conventions as test_noise_distributions.py: each goodness-of-fit
assertion passes when p > ALPHA = 1e-4 (a correct sampler fails it with
probability 1e-4; the seeds are fixed, so outcomes are reproducible), and
power checks run the same test against a deliberately wrong claim and
require p < ALPHA (their expected p-values are far below that).

Objective perturbation is tested *as released*: from a released w and the
data, the noise vector that produced it is recovered from the optimality
condition b = −Σ∇ℓ_i(w) − n(λ+Δ)w, and its norm and direction are tested
against Gamma(d, 2/ε′) and the uniform law on the sphere. The released w is
rounded to its grid g (float safety), which moves the recovered b by at most
n(λ + Δ + 1/4)·√d·g/2 ≈ 1/1024 of its sensitivity: far below what the tests
resolve with N_FITS draws.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.integrate import quad
from scipy.special import expit

from dpcli.mechanisms import (
    l2_laplace_vector,
    make_rng,
    noisy_max_exponential,
    objective_perturbation,
    output_perturbation,
)
from dpcli.mechanisms.erm import minimise
from tests.statistical.test_noise_distributions import ALPHA, frequencies_chi2_pvalue

pytestmark = pytest.mark.slow

N_VECTORS = 20_000
N_FITS = 3_000        # KS critical distance at 1e-4: 0.036; a 30% scale error moves it ~0.3


def _vectors(d: int, scale: float, seed: int, n: int = N_VECTORS) -> np.ndarray:
    rng = make_rng(seed)
    return np.array([l2_laplace_vector(d, scale, rng) for _ in range(n)])


def _norm_pvalue(vectors: np.ndarray, scale: float) -> float:
    d = vectors.shape[1]
    return float(stats.kstest(np.linalg.norm(vectors, axis=1),
                              stats.gamma(d, scale=scale).cdf).pvalue)


def _direction_pvalues(vectors: np.ndarray) -> list[float]:
    """u_j² ~ Beta(1/2, (d−1)/2) for each coordinate of a uniform unit vector u, and each
    coordinate's sign is a fair coin (d ≥ 2)."""
    d = vectors.shape[1]
    u = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    out = []
    for j in range(d):
        out.append(float(stats.kstest(u[:, j] ** 2, stats.beta(0.5, (d - 1) / 2).cdf).pvalue))
        out.append(float(stats.binomtest(int(np.sum(u[:, j] > 0)), len(u)).pvalue))
    return out


@pytest.mark.parametrize(("d", "scale"), [(1, 1.0), (3, 0.5), (12, 4.0)])
def test_l2_laplace_norm_is_gamma(d: int, scale: float) -> None:
    assert _norm_pvalue(_vectors(d, scale, seed=d), scale) > ALPHA


def test_l2_laplace_norm_test_rejects_a_scale_thirty_percent_off() -> None:
    assert _norm_pvalue(_vectors(5, 1.3, seed=1), 1.0) < ALPHA


@pytest.mark.parametrize("d", [2, 3, 12])
def test_l2_laplace_direction_is_uniform(d: int) -> None:
    # 2d tests at ALPHA each: Bonferroni keeps this test's false-failure rate ≤ 2d·1e-4
    assert min(_direction_pvalues(_vectors(d, 1.0, seed=10 + d))) > ALPHA


def test_direction_test_rejects_a_tilted_sampler() -> None:
    v = _vectors(3, 1.0, seed=20)
    v[:, 0] = np.abs(v[:, 0]) * np.where(make_rng(21).random(len(v)) < 0.55, 1, -1)
    assert min(_direction_pvalues(v)) < ALPHA


def _data(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    rng = make_rng(30)
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True) * rng.uniform(1.0, 3.0, size=(n, 1))
    y = np.where(rng.random(n) < expit(2 * x[:, 0]), 1.0, -1.0)
    return x, y


def _recovered_noise(lam: float, eps: float, d: int = 3, n: int = 40
                     ) -> tuple[np.ndarray, float]:
    x, y = _data(n, d)
    rng = make_rng(int(lam * 1e4) + int(eps * 100))
    noise, scale = [], 0.0
    for _ in range(N_FITS):
        fit = objective_perturbation(x, y, lam, eps, rng)
        w = fit.weights
        b = x.T @ (y * expit(-y * (x @ w))) - n * (lam + fit.extra_regulariser) * w
        noise.append(b)
        scale = fit.noise_scale
    return np.array(noise), scale


@pytest.mark.parametrize(("lam", "eps"), [(0.02, 1.0), (0.001, 0.2)], ids=["eps'", "Delta"])
def test_objective_perturbation_noise_is_gamma_norm_uniform_direction(lam: float,
                                                                      eps: float) -> None:
    """Both branches: ε′ > 0 (Δ = 0), and ε′ ≤ 0 (Δ > 0, ε′ = ε/2); scale 2/ε′."""
    noise, scale = _recovered_noise(lam, eps)
    assert scale == pytest.approx(2 / (eps / 2) if lam == 0.001 else
                                  2 / (eps - math.log1p(2 * 0.25 / (40 * lam)
                                                        + (0.25 / (40 * lam)) ** 2)))
    assert _norm_pvalue(noise, scale) > ALPHA
    assert min(_direction_pvalues(noise)) > ALPHA
    # power: the paper's uncorrected scale 2/ε would be rejected
    assert _norm_pvalue(noise, 2 / eps) < ALPHA


def test_output_perturbation_noise_has_scale_2_over_n_lambda_epsilon() -> None:
    n, d, lam, eps = 40, 3, 0.1, 1.0
    x, y = _data(n, d)
    centre = minimise(x, y, lam)
    rng = make_rng(40)
    fits = [output_perturbation(x, y, lam, eps, rng) for _ in range(N_FITS)]
    noise = np.array([fit.weights - centre for fit in fits])
    # the scale inflated for the weight grid and τ (0.1 % above 2/(nλε)); the lattice and
    # the rounding of the centre move each draw by at most √d·g ≈ 1e-3·2/(nλ)
    scale = fits[0].noise_scale
    assert 2 / (n * lam * eps) < scale <= 2 / (n * lam * eps) * (1 + 1 / 1024) + 1e-8
    assert _norm_pvalue(noise, scale) > ALPHA
    assert min(_direction_pvalues(noise)) > ALPHA
    assert _norm_pvalue(noise, 1.3 * scale) < ALPHA


def _noisy_max_probabilities(scores: np.ndarray, scale: float) -> np.ndarray:
    """P(argmax_i q_i + Z_i = i), Z_i iid exponential with mean ``scale``, by quadrature."""
    def cdf(t: float, q: float) -> float:
        return 0.0 if t < q else 1 - math.exp(-(t - q) / scale)

    out = []
    for i, q in enumerate(scores):
        others = [s for j, s in enumerate(scores) if j != i]

        def density(t: float, q: float = q, others: list = others) -> float:
            return math.exp(-(t - q) / scale) / scale * math.prod(cdf(t, s) for s in others)

        out.append(quad(density, q, q + 60 * scale, points=sorted(others), limit=200)[0])
    return np.array(out)


def test_noisy_max_exponential_matches_its_closed_form() -> None:
    scores, sensitivity, eps = np.array([0.0, -0.3, -0.5, -1.2]), 0.25, 1.0
    scale = 2 * sensitivity / eps
    probabilities = _noisy_max_probabilities(scores, scale)
    assert probabilities.sum() == pytest.approx(1.0, abs=1e-8)
    # two candidates in closed form: P(first) = 1 − e^(−gap/scale)/2
    two = _noisy_max_probabilities(np.array([0.0, -0.3]), scale)
    assert two[0] == pytest.approx(1 - 0.5 * math.exp(-0.3 / scale), rel=1e-8)
    rng = make_rng(50)
    picks = np.array([noisy_max_exponential(scores, sensitivity=sensitivity, epsilon=eps,
                                            rng=rng) for _ in range(40_000)])
    observed = np.bincount(picks, minlength=4)
    assert frequencies_chi2_pvalue(observed, probabilities) > ALPHA
    # power: a sampler at 2ε would be rejected
    assert frequencies_chi2_pvalue(observed, _noisy_max_probabilities(scores, scale / 2)) < ALPHA


def test_noisy_max_exponential_neighbour_ratio_is_within_e_to_the_epsilon() -> None:
    """Exact probabilities on neighbouring scores (each moved ≤ Δ, in opposite directions)."""
    sensitivity, eps = 0.1, 0.7
    scale = 2 * sensitivity / eps
    base = np.array([0.0, -0.05, -0.2])
    worst = 0.0
    for shift in ([0.1, -0.1, 0.0], [-0.1, 0.1, 0.1], [0.1, 0.1, -0.1], [-0.1, -0.1, 0.1]):
        p = _noisy_max_probabilities(base, scale)
        q = _noisy_max_probabilities(base + np.array(shift), scale)
        worst = max(worst, float(np.max(np.abs(np.log(p / q)))))
    assert worst <= eps + 1e-9


def _lattice_units(scale: float, seed: int) -> np.ndarray:
    from dpcli.mechanisms.erm import lattice_l2_laplace

    rng = make_rng(seed)
    return np.array([lattice_l2_laplace(1, scale, 0.25, rng)[0] for _ in range(20_000)])


def test_lattice_l2_laplace_in_one_dimension_is_discrete_laplace() -> None:
    """d = 1: P(k) ∝ exp(−|0.25·k|/θ) is the discrete Laplace with scale θ/0.25 (chi-square,
    cells expecting ≥ 20, tails pooled), and a 30% wrong scale is rejected."""
    from dpcli.mechanisms import discrete_laplace_cdf, discrete_laplace_pmf

    def pvalue(k: np.ndarray, units: float) -> float:
        reach = int(units * math.log(k.size * discrete_laplace_pmf(0, units) / 20.0))
        inner = np.arange(-reach, reach + 1)
        expected = np.concatenate([[discrete_laplace_cdf(-reach - 1, units)],
                                   discrete_laplace_pmf(inner, units),
                                   [1.0 - discrete_laplace_cdf(reach, units)]]) * k.size
        observed = np.bincount((np.clip(k, -reach - 1, reach + 1) + reach + 1).astype(int),
                               minlength=2 * reach + 3)
        return float(stats.chisquare(observed, expected).pvalue)

    k = _lattice_units(1.0, 41)  # θ = 1, grid 0.25: 4 grid units
    assert np.array_equal(k, np.round(k))
    assert pvalue(k, 4.0) > ALPHA
    assert pvalue(_lattice_units(1.3, 42), 4.0) < ALPHA
