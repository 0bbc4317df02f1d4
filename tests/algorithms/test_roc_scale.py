"""roc_scale: the signed pair count D, its replace-one sensitivity, the score scale."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from dpcli.algorithms import roc, roc_scale
from dpcli.budget import Budget
from dpcli.errors import UsageError


def _brute_d(scores: np.ndarray, positive: np.ndarray) -> int:
    s, p = np.asarray(scores, dtype=float), np.asarray(positive, dtype=bool)
    return int(np.sign(s[p][:, None] - s[~p][None, :]).sum())


def _d_via_cells(scores: np.ndarray, positive: np.ndarray, lower: float = 0.0,
                 upper: float = 1.0) -> int:
    h = roc.FineHistogram.of_scores(np.asarray(scores, dtype=float),
                                    np.asarray(positive, dtype=bool), lower=lower, upper=upper)
    return roc_scale.pair_count(h.counts)


def test_pair_count_matches_the_brute_force_sum_with_ties() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(2, 40))
        scores = rng.integers(0, 6, n) / 5.0  # many ties, on grid cells' upper ends
        positive = rng.random(n) < 0.5
        assert _d_via_cells(scores, positive) == _brute_d(scores, positive)
    # the dense (2, cells) counts of the streaming pass give the same count
    counts = np.zeros((2, 8), dtype=np.int64)
    counts[0, [1, 5]] = [2, 2]
    counts[1, [0, 5, 7]] = [3, 1, 2]
    scores = np.repeat([1, 5, 0, 5, 7], [2, 2, 3, 1, 2]).astype(float)
    positive = np.array([True] * 4 + [False] * 6)
    assert roc_scale.pair_count(counts) == _brute_d(scores, positive)


def test_auc_from_the_exact_pair_count_is_the_mann_whitney_auc() -> None:
    rng = np.random.default_rng(5)
    scores = rng.random(300)
    positive = rng.random(300) < scores
    d = _brute_d(scores, positive)
    n1, n0 = positive.sum(), (~positive).sum()
    assert 0.5 + d / (2 * n1 * n0) == pytest.approx(roc.true_roc(scores, positive).auc)


def test_pair_count_sensitivity_exhaustively_on_tiny_sets() -> None:
    """Every dataset of n records over 3 score values × 2 labels, every replace-one neighbour."""
    values = [(s, y) for s in (0.0, 0.5, 1.0) for y in (False, True)]
    for n in (2, 3, 4):
        bound = roc_scale.pair_sensitivity(n)
        worst = 0
        for rows in itertools.combinations_with_replacement(values, n):
            s = np.array([r[0] for r in rows])
            p = np.array([r[1] for r in rows])
            d = _d_via_cells(s, p)
            for other in values:  # replace the first record (rows are sorted: any record)
                for i in range(n):
                    s2, p2 = s.copy(), p.copy()
                    s2[i], p2[i] = other
                    worst = max(worst, abs(_d_via_cells(s2, p2) - d))
        assert worst <= bound
        assert worst == bound  # tight: a lone positive moves from the top to the bottom


def test_pair_count_sensitivity_on_random_neighbours() -> None:
    rng = np.random.default_rng(8)
    for _ in range(300):
        n = int(rng.integers(2, 60))
        s = rng.random(n) ** 3
        p = rng.random(n) < rng.random()
        i = int(rng.integers(n))
        s2, p2 = s.copy(), p.copy()
        s2[i], p2[i] = rng.random(), rng.random() < 0.5
        assert abs(_d_via_cells(s2, p2) - _d_via_cells(s, p)) <= 2 * (n - 1)


def test_expected_error_is_the_mean_absolute_noise_over_two_n1_n0() -> None:
    scale = 2 * 99 / 0.5
    q = np.exp(-1 / scale)
    assert roc_scale.abs_noise_mean(scale) == pytest.approx(2 * q / (1 - q * q))
    assert roc_scale.expected_error(100, 0.5, 30.0, 70.0) == pytest.approx(
        roc_scale.abs_noise_mean(scale) / (2 * 30 * 70))
    # n1's own noise adds ½·|n0 − n1|/(n1·n0)·E|Z_n|
    assert roc_scale.expected_error(100, 0.5, 30.0, 70.0, 0.1) == pytest.approx(
        roc_scale.abs_noise_mean(scale) / (2 * 30 * 70)
        + 0.5 * 40 / (30 * 70) * roc_scale.abs_noise_mean(10.0))
    assert roc_scale.abs_noise_mean(1e-9) == 0.0  # no overflow without noise


def test_release_auc_is_clipped_and_keeps_the_unclipped_value() -> None:
    rng = np.random.default_rng(0)
    out = roc_scale.release_auc(6, 2, n=4, epsilon=1e-3, positives_epsilon=1e-3, rng=rng)
    assert 0.0 <= out.auc <= 1.0 and 1 <= out.positives <= 3
    assert out.unclipped == pytest.approx(0.5 + out.pairs / (2 * out.positives
                                                              * (4 - out.positives)))
    exact = roc_scale.release_auc(6, 2, n=4, epsilon=1e9, positives_epsilon=1e9, rng=rng)
    assert (exact.pairs, exact.positives, exact.auc) == (6, 2, 1.0)  # 0.5 + 6 / 8 clipped
    assert exact.epsilon == 2e9


def test_auc_share_zero_keeps_the_trapezoid_auc_and_the_old_plan() -> None:
    config = roc.ROCConfig(auc_share=0)
    plan = roc.plan(config, 100, Budget(1.0))
    assert [s.name for s in plan] == ["counts"]
    rng = np.random.default_rng(1)
    s = rng.random(100)
    curve, _ = roc.private_roc(s, s > 0.5, lower=0, upper=1, config=config, run_plan=plan,
                               rng=rng)
    assert curve.auc_release is None and curve.curve_auc is None
    assert "auc_error" not in curve.to_payload()
    with pytest.raises(UsageError, match="auc_share"):
        roc.ROCConfig(auc_share=1.0)


def test_direct_auc_beats_the_curve_on_scores_squeezed_into_two_bins() -> None:
    """Issue 20's validate case: every score within [0.48, 0.54], a nearly perfect ranking."""
    rng = np.random.default_rng(2)
    n = 169
    positive = rng.random(n) < 0.37
    scores = 0.51 + np.where(positive, 1, -1) * rng.uniform(0.0, 0.03, n)
    true = roc.true_roc(scores, positive).auc
    config = roc.ROCConfig()
    plan = roc.plan(config, n, Budget(100.0))  # little noise: the bins' bias alone
    curve, _ = roc.private_roc(scores, positive, lower=0, upper=1, config=config,
                               run_plan=plan, rng=rng)
    assert abs(curve.auc - true) < 0.01
    assert curve.curve_auc is not None and abs(curve.curve_auc - true) > 0.05


