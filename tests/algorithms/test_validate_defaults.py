"""validate's issue-20 defaults: λ0 and the search rule, the class threshold (its utility's
sensitivity, its mechanism's distribution), the sparse design and the Newton solves."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from scipy import sparse

from dpcli.algorithms import degenerate
from dpcli.algorithms import validate as v
from dpcli.algorithms.inputs import Inputs
from dpcli.data.schema import BinaryColumn, CategoricalColumn, Label, NumericColumn, Schema
from dpcli.mechanisms import erm, exponential_probabilities, make_rng
from tests.mechanisms.test_erm import data
from tests.statistical.pooled import pooled_chi2

ALPHA = 1e-4     # false-failure rate of each distribution test

# ------------------------------------------------------------------ λ0 and the search rule


def test_auto_lambda_is_four_root_d_over_epsilon_n() -> None:
    assert v.auto_lambda(1000, 0.5, 16) == pytest.approx(4 * 4 / 500)
    # the noise's typical margin shift 2√d/(ε·n·λ) is ½ at λ0
    n, eps, d = 30_000, 1.0, 100
    lam = v.auto_lambda(n, eps, d)
    assert 2 * math.sqrt(d) / (eps * n * lam) == pytest.approx(0.5)
    # and objective perturbation needs no extra regulariser there: ε′ ≥ 7ε/8
    for n, eps, d in ((50, 0.1, 1), (1000, 2.0, 30), (200_000, 0.5, 300)):
        eps_prime, extra = erm.objective_constants(eps, n, v.auto_lambda(n, eps, d))
        assert extra == 0.0 and eps_prime >= 7 * eps / 8


def test_search_only_when_the_selection_noise_is_one_percent_of_the_range() -> None:
    # a grid given in the spec, wide enough a design that its smallest λ is within reach of
    # λ0 (≤ 4 λ0) where its noise is small: only the noise decides here
    config = v.ValidateConfig(grid=(5e-4, 0.01, 0.1))
    d = 10_000
    # ramp: noise mean ≈ 8/(λ_min·n·ε) — 1 % needs n·ε ≈ 1.6·10⁶ at λ_min = 5e-4
    small = v.decide(config, 1.0, 9_000, 1_000, d, 10_000)
    assert small.mode == "auto" and small.n_model == 10_000
    assert small.lam == pytest.approx(v.auto_lambda(10_000, float(small.epsilon_model), d))
    assert "selection noise" in small.reason
    big = v.decide(config, 2.0, 900_000, 100_000, d, 1_000_000)
    assert big.mode == "select" and big.lam is None and big.n_model == 900_000
    noise = v.selection_noise_mean(config, float(big.epsilon_model), 900_000, 100_000, d)
    assert noise <= v.SELECTION_NOISE_SHARE
    # the boundary is where the rule says (the reach holds at every n here)
    for n in (600_000, 800_000, 850_000, 900_000):
        dec = v.decide(config, 2.0, n, n // 9, d, n + n // 9)
        lam0 = v.auto_lambda(n + n // 9, float(dec.epsilon_model), d)
        assert min(config.grid) <= v.REACH * lam0
        noise = v.selection_noise_mean(config, float(dec.epsilon_model), n, n // 9, d)
        assert (dec.mode == "select") == (noise <= v.SELECTION_NOISE_SHARE)


def test_a_grid_wholly_above_lambda0_is_not_searched_by_auto() -> None:
    """The tester's case: 1.6·10⁶ Carseats rows, d = 17, ε = 1: the paper's grid is precise
    enough to search (noise < 1 %) but its smallest λ, 0.001, is ~100 λ0: auto trains at λ0;
    `lambda: search` still searches it, as documented."""
    paper = v.ValidateConfig()
    n, m, d = 1_440_000, 160_000, 17
    assert v.selection_noise_mean(paper, 0.95, n, m, d) <= v.SELECTION_NOISE_SHARE
    dec = v.decide(paper, 1.0, n, m, d, n + m)
    lam0 = v.auto_lambda(n + m, float(dec.epsilon_model), d)
    assert v.REACH * lam0 < 0.001
    assert (dec.mode, dec.n_model) == ("auto", n + m)
    assert dec.lam == pytest.approx(lam0)
    assert "over-regularised" in dec.reason and "0.001" in dec.reason
    search = v.decide(v.ValidateConfig(lam="search"), 1.0, n, m, d, n + m)
    assert search.mode == "select"
    # the reach: a grid starting just below REACH·λ0 passes it, just above not
    d_wide = 40_000     # wide enough that a grid near λ0 is precise enough
    lam0 = v.auto_lambda(n + m, float(dec.epsilon_model), d_wide)
    for factor, searched in ((0.999 * v.REACH, True), (1.001 * v.REACH, False)):
        grid = v.ValidateConfig(grid=(factor * lam0, 1.0))
        got = v.decide(grid, 1.0, n, m, d_wide, n + m)
        assert (got.mode == "select") == searched, got.reason


def test_the_default_trains_at_lambda0_on_usual_designs() -> None:
    """The paper's grid (smallest λ 0.001) is too noisy to search below n·ε ≈ 800,000 and
    wholly above 4·λ0 beyond it, unless the design is thousands of columns wide: the default
    (no grid in the spec) trains at λ0 at every n and ε."""
    config = v.ValidateConfig()
    for d in (5, 100, 1_000):
        for n, eps in ((10_000, 0.5), (1_000_000, 1.0), (100_000_000, 2.0)):
            dec = v.decide(config, eps, n, n // 9, d, n + n // 9)
            assert dec.mode == "auto" and dec.lam == pytest.approx(
                v.auto_lambda(n + n // 9, float(dec.epsilon_model), d))


def test_grid_edge() -> None:
    grid = (0.001, 0.112, 0.223, 1.0)
    assert v.grid_edge(grid, 0) == "smallest"
    assert v.grid_edge(grid, 3) == "largest"
    assert v.grid_edge(grid, 1) is None and v.grid_edge(grid, 2) is None
    assert v.grid_edge(grid, None) is None
    assert v.grid_edge((0.5,), 0) is None          # a grid of one value has no edge to pass
    assert v.grid_edge((1.0, 0.1, 0.5), 1) == "smallest"   # by value, not by position


def test_the_report_flags_a_choice_at_the_grid_edge() -> None:
    x, y = data(200, 3, 3)
    fit = v.train("objective", x, y, 0.5, 1.0, make_rng(0))
    for method, index, expected in (("stability", 0, "smallest"), ("stability", 1, None),
                                    ("alpha-split", 2, "largest"), ("random", 0, None)):
        config = v.ValidateConfig(grid=(0.5, 1.0, 2.0), method=method)
        report = v.fit_report(config, v.Outcome(index, fit), 1.0, 180, 20)
        assert report.get("lambda_at_grid_edge") == expected
    fixed = v.fit_report(v.ValidateConfig(), v.Outcome(None, fit), 1.0, 180, 20)
    assert "lambda_at_grid_edge" not in fixed


def test_given_lambda_search_and_baselines() -> None:
    given = v.decide(v.ValidateConfig(lam=0.3), 1.0, 90, 10, 5, 100)
    assert (given.mode, given.lam, given.n_model) == ("given", 0.3, 100)
    # with a --validation file the model trains on DATA only
    assert v.decide(v.ValidateConfig(lam=0.3), 1.0, 90, 10, 5, 100, split=False).n_model == 90
    assert v.decide(v.ValidateConfig(lam="search"), 1.0, 90, 10, 5, 100).mode == "select"
    assert v.decide(v.ValidateConfig(method="random"), 1.0, 90, 10, 5, 100).mode == "select"
    with pytest.raises(ValueError, match="lambda"):
        v.ValidateConfig(lam=0.0)
    with pytest.raises(ValueError, match="lambda"):
        v.ValidateConfig(lam="sometimes")
    with pytest.raises(ValueError, match="threshold_share"):
        v.ValidateConfig(threshold_share=0.5)


def test_threshold_share_rule_and_its_constant() -> None:
    # 1207 = 2(ln 4096 + ln 20)/(¾ · 0.025): the share at which the cut's utility error is
    # ≤ 2.5 % of N with probability 0.95
    derived = 2 * (math.log(v.THRESHOLD_CANDIDATES) + math.log(1 / v.THRESHOLD_FAILURE)) / (
        float(v.CUT_PART) * 0.025)
    assert round(derived) == v.SHARE_CONSTANT
    assert v.threshold_share(100, 1.0) == 0.25
    assert v.threshold_share(10**7, 1.0) == 0.05
    assert v.threshold_share(24_140, 1.0) == 0.05
    assert v.threshold_share(10_000, 1.0) == pytest.approx(0.121)
    # at the unclipped share the forecast error is 2.5 % of N
    assert v.threshold_error(10_000, 0.121) == pytest.approx(0.025, rel=0.01)
    dec = v.decide(v.ValidateConfig(), 1.0, 9_000, 1_000, 5, 10_000)
    assert dec.share == Fraction(121, 1000)
    assert dec.epsilon_model + dec.epsilon_threshold == 1     # exact: the plan adds up
    zero = v.decide(v.ValidateConfig(threshold_share=0.0), 1.0, 9_000, 1_000, 5, 10_000)
    assert zero.epsilon_threshold == 0 and zero.epsilon_model == 1


def test_full_plan_adds_up_and_names_the_steps() -> None:
    config = v.ValidateConfig()
    dec = v.decide(config, 0.7, 900, 100, 6, 1_000)
    plan = v.full_plan(config, dec, 900, 100, 6, 1_000)
    assert [s.name for s in plan] == ["train", "threshold_prior", "threshold",
                                      "threshold_check"]
    assert plan.total.epsilon == Fraction(7, 10)
    assert plan.step("threshold_prior").budget.epsilon == dec.epsilon_threshold / 8
    assert plan.step("threshold_check").budget.epsilon == dec.epsilon_threshold / 8
    search = v.decide(v.ValidateConfig(lam="search"), 0.7, 900, 100, 6, 1_000)
    names = [s.name for s in v.full_plan(config, search, 900, 100, 6, 1_000)]
    assert names == ["select", "final", "threshold_prior", "threshold", "threshold_check"]


# ------------------------------------------------------------------ the threshold utility


def test_threshold_utility_counts() -> None:
    z = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    y = np.array([-1.0, 1.0, -1.0, 1.0, 1.0])
    t = np.array([-3.0, -1.0, 0.5, 5.0])
    # t = −3: every row positive: TP 3, TN 0; t = −1: TP 2 (z > −1), TN 1; t = .5: TP 2, TN 2
    np.testing.assert_allclose(v.threshold_utility(z, y, t, (1.0, 1.0)), [3, 3, 4, 2])
    np.testing.assert_allclose(v.threshold_utility(z, y, t, (1.0, 0.5)), [3, 2.5, 3, 1])


@pytest.mark.parametrize("weights", [(1.0, 1.0), (1.0, 0.25), (0.1, 1.0), (0.0, 1.0)])
def test_threshold_utility_sensitivity_is_one_under_replace_one(weights) -> None:
    """Every replace-one neighbour of small datasets (each row replaced by every value of a
    small domain): every candidate's utility moves by at most Δ = 1, and 1 is reached."""
    domain = [(z, y) for z in (-1.5, -0.2, 0.0, 0.3, 2.0) for y in (-1.0, 1.0)]
    candidates = np.linspace(-2.0, 2.5, 37)
    rng = make_rng(3)
    worst = 0.0
    for _ in range(30):
        n = int(rng.integers(1, 7))
        rows = [domain[i] for i in rng.integers(len(domain), size=n)]
        z = np.array([r[0] for r in rows])
        y = np.array([r[1] for r in rows])
        base = v.threshold_utility(z, y, candidates, weights)
        for i, (zr, yr) in itertools.product(range(n), domain):
            z2, y2 = z.copy(), y.copy()
            z2[i], y2[i] = zr, yr
            moved = np.abs(v.threshold_utility(z2, y2, candidates, weights) - base).max()
            worst = max(worst, float(moved))
    assert worst <= 1.0 + 1e-12
    assert worst == pytest.approx(max(weights))   # the bound is tight for these weights


