"""A forecast's fixed cost before a spend: lazy metrics, kept answers, vectorised simulations.

The forecast runs before every spend, in every --dry-run and many times in ``dpcli plan``
(docs/forecast.md, "What it costs"). These tests check the levers structurally (what runs,
what is imported, what equals what), not by timing: the machine's load would make a timing
test flaky.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpcli.forecast import LazyMetrics, MetricForecast, make_forecast

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _metric(x: float) -> MetricForecast:
    return MetricForecast("error", x, (-2 * x, 2 * x))


def test_lazy_metrics_compute_each_metric_once_and_only_when_read() -> None:
    calls: list[str] = []

    def thunk(name: str, x: float):
        def make() -> MetricForecast:
            calls.append(name)
            return _metric(x)
        return make

    m = LazyMetrics({"head": thunk("head", 0.1), "slow": thunk("slow", 0.2)})
    assert list(m) == ["head", "slow"] and len(m) == 2 and "slow" in m
    assert calls == []
    assert m["head"].expected == 0.1 and m["head"].expected == 0.1
    assert calls == ["head"]
    assert m["slow"].expected == 0.2
    assert calls == ["head", "slow"]


def test_the_verdict_reads_only_the_headline_and_plan_answers_are_kept() -> None:
    # a usable forecast computes its headline once; the other metric waits for to_json; the
    # same ε asked again (epsilon_for, dpcli plan) is not recomputed
    evaluated: list[tuple[float, str]] = []

    def metrics_at(eps: float) -> LazyMetrics:
        def head() -> MetricForecast:
            evaluated.append((eps, "head"))
            return _metric(0.01 / eps)

        def other() -> MetricForecast:
            evaluated.append((eps, "other"))
            return _metric(1.0 / eps)
        return LazyMetrics({"head": head, "other": other})

    fc = make_forecast("x", 1.0, 100, "test", metrics_at, headline="head", target=0.05)
    assert fc.verdict.usable
    assert fc.lines() and evaluated == [(1.0, "head")]
    assert fc.at is not None
    fc.at(1.0)["head"]
    assert evaluated == [(1.0, "head")]        # kept, not recomputed
    assert set(fc.to_json()["forecast"]) == {"head", "other"}
    assert evaluated == [(1.0, "head"), (1.0, "other")]
    # inversion reads the headline only, at every ε it tries
    fc.epsilon_for("head", 0.001)
    assert all(name == "head" for _, name in evaluated[2:]) and len(evaluated) > 3


def test_a_plain_dict_of_metrics_still_works() -> None:
    fc = make_forecast("x", 1.0, 10, "test", lambda e: {"head": _metric(0.1 / e)},
                       headline="head", target=0.01)
    assert not fc.verdict.usable and fc.verdict.epsilon_usable is not None
    assert fc.to_json()["forecast"]["head"]["expected"] == pytest.approx(0.1)


def test_roc_forecast_before_a_spend_runs_no_curve_simulation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the line printed before a spend and the verdict read the AUC only (4,000 vectorised
    # draws); the 40 noisy curves, each post-processed, run once, when tpr/fpr are read
    from dpcli.forecast import forecast
    from dpcli.forecast import roc as roc_fc
    from dpcli.spec import load_spec

    calls: list[int] = []
    real = roc_fc._curve_errors

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(roc_fc, "_curve_errors", counted)
    spec = load_spec(CONFIGS / "adult.yaml")
    fc = forecast("roc", spec, spec.sections["roc"], 1000)
    assert fc.lines()[-1].startswith("verdict:")
    assert fc.epsilon_for("auc", 0.001) is not None
    assert calls == []
    j = fc.to_json()
    assert sorted(j["forecast"]) == ["auc", "fpr", "tpr"] and calls == [1]
    fc.to_json()
    assert calls == [1]


def test_evaluate_s_vectorised_release_is_the_mechanism_s_post_processing() -> None:
    # the forecast's batch projection and rounding give exactly what the release's
    # per-matrix functions give, row by row (fixed seed; deterministic)
    from dpcli.forecast import evaluate as ev
    from dpcli.mechanisms.consistency import nonnegative_with_total, round_with_total

    rng = np.random.default_rng(3)
    for _ in range(200):
        k = int(rng.integers(2, 5))
        n = int(rng.integers(1, 60))
        truth = rng.multinomial(n, np.ones(k * k) / (k * k))
        noisy = truth[None, :] + rng.integers(-8, 9, size=(40, k * k))
        got = ev.rounded_with_total(ev.projected_with_total(noisy.astype(float), n), n)
        want = np.array([round_with_total(nonnegative_with_total(r, n), n) for r in noisy])
        np.testing.assert_array_equal(got, want)
    # the rounding alone, on reals that sum to the total (both missing > 0 and < 0 paths)
    for _ in range(200):
        m = int(rng.integers(2, 9))
        v = rng.dirichlet(np.ones(m), size=30) * 17.0
        v[:3, 0] = np.floor(v[:3, 0]) + 1.0 - 1e-10   # rounds up: a surplus to take back
        total = 17
        want = np.array([round_with_total(r, total) for r in v])
        np.testing.assert_array_equal(ev.rounded_with_total(v, total), want)


def test_evaluate_s_simulated_metrics_match_the_scalar_metrics() -> None:
    from dpcli.forecast import evaluate as ev

    rng = np.random.default_rng(5)
    mats = rng.integers(0, 20, size=(50, 3, 3))
    mats[0] = 0
    mats[1, :, 1] = 0   # class 1 never predicted: precision undefined
    got = ev.batch_metrics(mats, 1)
    want = np.array([ev.metrics_of(m, 1) for m in mats])
    np.testing.assert_allclose(got, want, equal_nan=True)


def test_publish_grid_forecast_reuses_the_design_of_the_plan() -> None:
    from dpcli.forecast import publish_grid as pg
    from dpcli.spec import load_spec

    spec = load_spec(CONFIGS / "adult.yaml")
    section = spec.sections["publish-grid"]
    first = pg.design(spec, section, 5000)
    assert pg.design(spec, section, 5000) is first     # kept: taxonomies parsed once
    assert pg.design(spec, section, 6000) is not first


def test_a_taxonomy_file_is_parsed_once_per_process_until_it_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from dpcli import checks
    from dpcli.checks import Where
    from dpcli.data import taxonomy

    f = tmp_path / "tax.yaml"
    f.write_text("a: {Any: {x: {}, y: {}}}\nb: {Any: {u: {}}}\n")
    parsed: list[Path] = []
    real = checks.load_yaml
    monkeypatch.setattr(checks, "load_yaml", lambda p: parsed.append(p) or real(p))
    where = Where(f)
    assert taxonomy._from_file(f, "a", where) == {"Any": {"x": {}, "y": {}}}
    assert taxonomy._from_file(f, "b", where) == {"Any": {"u": {}}}
    assert len(parsed) == 1
    f.write_text("a: {Any: {z: {}}}\n")
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert taxonomy._from_file(f, "a", where) == {"Any": {"z": {}}}
    assert len(parsed) == 2


def test_printed_lines_say_what_the_numbers_are() -> None:
    assert _metric(0.1).line() == "error: typically 0.1 (median size); 90% of runs within ±0.2"
    lopsided = MetricForecast("loss", 0.05, (-0.01, 0.2))
    assert "between -0.01 and 0.2" in lopsided.line()
    assert MetricForecast("x", 0.0, (0.0, 0.0)).line() == "x: 0 (no noise on it)"
    bound = MetricForecast("extra", 0.3, (0.0, 0.3), bound_only=True)
    assert bound.line() == "extra: at most 0.3 (an upper bound, not a median)"
    assert bound.to_json()["bound_only"] is True and "bound_only" not in _metric(1).to_json()


def test_a_signed_interval_is_never_worded_as_an_absolute_error() -> None:
    # the tester's `plan`: "|AUC error| … 90% of runs between −0.253 and 0.15" (a negative
    # bound on a size) and validate's "between −0.0306 and 0" for a loss
    auc = MetricForecast("AUC error", 0.05, (-0.253, 0.15))   # roc's name: signed
    assert auc.line() == ("AUC error: typically 0.05 (median size); 90% of runs between "
                          "-0.253 and 0.15")
    loss = MetricForecast("class cut's utility loss / N", 0.01, (-0.0306, 0.0))
    assert loss.line() == ("class cut's utility loss / N: typically 0.01 (median size); "
                           "90% of runs at most 0.0306 (one-sided)")
    assert loss.to_json()["interval"] == [-0.0306, 0.0]  # the numbers are unchanged
    assert MetricForecast("e", 0.1, (-0.2, 0.19)).line().endswith("within ±0.2")


def test_a_floor_above_the_target_at_lo_skips_that_evaluation_and_not_the_answer() -> None:
    from dpcli.forecast import solve_epsilon

    asked: list[float] = []

    def error_at(e: float) -> float:
        asked.append(e)
        return 1.0 / e

    plain = solve_epsilon(error_at, 0.5)
    assert 1e-3 in asked
    asked.clear()
    floored = solve_epsilon(error_at, 0.5, floor_at=lambda e: 0.5 / e)
    assert floored == plain and 1e-3 not in asked
    # a floor at or below the target at lo: error_at(lo) is asked as before
    asked.clear()
    assert solve_epsilon(lambda e: asked.append(e) or 0.1, 0.5, floor_at=lambda e: 0.0) == 1e-3
    assert 1e-3 in asked


def test_train_nb_verdict_with_the_floor_is_the_plain_bisection_s(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the floor (the lattice points' own losses, without the envelope's walk) never exceeds
    # the headline, so the verdict's ε is the plain bisection's, from fewer simulations
    from dpcli.forecast import forecast, solve_epsilon
    from dpcli.forecast import train_nb as nbf
    from dpcli.spec import load_spec

    spec = load_spec(CONFIGS / "adult.yaml")
    fits: list[int] = []
    real = nbf._Simulation.accuracy_errors
    monkeypatch.setattr(nbf._Simulation, "accuracy_errors",
                        lambda self, scales: fits.append(1) or real(self, scales))
    for n in (1000, 200):
        fits.clear()
        fc = forecast("train-nb", spec, spec.sections["train-nb"], n)
        assert not fc.verdict.usable and fc.floor_at is not None and fc.at is not None
        simulated = len(fits)
        at = fc.at
        for e in (1e-3, 0.01, 0.3, 1.0, 1.7, 40.0):
            assert fc.floor_at(e) <= at(e)[nbf.HEADLINE].expected
        plain = solve_epsilon(lambda e, at=at: at(e)[nbf.HEADLINE].expected, nbf.TARGET)
        assert fc.verdict.epsilon_usable == plain
        assert simulated < len(fits)   # the plain solver walked the lattice from ε = 10⁻³


def test_lazy_metrics_first_is_computed_only_for_its_keys_and_comes_first() -> None:
    made: list[str] = []

    def first() -> dict[str, MetricForecast]:
        made.append("first")
        return {"a": _metric(0.3), "b": lambda: _metric(0.4)}

    m = LazyMetrics({"head": lambda: _metric(0.1)}, first=first)
    assert "head" in m and m["head"].expected == 0.1 and made == []
    assert list(m) == ["a", "b", "head"] and made == ["first"]
    assert m["b"].expected == 0.4 and len(m) == 3 and "zz" not in m
    assert made == ["first"]


def test_train_nb_bisection_builds_no_closed_forms_between_lattice_points(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the verdict's inversion reads the headline only: the plan (allocation) at each ε it
    # tries is made only where the closed forms are read, at the forecast's own ε
    from dpcli.forecast import forecast
    from dpcli.forecast import train_nb as nbf
    from dpcli.spec import load_spec

    spec = load_spec(CONFIGS / "adult.yaml")
    closed: list[int] = []
    real = nbf._parameter_errors
    monkeypatch.setattr(nbf, "_parameter_errors",
                        lambda *a, **k: closed.append(1) or real(*a, **k))
    fc = forecast("train-nb", spec, spec.sections["train-nb"], 1000)
    assert not fc.verdict.usable and closed == []
    assert list(fc.to_json()["forecast"])[:2] == ["prior", "counts"] and closed == [1]
