"""train-brc, Algorithm 2 with selecting rounds: the public stump joins every round at no
cost, and the chosen private classifiers vote with their released mean edge.

The released statistic's replace-one sensitivity (on ``train`` itself under coupled
selections), its noise against the closed form (with a power check), the shrinkage rule,
the plan's split, the model's round trip, and the case that motivated it: informative
public columns beside private ones that carry nothing (nycflights13).

Distribution tests wrongly fail with probability at most α = 1e-4 each.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from dpcli.algorithms import brc
from dpcli.budget import Budget
from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import BinaryColumn, Label, NumericColumn, Schema
from dpcli.mechanisms import make_rng
from dpcli.model_check import check as check_model
from tests.algorithms.test_brc import PUBLIC, _released, random_columns, replace_one, training

ALPHA = 1e-4


def _run(monkeypatch: pytest.MonkeyPatch, data: brc.TrainingSet, config: brc.BRCConfig,
         seed: int, forced: list[int] | None) -> tuple[list, brc.Trace, list[np.ndarray],
                                                       list[int]]:
    """``train`` recording the edges each selection reads; with ``forced``, those indices
    are selected instead (coupled selections)."""
    real = brc.select_candidate
    seen: list[np.ndarray] = []
    picks: list[int] = []

    def select(edges, sensitivity, epsilon, rng, public=None):
        assert public is None     # the stump no longer competes: it joins for free
        seen.append(np.array(edges))
        k = real(edges, sensitivity, epsilon, rng)
        picks.append(forced[len(picks)] if forced is not None else k)
        return picks[-1]

    monkeypatch.setattr(brc, "select_candidate", select)
    try:
        rounds, trace = brc.train(data, config, 2.0, make_rng(seed))
    finally:
        monkeypatch.setattr(brc, "select_candidate", real)
    return rounds, trace, seen, picks


def test_mean_chosen_edge_moves_by_at_most_the_edge_sensitivity(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On a replace-one neighbour in the private features fed D's selections: the public
    rounds and every chosen classifier are the same, each recorded edge is the chosen
    (signed) one, and their mean — the statistic release_vote adds noise to — moves by at
    most c2/(2·min N̂)."""
    rng = make_rng(50)
    for trial in range(12):
        n = int(rng.integers(6, 50))
        c = float(rng.choice([1.0, math.sqrt(2)]))
        config = brc.BRCConfig(rounds=6, c1=c, c2=c, candidates=int(rng.integers(2, 9)),
                               partial=True, voted=True)
        assert config.voted
        cols, label = random_columns(rng, n)
        mine, trace, seen, picks = _run(monkeypatch, training(cols, label, PUBLIC), config,
                                        trial, None)
        k = len(seen[0])
        assert [e for e in trace.edges] == [
            float(s[p]) if p < k else -float(s[p - k]) for s, p in zip(seen, picks, strict=True)]
        sens = brc.edge_sensitivity(c, np.array([n / 2]))
        assert sum(r.hyperplane is not None for r in mine) == 6
        assert sum(r.stump is not None for r in mine) <= 6
        for _ in range(3):
            cols2, label2 = replace_one(rng, cols, label, private=False)
            theirs, trace2, _, _ = _run(monkeypatch, training(cols2, label2, PUBLIC), config,
                                        trial, picks)
            assert _released(theirs) == _released(mine)
            assert abs(np.mean(trace.edges) - np.mean(trace2.edges)) <= sens + 1e-12