# ---------------------------------------------------------------------- the scale


def test_resolve_defaults_identity_for_a_score_column_and_refuses_logit_off_zero_one() -> None:
    s = roc_scale.resolve(None, model=None, lower=0.0, upper=10.0)
    assert (s.transform, s.lower, s.upper) == ("identity", 0.0, 10.0)
    with pytest.raises(UsageError, match="within \\[0, 1\\]"):
        roc_scale.resolve("logit", model=None, lower=0.0, upper=10.0)
    lg = roc_scale.resolve("logit", model=None, lower=0.0, upper=1.0)
    assert (lg.lower, lg.upper) == (-roc_scale.MAX_LOG_ODDS, roc_scale.MAX_LOG_ODDS)
    mid = roc_scale.resolve("logit", model=None, lower=0.2, upper=0.8)
    assert mid.lower == pytest.approx(np.log(0.25)) and mid.upper == pytest.approx(np.log(4))
    assert mid.to_score(np.array([0.0]))[0] == pytest.approx(0.5)
    with pytest.raises(UsageError, match="transform"):
        roc_scale.resolve("probit", model=None, lower=0.0, upper=1.0)


def _nb_model(tmp_path: Path):
    """A small naive Bayes model over one numeric and one categorical column."""
    from dpcli.algorithms.naive_bayes import NaiveBayesModel, NBConfig, NumericParams
    from dpcli.data.schema import CategoricalColumn, Label, NumericColumn, Schema

    schema = Schema((NumericColumn("x", 0.0, 10.0), CategoricalColumn("c", ("a", "b", "z"))),
                    Label("y", ("0", "1"), positive="1"))
    return NaiveBayesModel(
        schema=schema, columns=("x", "c"), config=NBConfig(), class_counts=np.array([60., 40.]),
        tables={"c": np.array([[30., 20., 10., 1.], [5., 15., 20., 2.]])},
        numeric={"x": NumericParams(0.0, 10.0, np.array([3.0, 6.0]), np.array([4.0, 2.0]))})


def test_logit_scale_of_a_naive_bayes_model_holds_every_log_odds_of_the_domain(
        tmp_path: Path) -> None:
    from dpcli.algorithms.degenerate import _batch

    model = _nb_model(tmp_path)
    scale = roc_scale.resolve(None, model=model, lower=0.0, upper=1.0)
    assert scale.transform == "logit"
    xs = np.linspace(0, 10, 4001)
    for code in range(4):  # a, b, z and other
        batch = _batch({"x": xs, "c": np.full(xs.size, code, dtype=np.int32)}, xs.size)
        z = roc_scale.model_log_odds(model, batch, positive=1)
        p = model.predict_proba(batch)[:, 1]
        np.testing.assert_allclose(z, np.log(p) - np.log1p(-p), atol=1e-8)
        assert scale.lower - 1e-3 <= z.min() and z.max() <= scale.upper + 1e-3
        # against the other class, the log-odds change sign
        np.testing.assert_allclose(roc_scale.model_log_odds(model, batch, positive=0), -z)
    assert scale.upper - scale.lower < 2 * roc_scale.MAX_LOG_ODDS  # the model's own range


def test_logit_scale_of_a_constant_model_has_a_positive_width() -> None:
    s = roc_scale._log_odds_scale(0.3, 0.3, "test")
    assert s.lower < 0.3 < s.upper

def test_logit_thresholds_map_back_like_scipys_expit() -> None:
    """Scale.to_score's σ (numpy, no scipy import at start-up) keeps scipy's values to a
    relative 1e-15 from −700 to 700, and ±∞ go to 0 and 1."""
    from scipy.special import expit

    from dpcli.algorithms.roc_scale import Scale

    scale = Scale("logit", -10.0, 10.0, "test")
    t = np.concatenate([np.linspace(-700, 700, 2001), [-np.inf, np.inf, 0.0]])
    np.testing.assert_allclose(scale.to_score(t), expit(t), rtol=1e-15, atol=0)
