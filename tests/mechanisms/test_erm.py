"""Objective and output perturbation: constants, the minimiser, and sensitivities.

The distribution of the noise is tested in tests/statistical/test_erm_noise.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_expit

from dpcli.mechanisms import (
    l2_laplace_vector,
    make_rng,
    objective_constants,
    objective_perturbation,
    output_perturbation,
)
from dpcli.mechanisms.erm import (
    LOGISTIC_CURVATURE,
    _row_norms_squared,
    minimise,
    weight_norm_bound,
)

C = LOGISTIC_CURVATURE


def data(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows in the unit ball (some on its surface) and ±1 labels loosely tied to them."""
    rng = make_rng(seed)
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x *= rng.uniform(0.2, 1.0, size=(n, 1))
    x[0] /= np.linalg.norm(x[0])
    y = np.where(rng.random(n) < expit(3 * x[:, 0]), 1.0, -1.0)
    return x, y


def neighbour(x: np.ndarray, y: np.ndarray, rng: np.random.Generator
              ) -> tuple[np.ndarray, np.ndarray]:
    """Replace one row by a worst-ish case: a unit-norm row with a random label."""
    x2, y2 = x.copy(), y.copy()
    i = int(rng.integers(len(y)))
    row = rng.normal(size=x.shape[1])
    x2[i] = row / np.linalg.norm(row)
    y2[i] = rng.choice([-1.0, 1.0])
    return x2, y2


# ------------------------------------------------------------------ ε′ and Δ


def test_epsilon_prime_pays_for_the_jacobian() -> None:
    eps, n, lam = 1.0, 1000, 0.01
    epsilon_prime, extra = objective_constants(eps, n, lam)
    ratio = C / (n * lam)
    assert extra == 0
    assert epsilon_prime == pytest.approx(eps - math.log(1 + 2 * ratio + ratio**2), rel=1e-12)
    # ε′ plus the log of the Jacobian bound (1 + c/(nλ))² gives back ε
    assert epsilon_prime + 2 * math.log1p(ratio) == pytest.approx(eps, rel=1e-12)


def test_weak_regulariser_takes_the_delta_branch() -> None:
    eps, n, lam = 0.1, 100, 0.001      # c/(nλ) = 2.5: log(1 + 5 + 6.25) ≫ ε
    epsilon_prime, extra = objective_constants(eps, n, lam)
    assert epsilon_prime == eps / 2
    assert extra == pytest.approx(C / (n * math.expm1(eps / 4)) - lam, rel=1e-12)
    assert extra > 0
    # with λ + Δ the Jacobian bound is e^(ε/2): the other half of ε
    assert (1 + C / (n * (lam + extra))) ** 2 == pytest.approx(math.exp(eps / 2), rel=1e-12)


@pytest.mark.parametrize("n", [10, 100, 1000, 10_000])
def test_branch_switches_exactly_where_epsilon_prime_reaches_zero(n: int) -> None:
    lam = 0.01
    ratio = C / (n * lam)
    boundary = math.log1p(2 * ratio + ratio**2)
    assert objective_constants(boundary * 1.001, n, lam)[1] == 0
    assert objective_constants(boundary * 0.999, n, lam)[1] > 0


def test_fit_reports_the_branch_it_took() -> None:
    x, y = data(40, 3, 0)
    fit = objective_perturbation(x, y, 0.001, 0.1, make_rng(1))
    assert fit.epsilon_prime == 0.05 and fit.extra_regulariser > 0
    assert fit.noise_scale == pytest.approx(2 / 0.05)
    fit = objective_perturbation(x, y, 1.0, 5.0, make_rng(1))
    assert fit.extra_regulariser == 0 and fit.epsilon_prime < 5.0


def test_constants_reject_bad_input() -> None:
    with pytest.raises(ValueError):
        objective_constants(0.0, 10, 0.1)
    with pytest.raises(ValueError):
        objective_constants(1.0, 10, -0.1)
    with pytest.raises(ValueError):
        objective_constants(1.0, 0, 0.1)


# ------------------------------------------------------------------ the minimiser


