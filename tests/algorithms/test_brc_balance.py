"""train-brc on unbalanced labels (issue 20, point 4): the private class count, class weights,
the decision threshold, no constant stumps or hyperplanes, and the ensemble's degeneracy check.

Statistical tests state their false-failure rate: α = 1e-4 each.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from dpcli.algorithms import brc, degenerate
from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import Label, NumericColumn, Schema
from dpcli.mechanisms import make_rng
from tests.algorithms.test_brc import (
    COLUMNS,
    PUBLIC,
    SCHEMA,
    random_columns,
    replace_one,
    training,
)

ALPHA = 1e-4
C = math.sqrt(2)


# --------------------------------------------------------------- the class count


def test_class_count_sensitivity_is_one_under_replace_one() -> None:
    """Replacing one record (features and label) moves the positive count by at most 1,
    and by exactly 1 when the label flips: Δ = COUNT_SENSITIVITY is tight."""
    rng = make_rng(30)
    worst = 0
    for _ in range(300):
        n = int(rng.integers(1, 60))
        cols, label = random_columns(rng, n)
        data = training(cols, label, ())
        cols2, label2 = replace_one(rng, cols, label, private=True)
        data2 = training(cols2, label2, ())
        change = abs(brc.count_positives(data) - brc.count_positives(data2))
        assert change <= brc.COUNT_SENSITIVITY
        worst = max(worst, change)
    assert worst == brc.COUNT_SENSITIVITY


def test_class_count_carries_discrete_laplace_noise_of_scale_one_over_epsilon() -> None:
    """Released count − true count ~ discrete Laplace(1/ε) (chi-square, α = 1e-4), before
    the clip to [1, n − 1] (far from the true count here)."""
    from tests.statistical.test_noise_distributions import discrete_laplace_chi2_pvalue

    epsilon, n, positives = 0.4, 10_000, 3000
    noise = np.array([brc.release_counts(positives, n, epsilon, make_rng(s)).positives
                      - positives for s in range(4000)])
    assert discrete_laplace_chi2_pvalue(noise, 1 / epsilon) > ALPHA
    # and the test can fail: noise of twice the scale is rejected
    wide = np.array([brc.release_counts(positives, n, epsilon / 2, make_rng(s)).positives
                     - positives for s in range(4000)])
    assert discrete_laplace_chi2_pvalue(wide, 1 / epsilon) < ALPHA


def test_public_label_count_is_exact_and_draws_nothing() -> None:
    rng = make_rng(5)
    balance = brc.release_counts(37, 100, None, rng)
    assert balance.exact and balance.positives == 37 and balance.prior == 0.37
    assert rng.random() == make_rng(5).random()   # no draw
    # a released count is clipped into [1, n − 1]: both classes keep a weight
    assert brc.release_counts(0, 100, None, rng).positives == 1
    assert brc.release_counts(100, 100, None, rng).positives == 99


def test_plan_charges_the_count_only_when_the_label_is_private() -> None:
    from dpcli.budget import Budget

    private = brc.plan(Budget(1.0), brc.BRCConfig(rounds=4, counted=True), 500)
    assert next(iter(private)).name == brc.CLASS_COUNT
    assert private.step(brc.CLASS_COUNT).budget == Budget(0.05)
    assert private.step("error_round_1").budget == Budget(0.85 / 4)
    partial = brc.plan(Budget(1.0), brc.BRCConfig(rounds=4), 500)
    assert brc.CLASS_COUNT not in [s.name for s in partial]
    assert partial.step("error_round_1").budget == Budget(0.9 / 4)


# --------------------------------------------------------------- class weights


def test_class_weights_give_each_class_half_the_weight_up_to_the_cap() -> None:
    lam = brc.class_weights(1000, 100)
    assert lam.min() == 1.0 and lam[1] == pytest.approx(9.0)
    assert lam[0] * 900 == pytest.approx(lam[1] * 100)
    assert np.array_equal(brc.class_weights(1000, 500), [1.0, 1.0])
    assert brc.class_weights(10_000, 10).max() == brc.MAX_CLASS_RATIO


def test_class_weight_cap_keeps_the_noise_below_the_edge() -> None:
    """ρ ≤ (0.1·n·ε_r/(√2·c1·c2))/T in [1, 20]: from public facts only."""
    config = brc.BRCConfig(rounds=100, counted=True)
    # 0.1·7000·0.425/(2√2) = 105.2 rounds of room at T = 100: ρ ≤ 1.05
    assert brc.weight_cap(config, 0.5, 7000) == pytest.approx(
        0.1 * 7000 * 0.425 / (math.sqrt(2) * C * C) / 100)
    assert brc.weight_cap(config, 0.5, 1000) == 1.0          # no room: no re-weighting
    assert brc.weight_cap(config, 10.0, 10**6) == brc.MAX_CLASS_RATIO
    cap = brc.weight_cap(config, 2.0, 30_000)
    noise_sd = cap * math.sqrt(2) * C * C * 100 / (2.0 * 0.85 * 30_000)
    assert noise_sd == pytest.approx(brc.EDGE)
    assert np.array_equal(brc.class_weights(1000, 100, 1.0), [1.0, 1.0])
    assert brc.class_weights(1000, 100, 3.0).max() == 3.0


def test_class_weighted_error_sensitivity_brute_force() -> None:
    """Weights λ_y·w, w in [1/c1, c2], λ in {1, ρ}: replacing one record (its weight, class
    and miss bit) moves the error by at most ρ·c1·c2/n."""
    rng = make_rng(31)
    for ratio in (1.0, 3.0, 20.0):
        for n in (2, 5, 30):
            bound = brc.error_sensitivity(C, C, n, ratio)
            worst = 0.0
            for _ in range(300):
                w = np.where(rng.random(n) < 0.5, 1 / C, C) * rng.choice([1.0, ratio], n)
                miss = (rng.random(n) < 0.5).astype(float)
                for w_new in (1 / C, C * ratio, float(rng.uniform(1 / C, C))):
                    for m_new in (0.0, 1.0):
                        w2, miss2 = w.copy(), miss.copy()
                        w2[-1], miss2[-1] = w_new, m_new
                        worst = max(worst, abs(brc.weighted_error(miss, w)
                                               - brc.weighted_error(miss2, w2)))
            assert worst <= bound + 1e-12


# --------------------------------------------------------------- the decision threshold


def _brute_force_cut(edges: np.ndarray, counts: np.ndarray) -> float:
    """Every edge k: predict positive for the bins from k on; the best TPR − FPR on the
    counts, ties to the edge nearest 0."""
    pos, neg = counts[:, 1].sum(), counts[:, 0].sum()
    scored = []
    for k, e in enumerate(edges):
        j = counts[k:, 1].sum() / pos - counts[k:, 0].sum() / neg
        scored.append((-round(j, 12), abs(e), e))
    return min(scored)[2]


def test_threshold_is_the_best_balanced_accuracy_on_the_released_histogram() -> None:
    rng = make_rng(47)
    edges = np.linspace(-2, 2, 17)
    for _ in range(200):
        counts = rng.integers(-5, 60, size=(16, 2))
        if counts[:, 0].sum() <= 0 or counts[:, 1].sum() <= 0:
            continue
        assert brc.decision_threshold(edges, counts) == _brute_force_cut(edges, counts)
    # unbalanced classes, separated at the edge 0.5: the cut is there, not at 0
    counts = np.zeros((16, 2), dtype=int)
    counts[:10, 0], counts[10:, 1] = 90, 4          # 900 negatives below 0.5, 24 positives
    assert brc.decision_threshold(edges, counts) == 0.5
    # no released mass in a class: the paper's sign(F)
    assert brc.decision_threshold(edges, np.zeros((16, 2), dtype=int)) == 0.0
    assert brc.decision_threshold((), ()) == 0.0


def test_threshold_reads_released_values_only() -> None:
    """fit's threshold is decision_threshold of the released (noisy) histogram: the same
    for two datasets whose releases coincide (post-processing)."""
    batch, schema = _unbalanced(900, 0.2, 48)
    data = brc.training_set([batch], schema, ("x", "z"), (), positive=1)
    _, cal, _ = brc.fit(data, brc.BRCConfig(rounds=8, counted=True), 1.0, make_rng(3))
    assert cal.threshold == brc.decision_threshold(cal.edges, cal.counts)
    assert cal.threshold in cal.edges


def _unbalanced(n: int, share: float, seed: int) -> tuple[EncodedBatch, Schema]:
    rng = make_rng(seed)
    schema = Schema((NumericColumn("x", 0.0, 1.0), NumericColumn("z", 0.0, 1.0)),
                    Label("label", ("0", "1"), "1"))
    x, z = rng.random(n), rng.random(n)
    # positives: a noisy high x, about `share` of the rows
    label = (x + 0.15 * rng.normal(size=n) > 1 - share).astype(np.int32)
    return EncodedBatch(n, label, {"x": x, "z": z}), schema


def test_unbalanced_labels_get_a_two_class_model() -> None:
    """~8% positives: the released threshold gives balanced accuracy well above 1/2 where
    the paper's sign(F) without class weights predicts (nearly) one class."""
    batch, schema = _unbalanced(6000, 0.08, 40)
    y = batch.label
    data = brc.training_set([batch], schema, ("x", "z"), (), positive=1)
    config = brc.BRCConfig(rounds=40, counted=True)
    balanced = []
    for seed in range(3):
        rounds, cal, _ = brc.fit(data, config, 2.0, make_rng(seed))
        model = brc.BRCModel(schema, ("x", "z"), "private", (), rounds, config, 6000, 2.0, cal)
        pred = model.predict_codes(batch)
        balanced.append((np.mean(pred[y == 1] == 1) + np.mean(pred[y == 0] == 0)) / 2)
        assert cal.positives is not None and abs(cal.prior - y.mean()) < 0.01
        assert degenerate.check_ensemble(model).degenerate is False
    assert min(balanced) > 0.7


