"""Chaudhuri & Vinterbo's validation: stability constants, the split rule, the procedures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit

from dpcli.algorithms import inputs
from dpcli.algorithms import validate as v
from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Label,
    NumericColumn,
    Schema,
)
from dpcli.mechanisms import l2_laplace_vector, make_rng, objective_perturbation
from dpcli.mechanisms.erm import output_perturbation, rounding_norm, weight_norm_bound
from tests.mechanisms.test_erm import data, neighbour

TRAIN = {"objective": objective_perturbation, "output": output_perturbation}


# ------------------------------------------------------------------ stability constants


@pytest.mark.parametrize("trainer", ["objective", "output"])
@pytest.mark.parametrize("score", ["ramp", "hinge", "logistic"])
def test_training_stability_beta1_on_neighbouring_training_sets(trainer: str,
                                                                score: str) -> None:
    """|q(F(T, λ, ε, R), V) − q(F(T′, λ, ε, R), V)| ≤ β1/n for replace-one T, T′, same R."""
    n, m, d = 30, 25, 3
    config = v.ValidateConfig(grid=(0.01, 0.2, 1.0), score=score, trainer=trainer)
    rng = make_rng(1)
    xv, yv = data(m, d, 99)
    worst = 0.0
    for trial in range(25):
        x, y = data(n, d, 200 + trial)
        x2, y2 = neighbour(x, y, rng)
        r = l2_laplace_vector(d, 1.0, rng)
        eps = float(rng.choice([0.1, 1.0]))
        beta1 = v.stability_constants(config, n, m, d, eps).beta1
        for lam in config.grid:
            a = TRAIN[trainer](x, y, lam, eps, standard_noise=r).weights
            b = TRAIN[trainer](x2, y2, lam, eps, standard_noise=r).weights
            moved = abs(v.validation_score(score, a, xv, yv) - v.validation_score(score, b, xv, yv))
            worst = max(worst, moved / (beta1 / n))
    assert worst <= 1 + 1e-7
    assert worst > 1e-3          # the neighbours do move the score


def test_ramp_validation_stability_is_one_over_m_for_any_w() -> None:
    """β2 = 1 for the ramp loss: no bound on ‖w‖ needed, so δ = 0."""
    m, d = 20, 3
    rng = make_rng(2)
    worst = 0.0
    for trial in range(300):
        xv, yv = data(m, d, 400 + trial)
        xv2, yv2 = neighbour(xv, yv, rng)
        w = rng.normal(size=d) * rng.uniform(0.1, 1000)
        moved = abs(v.validation_score("ramp", w, xv, yv) - v.validation_score("ramp", w, xv2, yv2))
        worst = max(worst, moved * m)
    assert worst <= 1 + 1e-12
    assert worst > 0.9
    config = v.ValidateConfig(score="ramp")
    c = v.stability_constants(config, 100, m, d, 1.0)
    assert (c.beta2, c.delta, c.weight_bound) == (1.0, 0.0, None)


@pytest.mark.parametrize("score", ["hinge", "logistic"])
def test_unbounded_validation_stability_holds_when_w_is_within_the_bound(score: str) -> None:
    """|q(w, V) − q(w, V′)| ≤ β2/m for every w with ‖w‖ ≤ W (the event of probability ≥ 1 − δ)."""
    m, d, n = 20, 3, 50
    config = v.ValidateConfig(grid=(0.1, 1.0), score=score, delta=1e-3)
    c = v.stability_constants(config, n, m, d, 1.0)
    assert c.weight_bound is not None and c.delta == 1e-3
    rng = make_rng(3)
    worst = 0.0
    for trial in range(300):
        xv, yv = data(m, d, 800 + trial)
        w = rng.normal(size=d)
        w *= c.weight_bound * rng.uniform(0.5, 1.0) / np.linalg.norm(w)
        xv2, yv2 = xv.copy(), yv.copy()
        i = int(rng.integers(m))
        yv2[i] = rng.choice([-1.0, 1.0])
        xv2[i] = -yv2[i] * w / np.linalg.norm(w)      # the replaced row at its worst loss
        moved = abs(v.validation_score(score, w, xv, yv) - v.validation_score(score, w, xv2, yv2))
        worst = max(worst, moved * m / c.beta2)
    assert worst <= 1 + 1e-9
    assert worst > 0.4


@pytest.mark.parametrize("trainer", ["objective", "output"])
def test_weight_bound_is_the_gamma_quantile_at_delta_over_k(trainer: str) -> None:
    """P(‖w_i‖ > W for some i) ≤ δ: the norm of R at its 1 − δ/k quantile bounds every fit."""
    from scipy.stats import gamma

    n, m, d = 200, 50, 5
    config = v.ValidateConfig(grid=(0.01, 0.5), score="hinge", delta=0.01, trainer=trainer)
    c = v.stability_constants(config, n, m, d, 0.5)
    r = gamma.isf(0.01 / 2, d)
    # plus what rounding the released weights to their grid can add (float safety)
    assert c.weight_bound == pytest.approx(max(weight_norm_bound(trainer, n, lam, 0.5, r)
                                               + rounding_norm(trainer, n, lam, 0.5, d, r)
                                               for lam in config.grid))
    assert c.beta2 == pytest.approx(min(2 * c.weight_bound, 1 + c.weight_bound))
    assert c.beta == max(c.beta1 / n, c.beta2 / m)


def test_beta1_is_set_by_the_smallest_lambda() -> None:
    c = v.stability_constants(v.ValidateConfig(grid=(0.5, 0.001, 1.0)), 1000, 100, 4, 0.5)
    assert c.beta1 == pytest.approx(2 / 0.001)
    # β1/n = 2 ≫ β2/m = 0.01, plus the tolerance and the weight grid's √d·g ≤ (β1/n)/1024
    assert 2 < c.beta <= 2 * (1 + 1 / 1024) + 1e-6


# ------------------------------------------------------------------ the public split


def test_validation_rows_depend_on_position_seed_and_fraction_only() -> None:
    whole = v.validation_rows(10_000, 0.1, 7)
    assert 0.09 < whole.mean() < 0.11
    # batch by batch (any offsets) gives the same rows
    parts = np.concatenate([v.validation_rows(3000, 0.1, 7, start=0),
                            v.validation_rows(7000, 0.1, 7, start=3000)])
    assert np.array_equal(whole, parts)
    assert np.array_equal(whole, v.validation_rows(10_000, 0.1, 7))
    assert not np.array_equal(whole, v.validation_rows(10_000, 0.1, 8))
    # nested in the fraction: a larger fraction keeps the smaller one's rows
    assert np.all(v.validation_rows(10_000, 0.3, 7)[whole])


def test_validation_rows_are_not_a_block_of_the_file() -> None:
    rows = v.validation_rows(100_000, 0.25, 0)
    # each tenth of the file holds about a quarter of its rows in V
    shares = rows.reshape(10, -1).mean(axis=1)
    assert np.all(np.abs(shares - 0.25) < 0.02)


# ------------------------------------------------------------------ the procedures


def _sets(n: int = 400, m: int = 200, d: int = 4) -> tuple[tuple, tuple]:
    rng = make_rng(5)
    w = np.array([2.0, -3.0, 1.0, 0.0])[:d]
    x = rng.normal(size=(n + m, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    y = np.where(rng.random(n + m) < expit(4 * x @ w), 1.0, -1.0)
    return (x[:n], y[:n]), (x[n:], y[n:])


@pytest.mark.parametrize("method", v.METHODS)
def test_tune_is_reproducible_with_a_seed(method: str) -> None:
    t, val = _sets()
    config = v.ValidateConfig(grid=(0.001, 0.01, 0.1, 1.0), method=method)
    a = v.tune(config, t, val, 1.0, make_rng(6))
    b = v.tune(config, t, val, 1.0, make_rng(6))
    assert a.index == b.index and np.array_equal(a.fit.weights, b.fit.weights)
    assert a.fit.lam == config.grid[a.index]
    assert a.fit.epsilon == pytest.approx(0.5 if method == "stability" else
                                          0.25 if method == "alpha-split" else 1.0)


def test_stability_finds_the_clearly_best_lambda_at_large_epsilon() -> None:
    """λ = 100 shrinks w to ~0 (ramp loss ≈ 1); λ = 0.05 fits. With ε = 50 the choice is sure."""
    t, val = _sets(n=3000, m=1000)
    config = v.ValidateConfig(grid=(0.05, 100.0))
    picks = [v.tune(config, t, val, 50.0, make_rng(s)).index for s in range(20)]
    assert picks.count(0) == 20


def test_stability_selection_uses_noise_of_mean_2_beta_over_epsilon2(monkeypatch) -> None:
    t, val = _sets()
    config = v.ValidateConfig(grid=(0.01, 0.1, 1.0))
    seen = {}

    def spy(scores: np.ndarray, *, sensitivity: float, epsilon: float, rng) -> int:
        seen.update(scores=scores, sensitivity=sensitivity, epsilon=epsilon)
        return 1

    monkeypatch.setattr(v, "noisy_max_exponential", spy)
    out = v.tune(config, t, val, 0.8, make_rng(7))
    c = v.stability_constants(config, 400, 200, 4, 0.4)
    assert seen["sensitivity"] == c.beta and seen["epsilon"] == pytest.approx(0.4)
    assert len(seen["scores"]) == 3 and np.all(seen["scores"] <= 0)
    assert out.index == 1 and out.fit.lam == 0.1 and out.stability == c


def test_final_model_is_retrained_with_fresh_noise(monkeypatch) -> None:
    t, val = _sets()
    calls = []
    real = v.TRAIN["objective"]

    def counting(x, y, lam, eps, rng):
        fit = real(x, y, lam, eps, rng)
        calls.append((lam, fit.weights.copy()))
        return fit

    monkeypatch.setitem(v.TRAIN, "objective", counting)
    out = v.tune(v.ValidateConfig(grid=(0.01, 0.1)), t, val, 1.0, make_rng(8))
    assert len(calls) == 3
    chosen_first = next(w for lam, w in calls[:2] if lam == out.fit.lam)
    assert not np.array_equal(chosen_first, out.fit.weights)       # a new draw
    assert np.array_equal(calls[2][1], out.fit.weights)


def test_random_trains_only_the_chosen_lambda(monkeypatch) -> None:
    t, val = _sets()
    calls = []
    real = v.TRAIN["objective"]
    monkeypatch.setitem(v.TRAIN, "objective",
                        lambda x, y, lam, eps, rng: calls.append(lam) or real(x, y, lam, eps, rng))
    picks = {v.tune(v.ValidateConfig(grid=(0.1, 0.2, 0.3), method="random"), t, val, 1.0,
                    make_rng(s)).index for s in range(30)}
    assert len(calls) == 30 and picks == {0, 1, 2}


def test_data_split_trains_each_lambda_on_a_disjoint_part(monkeypatch) -> None:
    t, val = _sets(n=403)
    sizes = []
    real = v.TRAIN["objective"]
    monkeypatch.setitem(v.TRAIN, "objective",
                        lambda x, y, lam, eps, rng: sizes.append(len(y)) or real(x, y, lam, eps,
                                                                                 rng))
    v.tune(v.ValidateConfig(grid=(0.1, 0.2, 0.3, 0.4), method="data-split"), t, val, 1.0,
           make_rng(9))
    assert sorted(sizes) == [100, 101, 101, 101]


def test_baseline_selection_is_the_exponential_mechanism_on_error_counts(monkeypatch) -> None:
    t, val = _sets()
    seen = {}

    def spy(scores, *, sensitivity, epsilon, rng):
        seen.update(scores=scores, sensitivity=sensitivity, epsilon=epsilon)
        return 0

    monkeypatch.setattr(v, "exponential_mechanism", spy)
    v.tune(v.ValidateConfig(grid=(0.1, 1.0), method="alpha-split"), t, val, 0.6, make_rng(10))
    assert seen["sensitivity"] == 1.0 and seen["epsilon"] == 0.6
    assert np.all(seen["scores"] <= 0) and np.all(seen["scores"] == np.round(seen["scores"]))


def test_error_count_has_sensitivity_one() -> None:
    rng = make_rng(11)
    for trial in range(200):
        xv, yv = data(15, 3, 900 + trial)
        xv2, yv2 = neighbour(xv, yv, rng)
        w = rng.normal(size=3)
        assert abs(v.errors(w, xv, yv) - v.errors(w, xv2, yv2)) <= 1


# ------------------------------------------------------------------ plan and config


def test_plans_add_up_to_the_run() -> None:
    stability = v.plan(v.ValidateConfig(score="hinge", delta=1e-5), 1.0, 900, 100, 10)
    assert [s.name for s in stability] == ["select", "final"]
    assert stability.total.eps == 1.0 and stability.total.dlt == 1e-5
    assert stability.step("select").budget.dlt == 1e-5
    ramp = v.plan(v.ValidateConfig(), 1.0, 900, 100, 10)
    assert ramp.total.dlt == 0
    for method in ("alpha-split", "data-split", "random"):
        p = v.plan(v.ValidateConfig(method=method), 0.7, 900, 100, 10)
        assert len(p) == 1 and p.total.eps == 0.7 and p.total.dlt == 0


def test_delta_is_used_only_by_stability_with_an_unbounded_score() -> None:
    assert v.ValidateConfig().run_delta == 0
    assert v.ValidateConfig(delta=0.01).run_delta == 0
    assert v.ValidateConfig(score="hinge").run_delta == v.DEFAULT_DELTA
    assert v.ValidateConfig(score="logistic", delta=0.01).run_delta == 0.01
    assert v.ValidateConfig(score="hinge", method="random").run_delta == 0


@pytest.mark.parametrize("kwargs", [{"grid": ()}, {"grid": (0.0, 1.0)}, {"grid": (1.0, 1.0)},
                                    {"method": "cv"}, {"score": "zero-one"},
                                    {"trainer": "sgd"}, {"delta": 1.0}, {"delta": 0.0},
                                    {"validation_fraction": 0.0}])
def test_config_rejects_bad_values(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        v.ValidateConfig(**kwargs)


# ------------------------------------------------------------------ design and model

SCHEMA = Schema(columns=(NumericColumn("age", 17, 90), CategoricalColumn("color", ("r", "g")),
                         BinaryColumn("member", ("no", "yes"))),
                label=Label("label", ("0", "1"), "1"), source=Path("test"))


def _batch() -> EncodedBatch:
    return EncodedBatch(4, np.array([0, 1, 1, 0], dtype=np.int32),
                        {"age": np.array([17.0, 90.0, 50.0, 30.0]),
                         "color": np.array([0, 1, 2, 2], dtype=np.int32),   # 2 = other
                         "member": np.array([1, 0, 1, 0], dtype=np.int8)})


def test_unit_ball_rows_have_norm_at_most_one_and_reach_it() -> None:
    b = _batch()
    x = inputs.Inputs.from_columns(SCHEMA, ("age", "color", "member"), b.columns, b.n).unit_ball()
    assert x.shape == (4, 1 + 1 + 3 + 2)
    norms = np.linalg.norm(x, axis=1)
    assert np.all(norms <= 1 + 1e-12)
    assert norms[0] == pytest.approx(1.0) and norms[1] == pytest.approx(1.0)   # age at a bound
    assert np.allclose(x[:, 0], 0.5)                                          # 1/√4


def test_model_predicts_from_its_payload() -> None:
    w = np.array([0.3, -1.0, 0.5, 0.1, -0.2, 0.7, -0.7])
    model = v.LogRegModel(SCHEMA, ("age", "color", "member"), w, {"lambda": 0.1})
    again = v.LogRegModel.from_payload(model.to_payload(), Path("m.json"))
    b = _batch()
    assert np.allclose(again.weights, w) and again.report == {"lambda": 0.1}
    proba = again.predict_proba(b)
    x = inputs.Inputs.from_columns(SCHEMA, ("age", "color", "member"), b.columns, b.n).unit_ball()
    assert np.allclose(proba[:, 1], expit(x @ w)) and np.allclose(proba.sum(axis=1), 1)
    payload = model.to_payload()
    assert payload["weights"]["color"] == {"r": 0.5, "g": 0.1, "other": -0.2}
    assert payload["divisor"] == pytest.approx(2.0)


def test_huge_declared_bounds_scale_without_overflow() -> None:
    """Bounds [-1e308, 1e308] overflow a naive width: a NaN for some values only would make
    a run's failure depend on one record."""
    col = NumericColumn("x", -1e308, 1e308)
    values = np.array([-1e308, -5e307, 0.0, 9e307, 1e308])
    scaled = inputs.scale(values, col)
    assert np.all(np.isfinite(scaled))
    assert np.allclose(scaled, [-1, -0.5, 0, 0.9, 1])