def test_released_vote_is_laplace_with_the_planned_scale() -> None:
    """noisy − grid-rounded mean ~ Laplace(vote_scale) (KS at α = 1e-4), on the grid; the
    same test rejects a scale 30 % off (power)."""
    edges = [0.031, -0.012, 0.047, 0.02]
    sens, eps = 0.01, 0.7
    scale = brc.vote_scale(sens, eps)
    assert scale == pytest.approx(sens / eps, rel=3e-3)
    grid = 2.0 ** math.floor(math.log2(sens / 1024))
    rng = make_rng(3)
    noisy = np.array([brc.release_vote(edges, sens, eps, rng) for _ in range(4000)])
    assert np.all(noisy / grid == np.round(noisy / grid))
    residual = noisy - grid * np.round(np.mean(edges) / grid)
    assert sps.kstest(residual, sps.laplace(scale=scale).cdf).pvalue > ALPHA
    assert sps.kstest(residual, sps.laplace(scale=1.3 * scale).cdf).pvalue < ALPHA
    assert brc.release_vote([], sens, eps, rng) == 0.0


def test_vote_weight_is_the_released_edge_when_quiet_and_edge_when_noisy() -> None:
    assert brc.vote_weight(0.004, 1e-5) == pytest.approx(0.004, rel=1e-6)
    assert brc.vote_weight(0.3, 1e-5) == pytest.approx(0.3, rel=1e-6)
    assert brc.vote_weight(-0.2, 1e-5) == brc.VOTE_FLOOR
    assert brc.vote_weight(0.9, 1e-5) == 0.5
    assert brc.vote_weight(0.004, 10.0) == pytest.approx(brc.EDGE, rel=1e-3)
    # the posterior mean under N(EDGE, EDGE²) with the noise's variance 2·scale²
    w = brc.EDGE ** 2 / (brc.EDGE ** 2 + 2 * 0.05 ** 2)
    assert brc.vote_weight(0.02, 0.05) == pytest.approx(w * 0.02 + (1 - w) * brc.EDGE)


def test_plan_has_the_vote_step_and_the_rounds_give_it_a_twentieth() -> None:
    config = brc.auto_config(1.0, 5000, counted=False, partial=True)
    assert config.voted and config.candidates > 1
    plan = brc.plan(Budget(1.0), config, 5000)
    assert [s.name for s in plan] == [brc.SELECTION, brc.VOTE, brc.CALIBRATION]
    assert plan.step(brc.SELECTION).budget == Budget(0.85)
    vote = plan.step(brc.VOTE)
    assert vote.mechanism == "grid_laplace" and vote.budget == Budget(0.05)
    assert vote.sensitivity == pytest.approx(config.c2 / 2)   # any class sizes ≥ 1
    assert config.rounds == brc.select_rounds(1.0, 2500, config.c2, False, True)
    # the paper's round and Algorithm 3 keep their split
    assert not brc.auto_config(1.0, 5000, partial=True, candidates=1).voted
    assert not brc.auto_config(1.0, 5000, counted=True).voted
    assert brc.rounds_share(False, False) == 1 - brc.CALIBRATION_SHARE
    with pytest.raises(ValueError, match="voted"):
        brc.BRCConfig(candidates=1, partial=True, voted=True)


def test_the_vote_pays_where_its_balanced_noise_is_a_quarter_of_the_edge() -> None:
    """vote_pays: c2/(n·ε/20) ≤ EDGE/4 (the grid's 0.2 % aside), so n·ε ≥ 800·c2; where it
    does not, Algorithm 2 runs as before (the stump competes, the rounds keep 9/10)."""
    for c2 in (1.0, math.sqrt(2)):
        edge = 800 * c2
        assert brc.vote_pays(1.0, math.ceil(edge * 1.01), c2)
        assert not brc.vote_pays(1.0, math.floor(edge * 0.99), c2)
        assert brc.vote_pays(2.0, math.ceil(edge * 1.01 / 2), c2)
    small = brc.auto_config(1.0, 300, partial=True)     # penguins-sized
    assert small.partial and not small.voted
    assert small.rounds == brc.select_rounds(1.0, 150, small.c2, False, False)
    assert [s.name for s in brc.plan(Budget(1.0), small, 300)] == [brc.SELECTION,
                                                                   brc.CALIBRATION]


