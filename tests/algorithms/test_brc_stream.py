"""train-brc streamed: one pass over the file per round (and one for the calibration) gives
the model the in-memory trainer gave before streaming, for the same seed and data.

``_reference_fit`` below is a frozen copy of that trainer (dpcli before streaming:
every record in memory, per-record weights updated in place, the public weights
renormalised by their mean, a sort per numeric public column, np.dot and pairwise
sums). The streamed trainer draws the generator in the same order, so every random
classifier, every noisy count and every choice must be equal; floats may differ only
where the order of a floating sum changed: the public errors, hence public α's and
the margin edges that Σ|α| sets, by at most 1e-9 relative; and the Platt fit that
reads those edges, which L-BFGS-B solves only to its tolerance, by at most 1e-5.
Without a public column nothing is summed in another order: the model is the same
bit for bit. Streaming from a file, from memory, or with any batch size gives the same
model bit for bit (every sum runs record by record in file order).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcli.algorithms import brc
from dpcli.algorithms.inputs import Inputs
from dpcli.data import DataSource
from dpcli.data.encode import EncodedBatch
from dpcli.errors import DataError
from dpcli.mechanisms import discrete_laplace_mechanism, grid_laplace_mechanism, make_rng
from tests.algorithms.test_brc import COLUMNS, PUBLIC, SCHEMA, random_columns

RTOL = 1e-9
PLATT_RTOL = 1e-5
COLOR = np.array(["r", "g", "b", "pink"])           # code 3: not declared, read as `other`
MEMBER = np.array(["no", "yes"])
REGION = np.array(["n", "s", "e", "w", "mid"])      # code 4: `other`


# --------------------------------------------------------------- the trainer before streaming


def _reference_stump(public: brc.PublicColumns, y: np.ndarray, w: np.ndarray
                     ) -> tuple[brc.Stump | None, float]:
    total = float(w.sum())
    pos_w = np.where(y > 0, w, 0.0)
    neg_w = w - pos_w
    best: tuple[float, brc.Stump] | None = None
    for name, codes in public.inputs.codes.items():
        k = public.inputs.n_levels[name]
        pos = np.bincount(codes, weights=pos_w, minlength=k)
        neg = np.bincount(codes, weights=neg_w, minlength=k)
        default = 1 if pos.sum() >= neg.sum() else -1
        signs = np.where(pos > neg, 1, np.where(neg > pos, -1, default)).astype(np.int8)
        if np.all(signs == signs[0]):
            continue   # constant on the declared domain: never a candidate
        err = float(np.minimum(pos, neg).sum()) / total
        if best is None or err < best[0]:
            best = (err, brc.Stump(name, signs=signs))
    for name, values in public.raw.items():
        order = np.argsort(values, kind="stable")
        xs = values[order]
        below_pos = np.cumsum(pos_w[order])
        below_neg = np.cumsum(neg_w[order])
        err_up = below_pos + (below_neg[-1] - below_neg)
        # a cut after each distinct value but the last (above every value: constant)
        cut = np.flatnonzero(xs[:-1] < xs[1:])
        if cut.size == 0:
            continue
        up = err_up[cut]
        down = total - up
        i_up, i_down = int(np.argmin(up)), int(np.argmin(down))
        if up[i_up] <= down[i_down]:
            i, above, err = cut[i_up], 1, float(up[i_up]) / total
        else:
            i, above, err = cut[i_down], -1, float(down[i_down]) / total
        if best is None or err < best[0]:
            threshold = float((xs[i] + xs[i + 1]) / 2)
            best = (err, brc.Stump(name, threshold=threshold, above=above))
    if best is None:
        return None, 0.5
    return best[1], best[0]


def _reference_fit(data: brc.TrainingSet, config: brc.BRCConfig, epsilon: float,
                   rng: np.random.Generator) -> tuple[list[brc.Round], brc.Calibration]:
    n, y = data.n, data.y
    positives = int((y > 0).sum())
    if config.counted:   # the label is private: the noisy positive count first
        positives = int(discrete_laplace_mechanism(np.array([positives]), sensitivity=1,
                                                   epsilon=float(epsilon) / 20, rng=rng)[0])
    positives = min(max(positives, 1), n - 1)
    eps_rounds = float(epsilon) * (1 - 0.1 - (0.05 if config.counted else 0))
    # each class half the weight, the smaller weight 1, at most the noise budget's ratio
    # (ρ·√2·c1·c2·T/(ε_r·n) ≤ 0.1) and 20:1
    room = 0.1 * n * eps_rounds / (math.sqrt(2) * config.c1 * config.c2) / config.rounds
    lam = np.array([1 / (n - positives), 1 / positives])
    lam = np.minimum(lam / lam.min(), min(20.0, max(1.0, room)))
    lam_rows = lam[(y > 0).astype(int)]
    sens = brc.error_sensitivity(config.c1, config.c2, n) * float(lam.max())
    w_pri, w_pub, margin = np.ones(n), np.ones(n), np.zeros(n)
    rounds: list[brc.Round] = []
    for _ in range(config.rounds):
        h = brc.random_hyperplane(data.private, rng)
        pred_pri = h.predict(data.private)
        miss_pri = (pred_pri != y).astype(np.float64)
        v_pri = w_pri * lam_rows
        noisy = grid_laplace_mechanism(float(np.dot(v_pri, miss_pri) / v_pri.sum()),
                                       sensitivity=sens, epsilon=eps_rounds / config.rounds,
                                       rng=rng)
        err_pri = min(1.0, max(0.0, noisy))
        if data.public is not None:
            stump, err_pub = _reference_stump(data.public, y, w_pub * lam_rows)
            if stump is not None and abs(0.5 - err_pub) > abs(0.5 - err_pri):
                alpha = 0.5 - err_pub
                pred_pub = stump.predict(data.public.inputs, data.public.raw)
                w_pub = w_pub * np.exp(alpha * (pred_pub != y))
                w_pub /= w_pub.mean()
                margin += alpha * pred_pub
                rounds.append(brc.Round(alpha, stump=stump))
                continue
        alpha = 0.5 - err_pri
        w_pri = brc.clipped_update(w_pri, miss_pri, alpha, config.c1, config.c2)
        margin += alpha * pred_pri
        rounds.append(brc.Round(alpha, hyperplane=h))
    span = float(sum(abs(r.alpha) for r in rounds))
    edges, counts = brc.margin_histogram(margin, y, span)
    noisy_counts = np.asarray(discrete_laplace_mechanism(
        counts, sensitivity=brc.HIST_SENSITIVITY, epsilon=float(epsilon) / 10, rng=rng))
    a, b = brc._platt(edges, np.maximum(noisy_counts, 0).astype(np.float64))
    prior = positives / n
    return rounds, brc.Calibration(a, b, tuple(map(float, edges)),
                                   tuple((int(p), int(q)) for p, q in noisy_counts),
                                   prior, positives, not config.counted,
                                   brc.decision_threshold(edges, noisy_counts))


# --------------------------------------------------------------- data and models


def _write(path: Path, cols: dict[str, np.ndarray], label: np.ndarray) -> Path:
    """The encoded columns as a Parquet file of raw values (undeclared categories kept)."""
    pd.DataFrame({"age": cols["age"], "color": COLOR[cols["color"]],
                  "member": MEMBER[cols["member"]], "income": cols["income"],
                  "region": REGION[cols["region"]], "label": label}).to_parquet(path, index=False)
    return path


def _stream(path: Path, public: tuple[str, ...], batch_rows: int) -> brc.TrainingStream:
    source = DataSource(path, SCHEMA, batch_rows=batch_rows)
    n = source.check_values(COLUMNS)
    return brc.TrainingStream(lambda: source.batches(COLUMNS, rng=make_rng(0)), n, SCHEMA,
                              COLUMNS, public, positive=1)


def _in_memory(cols: dict[str, np.ndarray], label: np.ndarray,
               public: tuple[str, ...]) -> brc.TrainingSet:
    return brc.training_set([EncodedBatch(len(label), label, cols)], SCHEMA, COLUMNS, public,
                            positive=1)


def _model(rounds: list[brc.Round], calibration: brc.Calibration) -> list:
    """Everything a model file holds of a fit, as plain values (floats exact)."""
    out: list = []
    for r in rounds:
        if r.hyperplane is not None:
            h = r.hyperplane
            out.append(("private", r.alpha, h.intercept, tuple(h.numeric),
                        tuple((k, tuple(v)) for k, v in sorted(h.levels.items()))))
        else:
            s = r.stump
            assert s is not None
            out.append(("public", r.alpha, s.column, s.threshold, s.above,
                        None if s.signs is None else tuple(s.signs)))
    out.append(("calibration", calibration.a, calibration.b, calibration.edges,
                calibration.counts, calibration.prior, calibration.positives,
                calibration.threshold))
    return out


def _assert_matches_reference(rounds: list[brc.Round], calibration: brc.Calibration,
                              ref: list[brc.Round], ref_cal: brc.Calibration) -> None:
    """Same classifiers, choices and noisy counts; private α's exact; public α's, edges,
    a and b within RTOL (the order of the public sums changed)."""
    assert [r.kind for r in rounds] == [r.kind for r in ref]
    for r, q in zip(rounds, ref, strict=True):
        if r.hyperplane is not None:
            assert q.hyperplane is not None and r.alpha == q.alpha
            assert r.hyperplane.intercept == q.hyperplane.intercept
            assert np.array_equal(r.hyperplane.numeric, q.hyperplane.numeric)
            for name, weights in q.hyperplane.levels.items():
                assert np.array_equal(r.hyperplane.levels[name], weights)
        else:
            assert r.stump is not None and q.stump is not None
            assert (r.stump.column, r.stump.threshold, r.stump.above) == (
                q.stump.column, q.stump.threshold, q.stump.above)
            assert (r.stump.signs is None) == (q.stump.signs is None)
            if q.stump.signs is not None:
                assert np.array_equal(r.stump.signs, q.stump.signs)
            assert r.alpha == pytest.approx(q.alpha, rel=RTOL, abs=1e-15)
    assert calibration.counts == ref_cal.counts
    assert (calibration.positives, calibration.prior, calibration.exact_count) == (
        ref_cal.positives, ref_cal.prior, ref_cal.exact_count)
    assert calibration.threshold == pytest.approx(ref_cal.threshold, rel=PLATT_RTOL,
                                                  abs=1e-6)
    np.testing.assert_allclose(calibration.edges, ref_cal.edges, rtol=RTOL)
    # a and b: the Platt fit of the released counts at the bin centres, exactly ...
    counts = np.maximum(np.array(calibration.counts), 0).astype(np.float64)
    assert (calibration.a, calibration.b) == brc._platt(np.array(calibration.edges), counts)
    # ... which L-BFGS-B stops within its tolerance: edges 1e-16 apart can move the
    # stopping point by ~1e-6 (measured up to 4e-7)
    assert calibration.a == pytest.approx(ref_cal.a, rel=PLATT_RTOL)
    assert calibration.b == pytest.approx(ref_cal.b, rel=PLATT_RTOL, abs=1e-9)
    if all(r.hyperplane is not None for r in ref):
        # no public sum, no other order: every release is the same bit for bit
        assert _model(rounds, calibration) == _model(ref, ref_cal)


# --------------------------------------------------------------- equality


CASES = {
    # Algorithm 2: a binary, a continuous and a categorical public column
    "partial": dict(n=700, public=PUBLIC, rounds=14, epsilon=1.0, c=math.sqrt(2), ties=False),
    # Algorithm 2 with many equal public values, and clipping that binds often
    "partial-ties-clipped": dict(n=500, public=PUBLIC, rounds=16, epsilon=3.0, c=1.1,
                                 ties=True),
    # Algorithm 3: every feature and the label private
    "private": dict(n=600, public=(), rounds=12, epsilon=2.0, c=math.sqrt(2), ties=False),
    # --rounds auto: T from the rule of thumb (6 here)
    "partial-auto": dict(n=600, public=PUBLIC, rounds="auto", epsilon=0.05, c=math.sqrt(2),
                         ties=False),
    "private-auto": dict(n=900, public=(), rounds="auto", epsilon=0.03, c=math.sqrt(2),
                         ties=True),
    # Algorithm 3 with its private class count (1/20 of ε) and unbalanced labels
    "private-counted": dict(n=800, public=(), rounds=10, epsilon=2.0, c=math.sqrt(2),
                            ties=False, counted=True, positive_share=0.15),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("seed", [3, 4])
def test_streaming_gives_the_in_memory_trainers_model(case: str, seed: int,
                                                      tmp_path: Path) -> None:
    spec = CASES[case]
    n, public, epsilon, c = spec["n"], spec["public"], spec["epsilon"], spec["c"]
    cols, label = random_columns(make_rng(100 + seed), n)
    if "positive_share" in spec:
        label = (make_rng(200 + seed).random(n) < spec["positive_share"]).astype(label.dtype)
    if spec["ties"]:
        cols["income"] = np.round(cols["income"] / 10) * 10     # 11 distinct public values
        cols["age"] = np.round(cols["age"])
    rounds_t = (brc.auto_rounds(epsilon, n, c, c) if spec["rounds"] == "auto"
                else spec["rounds"])
    config = brc.BRCConfig(rounds=rounds_t, c1=c, c2=c, counted=spec.get("counted", False))

    ref, ref_cal = _reference_fit(_in_memory(cols, label, public), config, epsilon,
                                  make_rng(seed))
    path = _write(tmp_path / "train.parquet", cols, label)
    streamed, cal, trace = brc.fit(_stream(path, public, batch_rows=97), config, epsilon,
                                   make_rng(seed))
    memory, cal_memory, _ = brc.fit(_in_memory(cols, label, public), config, epsilon,
                                    make_rng(seed))

    assert len(streamed) == rounds_t and trace.margin is None
    assert _model(streamed, cal) == _model(memory, cal_memory)     # bit for bit
    _assert_matches_reference(streamed, cal, ref, ref_cal)
    if public and spec["rounds"] != "auto":   # (at ε = 0.05 the noise makes most errors 0 or 1)
        assert {r.kind for r in streamed} == {"public", "private"}   # both sides exercised


def test_the_model_does_not_depend_on_the_batch_size(tmp_path: Path) -> None:
    rng = make_rng(7)
    cols, label = random_columns(rng, 150)
    cols["income"] = np.round(cols["income"])
    path = _write(tmp_path / "train.parquet", cols, label)
    config = brc.BRCConfig(rounds=8, c1=1.2, c2=1.2)
    models = []
    for batch_rows in (1, 7, 64, 150):
        rounds, cal, _ = brc.fit(_stream(path, PUBLIC, batch_rows), config, 2.0, make_rng(8))
        models.append(_model(rounds, cal))
    assert all(m == models[0] for m in models[1:])
    assert {m[0] for m in models[0][:-1]} == {"public", "private"}


@pytest.mark.parametrize("private", [True, False], ids=["all-private", "partial"])
def test_streamed_errors_keep_lemma_1_on_neighbours(private: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The replayed weights bound the error's sensitivity as stored ones did: on a
    replace-one neighbour fed D's noisy outputs, every value the streamed trainer hands the
    mechanism moves by at most c1·c2/n, and the released ensemble is identical."""
    from tests.algorithms.test_brc import replace_one

    real = brc.grid_laplace_mechanism
    config = brc.BRCConfig(rounds=12, c1=1.3, c2=1.6)
    public = () if private else PUBLIC

    def run(cols: dict[str, np.ndarray], label: np.ndarray, seed: int,
            forced: list[float] | None) -> tuple[list, list[float], list[float]]:
        values: list[float] = []
        outputs: list[float] = []

        def mechanism(value: float, **kw: object) -> float:
            z = real(value, **kw)  # type: ignore[arg-type]
            values.append(value)
            outputs.append(forced[len(values) - 1] if forced is not None else z)
            return outputs[-1]

        stream = brc.TrainingStream(Counting(cols, label, size=7), len(label), SCHEMA,
                                    COLUMNS, public, positive=1)
        monkeypatch.setattr(brc, "grid_laplace_mechanism", mechanism)
        try:
            rounds, _ = brc.train(stream, config, 5.0, make_rng(seed))
        finally:
            monkeypatch.setattr(brc, "grid_laplace_mechanism", real)
        return _model(rounds, brc.Calibration()), values, outputs

    rng = make_rng(17)
    for trial in range(8):
        n = int(rng.integers(20, 80))
        cols, label = random_columns(rng, n)
        mine, values, outputs = run(cols, label, trial, None)
        bound = brc.error_sensitivity(config.c1, config.c2, n)
        for _ in range(3):
            cols2, label2 = replace_one(rng, cols, label, private)
            theirs, values2, _ = run(cols2, label2, trial, outputs)
            assert np.max(np.abs(np.subtract(values, values2))) <= bound + 1e-12
            assert theirs == mine