def test_a_delta_too_small_for_the_gamma_quantile_is_refused() -> None:
    with pytest.raises(ValueError):
        v.ValidateConfig(score="hinge", delta=1e-300)
    c = v.stability_constants(v.ValidateConfig(score="hinge", delta=v.MIN_DELTA), 100, 10, 5, 1.0)
    assert np.isfinite(c.beta)


def _wide_schema(levels: int) -> Schema:
    return Schema(columns=(NumericColumn("age", 17, 90), BinaryColumn("member", ("no", "yes")),
                           CategoricalColumn("tail", tuple(f"t{i}" for i in range(levels))),
                           CategoricalColumn("color", ("r", "g", "b"))),
                  label=SCHEMA.label)


def test_a_one_hot_block_wider_than_the_rest_and_root_n_eps_is_left_out() -> None:
    """wide_columns: public facts only. 'tail' (L levels + other) is left out when L + 1 is
    above both the rest's width (age 1 + member 2 + color 4 = 7) and √(n·ε)."""
    cols = ["age", "member", "tail", "color"]
    wide = _wide_schema(99)                                  # 100 levels with 'other'
    assert v.wide_columns(wide, cols, 400, 1.0) == ("tail",)           # √400 = 20
    assert v.wide_columns(wide, cols, 9_999, 1.0) == ("tail",)         # √9,999 < 100
    assert v.wide_columns(wide, cols, 10_000, 1.0) == ()               # 100 is not above 100
    assert v.wide_columns(wide, cols, 40_000, 0.25) == ()              # n·ε decides, not n
    assert v.wide_columns(_wide_schema(5), cols, 10, 0.1) == ()        # 6 levels < rest 7
    assert v.wide_columns(wide, ["tail"], 10, 0.1) == ()               # never an empty design


def test_wide_blocks_are_judged_widest_first() -> None:
    """Two wide blocks: each is wider than the rest only once the wider one is gone."""
    schema = Schema(columns=(NumericColumn("age", 17, 90),
                             CategoricalColumn("a", tuple(f"a{i}" for i in range(300))),
                             CategoricalColumn("b", tuple(f"b{i}" for i in range(200)))),
                    label=SCHEMA.label)
    assert v.wide_columns(schema, ["age", "a", "b"], 1_000, 1.0) == ("a", "b")
    assert v.wide_columns(schema, ["age", "a", "b"], 50_000, 1.0) == ("a",)  # √5e4 ≈ 224