# --------------------------------------------------------------- no constant classifiers


def test_no_stump_is_constant_on_the_declared_domain() -> None:
    rng = make_rng(41)
    cols, label = random_columns(rng, 300)
    cols["income"] = np.full(300, 100.0)         # every value at the declared upper bound
    cols["member"] = np.zeros(300, dtype=np.int8)
    data = training(cols, label, PUBLIC)
    upper = SCHEMA.column("income").upper
    for _ in range(30):
        w = rng.uniform(0.2, 3, 300)
        stump, _err = brc.fit_stump(data.public, data.y, w)
        if stump is None:
            continue
        if stump.signs is not None:
            assert len(set(stump.signs.tolist())) == 2
        else:
            assert stump.threshold < upper
    # only constant candidates: no stump at all, and the public side never wins
    one = {**cols, "region": np.zeros(300, dtype=np.int32)}
    y = np.ones(300, dtype=np.int32)
    only = training(one, y, ("income", "region"))
    assert brc.fit_stump(only.public, only.y, np.ones(300)) == (None, 0.5)


def test_random_hyperplanes_are_never_constant_on_the_domain() -> None:
    data = training(*random_columns(make_rng(42), 50), ())
    rng = make_rng(43)
    for _ in range(500):
        h = brc.random_hyperplane(data.layout, rng)
        lo, hi = h.extremes()
        assert lo < 0 <= hi
    # extremes are exact: a brute force over the corners and every level
    h = brc.Hyperplane(0.9, np.array([0.5, -0.2]), {"c": np.array([0.3, -0.1, 0.0])})
    corners = [0.9 + 0.5 * a - 0.2 * b + c for a in (-1, 1) for b in (-1, 1)
               for c in (0.3, -0.1, 0.0)]
    assert h.extremes() == pytest.approx((min(corners), max(corners)))
    assert h.constant() is True      # min 0.9 − 0.5 − 0.2 − 0.1 = 0.1 ≥ 0