# --------------------------------------------------------------- passes


class Counting:
    """Batches of records in memory, handed out a pass at a time, with the passes counted."""

    def __init__(self, cols: dict[str, np.ndarray], label: np.ndarray, size: int) -> None:
        self.batches = [EncodedBatch(len(label[i:i + size]), label[i:i + size],
                                     {c: v[i:i + size] for c, v in cols.items()})
                        for i in range(0, len(label), size)]
        self.passes = 0

    def __call__(self) -> list[EncodedBatch]:
        self.passes += 1
        return self.batches


def test_one_pass_for_the_count_one_per_round_and_one_for_the_calibration() -> None:
    cols, label = random_columns(make_rng(9), 230)
    batches = Counting(cols, label, size=50)
    stream = brc.TrainingStream(batches, 230, SCHEMA, COLUMNS, PUBLIC, positive=1)
    seen: list[int] = []
    brc.fit(stream, brc.BRCConfig(rounds=6), 1.0, make_rng(10), progress=seen.append)
    assert batches.passes == 8
    assert seen == [50, 50, 50, 50, 30] * 8 and sum(seen) == 8 * 230
    batches.passes = 0
    brc.train(stream, brc.BRCConfig(rounds=6), 1.0, make_rng(10))
    assert batches.passes == 6