def test_minimiser_reaches_the_exact_optimum() -> None:
    x, y = data(300, 5, 2)
    lam, lin = 0.01, make_rng(3).normal(size=5) * 0.1
    w = minimise(x, y, lam, linear=lin)
    grad = -(x.T @ (y * expit(-y * (x @ w)))) / len(y) + lam * w + lin
    assert np.linalg.norm(grad) < 1e-9

    def objective(v: np.ndarray) -> float:
        return float(-np.mean(log_expit(y * (x @ v))) + 0.5 * lam * v @ v + lin @ v)

    reference = minimize(objective, np.zeros(5), method="BFGS", options={"gtol": 1e-10}).x
    assert np.allclose(w, reference, atol=1e-5)


def test_objective_perturbation_solves_the_perturbed_objective() -> None:
    """The released w is the minimiser of J + bᵀw/n + (Δ/2)‖w‖², b = (2/ε′)·R."""
    x, y = data(60, 4, 4)
    r = l2_laplace_vector(4, 1.0, make_rng(5))
    for lam, eps in ((0.5, 1.0), (0.001, 0.1)):       # both branches
        fit = objective_perturbation(x, y, lam, eps, standard_noise=r)
        b = 2 * r / fit.epsilon_prime
        w = fit.weights
        grad = (-(x.T @ (y * expit(-y * (x @ w)))) / len(y) + (lam + fit.extra_regulariser) * w
                + b / len(y))
        assert np.linalg.norm(grad) < 1e-9


def test_seeded_fits_are_reproducible() -> None:
    x, y = data(50, 3, 6)
    a = objective_perturbation(x, y, 0.1, 1.0, make_rng(7)).weights
    b = objective_perturbation(x, y, 0.1, 1.0, make_rng(7)).weights
    c = objective_perturbation(x, y, 0.1, 1.0, make_rng(8)).weights
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.array_equal(output_perturbation(x, y, 0.1, 1.0, make_rng(7)).weights,
                          output_perturbation(x, y, 0.1, 1.0, make_rng(7)).weights)


def test_rows_outside_the_unit_ball_and_bad_labels_are_refused() -> None:
    x, y = data(20, 3, 9)
    with pytest.raises(ValueError, match="unit ball"):
        objective_perturbation(x * 2, y, 0.1, 1.0, make_rng(0))
    with pytest.raises(ValueError, match="labels"):
        output_perturbation(x, (y > 0).astype(float), 0.1, 1.0, make_rng(0))
    with pytest.raises(ValueError, match="shape"):
        objective_perturbation(x, y, 0.1, 1.0, standard_noise=np.zeros(2))


# ------------------------------------------------------------------ sensitivities (rule 4)


@pytest.mark.parametrize("lam", [0.01, 0.3])
def test_non_private_minimiser_moves_at_most_2_over_n_lambda(lam: float) -> None:
    """Output perturbation's statistic: ‖w*(D) − w*(D′)‖ ≤ 2/(nλ) over replace-one neighbours."""
    rng = make_rng(10)
    worst = 0.0
    for trial in range(40):
        x, y = data(30, 3, 100 + trial)
        x2, y2 = neighbour(x, y, rng)
        moved = np.linalg.norm(minimise(x, y, lam) - minimise(x2, y2, lam))
        worst = max(worst, moved * 30 * lam / 2)
    assert worst <= 1 + 1e-7
    assert worst > 0.05          # the bound is not vacuous for these neighbours


def test_objective_perturbation_noise_to_match_a_given_w_moves_at_most_2() -> None:
    """For any w, the b that makes w optimal differs between neighbours by at most 2.

    b(w; D) = −Σ ∇ℓ_i(w) − n(λ+Δ)w: the change is one record's loss gradient
    replaced, each of norm ≤ 1 (|ℓ′| ≤ 1, ‖x‖ ≤ 1). This is the step of CMS's
    proof that the density of b pays e^(ε′) for.
    """
    rng = make_rng(11)
    worst = 0.0
    for trial in range(200):
        x, y = data(20, 4, 300 + trial)
        x2, y2 = neighbour(x, y, rng)
        w = rng.normal(size=4) * rng.uniform(0.1, 20)

        def total_gradient(xs: np.ndarray, ys: np.ndarray, w: np.ndarray = w) -> np.ndarray:
            return -(xs.T @ (ys * expit(-ys * (xs @ w))))

        worst = max(worst, float(np.linalg.norm(total_gradient(x, y) - total_gradient(x2, y2))))
    assert worst <= 2 + 1e-12
    assert worst > 1.0


