"""train-brc's selecting rounds: K random classifiers a round, one chosen privately by its
class-balanced edge (report-noisy-max with exponential noise), T after the class count.

The statistic's replace-one sensitivity (brute force and on ``train`` itself under coupled
selections), the selection's output distribution against its closed form, the rules of
public facts (T, K), the plan, and the model it gives on unbalanced labels.

Distribution tests wrongly fail with probability at most α = 1e-4 each.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy import stats as sps

from dpcli.algorithms import brc, degenerate
from dpcli.budget import Budget
from dpcli.mechanisms import make_rng
from tests.algorithms.test_brc import (
    PUBLIC,
    _released,
    random_columns,
    replace_one,
    training,
)
from tests.algorithms.test_brc_balance import _unbalanced

ALPHA = 1e-4


def _edges_of(w: np.ndarray, y: np.ndarray, miss: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """balanced_edges from per-record weights, labels (0/1) and misses (records × K)."""
    sums = np.zeros((miss.shape[1], 4))
    for k in range(miss.shape[1]):
        np.add.at(sums[k], 2 * y + miss[:, k], w)
    return brc.balanced_edges(sums, sizes)


# --------------------------------------------------------------- the statistic


def test_balanced_edge_is_the_balanced_accuracys_edge() -> None:
    """Weights 1 and the true class sizes: q = (TPR + TNR)/2 − 1/2; the mirror's is −q."""
    rng = make_rng(2)
    y = (rng.random(300) < 0.2).astype(np.intp)
    miss = (rng.random((300, 5)) < 0.4).astype(np.intp)
    sizes = np.array([np.sum(y == 0), np.sum(y == 1)], dtype=float)
    q = _edges_of(np.ones(300), y, miss, sizes)
    for k in range(5):
        tpr = np.mean(miss[y == 1, k] == 0)
        tnr = np.mean(miss[y == 0, k] == 0)
        assert q[k] == pytest.approx((tpr + tnr) / 2 - 0.5, abs=1e-12)
        mirror = _edges_of(np.ones(300), y, 1 - miss[:, [k]], sizes)[0]
        assert mirror == pytest.approx(-q[k], abs=1e-12)


def test_balanced_edge_sensitivity_brute_force() -> None:
    """Replace-one: one record's weight (in [1/c1, c2]), label and miss bits replaced, the
    public normalisers N̂ fixed (any values, not the true sizes): no edge moves by more than
    c2/(2·min N̂), and with equal normalisers a weight-c2 record reaches it."""
    rng = make_rng(11)
    for c1, c2 in [(1.0, 1.0), (math.sqrt(2), math.sqrt(2)), (3.0, 1.5), (1.0, 4.0)]:
        for n in (2, 5, 30):
            for sizes in (np.array([n / 2, n / 2]), np.array([n - 1.0, 1.0]),
                          rng.uniform(1, 3 * n, 2)):
                bound = brc.edge_sensitivity(c2, sizes)
                worst = 0.0
                for _ in range(150):
                    w = np.where(rng.random(n) < 0.5, c2, rng.uniform(1 / c1, c2, n))
                    y = rng.integers(0, 2, n)
                    miss = rng.integers(0, 2, (n, 3))
                    base = _edges_of(w, y, miss, sizes)
                    for w_new in (1 / c1, c2):
                        for y_new in (0, 1):
                            w2, y2, miss2 = w.copy(), y.copy(), miss.copy()
                            i = int(rng.integers(n))
                            w2[i], y2[i] = w_new, y_new
                            miss2[i] = rng.integers(0, 2, 3)
                            change = np.max(np.abs(_edges_of(w2, y2, miss2, sizes) - base))
                            worst = max(worst, float(change))
                assert worst <= bound + 1e-12
                if sizes[0] == sizes[1]:   # a weight-c2 record flipping its vote reaches it
                    assert worst >= 0.99 * bound