@pytest.mark.parametrize("drop_at", [2, 4])
def test_a_file_that_changes_between_passes_is_an_error(drop_at: int) -> None:
    """n sets the noise: a pass that reads another number of records must not go on."""
    cols, label = random_columns(make_rng(11), 120)
    full = Counting(cols, label, size=40)

    def batches() -> list[EncodedBatch]:
        got = full()
        return got[:-1] if full.passes == drop_at else got

    stream = brc.TrainingStream(batches, 120, SCHEMA, COLUMNS, PUBLIC, positive=1)
    with pytest.raises(DataError, match="read 80 records, but 120 were counted"):
        brc.fit(stream, brc.BRCConfig(rounds=3), 1.0, make_rng(12))


def test_records_in_memory_keep_their_weights_and_streams_replay_them() -> None:
    """Replaying the history on a batch gives each record the weights it had when the
    trainer updated them in place, bit for bit; private weights stay in [1/c1, c2]."""
    cols, label = random_columns(make_rng(13), 300)
    data = _in_memory(cols, label, PUBLIC)
    config = brc.BRCConfig(rounds=20, c1=1.2, c2=1.3)
    rounds, _ = brc.train(data, config, 5.0, make_rng(14))
    w_pri, log_pub = np.ones(300), np.zeros(300)
    for r in rounds:
        w_pri, log_pub = brc.replay_weights([r], data, config, (w_pri, log_pub))
    for size in (1, 33):
        for i in range(0, 300, size):
            part = _in_memory({c: v[i:i + size] for c, v in cols.items()}, label[i:i + size],
                              PUBLIC)
            w, lp = brc.replay_weights(rounds, part, config)
            assert np.array_equal(w, w_pri[i:i + size])
            assert np.array_equal(lp, log_pub[i:i + size])
    assert np.all(w_pri >= 1 / 1.2 - 1e-15) and np.all(w_pri <= 1.3 + 1e-15)
    assert len(np.unique(w_pri)) > 3 and len(np.unique(log_pub)) > 3