def test_fine_bins_only_with_the_vote_and_where_the_noise_allows() -> None:
    """32 bins where a class total's noise sd (√(2·32)·2/ε) is at most 5 % of the smaller
    class, in Algorithm 2 with the released vote only; 16 (or T + 1) otherwise."""
    eps = 0.1
    sd = math.sqrt(2.0 * brc.FINE_BINS) * brc.HIST_SENSITIVITY / eps
    edge = sd / brc.FINE_NOISE
    assert brc.fine_bins(True, edge, eps) and brc.fine_bins(True, 10 * edge, eps)
    assert not brc.fine_bins(True, edge * 0.999, eps)
    assert not brc.fine_bins(False, 1e9, eps)
    # ISLP Default's 160 positives and fair's 1,000 stay at 16 at ε = 1; Adult's 5,000 do not
    assert not brc.fine_bins(True, 160, 0.1) and not brc.fine_bins(True, 1000, 0.1)
    assert brc.fine_bins(True, 5000, 0.1)
    # below the vote's rule nothing changes: the same bins as before
    small = brc.auto_config(1.0, 300, partial=True)
    assert not small.voted and not brc.fine_bins(small.voted, 150, 0.1)


def _public_signal(n: int, seed: int) -> tuple[EncodedBatch, Schema]:
    """A public binary column that gives the label 80 % of the time, and two private
    numeric columns that are pure noise (the shape of nycflights13's split)."""
    rng = make_rng(seed)
    schema = Schema((BinaryColumn("hub", ("no", "yes")), NumericColumn("x", 0.0, 1.0),
                     NumericColumn("z", 0.0, 1.0)), Label("label", ("0", "1"), "1"))
    hub = rng.integers(0, 2, n).astype(np.int8)
    label = np.where(rng.random(n) < 0.8, hub, 1 - hub).astype(np.int32)
    return EncodedBatch(n, label, {"hub": hub, "x": rng.random(n), "z": rng.random(n)}), schema


def test_uninformative_private_columns_get_a_small_vote_and_the_public_column_decides(
        tmp_path) -> None:
    """Private columns of pure noise: the released vote is far below EDGE, the public
    stump's α (its exact edge, 0.3) dominates, so the class is the public column's 80 %
    rule; with the data-free EDGE the 0.1 votes of noise hyperplanes outweighed it."""
    batch, schema = _public_signal(8000, 7)
    cols = ("hub", "x", "z")
    data = brc.training_set([batch], schema, cols, ("hub",), positive=1)
    config = brc.auto_config(1.0, 8000, partial=True)
    y = batch.label == 1
    for seed in range(3):
        rounds, cal, _ = brc.fit(data, config, 1.0, make_rng(seed))
        ran = brc.config_ran(config, rounds)
        assert ran.rounds == sum(r.hyperplane is not None for r in rounds)
        assert cal.vote is not None and abs(cal.vote) < 0.02
        # 4,000 records in the smaller class at ε_cal = 0.1: the finer histogram
        assert len(cal.counts) == brc.FINE_BINS and len(cal.edges) == brc.FINE_BINS + 1
        vote = {abs(r.alpha) for r in rounds if r.hyperplane is not None}
        assert len(vote) == 1 and vote.pop() < 0.03
        model = brc.BRCModel(schema, cols, "partial", ("hub",), rounds, ran, 8000, 1.0, cal)
        pred = model.predict_codes(batch) == 1
        assert np.mean(pred == (batch.columns["hub"] == 1)) > 0.99
        assert np.mean(pred == y) > 0.78
        payload = model.to_payload()
        assert payload["private_vote"]["released_mean_edge"] == cal.vote
        back = brc.BRCModel.from_payload(payload, tmp_path / "m.json")
        assert back.config.voted and back.calibration.vote == cal.vote
        check_model(brc.KIND, back, tmp_path / "m.json")
        assert np.array_equal(back.margin(batch), model.margin(batch))
