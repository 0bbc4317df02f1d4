"""Heavy-tailed noise, its closed forms, the smooth-sensitivity mechanism and S*_β.

Distributional (KS) tests of the sampler are in tests/statistical/.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpcli.mechanisms import (
    heavy_tailed_cdf,
    heavy_tailed_noise,
    heavy_tailed_pdf,
    make_rng,
    smooth_beta,
    smooth_noise_scale,
    smooth_sensitivity,
    smooth_sensitivity_mechanism,
)
from dpcli.mechanisms.smooth import discrete_heavy_tailed_noise, discrete_heavy_tailed_pmf

# --- calibration (docs/design.md rule 7) -----------------------------------------------


def test_cauchy_calibration_is_six_s_over_epsilon() -> None:
    assert smooth_beta(1.0) == pytest.approx(1 / 6)
    assert smooth_beta(0.6, gamma=2.0) == pytest.approx(0.1)
    assert smooth_noise_scale(1.0, 1.0) == pytest.approx(6.0)
    assert smooth_noise_scale(0.5, 2.0, gamma=2.0) == pytest.approx(1.5)


def test_general_gamma_calibration() -> None:
    assert smooth_beta(2.0, gamma=3.0) == pytest.approx(2.0 / 8.0)
    assert smooth_noise_scale(1.5, 0.5, gamma=4.0) == pytest.approx(2 * 5 * 1.5 / 0.5)
    # scale · β = S: the noise scale is S/α with α = β
    assert smooth_noise_scale(2.0, 0.7, 3.0) * smooth_beta(0.7, 3.0) == pytest.approx(2.0)


@pytest.mark.parametrize("gamma", [1.5, 2.0, 3.0, 5.0])
@pytest.mark.parametrize("epsilon", [0.1, 1.0, 3.0])
def test_calibration_bounds_the_privacy_loss(gamma: float, epsilon: float) -> None:
    """Numerical check of the proof: f(x) = 0 with S(x) = 1 against a neighbour whose
    value moves by min(S(x), S(y)) <= LS and whose bound moves by e^(±β).
    The output log-density ratio must stay below ε everywhere on a wide grid."""
    grid = np.concatenate([-np.logspace(-6, 9, 2000), np.linspace(-50, 50, 20001),
                           np.logspace(-6, 9, 2000)])
    beta = smooth_beta(epsilon, gamma)

    def log_density(output: np.ndarray, value: float, bound: float) -> np.ndarray:
        scale = smooth_noise_scale(bound, epsilon, gamma)
        return np.log(heavy_tailed_pdf((output - value) / scale, gamma=gamma) / scale)

    base = log_density(grid, 0.0, 1.0)
    worst = 0.0
    for lam in (-beta, 0.0, beta):
        bound = math.exp(lam)
        for shift in (min(1.0, bound), -min(1.0, bound)):
            worst = max(worst, float(np.max(np.abs(base - log_density(grid, shift, bound)))))
    assert 0 < worst <= epsilon


def test_the_naive_bayes_paper_scale_is_not_private() -> None:
    """The √(2s/ε) Cauchy scale of the naive Bayes pseudo-code: with S = 100, ε = 1 a
    shift by S changes the output log-density by far more than ε."""
    sensitivity, epsilon = 100.0, 1.0
    scale = math.sqrt(2 * sensitivity / epsilon)
    grid = np.linspace(-1000, 1000, 200001)
    ratio = np.log(heavy_tailed_pdf(grid / scale, gamma=2)) - np.log(
        heavy_tailed_pdf((grid - sensitivity) / scale, gamma=2))
    assert np.max(np.abs(ratio)) > 3 * epsilon


# --- the sampler and its closed forms --------------------------------------------------

def test_cdf_for_gamma_two_is_the_standard_cauchy() -> None:
    z = np.concatenate([-np.logspace(-4, 8, 50), [0.0], np.logspace(-4, 8, 50)])
    np.testing.assert_allclose(heavy_tailed_cdf(z, gamma=2.0), stats.cauchy.cdf(z),
                               rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(heavy_tailed_pdf(z, gamma=2.0), stats.cauchy.pdf(z), rtol=1e-12)


@pytest.mark.parametrize("gamma", [1.2, 1.5, 2.0, 3.0, 6.0])
def test_pdf_and_cdf_are_consistent(gamma: float) -> None:
    total, _ = integrate.quad(lambda z: heavy_tailed_pdf(z, gamma=gamma), -np.inf, np.inf,
                              limit=200)
    assert total == pytest.approx(1.0, abs=1e-6)
    assert heavy_tailed_cdf(0.0, gamma=gamma) == 0.5
    assert heavy_tailed_cdf(np.inf, gamma=gamma) == 1.0
    assert heavy_tailed_cdf(-np.inf, gamma=gamma) == 0.0
    z = np.linspace(-20, 20, 401)
    cdf = heavy_tailed_cdf(z, gamma=gamma)
    np.testing.assert_allclose(cdf + heavy_tailed_cdf(-z, gamma=gamma), 1.0, atol=1e-12)
    assert np.all(np.diff(cdf) > 0)
    for a, b in [(-3.0, -0.5), (0.2, 1.7), (-1.0, 4.0)]:
        mass, _ = integrate.quad(lambda t: heavy_tailed_pdf(t, gamma=gamma), a, b)
        assert heavy_tailed_cdf(b, gamma=gamma) - heavy_tailed_cdf(a, gamma=gamma) == \
            pytest.approx(mass, rel=1e-7)


def test_noise_shape_reproducibility_and_symmetry() -> None:
    z = heavy_tailed_noise((3, 4), gamma=2.0, rng=make_rng(5))
    assert z.shape == (3, 4)
    assert z.dtype == np.float64
    np.testing.assert_array_equal(z, heavy_tailed_noise((3, 4), gamma=2.0, rng=make_rng(5)))
    many = heavy_tailed_noise(10_000, gamma=3.0, rng=make_rng(6))
    assert many.shape == (10_000,)
    assert np.all(np.isfinite(many))
    # Sign balance: the count of positives is Binomial(10^4, 1/2), sd 50; 300 is 6 sd
    # (false-failure rate about 2e-9).
    assert abs(int(np.sum(many > 0)) - 5_000) < 300


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"gamma": 1.0}, ValueError),
    ({"gamma": 0.5}, ValueError),
    ({"gamma": np.inf}, ValueError),
    ({"gamma": "2"}, TypeError),
    ({"size": -1}, ValueError),
    ({"size": 2.0}, TypeError),
    ({"size": (2, -1)}, ValueError),
    ({"rng": None}, TypeError),
])
def test_noise_rejects_bad_parameters(kwargs: dict, error: type[Exception]) -> None:
    params = {"size": 3, "gamma": 2.0, "rng": make_rng(0)} | kwargs
    with pytest.raises(error):
        heavy_tailed_noise(**params)


# --- the mechanism ------------------------------------------------------------

def test_mechanism_adds_scaled_discrete_noise_on_the_grid() -> None:
    """Output = grid·(round(value/grid) + K), K the discrete sampler at t = 2(γ+1)(S + grid)/ε
    grid steps: the rounding inflates S by one grid step."""
    value = np.array([1.0, 2.0 + 2**-12, 3.3])
    grid = 2.0**-10
    out = smooth_sensitivity_mechanism(value, smooth_sensitivity=0.5, epsilon=2.0, gamma=3.0,
                                       rng=make_rng(11), grid=grid)
    steps = 2 * 4 * (0.5 + grid) / 2.0 / grid
    k = discrete_heavy_tailed_noise(3, gamma=3.0, scale=steps, rng=make_rng(11))
    np.testing.assert_array_equal(out, (np.rint(value / grid) + k) * grid)
    assert np.array_equal(out / grid, np.round(out / grid))  # exact grid multiples
    again = smooth_sensitivity_mechanism(value, smooth_sensitivity=0.5, epsilon=2.0, gamma=3.0,
                                         rng=make_rng(11), grid=grid)
    np.testing.assert_array_equal(out, again)


def test_mechanism_on_grid_has_no_rounding_inflation() -> None:
    out = smooth_sensitivity_mechanism(np.array([7.0, 9.0]), smooth_sensitivity=3.0, epsilon=1.0,
                                       rng=make_rng(12), grid=1.0, on_grid=True)
    k = discrete_heavy_tailed_noise(2, gamma=2.0, scale=18.0, rng=make_rng(12))
    np.testing.assert_array_equal(out, np.array([7.0, 9.0]) + k)
    with pytest.raises(ValueError, match="multiple of grid"):
        smooth_sensitivity_mechanism(7.5, smooth_sensitivity=3.0, epsilon=1.0, rng=make_rng(0),
                                     grid=1.0, on_grid=True)


def test_mechanism_scalar_in_float_out() -> None:
    out = smooth_sensitivity_mechanism(4, smooth_sensitivity=1.0, epsilon=1.0, rng=make_rng(0),
                                       grid=2.0**-20)
    assert isinstance(out, float)
    assert out != 4.0


def test_zero_smooth_sensitivity_on_the_grid_means_no_noise() -> None:
    out = smooth_sensitivity_mechanism(2.5, smooth_sensitivity=0.0, epsilon=1.0, rng=make_rng(0),
                                       grid=0.5, on_grid=True)
    assert out == 2.5


def test_discrete_sampler_handles_tiny_and_zero_scales() -> None:
    """t = 0: no noise; t = 1e-300: P(K ≠ 0) ≈ 2·(1e-300)² — all zeros, and no endless loop."""
    assert not discrete_heavy_tailed_noise(100, gamma=2.0, scale=0.0, rng=make_rng(0)).any()
    assert not discrete_heavy_tailed_noise(100, gamma=4.0, scale=1e-300, rng=make_rng(0)).any()


def test_discrete_pmf_sums_to_one_and_matches_phi() -> None:
    for gamma, t in [(2.0, 0.4), (4.0, 7.0), (1.5, 30.0)]:
        k = np.arange(-2000, 2001)
        p = discrete_heavy_tailed_pmf(k, gamma=gamma, scale=t)
        ratio = p / p[2000]
        np.testing.assert_allclose(ratio, 1 / (1 + np.abs(k / t) ** gamma), rtol=1e-12)
        assert p.sum() < 1
        assert discrete_heavy_tailed_pmf(0.5, gamma=gamma, scale=t) == 0
    # γ = 2: Σ 1/(1 + (k/t)²) = π t coth(π t), a closed form for the normaliser
    t = 3.0
    assert discrete_heavy_tailed_pmf(0, gamma=2.0, scale=t) == pytest.approx(
        math.tanh(math.pi * t) / (math.pi * t), rel=1e-9)


@pytest.mark.parametrize(("gamma", "epsilon", "t"), [(2.0, 1.0, 0.5), (4.0, 0.3, 5.0),
                                                     (3.0, 2.0, 40.0)])
def test_discrete_privacy_loss_is_within_epsilon(gamma: float, epsilon: float, t: float) -> None:
    """The proof's two factors, on the exact pmf: a shift by s ≤ α·t grid steps and a scale
    change by e^β cost at most γε/(γ+1) < ε together (worst case over k and both signs)."""
    alpha = beta = epsilon / (2 * (gamma + 1))
    k = np.arange(-5000, 5001).astype(float)
    base = discrete_heavy_tailed_pmf(k, gamma=gamma, scale=t)
    s = math.floor(alpha * t)
    for factor in (math.exp(beta), math.exp(-beta)):
        other = discrete_heavy_tailed_pmf(k - s, gamma=gamma, scale=t * factor)
        loss = np.max(np.abs(np.log(base / other)))
        assert loss <= gamma * epsilon / (gamma + 1) + 1e-9


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"smooth_sensitivity": -0.25}, ValueError),
    ({"smooth_sensitivity": np.nan}, ValueError),
    ({"smooth_sensitivity": "1"}, TypeError),
    ({"epsilon": 0.0}, ValueError),
    ({"gamma": 1.0}, ValueError),
    ({"value": np.inf}, ValueError),
    ({"value": "x"}, TypeError),
    ({"rng": 3}, TypeError),
    ({"grid": 0.0}, ValueError),
    ({"grid": -1.0}, ValueError),
])
def test_mechanism_rejects_bad_parameters(kwargs: dict, error: type[Exception]) -> None:
    params = {"value": 1.0, "smooth_sensitivity": 1.0, "epsilon": 1.0, "rng": make_rng(0),
              "grid": 2.0**-20}
    with pytest.raises(error) as info:
        smooth_sensitivity_mechanism(**(params | kwargs))
    assert "0.25" not in str(info.value)  # the (private) smooth sensitivity is not printed


# --- S*_β ---------------------------------------------------------------------

def _brute_force(values: np.ndarray, beta: float, global_bound: float) -> float:
    k = np.arange(len(values))
    tail = global_bound * math.exp(-beta * len(values))
    return max(float(np.max(np.exp(-beta * k) * values)), tail)


def test_smooth_sensitivity_matches_brute_force_on_random_sequences() -> None:
    rng = make_rng(2024)
    stopped_early = 0
    for _ in range(300):
        max_distance = int(rng.integers(0, 200))
        global_bound = float(rng.uniform(0.5, 10.0))
        beta = float(rng.choice([1e-3, 0.01, 0.1, 0.5, 2.0]))
        # A(k): a random start plus sparse random jumps, capped at the global bound
        start = rng.uniform(0.0, 0.2) * global_bound
        jumps = rng.exponential(rng.uniform(0.0, 0.1) * global_bound, size=max_distance + 1)
        jumps *= rng.random(max_distance + 1) < 0.3
        values = np.minimum(start + np.cumsum(jumps), global_bound)
        calls: list[int] = []

        def local(k: int, values: np.ndarray = values, calls: list[int] = calls) -> float:
            calls.append(k)
            return float(values[k])

        result = smooth_sensitivity(local, beta=beta, max_distance=max_distance,
                                    global_bound=global_bound)
        assert result == pytest.approx(_brute_force(values, beta, global_bound), rel=1e-12)
        assert calls == list(range(len(calls)))  # distances in order, none repeated
        stopped_early += len(calls) < max_distance + 1
    assert stopped_early > 50  # the early stop is exercised, not only the full scan


def test_smooth_sensitivity_at_full_distance_is_the_textbook_formula() -> None:
    # A(k) reaches the global bound at k = max_distance (as at k = n): no tail term needed.
    values = [0.1, 0.1, 0.3, 0.3, 0.3, 1.0]
    beta = 0.4
    expected = max(math.exp(-beta * k) * a for k, a in enumerate(values))
    assert smooth_sensitivity(lambda k: values[k], beta=beta, max_distance=5,
                              global_bound=1.0) == pytest.approx(expected)


def test_smooth_sensitivity_takes_a_running_maximum() -> None:
    # passing the local sensitivity at distance exactly k: 0.9 at k=1 must carry to k=2.
    values = [0.2, 0.9, 0.1, 0.1]
    result = smooth_sensitivity(lambda k: values[k], beta=0.01, max_distance=3, global_bound=1.0)
    assert result == pytest.approx(max(0.2, 0.9 * math.exp(-0.01), 1.0 * math.exp(-0.04)))


def test_smooth_sensitivity_stops_when_nothing_can_beat_the_maximum() -> None:
    calls: list[int] = []

    def local(k: int) -> float:
        calls.append(k)
        return 1.0  # already the global bound

    assert smooth_sensitivity(local, beta=0.5, max_distance=10_000, global_bound=1.0) == 1.0
    assert calls == [0]


def test_short_max_distance_keeps_a_valid_upper_bound() -> None:
    # Distances beyond max_distance may reach the global bound: their term e^(-β(K+1))·GS
    # is included.
    result = smooth_sensitivity(lambda k: 0.0, beta=0.1, max_distance=4, global_bound=2.0)
    assert result == pytest.approx(2.0 * math.exp(-0.5))


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"beta": 0.0}, ValueError),
    ({"beta": -0.1}, ValueError),
    ({"beta": "0.1"}, TypeError),
    ({"max_distance": -1}, ValueError),
    ({"max_distance": 3.0}, TypeError),
    ({"global_bound": 0.0}, ValueError),
    ({"global_bound": np.inf}, ValueError),
    ({"local_at_distance": 0.5}, TypeError),
    ({"local_at_distance": lambda k: 2.5}, ValueError),  # above the global bound
    ({"local_at_distance": lambda k: -0.5}, ValueError),
    ({"local_at_distance": lambda k: math.nan}, ValueError),
    ({"local_at_distance": lambda k: "0.5"}, TypeError),
])
def test_smooth_sensitivity_rejects_bad_parameters(kwargs: dict, error: type[Exception]) -> None:
    params = {"local_at_distance": lambda k: 0.5, "beta": 0.1, "max_distance": 10,
              "global_bound": 1.0} | kwargs
    with pytest.raises(error) as info:
        smooth_sensitivity(params.pop("local_at_distance"), **params)
    assert "2.5" not in str(info.value)