# --------------------------------------------------------------- degeneracy


def _model(rounds: list[brc.Round], cal: brc.Calibration) -> brc.BRCModel:
    return brc.BRCModel(SCHEMA, COLUMNS, "private", (), rounds, brc.BRCConfig(rounds=len(rounds)),
                        1000, 1.0, cal)


def test_check_ensemble_flags_a_near_constant_and_a_one_class_ensemble() -> None:
    data = training(*random_columns(make_rng(44), 50), ())
    rng = make_rng(45)
    hs = [brc.random_hyperplane(data.layout, rng) for _ in range(5)]
    edges = tuple(np.linspace(-1, 1, 17).tolist())
    counts = tuple((10, 10) for _ in range(16))
    healthy = _model([brc.Round(0.2, hyperplane=h) for h in hs],
                     brc.Calibration(4.0, 0.0, edges, counts, 0.5, 500, False, 0.0))
    verdict = degenerate.check_ensemble(healthy)
    assert verdict is not None and not verdict.degenerate and verdict.problem() is None
    # α's near 0: the score barely moves
    flat = _model([brc.Round(1e-6, hyperplane=h) for h in hs],
                  brc.Calibration(4.0, 0.0, edges, counts, 0.5, 500, False, 0.0))
    verdict = degenerate.check_ensemble(flat)
    assert verdict.degenerate and "near-constant" in verdict.problem()
    assert verdict.to_json()["near_constant_score"] is True
    # a threshold above every margin: class 1 is never predicted
    high = _model([brc.Round(0.2, hyperplane=h) for h in hs],
                  brc.Calibration(4.0, 0.0, edges, counts, 0.5, 500, False, 5.0))
    verdict = degenerate.check_ensemble(high)
    assert verdict.degenerate and verdict.never == ("1",)
    assert verdict.rare == ("1",) and "'1'" in verdict.problem()
    assert verdict.to_json()["never_predicted"] == ["1"]


