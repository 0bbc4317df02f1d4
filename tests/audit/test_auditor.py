"""The auditor itself (tests/audit/auditor.py): its bound, its events, its conditioning, and
its calibration on a mechanism with a known privacy loss (Laplace with shift = sensitivity)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.audit.auditor import Event, audit, candidate_events, eps_lower_bound

EPS = 1.0


def test_bound_is_zero_without_a_gap_and_below_the_observed_log_ratio() -> None:
    assert eps_lower_bound(500, 500, 1000) == 0.0
    assert eps_lower_bound(0, 0, 1000) == 0.0
    bound = eps_lower_bound(900, 100, 1000)
    assert math.log(9) - 0.6 < bound < math.log(9)
    # more runs, a tighter bound on the same ratio; unequal sample sizes allowed
    assert eps_lower_bound(9000, 1000, 10000) > bound
    assert eps_lower_bound(900, 50, 1000, n_other=500) == pytest.approx(
        eps_lower_bound(900, 100, 1000), rel=0.15)


def test_events_cover_thresholds_and_atoms() -> None:
    few = candidate_events(np.array([0.0, 1.0, 1.0, 2.0]))
    assert Event("==", 1.0) in few and Event(">=", 2.0) in few and Event("<=", 0.0) in few
    many = np.concatenate([np.linspace(0, 1, 500), np.full(100, 0.5)])
    events = candidate_events(many)
    assert Event("==", 0.5) in events                 # an atom of a continuous statistic
    assert sum(e.op == "==" for e in events) == 1
    assert Event(">=", 0.5).count(np.array([0.4, 0.5, 0.6])) == 2


def _laplace(shift: float, scale: float):
    return lambda rng: float(shift + rng.laplace(0.0, scale))


def test_laplace_at_its_scale_stays_below_epsilon_and_half_scale_is_flagged() -> None:
    """Laplace(1/ε) shifted by the sensitivity 1: the loss is exactly ε at the tails, so the
    bound must approach ε from below; at half the scale it is 2ε and must be flagged."""
    right = audit(_laplace(0.0, 1 / EPS), _laplace(1.0, 1 / EPS), runs=4000, pilot=2000)
    assert 0.5 < right.eps_lower <= EPS
    wrong = audit(_laplace(0.0, 0.5 / EPS), _laplace(1.0, 0.5 / EPS), runs=4000, pilot=2000,
                  seed=1)
    assert wrong.eps_lower > EPS


def test_conditional_runs_are_dropped_on_each_side() -> None:
    def half(shift: float):
        def run(rng):
            keep = rng.random() < 0.5
            return float(shift + rng.laplace(0.0, 1.0)) if keep else float("nan")
        return run
    finding = audit(half(0.0), half(1.0), runs=2000, pilot=1000)
    assert 850 < finding.kept_d < 1150 and 850 < finding.kept_dp < 1150
    assert finding.eps_lower <= EPS