# --------------------------------------------------------------- the stump's statistics


def test_stump_statistics_are_per_distinct_value_and_split_anywhere() -> None:
    """Sums per declared level and per distinct public value, whatever the batches: equal
    bit for bit to one bincount over every record; the memory is the distinct values."""
    rng = make_rng(15)
    n = 400
    cols, label = random_columns(rng, n)
    cols["income"] = rng.integers(0, 37, n).astype(float)
    y = np.where(label == 1, 1, -1)
    w = np.exp(rng.normal(0, 3, n))                 # weights over many magnitudes
    whole = _in_memory(cols, label, PUBLIC).public
    assert whole is not None
    values, inverse = np.unique(cols["income"], return_inverse=True)
    expected_pos = np.bincount(inverse, weights=np.where(y > 0, w, 0.0))
    expected_neg = np.bincount(inverse, weights=np.where(y < 0, w, 0.0))
    expected = brc.fit_stump(whole, y, w)
    for size in (1, 13, 128, n):
        stats = brc.StumpStats.for_columns(whole)
        for i in range(0, n, size):
            part = _in_memory({c: v[i:i + size] for c, v in cols.items()}, label[i:i + size],
                              PUBLIC).public
            assert part is not None
            stats.add(part, y[i:i + size], w[i:i + size])
        income = stats.values["income"]
        assert np.array_equal(income.values, values) and values.size <= 37
        assert np.array_equal(income.pos, expected_pos)
        assert np.array_equal(income.neg, expected_neg)
        for name in ("member", "region"):
            pos, neg = stats.levels[name][:, 1], stats.levels[name][:, 0]
            assert pos.size == whole.inputs.n_levels[name]
            assert np.array_equal(pos, np.bincount(cols[name], weights=np.where(y > 0, w, 0.0),
                                                   minlength=pos.size))
            assert np.array_equal(neg, np.bincount(cols[name], weights=np.where(y < 0, w, 0.0),
                                                   minlength=pos.size))
        stump, err = stats.best()
        assert (stump.column, stump.threshold, stump.above, err) == (
            expected[0].column, expected[0].threshold, expected[0].above, expected[1])
        again = stats.cleared()
        assert np.array_equal(again.values["income"].values, values)
        assert not again.values["income"].pos.any() and float(again.total[0]) == 0.0


