"""train-brc (Shen et al.): Lemma 1 on replace-one neighbours, the noise, the clipping
rule, the stump learner, the model's round trip and the paper's toy example.

Distribution tests wrongly fail with probability at most α = 1e-4 each.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from dpcli.algorithms import brc, inputs
from dpcli.budget import Budget
from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Label,
    NumericColumn,
    Schema,
)
from dpcli.mechanisms import make_rng

ALPHA = 1e-4
C = math.sqrt(2)
SCHEMA = Schema(
    columns=(NumericColumn("age", 17.0, 90.0), CategoricalColumn("color", ("r", "g", "b")),
             BinaryColumn("member", ("no", "yes")), NumericColumn("income", 0.0, 100.0),
             CategoricalColumn("region", ("n", "s", "e", "w"))),
    label=Label("label", ("0", "1"), "1"))
COLUMNS = ("age", "color", "member", "income", "region")
PUBLIC = ("member", "income", "region")


def random_columns(rng: np.random.Generator, n: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Encoded columns (as the data layer gives them) and 0/1 labels tied to a few of them."""
    cols = {"age": rng.uniform(17, 90, n), "color": rng.integers(0, 4, n).astype(np.int32),
            "member": rng.integers(0, 2, n).astype(np.int8),
            "income": rng.uniform(0, 100, n), "region": rng.integers(0, 5, n).astype(np.int32)}
    score = (cols["age"] - 50) / 20 + (cols["color"] == 1) + (cols["income"] - 50) / 30
    label = (score + rng.normal(0, 1, n) > 0).astype(np.int32)
    return cols, label


def training(cols: dict[str, np.ndarray], label: np.ndarray,
             public: tuple[str, ...]) -> brc.TrainingSet:
    batch = EncodedBatch(len(label), label, cols)
    return brc.training_set([batch], SCHEMA, COLUMNS, public, positive=1)