def test_class_weights_are_in_the_unit_interval_and_half_balance() -> None:
    a_pos, a_neg = v.class_weights(200, 1000)      # p = 0.2: √(p/q) = ½
    assert (a_pos, a_neg) == pytest.approx((1.0, 0.5))
    assert v.class_weights(800, 1000) == pytest.approx((0.5, 1.0))
    assert v.class_weights(500, 1000) == pytest.approx((1.0, 1.0))
    for count in (-50, 0, 1, 999, 1000, 5000):     # noisy counts outside [0, N] are clipped
        a = v.class_weights(count, 1000)
        assert all(0 < w <= 1 for w in a)
    # geometrically halfway: a₊·P / (a₋·(N − P)) = √(P/(N − P))
    assert a_pos * 200 / (a_neg * 800) == pytest.approx(math.sqrt(200 / 800))


def test_threshold_index_matches_the_exponential_mechanism() -> None:
    """Distribution test (α = 1e-4): the chosen candidate follows exp(ε·u/2) exactly."""
    rng = make_rng(11)
    z = rng.normal(size=60)
    y = np.where(rng.random(60) < 1 / (1 + np.exp(-2 * z)), 1.0, -1.0)
    candidates = np.linspace(-3, 3, 40)
    weights, eps = (1.0, 0.6), 0.8
    utility = v.threshold_utility(z, y, candidates, weights)
    expected = exponential_probabilities(utility, sensitivity=1.0, epsilon=eps)
    draws = 40_000
    picks = np.array([v.threshold_index(z, y, candidates, weights, eps, rng)
                      for _ in range(draws)])
    observed = np.bincount(picks, minlength=len(candidates)).astype(float)
    pvalue, cells = pooled_chi2(observed, expected)
    assert cells >= 5 and pvalue > ALPHA
    # power: the same draws are rejected against the mechanism at 2ε
    wrong = exponential_probabilities(utility, sensitivity=1.0, epsilon=2 * eps)
    assert pooled_chi2(observed, wrong)[0] < ALPHA