@pytest.mark.parametrize("trainer", ["objective", "output"])
def test_same_noise_fits_of_neighbours_are_within_2_over_n_lambda(trainer: str) -> None:
    """Training stability (Chaudhuri & Vinterbo): with R held fixed, w moves ≤ 2/(nλ)."""
    train = objective_perturbation if trainer == "objective" else output_perturbation
    rng = make_rng(12)
    worst = 0.0
    for trial in range(30):
        x, y = data(40, 3, 500 + trial)
        x2, y2 = neighbour(x, y, rng)
        r = l2_laplace_vector(3, 1.0, rng)
        for lam, eps in ((0.05, 1.0), (0.001, 0.2)):
            a = train(x, y, lam, eps, standard_noise=r).weights
            b = train(x2, y2, lam, eps, standard_noise=r).weights
            worst = max(worst, float(np.linalg.norm(a - b)) * 40 * lam / 2)
    assert worst <= 1 + 1e-7


@pytest.mark.parametrize("trainer", ["objective", "output"])
def test_weight_norm_bound_holds(trainer: str) -> None:
    train = objective_perturbation if trainer == "objective" else output_perturbation
    rng = make_rng(13)
    for trial in range(30):
        x, y = data(25, 3, 700 + trial)
        r = l2_laplace_vector(3, 1.0, rng)
        lam, eps = float(rng.choice([0.001, 0.05, 1.0])), float(rng.choice([0.1, 1.0, 5.0]))
        w = train(x, y, lam, eps, standard_noise=r).weights
        assert np.linalg.norm(w) <= weight_norm_bound(trainer, 25, lam, eps,
                                                      float(np.linalg.norm(r))) * (1 + 1e-9)
    with pytest.raises(ValueError):
        weight_norm_bound("gradient", 25, 0.1, 1.0, 1.0)


@pytest.mark.parametrize("trainer", ["objective", "output"])
def test_released_weights_are_exact_multiples_of_the_public_grid(trainer: str) -> None:
    """Float safety: every released weight is k·g, g = weight_grid(n, λ (+ Δ), d)."""
    from dpcli.mechanisms.erm import objective_constants, weight_grid

    train = objective_perturbation if trainer == "objective" else output_perturbation
    x, y = data(60, 4, 900)
    for lam, eps in ((0.05, 1.0), (0.001, 0.2)):
        fit = train(x, y, lam, eps, make_rng(5))
        extra = objective_constants(eps, 60, lam)[1] if trainer == "objective" else 0.0
        assert fit.grid == weight_grid(60, lam + extra, 4)
        k = fit.weights / fit.grid
        assert np.array_equal(k, np.round(k))
        assert math.log2(fit.grid) == round(math.log2(fit.grid))


def test_output_perturbation_inflates_its_scale_for_the_rounding() -> None:
    from dpcli.mechanisms.erm import GRADIENT_TOLERANCE, weight_grid

    x, y = data(60, 4, 901)
    fit = output_perturbation(x, y, 0.05, 1.0, make_rng(6))
    g = weight_grid(60, 0.05, 4)
    assert fit.noise_scale == pytest.approx(2 / (60 * 0.05) + 2 * GRADIENT_TOLERANCE / 0.05
                                            + 2 * g, rel=1e-12)
    assert 2 / (60 * 0.05) < fit.noise_scale <= 2 / (60 * 0.05) * (1 + 1 / 1024) + 1e-8


@pytest.mark.parametrize("block", [1, 3, 7, 1 << 16])
def test_row_norms_in_blocks_equal_the_whole_matrix(block: int) -> None:
    """The unit-ball check reads squared row norms block by block (memory): the same numbers
    as the whole-matrix product, with empty rows, a last partial block and one row."""
    from scipy import sparse

    rng = np.random.default_rng(3)
    for rows in (1, 10, 23):
        x = sparse.random(rows, 9, density=0.3, format="csr", random_state=rng)
        x = sparse.csr_matrix(x.multiply(rng.uniform(-1, 1, size=(rows, 1))))
        whole = np.asarray(x.multiply(x).sum(axis=1)).ravel()
        np.testing.assert_array_equal(_row_norms_squared(x, block=block), whole)