def replace_one(rng: np.random.Generator, cols: dict[str, np.ndarray], label: np.ndarray,
                private: bool) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A neighbour: one record's private features redrawn (and its label, if private).

    In partial mode the public columns and the label are public, so they stay.
    """
    other = {c: v.copy() for c, v in cols.items()}
    lab = label.copy()
    i = int(rng.integers(len(label)))
    new, _ = random_columns(rng, 1)
    for c in COLUMNS:
        if private or c not in PUBLIC:
            other[c][i] = new[c][0]
    if private:
        lab[i] = 1 - lab[i] if rng.random() < 0.5 else lab[i]
    return other, lab


# --------------------------------------------------------------- Lemma 1


def test_weighted_error_sensitivity_brute_force() -> None:
    """Every weight in [1/c1, c2]: replacing one record's weight and miss bit moves the
    error by at most c1·c2/n, including the extreme weights the bound is tight near."""
    rng = make_rng(1)
    for c1, c2 in [(C, C), (1.0, 3.0), (4.0, 1.0), (2.0, 2.0)]:
        for n in (2, 3, 7, 40):
            bound = brc.error_sensitivity(c1, c2, n)
            worst = 0.0
            for _ in range(300):
                pick = rng.random((2, n))
                w = np.where(pick[0] < 0.3, 1 / c1, np.where(pick[0] > 0.7, c2,
                                                              rng.uniform(1 / c1, c2, n)))
                miss = (pick[1] < 0.5).astype(float)
                for w_new in (1 / c1, c2, float(rng.uniform(1 / c1, c2))):
                    for m_new in (0.0, 1.0):
                        w2, miss2 = w.copy(), miss.copy()
                        w2[-1], miss2[-1] = w_new, m_new
                        change = abs(brc.weighted_error(miss, w) - brc.weighted_error(miss2, w2))
                        worst = max(worst, change)
            assert worst <= bound + 1e-12


def _coupled(data: brc.TrainingSet, config: brc.BRCConfig, epsilon: float, seed: int,
             monkeypatch: pytest.MonkeyPatch, forced: list[float] | None = None
             ) -> tuple[list, list[float], list[float]]:
    """Run ``train``, recording each value it passes to the mechanism and its output;
    with ``forced``, the mechanism returns those outputs instead (coupled noise)."""
    values: list[float] = []
    outputs: list[float] = []
    real = brc.grid_laplace_mechanism

    def mechanism(value: float, **kw: object) -> float:
        z = real(value, **kw)  # type: ignore[arg-type]
        values.append(value)
        z = forced[len(values) - 1] if forced is not None else z
        outputs.append(z)
        return z

    monkeypatch.setattr(brc, "grid_laplace_mechanism", mechanism)
    ensemble, _ = brc.train(data, config, epsilon, make_rng(seed))
    monkeypatch.setattr(brc, "grid_laplace_mechanism", real)
    return ensemble, values, outputs


def _released(ensemble: list) -> list:
    out = []
    for r in ensemble:
        if r.hyperplane is not None:
            h = r.hyperplane
            out.append(("private", r.alpha, h.intercept, tuple(h.numeric),
                        tuple((k, tuple(v)) for k, v in sorted(h.levels.items()))))
        else:
            s = r.stump
            out.append(("public", r.alpha, s.column, s.threshold, s.above,
                        None if s.signs is None else tuple(s.signs)))
    return out


@pytest.mark.parametrize("private", [True, False], ids=["all-private", "partial"])
def test_train_itself_under_coupled_noise(private: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lemma 1 and adaptive composition, on ``train`` itself: on a replace-one neighbour
    (private features; in all-private mode the label too) fed D's noisy outputs, every
    value ``train`` hands the mechanism moves by ≤ c1·c2/n, and the released ensemble is
    identical, so nothing but the noisy errors carries private data into the model."""
    rng = make_rng(30)
    config = brc.BRCConfig(rounds=30)
    for trial in range(30):
        n = int(rng.integers(5, 60))
        cols, label = random_columns(rng, n)
        public = () if private else PUBLIC
        epsilon = float(rng.choice([0.5, 5.0, 500.0]))
        mine, values, outputs = _coupled(training(cols, label, public), config, epsilon,
                                         trial, monkeypatch)
        bound = brc.error_sensitivity(config.c1, config.c2, n)
        for _ in range(4):
            cols2, label2 = replace_one(rng, cols, label, private)
            theirs, values2, _ = _coupled(training(cols2, label2, public), config, epsilon,
                                          trial, monkeypatch, forced=outputs)
            assert np.max(np.abs(np.subtract(values, values2))) <= bound + 1e-12
            assert _released(theirs) == _released(mine)


def test_private_weights_stay_clipped() -> None:
    rng = make_rng(3)
    for c1, c2 in [(C, C), (1.0, 2.0), (3.0, 1.0)]:
        w = np.ones(50)
        for _ in range(200):
            miss = (rng.random(50) < 0.5).astype(float)
            w = brc.clipped_update(w, miss, float(rng.uniform(-0.5, 0.5)), c1, c2)
            assert np.all(w >= 1 / c1 - 1e-15) and np.all(w <= c2 + 1e-15)


def test_clipped_update_follows_the_papers_rule() -> None:
    """Update where the new weight stays in [1/c1, c2], else leave it; hits never change."""
    w = np.array([1.0, 1.3, 0.75, 1.0])
    miss = np.array([1.0, 1.0, 1.0, 0.0])
    out = brc.clipped_update(w, miss, 0.2, C, C)
    assert out[0] == pytest.approx(math.exp(0.2))     # 1.22 <= √2: updated
    assert out[1] == 1.3                              # 1.3·e^0.2 = 1.59 > √2: unchanged
    assert out[2] == pytest.approx(0.75 * math.exp(0.2))
    assert out[3] == 1.0
    low = brc.clipped_update(np.array([0.75]), np.array([1.0]), -0.1, C, C)
    assert low[0] == 0.75                             # 0.68 < 1/√2: unchanged