# ------------------------------------------------------------------ the released threshold

SCHEMA = Schema(columns=(NumericColumn("x", -1.0, 1.0), CategoricalColumn("c", ("a", "b")),
                         BinaryColumn("f", ("no", "yes"))),
                label=Label("y", ("0", "1"), "1"))


def _model(weights: list[float], threshold: float = 0.0) -> v.LogRegModel:
    return v.LogRegModel(SCHEMA, ("x", "c", "f"), np.array(weights), {}, threshold)


def test_choose_threshold_candidates_span_the_declared_logit_range() -> None:
    model = _model([0.1, 2.0, 0.0, 0.5, -0.5, 0.0, 0.0])
    lo, hi = v.logit_range(model)
    divisor = 2.0     # √(1 + 3 columns)
    assert (lo, hi) == pytest.approx(((0.1 - 2.0 - 0.5) / divisor, (0.1 + 2.0 + 0.5) / divisor))
    rng = make_rng(4)
    z = rng.uniform(lo, hi, 500)
    y = np.where(z > 0.3, 1.0, -1.0)
    cut = v.choose_threshold(model, z, y, 5.0, rng)
    assert lo <= cut.logit <= hi and abs(cut.logit - 0.3) < 0.1
    assert cut.candidates == (pytest.approx(lo), pytest.approx(hi), 4096)
    assert abs(cut.noisy_predicted_positive - np.count_nonzero(z > cut.logit)) < 20
    assert cut.one_class() is None
    assert cut.to_json()["epsilon"] == 5.0
    none = v.choose_threshold(model, z, y, 0, rng)
    assert none.logit == 0.0 and none.to_json()["epsilon"] == 0.0