@pytest.mark.parametrize("private", [True, False], ids=["all-private", "partial"])
def test_train_selecting_under_coupled_selections(private: bool,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """On ``train`` itself: on a replace-one neighbour (private features; the label too in
    all-private mode) fed D's selected indices, every edge ``train`` hands the selection
    moves by at most its sensitivity, the public stump's score not at all, and the released
    ensemble is identical: nothing but the selected indices carries private data."""
    real = brc.select_candidate

    def run(data: brc.TrainingSet, config: brc.BRCConfig, seed: int,
            forced: list[int] | None) -> tuple[list, list[tuple[np.ndarray, float, float | None]],
                                               list[int]]:
        seen: list[tuple[np.ndarray, float, float | None]] = []
        picks: list[int] = []

        def select(edges, sensitivity, epsilon, rng, public=None):
            seen.append((np.array(edges), sensitivity, public))
            k = real(edges, sensitivity, epsilon, rng, public=public)
            picks.append(forced[len(picks)] if forced is not None else k)
            return picks[-1]

        monkeypatch.setattr(brc, "select_candidate", select)
        try:
            rounds, _ = brc.train(data, config, 2.0, make_rng(seed))
        finally:
            monkeypatch.setattr(brc, "select_candidate", real)
        return rounds, seen, picks

    rng = make_rng(40)
    public = () if private else PUBLIC
    for trial in range(12):
        n = int(rng.integers(6, 50))
        c = float(rng.choice([1.0, math.sqrt(2)]))
        config = brc.BRCConfig(rounds=6, c1=c, c2=c, candidates=int(rng.integers(2, 9)))
        cols, label = random_columns(rng, n)
        mine, seen, picks = run(training(cols, label, public), config, trial, None)
        assert len(seen) == 6 and all(s[1] == brc.edge_sensitivity(c, np.array([n / 2]))
                                      for s in seen)
        for _ in range(3):
            cols2, label2 = replace_one(rng, cols, label, private)
            theirs, seen2, _ = run(training(cols2, label2, public), config, trial, picks)
            for (e1, sens, p1), (e2, _, p2) in zip(seen, seen2, strict=True):
                assert np.max(np.abs(e1 - e2)) <= sens + 1e-12
                assert p1 == p2      # the stump's exact edge: public columns and label
            assert _released(theirs) == _released(mine)


# --------------------------------------------------------------- the mechanism


def _rnm_exponential_probabilities(logits: np.ndarray) -> np.ndarray:
    """P(argmax_i (l_i + E_i) = i), E_i iid standard exponential: ∫ f_i Π_{j≠i} F_j."""
    out = []
    for i, li in enumerate(logits):
        others = np.delete(logits, i)

        def density(x: float, li: float = li, others: np.ndarray = others) -> float:
            return math.exp(-(x - li)) * float(np.prod(1 - np.exp(-np.maximum(x - others,
                                                                              0.0))))

        lo = max(li, float(others.max()))
        out.append(integrate.quad(density, lo, lo + 60)[0]
                   + (integrate.quad(density, li, lo)[0] if lo > li else 0.0))
    return np.asarray(out)


def test_selection_matches_report_noisy_max_with_exponential_noise() -> None:
    """select_candidate's index over 40,000 draws against the closed form of report-noisy-
    max with exponential noise of scale 2Δ/ε on the 2K signed edges and the public score
    (chi-square, α = 1e-4)."""
    edges = np.array([0.12, -0.05, 0.02])
    public = 0.08
    sens, eps = 0.02, 0.3
    scores = np.concatenate([edges, -edges, [public]])
    probs = _rnm_exponential_probabilities(eps * (scores - scores.max()) / (2 * sens))
    assert probs.sum() == pytest.approx(1.0, abs=1e-6)
    rng = make_rng(7)
    draws = 40_000
    picks = np.array([brc.select_candidate(edges, sens, eps, rng, public=public)
                      for _ in range(draws)])
    observed = np.bincount(picks, minlength=scores.size)
    chi2 = float(np.sum((observed - draws * probs) ** 2 / (draws * probs)))
    assert chi2 < sps.chi2.ppf(1 - ALPHA, scores.size - 1)


def test_one_candidate_against_its_mirror_is_the_two_point_closed_form() -> None:
    """Two candidates h, −h with edges q, −q: −h wins with probability ½·e^(−ε·q/Δ)
    (exact binomial test, two-sided, α = 1e-4)."""
    q, sens, eps = 0.05, 0.01, 0.2
    p = 0.5 * math.exp(-eps * 2 * q / (2 * sens))
    rng = make_rng(3)
    draws = 20_000
    wins = sum(brc.select_candidate(np.array([q]), sens, eps, rng) == 1 for _ in range(draws))
    assert sps.binomtest(wins, draws, p).pvalue > ALPHA


# --------------------------------------------------------------- rules of public facts


@pytest.mark.parametrize(("epsilon", "smaller", "c2", "counted"), [
    (0.5, 100, 1.0, True), (1.0, 5000, 1.0, False), (0.16, 7500, 1.0, True),
    (2.0, 3e5, math.sqrt(2), True), (0.01, 10, 1.0, True)])
def test_select_rounds_hold_the_selection_noise_at_a_third_of_the_edge(
        epsilon: float, smaller: float, c2: float, counted: bool) -> None:
    t = brc.select_rounds(epsilon, smaller, c2, counted)
    eps_r = brc.rounds_epsilon(epsilon, counted)
    scale = 2 * brc.edge_sensitivity(c2, np.array([smaller])) * t / eps_r
    assert brc.SELECT_MIN_ROUNDS <= t <= brc.AUTO_MAX_ROUNDS
    if brc.SELECT_MIN_ROUNDS < t < brc.AUTO_MAX_ROUNDS:
        assert scale <= brc.EDGE / 3 + 1e-12
        # one round more would break it
        assert 2 * brc.edge_sensitivity(c2, np.array([smaller])) * (t + 1) / eps_r > brc.EDGE / 3
    assert brc.select_rounds(epsilon, smaller / 2, c2, counted) <= t


def test_candidates_fall_with_n_within_their_bounds() -> None:
    assert brc.auto_candidates(100) == brc.MAX_CANDIDATES
    assert brc.auto_candidates(30_000) == 2 ** 22 // 30_000
    assert brc.auto_candidates(10 ** 7) == brc.MIN_CANDIDATES
    ks = [brc.auto_candidates(n) for n in (10, 10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6)]
    assert ks == sorted(ks, reverse=True)


def test_auto_config_selects_and_sets_rounds_after_the_count() -> None:
    config = brc.auto_config(1.0, 2000, counted=True)
    assert config.candidates == 256 and config.rounds_after_count
    assert config.rounds == brc.select_rounds(1.0, 1000, config.c2, True)
    assert brc.auto_config(1.0, 2000, True, candidates=1).candidates == 1


def test_plan_is_one_selection_step_of_the_rounds_share() -> None:
    config = brc.BRCConfig(rounds=7, c1=1.0, c2=1.0, counted=True, candidates=64,
                           rounds_after_count=True)
    plan = brc.plan(Budget(2.0), config, 500)
    assert [s.name for s in plan] == [brc.CLASS_COUNT, brc.SELECTION, brc.CALIBRATION]
    step = plan.step(brc.SELECTION)
    assert step.mechanism == "report_noisy_max"
    assert step.budget == Budget(2.0 * 0.85)
    assert step.sensitivity == pytest.approx(0.5)       # c2 / (2·1): any released count
    assert "at most 7" in step.note


# --------------------------------------------------------------- the model


def test_selected_rounds_vote_edge_and_t_follows_the_released_count() -> None:
    """~8 % positives at ε = 2: T from the smaller released class, every round ±EDGE, a
    two-class model with balanced accuracy above 0.7 and no degeneracy."""
    batch, schema = _unbalanced(6000, 0.08, 40)
    y = batch.label
    data = brc.training_set([batch], schema, ("x", "z"), (), positive=1)
    config = brc.auto_config(2.0, 6000, counted=True)
    for seed in range(3):
        rounds, cal, _ = brc.fit(data, config, 2.0, make_rng(seed))
        assert cal.positives is not None
        smaller = min(cal.positives, 6000 - cal.positives)
        assert len(rounds) == brc.select_rounds(2.0, smaller, config.c2, True) < config.rounds
        assert {abs(r.alpha) for r in rounds} == {brc.EDGE}
        ran = brc.config_ran(config, rounds)
        assert ran.rounds == len(rounds) and brc.config_ran(ran, rounds[:2]) == ran
        model = brc.BRCModel(schema, ("x", "z"), "private", (), rounds, ran, 6000, 2.0, cal)
        assert len(cal.counts) == brc.margin_bins(rounds) == min(brc.CALIBRATION_BINS,
                                                                 len(rounds) + 1)
        pred = model.predict_codes(batch)
        balanced = (np.mean(pred[y == 1] == 1) + np.mean(pred[y == 0] == 0)) / 2
        assert balanced > 0.7
        assert degenerate.check_ensemble(model).degenerate is False
        payload = model.to_payload()
        assert payload["candidates"] == config.candidates and payload["T"] == len(rounds)
        assert payload["edge_sensitivity"] == pytest.approx(config.c2 / (2 * smaller))