# --------------------------------------------------------------- noise


def test_released_errors_are_laplace_with_the_planned_scale(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """noisy − (grid-rounded) true error of every round ~ Laplace(≈ c1·c2·T/(ε·n)), on the
    grid γ; KS at α = 1e-4 (the grid's discreteness is 1/26,000 of the scale here)."""
    rng = make_rng(4)
    n, rounds, epsilon = 200, 3000, 150.0
    cols, label = random_columns(rng, n)
    config = brc.BRCConfig(rounds=rounds)
    _, values, outputs = _coupled(training(cols, label, ()), config, epsilon, 5, monkeypatch)
    delta = brc.error_sensitivity(C, C, n)
    grid = 2.0 ** math.floor(math.log2(delta / 1024))
    true, noisy = np.array(values), np.array(outputs)
    assert np.all(noisy / grid == np.round(noisy / grid))   # exact multiples of the grid
    residual = noisy - grid * np.round(true / grid)
    scale = (math.ceil(delta / grid) + 1) * grid * rounds / epsilon   # ≈ c1·c2·T/(ε·n)
    assert scale == pytest.approx(C * C * rounds / (epsilon * n), rel=3e-3)
    assert sps.kstest(residual, sps.laplace(scale=scale).cdf).pvalue > ALPHA


def test_random_classifiers_are_uniform_and_data_free() -> None:
    """Coefficients and intercept ~ U[-1, 1] (KS, α = 1e-4), whatever the rows hold."""
    rng = make_rng(6)
    cols, label = random_columns(rng, 30)
    x = training(cols, label, ()).private
    draws = [brc.random_hyperplane(x, make_rng(s)) for s in range(600)]
    values = np.concatenate([[h.intercept, *h.numeric, *h.levels["color"]] for h in draws])
    assert sps.kstest(values, sps.uniform(loc=-1, scale=2).cdf).pvalue > ALPHA
    cols2, label2 = random_columns(make_rng(7), 30)
    x2 = training(cols2, label2, ()).private
    a, b = brc.random_hyperplane(x, make_rng(9)), brc.random_hyperplane(x2, make_rng(9))
    assert a.intercept == b.intercept and np.array_equal(a.numeric, b.numeric)
    assert all(np.array_equal(a.levels[k], b.levels[k]) for k in a.levels)


# --------------------------------------------------------------- plan


def test_plan_spends_nine_tenths_over_t_rounds_and_a_tenth_on_calibration() -> None:
    config = brc.BRCConfig(rounds=7)
    plan = brc.plan(Budget(0.35), config, n=1000)
    assert len(plan) == 8 and plan.total == Budget(0.35)
    rounds = [s for s in plan if s.name.startswith("error_round_")]
    assert [s.name for s in rounds] == [f"error_round_{t}" for t in range(1, 8)]
    assert all(s.mechanism == "grid_laplace" and s.budget == Budget(0.045) for s in rounds)
    cal = plan.step("calibration")
    assert cal.mechanism == "discrete_laplace" and cal.budget == Budget(0.035)
    assert brc.noise_scale(config, 0.35, 1000) == pytest.approx(C * C * 7 / (0.315 * 1000))


@pytest.mark.parametrize(("epsilon", "n", "counted", "expected"),
                         [(0.16, 20_000, False, 101), (0.01, 3000, False, 10),
                          (1.0, 100_000, False, 200), (0.5, 5000, True, 75),
                          (1.0, 400, False, 12)])
def test_auto_rounds_keeps_the_noise_below_the_edge(epsilon: float, n: int, counted: bool,
                                                    expected: int) -> None:
    """T = ⌊0.1·n·ε_r/(√2·c1·c2)⌋ in [10, 200]: inside the range, the noise's standard
    deviation √2·c1·c2·T/(ε_r·n) is at most the edge 0.1 at T and above it at T + 1."""
    t = brc.auto_rounds(epsilon, n, C, C, counted)
    assert t == expected
    eps_r = epsilon * (0.85 if counted else 0.9)
    sd = lambda rounds: math.sqrt(2) * C * C * rounds / (eps_r * n)  # noqa: E731
    if brc.AUTO_MIN_ROUNDS < t < brc.AUTO_MAX_ROUNDS:
        assert sd(t) <= brc.EDGE + 1e-9 < sd(t + 1)
    assert brc.AUTO_MIN_ROUNDS <= t <= brc.AUTO_MAX_ROUNDS


@pytest.mark.parametrize("bad", [{"rounds": 0}, {"c1": 0.9}, {"c2": math.inf},
                                 {"c1": 1e200}])
def test_config_refuses_what_breaks_the_bound(bad: dict) -> None:
    with pytest.raises(ValueError):
        brc.BRCConfig(**bad)


def test_modes() -> None:
    # the third argument: whether the spec declares the label public
    assert brc.resolve_mode(COLUMNS, PUBLIC, True) == ("partial", PUBLIC)
    assert brc.resolve_mode(COLUMNS, PUBLIC, False) == ("private", ())
    assert brc.resolve_mode(("age",), PUBLIC, True) == ("private", ())
    assert brc.relation("private", ()) == "replace-one"
    assert "member" in brc.relation("partial", ("member",))


# --------------------------------------------------------------- calibration


def test_margin_histogram_sensitivity_on_neighbours() -> None:
    """Replace-one moves one (margin, label) pair: the (bin, class) counts move by ≤ 2."""
    rng = make_rng(20)
    for _ in range(300):
        n = int(rng.integers(1, 30))
        span = float(rng.uniform(0.1, 5))
        margin = rng.uniform(-span, span, n)
        margin[rng.random(n) < 0.2] = span                # the top edge belongs to the last bin
        y = np.where(rng.random(n) < 0.5, 1, -1)
        _, counts = brc.margin_histogram(margin, y, span)
        assert counts.sum() == n
        i = int(rng.integers(n))
        margin2, y2 = margin.copy(), y.copy()
        margin2[i] = float(rng.choice([-span, span, rng.uniform(-span, span)]))
        y2[i] = -y2[i] if rng.random() < 0.5 else y2[i]
        _, counts2 = brc.margin_histogram(margin2, y2, span)
        assert np.abs(counts - counts2).sum() <= brc.HIST_SENSITIVITY


def test_calibration_counts_carry_discrete_laplace_noise() -> None:
    """Released counts − true counts ~ discrete Laplace(2/ε) (chi-square, α = 1e-4)."""
    from tests.statistical.test_noise_distributions import discrete_laplace_chi2_pvalue

    rng = make_rng(21)
    margin = rng.uniform(-3, 3, 500)
    y = np.where(rng.random(500) < 0.4, 1, -1)
    _, true = brc.margin_histogram(margin, y, 3.0)
    epsilon = 0.5
    noise = np.concatenate([
        (brc.noisy_margin_histogram(margin, y, 3.0, epsilon, make_rng(s))[1] - true).ravel()
        for s in range(250)])
    assert discrete_laplace_chi2_pvalue(noise, 2 / epsilon) > ALPHA


def test_platt_fit_recovers_a_known_link_and_keeps_a_positive() -> None:
    edges = np.linspace(-2, 2, 17)
    centres = (edges[:-1] + edges[1:]) / 2
    p = 1 / (1 + np.exp(-(1.5 * centres - 0.7)))
    counts = np.column_stack([1e6 * (1 - p), 1e6 * p])
    a, b = brc._platt(edges, counts)
    assert a == pytest.approx(1.5, rel=1e-3) and b == pytest.approx(-0.7, abs=1e-3)
    a, _ = brc._platt(edges, counts[:, ::-1].copy())    # a decreasing relation: a stays > 0
    assert a > 0
    assert brc._platt(edges, np.column_stack([counts[:, 0], np.zeros(16)])) == (brc.LINK, 0.0)


def test_prediction_is_the_prior_threshold_and_the_score_is_calibrated(tmp_path: Path
                                                                      ) -> None:
    """Unbalanced labels (the top fifth of a line is positive): the class is F > F*, the
    released histogram's best balanced accuracy; σ(a·F + b) keeps F's ranking (a > 0) and
    is far better calibrated than the bare link σ(4F); both survive the model file."""
    from scipy.special import expit

    n = 4000
    x = np.linspace(17, 90, n)
    label = (np.arange(n) >= int(0.8 * n)).astype(np.int32)
    schema = Schema((NumericColumn("age", 17.0, 90.0),), Label("label", ("0", "1"), "1"))
    batch = EncodedBatch(n, label, {"age": x})
    data = brc.training_set([batch], schema, ("age",), (), positive=1)
    config = brc.BRCConfig(rounds=50, c1=2.0, c2=2.0)
    calibrated, link = [], []
    for seed in range(5):
        rounds, calibration, trace = brc.fit(data, config, 100.0, make_rng(seed))
        assert len(calibration.edges) == brc.CALIBRATION_BINS + 1 and calibration.a > 0
        model = brc.BRCModel(schema, ("age",), "private", (), rounds, config, n, 100.0,
                             calibration)
        proba = model.predict_proba(batch)
        f = model.margin(batch)
        assert np.allclose(f, trace.margin)
        # the class: F above the threshold from the released histogram
        codes = model.predict_codes(batch)
        assert np.array_equal(codes, (f > calibration.threshold).astype(int))
        assert calibration.prior == 0.2 and calibration.exact_count
        assert calibration.threshold == brc.decision_threshold(calibration.edges,
                                                               calibration.counts)
        assert np.mean(codes[label == 1]) > 0.9 and np.mean(codes[label == 0] == 0) > 0.9
        order = np.argsort(f, kind="stable")
        assert np.all(np.diff(proba[order, 1]) >= -1e-12)
        calibrated.append(np.mean((proba[:, 1] - label) ** 2))
        link.append(np.mean((expit(brc.LINK * f) - label) ** 2))
    assert np.median(calibrated) < 0.6 * np.median(link)
    again = brc.BRCModel.from_payload(model.to_payload(), tmp_path / "m.json")
    assert np.allclose(again.predict_proba(batch), proba)
    assert np.array_equal(again.predict_codes(batch), model.predict_codes(batch))


# --------------------------------------------------------------- learners


def test_stump_is_the_least_weighted_error_over_columns() -> None:
    """Brute force every threshold of every numeric column and every per-level labelling."""
    rng = make_rng(8)
    for _ in range(20):
        n = int(rng.integers(4, 40))
        cols, label = random_columns(rng, n)
        cols["income"] = rng.integers(0, 6, n).astype(float)    # ties between values
        data = training(cols, label, PUBLIC)
        w = rng.uniform(0.2, 3, n)
        stump, err = brc.fit_stump(data.public, data.y, w)
        best = math.inf
        x = cols["income"]
        for t in np.unique(x)[:-1]:
            for above in (1, -1):
                pred = np.where(x > t, above, -above)
                best = min(best, float(w @ (pred != data.y)) / w.sum())
        for name in ("member", "region"):
            codes = cols[name]
            pos = np.array([w[(codes == v) & (data.y > 0)].sum() for v in np.unique(codes)])
            neg = np.array([w[(codes == v) & (data.y < 0)].sum() for v in np.unique(codes)])
            if np.all(pos > neg) or np.all(neg > pos):
                continue   # one class for every level: constant, never a candidate
            best = min(best, float(np.minimum(pos, neg).sum()) / w.sum())
        assert err == pytest.approx(best)
        pred = stump.predict(data.public.inputs, data.public.raw)
        assert float(w @ (pred != data.y)) / w.sum() == pytest.approx(err)


def test_private_features_are_scaled_by_declared_bounds() -> None:
    col = NumericColumn("age", 17.0, 90.0)
    assert np.allclose(inputs.scale(np.array([17.0, 53.5, 90.0]), col), [-1, 0, 1])


# --------------------------------------------------------------- model and accuracy


def test_seeded_training_is_reproducible_and_the_model_round_trips(tmp_path: Path) -> None:
    rng = make_rng(10)
    cols, label = random_columns(rng, 500)
    data = training(cols, label, PUBLIC)
    config = brc.BRCConfig(rounds=12)
    a, _ = brc.train(data, config, 1.0, make_rng(11))
    b, _ = brc.train(data, config, 1.0, make_rng(11))
    assert [(r.alpha, r.kind) for r in a] == [(r.alpha, r.kind) for r in b]
    assert {r.kind for r in a} == {"public", "private"}
    assert all(-0.5 <= r.alpha <= 0.5 for r in a)
    model = brc.BRCModel(inputs.model_schema(SCHEMA, COLUMNS), COLUMNS, "partial", PUBLIC, a,
                         config, data.n, 1.0)
    payload = model.to_payload()
    assert payload["public_columns"] == list(PUBLIC) and payload["label_public"] is True
    assert payload["scaling"]["age"] == {"lower": 17.0, "upper": 90.0, "onto": [-1, 1]}
    again = brc.BRCModel.from_payload(payload, tmp_path / "m.json")
    batch = EncodedBatch(500, label, cols)
    assert np.allclose(model.predict_proba(batch), again.predict_proba(batch))
    proba = model.predict_proba(batch)
    assert np.allclose(proba.sum(axis=1), 1) and proba.min() >= 0 and proba.max() <= 1


def test_papers_toy_example_learns_the_line() -> None:
    """§4: n points on a line, left half negative, right half positive; random
    classifiers boosted (all private, large ε) find the cut."""
    n = 2000
    x = np.linspace(17, 90, n)
    label = (np.arange(n) >= n // 2).astype(np.int32)
    schema = Schema((NumericColumn("age", 17.0, 90.0),), Label("label", ("0", "1"), "1"))
    batch = EncodedBatch(n, label, {"age": x})
    data = brc.training_set([batch], schema, ("age",), (), positive=1)
    config = brc.BRCConfig(rounds=50, c1=2.0, c2=2.0)
    accuracy = []
    for seed in range(5):
        rounds, _ = brc.train(data, config, 100.0, make_rng(seed))
        model = brc.BRCModel(schema, ("age",), "private", (), rounds, config, n, 100.0)
        accuracy.append(np.mean(model.predict_proba(batch).argmax(axis=1) == label))
    assert np.median(accuracy) >= 0.9


def test_public_learner_alone_helps_when_private_features_are_noise() -> None:
    """Partial mode: with a label that depends on a public column only, the ensemble
    leans on public stumps and beats chance clearly."""
    rng = make_rng(12)
    n = 3000
    cols, _ = random_columns(rng, n)
    label = (cols["income"] > 60).astype(np.int32)
    data = training(cols, label, PUBLIC)
    rounds, trace = brc.train(data, brc.BRCConfig(rounds=10), 1.0, make_rng(13))
    assert trace.chosen.count("public") >= 5
    model = brc.BRCModel(inputs.model_schema(SCHEMA, COLUMNS), COLUMNS, "partial", PUBLIC,
                         rounds, brc.BRCConfig(rounds=10), n, 1.0)
    batch = EncodedBatch(n, label, cols)
    assert np.mean(model.predict_proba(batch).argmax(axis=1) == label) > 0.95