def test_choose_threshold_finds_a_rare_class_cut() -> None:
    """10 % positives with scores shifted down: the 0.5 cut (logit 0) predicts none of them;
    the balanced private cut recovers most."""
    rng = make_rng(8)
    n = 5000
    y = np.where(rng.random(n) < 0.1, 1.0, -1.0)
    z = np.clip(-1.5 + 1.0 * (y > 0) + 0.2 * rng.normal(size=n), -3, 3)
    model = _model([0.0, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0])   # logit range [−3, 3]
    assert np.mean(z[y > 0] > 0) < 0.05
    cut = v.choose_threshold(model, z, y, 1.0, rng)
    recall = np.mean(z[y > 0] > cut.logit)
    specificity = np.mean(z[y < 0] <= cut.logit)
    assert recall > 0.8 and specificity > 0.8


def test_one_class_on_the_rows_is_read_from_the_released_count() -> None:
    def cut(count: int) -> v.Threshold:
        return v.Threshold(0.5, 1.0, 10, (1.0, 1.0), (-1.0, 1.0, 4096), count, 10_000)
    # the count's noise (ε = 1/8 of the threshold's 1, Δ = 1) has a 95 % half-width of 25
    # rows: a count within 25 of 0.1 % of the rows (10) cannot rule out one class
    assert cut(10).check_halfwidth == 25
    assert cut(10).one_class() == "negative" and cut(-3).one_class() == "negative"
    assert cut(35).one_class() == "negative"              # 10 + 25: not ruled out
    assert cut(9_990).one_class() == "positive" and cut(12_000).one_class() == "positive"
    assert cut(9_965).one_class() == "positive"
    assert cut(36).one_class() is None and cut(9_964).one_class() is None
    assert cut(5_000).one_class() is None
    assert v.Threshold(0.0, 0.0).one_class() is None     # threshold_share 0: nothing released
    rng = make_rng(6)
    z = rng.normal(size=3000)
    y = np.where(z > 0, 1.0, -1.0)
    model = _model([0.0, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0])   # logit range [−3, 3]
    released = v.choose_threshold(model, z - 10.0, y, 2.0, rng)  # every row far below
    assert released.one_class() == "negative"