def test_the_stump_learner_matches_the_sorting_one_without_ties() -> None:
    """Every public value distinct: per-value sums are the records' weights, so the
    streamed learner and the sort-and-cumsum one agree exactly, error included."""
    rng = make_rng(16)
    for _ in range(20):
        n = int(rng.integers(3, 60))
        cols, label = random_columns(rng, n)
        public = _in_memory(cols, label, PUBLIC).public
        assert public is not None
        y = np.where(label == 1, 1, -1)
        w = rng.uniform(0.1, 3, n)
        got, ref = brc.fit_stump(public, y, w), _reference_stump(public, y, w)
        assert (got[0].column, got[0].threshold, got[0].above) == (
            ref[0].column, ref[0].threshold, ref[0].above)
        assert got[1] == pytest.approx(ref[1], rel=1e-12)


def test_the_layout_of_a_stream_is_the_schemas() -> None:
    """Classifiers are drawn before a pass reads anything: sizes from the schema alone."""
    stream = brc.TrainingStream(lambda: [], 10, SCHEMA, COLUMNS, PUBLIC, positive=1)
    layout = stream.layout
    assert isinstance(layout, Inputs) and layout.n == 0
    assert layout.numeric_names == ("age",) and layout.n_levels == {"color": 4}


def test_replaying_the_history_gives_the_kept_weights_model(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """A stream above KEEP_WEIGHTS records replays every round on every pass instead of
    keeping two floats a record: the same model bit for bit."""
    cols, label = random_columns(make_rng(12), 300)
    path = _write(tmp_path / "train.parquet", cols, label)
    config = brc.BRCConfig(rounds=9, counted=True)
    kept = brc.fit(_stream(path, PUBLIC, batch_rows=41), config, 1.0, make_rng(13))
    monkeypatch.setattr(brc, "KEEP_WEIGHTS", 0)
    replayed = brc.fit(_stream(path, PUBLIC, batch_rows=41), config, 1.0, make_rng(13))
    assert _model(*kept[:2]) == _model(*replayed[:2])
    assert {r.kind for r in kept[0]} == {"public", "private"}
