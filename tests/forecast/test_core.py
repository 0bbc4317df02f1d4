"""The forecast core: Laplace error quantiles, the ε solver, simulated forecasts, the verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcli.forecast import (
    MetricForecast,
    from_samples,
    has_forecast,
    laplace_error,
    make_forecast,
    solve_epsilon,
)


def test_laplace_error_matches_a_monte_carlo() -> None:
    # α = 1e-4: the empirical median and 90 % quantile of |Laplace(b)| over 200,000 draws lie
    # within 2 % of the closed form far beyond 4 standard errors
    rng = np.random.default_rng(7)
    b = 3.0
    draws = np.abs(rng.laplace(0, b, 200_000))
    f = laplace_error(b, "x")
    assert np.median(draws) == pytest.approx(f.expected, rel=0.02)
    assert np.quantile(draws, 0.9) == pytest.approx(f.bound, rel=0.02)


def test_from_samples_gives_median_abs_and_central_interval() -> None:
    errors = np.array([-3.0, -1.0, 0.0, 1.0, 2.0, 5.0])
    f = from_samples(errors, "e", level=0.5)
    assert f.expected == pytest.approx(1.5)
    lo, hi = f.interval
    assert lo == pytest.approx(np.quantile(errors, 0.25))
    assert hi == pytest.approx(np.quantile(errors, 0.75))
    with pytest.raises(ValueError):
        from_samples(np.array([np.nan]), "e")


def test_solve_epsilon_finds_the_smallest_epsilon_to_one_percent() -> None:
    needed = solve_epsilon(lambda e: 1.0 / e, 0.01)
    assert needed is not None and 100 <= needed <= 101
    assert solve_epsilon(lambda e: 1.0, 0.5) is None
    assert solve_epsilon(lambda e: 0.0, 0.5) == pytest.approx(1e-3)


def test_verdict_says_when_noise_dominates_and_which_epsilon_would_do() -> None:
    def at(e: float) -> dict[str, MetricForecast]:
        return {"auc": laplace_error(1.0 / e, "|AUC error|", sensitivity_scale=0.01)}

    weak = make_forecast("roc", 0.1, 1000, "closed form", at, headline="auc", target=0.01)
    assert not weak.verdict.usable
    assert weak.verdict.epsilon_usable == pytest.approx(math.log(2.0), rel=0.02)
    assert "noise dominates" in weak.lines()[-1]
    strong = make_forecast("roc", 2.0, 1000, "closed form", at, headline="auc", target=0.01)
    assert strong.verdict.usable and strong.lines()[-1] == "verdict: usable"
    j = strong.to_json()
    assert set(j["forecast"]["auc"]) >= {"expected", "interval", "level"}
    assert j["verdict"]["usable"] is True


def test_metric_forecast_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        MetricForecast("x", -1.0, (0.0, 1.0))
    with pytest.raises(ValueError):
        MetricForecast("x", 1.0, (1.0, 0.0))


def test_an_unknown_command_has_no_forecast() -> None:
    assert not has_forecast("ledger")


def test_a_forecast_solves_for_any_of_its_metrics() -> None:
    def at(e: float) -> dict[str, MetricForecast]:
        return {"auc": laplace_error(1.0 / e, "a", sensitivity_scale=0.01),
                "curve": laplace_error(1.0 / e, "c", sensitivity_scale=0.1)}

    fc = make_forecast("roc", 1.0, 1000, "closed form", at, headline="auc", target=0.01)
    needed = fc.epsilon_for("curve", 0.01)
    assert needed is not None and needed == pytest.approx(10 * math.log(2.0), rel=0.02)
    with pytest.raises(KeyError):
        fc.epsilon_for("nope", 0.1)