def test_degeneracy_is_judged_at_the_released_cut() -> None:
    model = _model([0.1, 2.0, 0.0, 0.5, -0.5, 0.0, 0.0])
    _, hi = v.logit_range(model)
    assert not degenerate.check(model).degenerate
    model.threshold = hi + 0.01       # no input is above the cut: class 1 never predicted
    verdict = degenerate.check(model)
    assert verdict.never == ("1",) and "predicted class '1'" in verdict.problem()
    model.threshold = -10.0           # every input above: class 0 never predicted
    assert degenerate.check(model).never == ("0",)
    # near-constant: log-odds spread below 1e-3 over the whole declared domain
    flat = _model([0.2, 1e-4, 0.0, 0.0, 0.0, 0.0, 0.0])
    verdict = degenerate.check(flat)
    assert verdict.constant and "nearly the same score" in verdict.problem()


def test_threshold_survives_the_model_file() -> None:
    model = _model([0.1, 2.0, 0.0, 0.5, -0.5, 0.0, 0.0], threshold=-0.75)
    payload = model.to_payload()
    assert payload["threshold_logit"] == -0.75
    again = v.LogRegModel.from_payload(payload, Path("m.json"))
    assert again.threshold == -0.75 and "threshold_logit" not in again.report
    payload.pop("threshold_logit")       # a model written before the threshold: the 0.5 cut
    assert v.LogRegModel.from_payload(payload, Path("m.json")).threshold == 0.0


# ------------------------------------------------------------------ sparse design, solver


def test_sparse_unit_ball_equals_the_dense_one() -> None:
    rng = make_rng(5)
    n = 300
    columns = {"x": rng.uniform(-1, 1, n), "c": rng.integers(0, 3, n).astype(np.int32),
               "f": rng.integers(0, 2, n).astype(np.int8)}
    inputs = Inputs.from_columns(SCHEMA, ("x", "c", "f"), columns, n)
    dense = inputs.unit_ball()
    csr = inputs.unit_ball_sparse()
    assert sparse.issparse(csr) and csr.shape == dense.shape
    np.testing.assert_array_equal(csr.toarray(), dense)


@pytest.mark.parametrize("dense_max", [erm.DENSE_HESSIAN_MAX, 0])   # Cholesky, then CG
def test_minimise_on_sparse_rows_reaches_the_tolerance(monkeypatch, dense_max: int) -> None:
    monkeypatch.setattr(erm, "DENSE_HESSIAN_MAX", dense_max)
    monkeypatch.setattr(erm, "HESSIAN_BLOCK", 37)     # several row blocks
    x, y = data(400, 6, 21)
    lin = make_rng(2).normal(size=6) * 1e-3
    reference = erm.minimise(x, y, 0.01, lin) if dense_max else None
    w = erm.minimise(sparse.csr_matrix(x), y, 0.01, lin)
    p = 1 / (1 + np.exp(y * (x @ w)))
    gradient = -(x.T @ (y * p)) / len(y) + 0.01 * w + lin
    assert np.linalg.norm(gradient) <= 10 * erm.GRADIENT_TOLERANCE
    if reference is not None:
        np.testing.assert_allclose(w, reference, atol=1e-9)


def test_objective_perturbation_is_the_same_on_sparse_rows() -> None:
    x, y = data(200, 5, 9)
    a = erm.objective_perturbation(x, y, 0.05, 1.0, make_rng(1))
    b = erm.objective_perturbation(sparse.csr_matrix(x), y, 0.05, 1.0, make_rng(1))
    np.testing.assert_array_equal(a.weights, b.weights)
    bad = x.copy()
    bad[0] *= 2 / np.linalg.norm(bad[0])
    with pytest.raises(ValueError, match="unit ball"):
        erm.objective_perturbation(sparse.csr_matrix(bad), y, 0.05, 1.0, make_rng(1))