def test_check_ensemble_reads_the_model_file_alone(tmp_path: Path) -> None:
    batch, schema = _unbalanced(800, 0.3, 46)
    data = brc.training_set([batch], schema, ("x", "z"), (), positive=1)
    config = brc.BRCConfig(rounds=10, counted=True)
    rounds, cal, _ = brc.fit(data, config, 1.0, make_rng(7))
    model = brc.BRCModel(schema, ("x", "z"), "private", (), rounds, config, 800, 1.0, cal)
    again = brc.BRCModel.from_payload(model.to_payload(), tmp_path / "m.json")
    assert again.calibration == model.calibration
    assert degenerate.check_ensemble(again).to_json() == degenerate.check_ensemble(
        model).to_json()
    assert np.array_equal(again.predict_codes(batch), model.predict_codes(batch))


def test_the_released_histogram_overrules_the_domain_probe() -> None:
    """Probe points uniform on wide declared bounds can all miss where the records lie: when
    the released margin histogram gives class '1' to most training records, a probe that
    never predicts it is recorded, not called degenerate (a new user's finding: models
    predicting 'Yes' for 60 % of rows were flagged)."""
    data = training(*random_columns(make_rng(44), 50), ())
    rng = make_rng(45)
    hs = [brc.random_hyperplane(data.layout, rng) for _ in range(5)]
    edges = tuple(np.linspace(-2, 2, 17).tolist())
    counts = tuple((60, 60) if i >= 14 else (3, 3) for i in range(16))
    # every probe margin is at most 5 × 0.2 = 1 < the threshold 1.5
    model = _model([brc.Round(0.2, hyperplane=h) for h in hs],
                   brc.Calibration(4.0, 0.0, edges, counts, 0.5, 500, False, 1.5))
    verdict = degenerate.check_ensemble(model)
    assert verdict.never == ("1",) and verdict.training_share == pytest.approx(240 / 324)
    assert not verdict.degenerate and verdict.problem() is None
    assert verdict.to_json()["never_predicted"] == ["1"]  # still on record
