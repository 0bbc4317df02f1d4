"""Private regularised logistic regression: objective and output perturbation.

Chaudhuri, Monteleoni & Sarwate, "Differentially private empirical risk
minimization", JMLR 12 (2011): Algorithm 2 (objective perturbation) and
Algorithm 1 (output perturbation), for the regularised logistic loss

    J(w) = (1/n) Σ_i log(1 + exp(−y_i wᵀx_i)) + (λ/2)‖w‖²,   y_i ∈ {−1, +1}.

Both need every row in the unit ball (‖x_i‖ ≤ 1; dpcli maps rows there with
the *declared* bounds, :meth:`dpcli.algorithms.inputs.Inputs.unit_ball`).
The logistic loss ℓ(z) = log(1 + e^−z) is convex with |ℓ′| ≤ 1 and
|ℓ″| ≤ c = 1/4, which is what the proofs use. Both are proved in the paper
for datasets that differ in one entry (replace-one, dpcli's relation).

Noise vectors have density ∝ exp(−‖b‖/θ) on R^d: the norm is Gamma(d, θ)
and the direction uniform on the sphere (:func:`l2_laplace_vector`). Each
mechanism is written as F(data, λ, ε, R) with R a *standard* draw (θ = 1)
scaled by the mechanism, so that a caller can rerun it on a neighbouring
dataset with the same randomness: Chaudhuri & Vinterbo's training
stability (dpcli.algorithms.validate) is a statement about exactly that.

The proofs assume the exact minimiser. :func:`minimise` is Newton's method
with a backtracking line search on a strongly convex objective, run until
the gradient norm is at most τ = 1e-10, so the returned w is within
τ/λ of it (the validation procedure adds that slack to its sensitivity).

Float safety (rule 6, Mironov 2012). Released weights are multiples of a
public power-of-two grid g = :func:`weight_grid` (about 1/1024 of the
sensitivity 2/(nλ) per coordinate's share). Output perturbation is exact
on that grid: the rounded minimiser plus noise drawn on the lattice gZ^d
(:func:`lattice_l2_laplace`), the sensitivity inflated for the rounding and
the optimiser's tolerance, so it is ε-DP as computed. Objective
perturbation releases the minimiser of a perturbed objective, a nonlinear
function of noise and data; its released w is rounded to the grid, which
closes the low-order-bit channel but not every float effect (see
:func:`objective_perturbation`). What is still not accounted for: an
optimiser that stops at the float floor above τ in extreme cases (λ ≈ 1e-6
with tiny ε).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypeAlias, cast

import numpy as np
from scipy import sparse
from scipy.linalg import cho_factor, cho_solve
from scipy.sparse.linalg import LinearOperator, cg
from scipy.special import expit, log_expit

from dpcli.mechanisms.rng import check_int, check_positive, check_rng

LOGISTIC_CURVATURE = 0.25   # c: |ℓ″(z)| ≤ 1/4 for the logistic loss
GRADIENT_TOLERANCE = 1e-10   # τ: the minimiser's target; stability accounts for it
MAX_NEWTON_STEPS = 100

#: a design matrix: dense rows, or scipy.sparse CSR rows (the one-hot design)
Design: TypeAlias = np.ndarray | sparse.csr_matrix


@dataclass(frozen=True)
class PrivateFit:
    """A released weight vector and the public constants of the run that produced it.

    ``epsilon_prime`` and ``extra_regulariser`` (objective perturbation's ε′
    and Δ) and ``noise_scale`` (θ of the noise density ∝ exp(−‖b‖/θ)) depend
    only on n, λ and ε: public. The noise itself is never part of the fit.
    """

    weights: np.ndarray
    lam: float
    epsilon: float
    noise_scale: float
    epsilon_prime: float | None = None      # objective perturbation only
    extra_regulariser: float = 0.0          # objective perturbation's Δ
    grid: float | None = None               # the weights' public grid (None: not rounded)


def l2_laplace_vector(d: int, scale: float, rng: np.random.Generator) -> np.ndarray:
    """A vector b in R^d with density ∝ exp(−‖b‖/scale).

    In polar coordinates the density is ∝ r^(d−1)·exp(−r/scale) in the norm
    r (Gamma(d, scale)) times the uniform density on the sphere, drawn as a
    normalised standard Gaussian vector.
    """
    d = check_int("d", d, minimum=1)
    scale = check_positive("scale", scale)
    rng = check_rng(rng)
    direction = rng.standard_normal(d)
    while not np.any(direction):  # probability 0, but a zero vector has no direction
        direction = rng.standard_normal(d)
    return rng.gamma(d, scale) * direction / np.linalg.norm(direction)


WEIGHT_GRID_STEPS = 1024   # grid steps per coordinate's share of the sensitivity 2/(nλ)


def weight_grid(n: int, lam: float, d: int) -> float:
    """g = 2^⌊log2(2/(nλ) / (1024·√d))⌋: the public grid of released weights.

    λ is the regulariser the minimiser sees (λ + Δ for objective
    perturbation). Rounding moves a weight vector by at most √d·g/2 <=
    (1/2048)·2/(nλ) in norm: a 0.1 % inflation of the sensitivity.
    """
    n = check_int("n", n, minimum=1)
    lam = check_positive("lam", lam)
    d = check_int("d", d, minimum=1)
    return math.ldexp(1.0, math.floor(math.log2(2 / (n * lam) / (WEIGHT_GRID_STEPS
                                                                * math.sqrt(d)))))


def lattice_l2_laplace(d: int, scale: float, grid: float, rng: np.random.Generator
                       ) -> np.ndarray:
    """Integers k in Z^d with P(k) ∝ exp(−‖g·k‖/θ): the L2 Laplace on the lattice gZ^d.

    Returned as an integer-valued float64 vector (the noise is g·k).
    Sampler: rejection from the continuous density (:func:`l2_laplace_vector`):
    draw b, k = round(b/g), accept with probability
    exp((‖b‖ − ‖g·k‖)/θ − √d·g/(2θ)) (<= 1, as ‖g·k − b‖ <= √d·g/2). An
    accepted b has density ∝ exp(−‖g·round(b/g)‖/θ), flat on each cell, so k
    has the stated pmf. Acceptance is about exp(−√d·g/θ): near 1 when the
    grid is fine against the scale.
    """
    d = check_int("d", d, minimum=1)
    scale = check_positive("scale", scale)
    g = check_positive("grid", grid)
    rng = check_rng(rng)
    slack = math.sqrt(d) * g / (2 * scale)
    while True:
        b = l2_laplace_vector(d, scale, rng)
        k = np.rint(b / g)
        log_accept = (np.linalg.norm(b) - np.linalg.norm(g * k)) / scale - slack
        if math.log(rng.random()) < log_accept:
            return k


def objective_constants(epsilon: float, n: int, lam: float,
                        curvature: float = LOGISTIC_CURVATURE) -> tuple[float, float]:
    """ε′ and Δ of CMS Algorithm 2 for a run with ε, n records and regulariser λ.

    ε′ = ε − log(1 + 2c/(nλ) + c²/(nλ)²) pays for the change of variables
    from b to w (the Jacobian ratio between neighbours is at most
    (1 + c/(nλ))²). If ε′ ≤ 0 the regulariser is too weak for ε: the
    algorithm adds Δ = c/(n(e^(ε/4) − 1)) − λ, so that the Jacobian ratio is
    (1 + c/(n(λ + Δ)))² = e^(ε/2), and uses ε′ = ε/2 for the noise.
    """
    epsilon = check_positive("epsilon", epsilon)
    n = check_int("n", n, minimum=1)
    lam = check_positive("lam", lam)
    ratio = curvature / (n * lam)
    epsilon_prime = epsilon - math.log1p(2 * ratio + ratio * ratio)
    if epsilon_prime > 0:
        return epsilon_prime, 0.0
    return epsilon / 2, curvature / (n * math.expm1(epsilon / 4)) - lam


def objective_perturbation(x: Design, y: np.ndarray, lam: float, epsilon: float,
                           rng: np.random.Generator | None = None, *,
                           standard_noise: np.ndarray | None = None) -> PrivateFit:
    """Regularised logistic regression released by objective perturbation (CMS Algorithm 2).

    Releases: w = argmin J(w) + bᵀw/n + (Δ/2)‖w‖², b with density
    ∝ exp(−ε′‖b‖/2), i.e. b = (2/ε′)·R for a standard draw R.
    Sensitivity: under replace-one, the gradient of Σ_i ℓ changes by at most
    2 in norm (|ℓ′| ≤ 1, ‖x‖ ≤ 1), so the b that maps to a given w moves by
    at most 2: a density factor e^(ε′); the Jacobian of b ↦ w changes by at
    most (1 + c/(n(λ+Δ)))², the rest of ε (:func:`objective_constants`).
    Cost: ε-DP (δ = 0). Rows must lie in the unit ball, labels in {−1, +1}.

    Float safety: w is released rounded to g = weight_grid(n, λ + Δ, d).
    Rounding is post-processing of the mechanism above, so in exact
    arithmetic it costs nothing; in floating point it confines what the
    computed w can say beyond the ideal one to the cell it lands in: the
    low-order bits of a float minimiser (which depend on the data as well as
    on b) are never released. The computed w is within τ/(λ+Δ) of the exact
    minimiser, so the released cell differs from the ideal mechanism's only
    when the exact w lies within that distance of a cell boundary in some
    coordinate (probability about 2d·τ/((λ+Δ)·g) when w's density is flat
    at the grid's scale, e.g. 1e-6 for d = 10, n = 10^4, λ = 10^-3) — there
    alone the float computation, not the noise, decides. Why b is not drawn
    on a grid instead: w(b) = argmin J + bᵀw/n maps a lattice of b to a
    data-dependent discrete set of w, so an output would pin down which
    dataset produced it; rounding w keeps one public grid for every dataset.

    ``standard_noise`` replaces the draw of R (density ∝ exp(−‖r‖)) by a
    given one: for stability arguments and tests that hold the randomness
    fixed across neighbouring datasets. Such a fit is not rounded (its
    ``grid`` is None) and must not be released.
    """
    x, y = _check_data(x, y)
    n, d = x.shape
    epsilon_prime, extra = objective_constants(epsilon, n, lam)
    r = _standard(d, rng, standard_noise)
    theta = 2.0 / epsilon_prime
    w = minimise(x, y, lam + extra, linear=theta * r / n)
    if standard_noise is not None:
        return PrivateFit(w, lam, epsilon, theta, epsilon_prime, extra)
    grid = weight_grid(n, lam + extra, d)
    return PrivateFit(np.rint(w / grid) * grid, lam, epsilon, theta, epsilon_prime, extra,
                      grid)


def output_perturbation(x: Design, y: np.ndarray, lam: float, epsilon: float,
                        rng: np.random.Generator | None = None, *,
                        standard_noise: np.ndarray | None = None) -> PrivateFit:
    """Regularised logistic regression released by output perturbation (CMS Algorithm 1).

    Releases: w* + b, w* = argmin J(w), b with density ∝ exp(−(nλε/2)‖b‖).
    Sensitivity: J is λ-strongly convex and replacing one record changes
    its gradient by at most 2/n in norm, so ‖w*(D) − w*(D′)‖ ≤ 2/(nλ)
    (CMS Corollary 8 under replace-one).
    Noise: the L2 analogue of Laplace, scale θ = 2/(nλε): the density of a
    given output changes by at most exp(‖Δw*‖/θ) ≤ e^ε.
    Cost: ε-DP (δ = 0). Rows must lie in the unit ball, labels in {−1, +1}.

    Float safety (what is released): g·(round(w*/g) + K) on the public grid
    g = weight_grid(n, λ, d), K ∈ Z^d with P(K) ∝ exp(−‖g·K‖/θ′)
    (:func:`lattice_l2_laplace`). The computed w* is within τ/λ of the exact
    one, and rounding moves each coordinate by at most g/2, so the rounded
    minimisers of neighbours are at most Δ′ = 2/(nλ) + 2τ/λ + √d·g apart in
    norm; θ′ = Δ′/ε (``noise_scale``; about 0.1 % above θ). Proof: the
    lattice pmf's normaliser does not depend on the (lattice) centre, and
    exp(−‖z − c‖/θ′)/exp(−‖z − c′‖/θ′) <= exp(‖c − c′‖/θ′) <= e^ε.

    ``standard_noise`` (stability arguments and tests): w* + θ·R, continuous,
    not rounded (``grid`` None): such a fit must not be released.
    """
    x, y = _check_data(x, y)
    lam = check_positive("lam", lam)
    epsilon = check_positive("epsilon", epsilon)
    n, d = x.shape
    theta = 2.0 / (n * lam * epsilon)
    if standard_noise is not None:
        r = _standard(d, rng, standard_noise)
        return PrivateFit(minimise(x, y, lam) + theta * r, lam, epsilon, theta)
    if rng is None:
        raise TypeError("give rng (or standard_noise)")
    grid = weight_grid(n, lam, d)
    inflated = (2.0 / (n * lam) + 2 * GRADIENT_TOLERANCE / lam + math.sqrt(d) * grid) / epsilon
    k = lattice_l2_laplace(d, inflated, grid, check_rng(rng))
    return PrivateFit((np.rint(minimise(x, y, lam) / grid) + k) * grid, lam, epsilon, inflated,
                      grid=grid)


def weight_norm_bound(fit_kind: str, n: int, lam: float, epsilon: float, noise_norm: float
                      ) -> float:
    """A bound on ‖w‖ of a fit whose standard noise R has ‖R‖ ≤ ``noise_norm``.

    Objective perturbation: at the optimum (λ+Δ)w = −(1/n)Σ ℓ′·y·x − b/n, so
    ‖w‖ ≤ (1 + ‖b‖/n)/(λ + Δ) with ‖b‖ = (2/ε′)‖R‖. Output perturbation:
    ‖w*‖ ≤ 1/λ by the same argument, plus ‖b‖ = θ‖R‖. For the released,
    rounded fits add :func:`rounding_norm` (the rounding and, for output
    perturbation, the lattice noise's extra scale).
    """
    if fit_kind == "objective":
        epsilon_prime, extra = objective_constants(epsilon, n, lam)
        return (1 + 2 * noise_norm / (epsilon_prime * n)) / (lam + extra)
    if fit_kind == "output":
        return 1 / lam + 2 * noise_norm / (n * lam * epsilon)
    raise ValueError(f"unknown trainer {fit_kind!r} (objective or output)")


def rounding_norm(fit_kind: str, n: int, lam: float, epsilon: float, d: int,
                  noise_norm: float) -> float:
    """What rounding to the weight grid can add to ‖w‖ beyond :func:`weight_norm_bound`.

    Objective perturbation: √d·g/2. Output perturbation: the lattice noise
    g·K is within √d·g/2 of its continuous draw b, whose scale is θ′ instead
    of θ, plus √d·g/2 for rounding w*: √d·g + (θ′ − θ)·‖R‖ (‖R‖ = noise_norm
    at the standard scale, the same quantile as for the continuous noise).
    """
    if fit_kind == "objective":
        extra = objective_constants(epsilon, n, lam)[1]
        return math.sqrt(d) * weight_grid(n, lam + extra, d) / 2
    grid = weight_grid(n, lam, d)
    extra_scale = (2 * GRADIENT_TOLERANCE / lam + math.sqrt(d) * grid) / epsilon
    return math.sqrt(d) * grid + extra_scale * noise_norm


def minimise(x: Design, y: np.ndarray, lam: float, linear: np.ndarray | None = None
             ) -> np.ndarray:
    """argmin (1/n)Σ log(1 + exp(−y_i wᵀx_i)) + (λ/2)‖w‖² + linearᵀw, by Newton's method.

    The objective is λ-strongly convex, so the minimiser is unique and the
    damped Newton iteration converges to it from w = 0; it stops when the
    gradient norm is at most GRADIENT_TOLERANCE, or when a full step no
    longer reduces it (the float floor). It never raises on the data: a
    failure after the charge would depend on the records.

    ``x`` may be a dense array or a scipy.sparse CSR matrix (the one-hot
    design is mostly zeros: 200,000 rows × 40 mixed columns is ~100 MB as
    CSR against ~1.5 GB dense). The Newton system H·s = g is solved by
    Cholesky on the explicit d × d Hessian (accumulated in row blocks, so no
    n × d temporary) when d ≤ DENSE_HESSIAN_MAX, else by conjugate gradients
    on Hessian-vector products (Jacobi-preconditioned, to a relative residual
    that tightens with ‖g‖: inexact Newton keeps its fast local convergence).
    Either way the stopping rule is the same gradient test, so the returned w
    is within τ/λ of the exact minimiser as before.
    """
    n, d = x.shape
    lin = np.zeros(d) if linear is None else np.asarray(linear, dtype=np.float64)
    w = np.zeros(d)

    def value(v: np.ndarray) -> float:
        return float(-np.mean(log_expit(y * (x @ v))) + 0.5 * lam * v @ v + lin @ v)

    def gradient(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = expit(-(y * (x @ v)))                   # −ℓ′(z) = σ(−z)
        return -np.asarray(x.T @ (y * p)).ravel() / n + lam * v + lin, p

    current = value(w)
    grad, p = gradient(w)
    for _ in range(MAX_NEWTON_STEPS):
        norm = np.linalg.norm(grad)
        if norm <= GRADIENT_TOLERANCE:
            break
        step = _newton_step(x, p * (1 - p), lam, grad)
        # Armijo on the objective; but near the optimum its change falls below the float
        # resolution, and there the full step is judged by the gradient norm instead
        t = 1.0
        candidate = w - step
        new = value(candidate)
        new_grad, new_p = gradient(candidate)
        while not (new <= current - 1e-4 * t * float(grad @ step)
                   or (t == 1.0 and abs(new - current) <= 1e-12 * max(1.0, abs(current))
                       and np.linalg.norm(new_grad) < norm)):
            t *= 0.5
            if t < 1e-10:
                return w                            # the float floor: nothing left to gain
            candidate = w - t * step
            new = value(candidate)
            new_grad, new_p = gradient(candidate)
        w, current, grad, p = candidate, new, new_grad, new_p
    return w


DENSE_HESSIAN_MAX = 2048     # above this width, Newton steps by conjugate gradients
HESSIAN_BLOCK = 16384        # rows per block when the Hessian is accumulated


def _newton_step(x: Design, curvature: np.ndarray, lam: float, grad: np.ndarray
                 ) -> np.ndarray:
    """Solve (Xᵀ diag(curvature) X / n + λI) s = grad (see :func:`minimise`)."""
    n, d = x.shape
    if d <= DENSE_HESSIAN_MAX:
        hessian = np.zeros((d, d))
        for lo in range(0, n, HESSIAN_BLOCK):
            block = x[lo:lo + HESSIAN_BLOCK]
            c = curvature[lo:lo + HESSIAN_BLOCK]
            if sparse.issparse(block):
                hessian += (block.T @ sparse.diags(c) @ block).toarray()
            else:
                hessian += (block.T * c) @ block
        hessian /= n
        hessian[np.diag_indices(d)] += lam
        try:
            return np.asarray(cho_solve(cho_factor(hessian), grad))
        except np.linalg.LinAlgError:     # not positive definite in floats: fall back
            return np.linalg.solve(hessian, grad)
    if sparse.issparse(x):
        xs = cast("sparse.csr_matrix", x)  # issparse narrows nothing for the checker
        diagonal = np.asarray(xs.multiply(xs).T @ curvature).ravel() / n + lam
    else:
        diagonal = np.einsum("ij,ij,i->j", x, x, curvature) / n + lam

    def product(v: np.ndarray) -> np.ndarray:
        return np.asarray(x.T @ (curvature * (x @ v))).ravel() / n + lam * v

    operator = LinearOperator((d, d), matvec=product, dtype=np.float64)
    preconditioner = LinearOperator((d, d), matvec=lambda v: v / diagonal, dtype=np.float64)
    rtol = min(0.5, math.sqrt(float(np.linalg.norm(grad))))
    step, _ = cg(operator, grad, rtol=rtol, atol=0.0, maxiter=10 * d, M=preconditioner)
    return np.asarray(step)


def _standard(d: int, rng: np.random.Generator | None, given: np.ndarray | None
              ) -> np.ndarray:
    if given is not None:
        r = np.asarray(given, dtype=np.float64)
        if r.shape != (d,):
            raise ValueError(f"standard_noise must have shape ({d},), got {r.shape}")
        return r
    if rng is None:
        raise TypeError("give rng (or standard_noise)")
    return l2_laplace_vector(d, 1.0, rng)  # output perturbation draws its own lattice noise


def _row_norms_squared(x: sparse.csr_matrix, block: int = 1 << 16) -> np.ndarray:
    """‖row‖² of a CSR matrix, ``block`` rows at a time: ``x.multiply(x)`` would copy the whole
    design (values and indices) at once, the peak of a validate run on a large file."""
    out = np.empty(x.shape[0])
    for start in range(0, x.shape[0], block):
        part = x[start:start + block]
        out[start:start + block] = np.asarray(part.multiply(part).sum(axis=1)).ravel()
    return out


def _check_data(x: Design, y: np.ndarray) -> tuple[Design, np.ndarray]:
    if sparse.issparse(x):
        x = sparse.csr_matrix(x, dtype=np.float64)
        squared = _row_norms_squared(x)
    else:
        x = np.asarray(x, dtype=np.float64)
        squared = np.einsum("ij,ij->i", x, x) if x.ndim == 2 else np.zeros(0)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.shape != (x.shape[0],) or x.shape[0] == 0:
        raise ValueError("x must be (n, d) with n ≥ 1 and y of length n")
    if not np.all(np.isin(y, (-1.0, 1.0))):
        raise ValueError("labels must be −1 or +1")
    if np.any(squared > 1 + 1e-9):
        # the proofs bound the loss gradient by ‖x‖; a row outside voids the guarantee
        raise ValueError("every row must lie in the unit ball (‖x‖ ≤ 1)")
    return x, y
