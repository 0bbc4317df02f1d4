"""The degeneracy check: exact over the declared domain, and what it says."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest

from dpcli.algorithms import naive_bayes as nb
from dpcli.algorithms.degenerate import EITHER, _batch, _log_odds, check, one_class_words
from dpcli.algorithms.inputs import model_schema
from dpcli.algorithms.validate import LogRegModel
from dpcli.data.encode import TokenSets
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Label,
    NumericColumn,
    Schema,
    TokensColumn,
)

LABEL = Label("y", ("0", "1"), positive="1")
VOCAB = ("a", "b", "c", "d")
SCHEMA = Schema((NumericColumn("x", 0.0, 10.0), CategoricalColumn("c", ("r", "g")),
                 BinaryColumn("b", ("no", "yes")),
                 TokensColumn("t", VOCAB, Path("v.txt"), max_per_row=2)), LABEL)
COLUMNS = ("x", "c", "b", "t")


def _nb(rng: np.random.Generator, prior: tuple[float, float] = (50.0, 50.0)):
    return nb.NaiveBayesModel(
        schema=SCHEMA, columns=COLUMNS, config=nb.NBConfig(distribution="gaussian"),
        class_counts=np.array(prior),
        tables={"c": rng.integers(1, 30, (2, 3)).astype(float),
                "b": rng.integers(1, 30, (2, 2)).astype(float),
                "t": rng.integers(0, 50, (2, len(VOCAB))).astype(float)},
        numeric={"x": nb.NumericParams(0.0, 10.0, rng.uniform(2, 8, 2), rng.uniform(1, 9, 2))})


def _every_input() -> list[dict]:
    """Every input of a coarse version of the domain: x on a grid, every level, every word set
    of at most 2 words."""
    sets = [s for r in range(3) for s in itertools.combinations(range(len(VOCAB)), r)]
    return [{"x": x, "c": c, "b": b, "t": t}
            for x in np.linspace(0, 10, 2049) for c in range(3) for b in range(2) for t in sets]


def _brute(model) -> tuple[float, float]:
    rows = _every_input()
    offsets = np.cumsum([0, *(len(r["t"]) for r in rows)]).astype(np.int64)
    indices = np.array([i for r in rows for i in r["t"]], dtype=np.int32)
    batch = _batch({"x": np.array([r["x"] for r in rows]),
                    "c": np.array([r["c"] for r in rows], dtype=np.int32),
                    "b": np.array([r["b"] for r in rows], dtype=np.int8),
                    "t": TokenSets(offsets, indices)}, len(rows))
    values = _log_odds(model, batch)
    return float(values.min()), float(values.max())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_naive_bayes_range_is_that_of_every_input(seed: int) -> None:
    """The column-by-column range equals a brute force over every input of the domain (x on
    the same grid, so the two must agree to rounding)."""
    model = _nb(np.random.default_rng(seed))
    verdict = check(model)
    assert verdict is not None
    assert verdict.log_odds == pytest.approx(_brute(model), abs=1e-9)


def test_a_prior_that_swamps_every_feature_never_predicts_the_rare_class() -> None:
    # unclamped every-word-absent terms (a model file from before the clamp): with an empty
    # class they swamp every other feature, which is the shape this check must name
    model = dataclasses.replace(_nb(np.random.default_rng(4), prior=(1e9, 0.0)),
                                clamp_absent=False)
    verdict = check(model)
    assert verdict.never == ("1",) and verdict.degenerate and not verdict.constant
    assert "no input in the declared domain is predicted class '1'" in verdict.problem()
    assert verdict.to_json()["never_predicted"] == ["1"]


def test_a_model_without_information_gives_one_score() -> None:
    schema = model_schema(SCHEMA, ("x", "c", "b"))
    weights = np.zeros(1 + 1 + 3 + 2)
    verdict = check(LogRegModel(schema, ("x", "c", "b"), weights, {}))
    assert verdict.constant and verdict.never == ("1",)  # σ(0) = 1/2: a tie goes to class 0
    assert "same score to every input" in verdict.problem()


def test_a_useful_logistic_regression_is_not_flagged() -> None:
    schema = model_schema(SCHEMA, ("x", "c", "b"))
    weights = np.array([0.0, 2.0, 0.5, -0.5, 0.0, 0.3, -0.3])
    verdict = check(LogRegModel(schema, ("x", "c", "b"), weights, {}))
    assert not verdict.degenerate and verdict.problem() is None
    lo, hi = verdict.log_odds
    assert lo < 0 < hi


def test_more_than_two_classes_are_not_judged() -> None:
    three = Schema(SCHEMA.columns, Label("y", ("a", "b", "c"), positive=None))
    model = _nb(np.random.default_rng(5))
    model.schema = three
    assert check(model) is None


# ------------------------------------------------------------------ grid signal test
def _noisy(counts: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
    """Counts with the discrete Laplace noise publish-grid adds, clamped at 0."""
    t = np.exp(-1.0 / scale)
    noise = rng.geometric(1 - t, counts.shape) - rng.geometric(1 - t, counts.shape)
    return np.maximum(counts + noise, 0)


def test_the_signal_test_rarely_reports_a_signal_that_is_not_there() -> None:
    """Label independent of the cell: the test may call it a signal (p ≤ 0.05) at most about
    5 % of the time. 300 null grids; the bound is the binomial(300, 0.05) quantile at
    1 − 1e-4, so a correct test fails here with probability below 1e-4."""
    from scipy import stats

    from dpcli.algorithms.degenerate import SIGNAL_LEVEL, signal_p_value

    rng = np.random.default_rng(2024)
    found = 0
    for _ in range(300):
        sizes = rng.integers(0, 120, 24)
        positive = rng.binomial(sizes, 0.3)
        counts = _noisy(np.column_stack([sizes - positive, positive]), 4.0, rng)
        found += signal_p_value(counts, 4.0) <= SIGNAL_LEVEL
    assert found <= stats.binom.ppf(1 - 1e-4, 300, SIGNAL_LEVEL)


def test_the_signal_test_finds_a_clear_signal() -> None:
    from dpcli.algorithms.degenerate import SIGNAL_DRAWS, signal_p_value

    rng = np.random.default_rng(7)
    sizes = np.full(12, 200)
    rate = np.where(np.arange(12) % 2 == 0, 0.1, 0.5)
    positive = rng.binomial(sizes, rate)
    counts = _noisy(np.column_stack([sizes - positive, positive]), 4.0, rng)
    assert signal_p_value(counts, 4.0) == 1 / (SIGNAL_DRAWS + 1)


def _grid(cells: int, signal: bool, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 60, cells)
    rate = rng.beta(1, 3, cells) if signal else np.full(cells, 0.25)
    positive = rng.binomial(sizes, rate)
    return _noisy(np.column_stack([sizes - positive, positive]), 4.0, rng)


def test_the_signal_test_stops_early_with_the_full_run_s_answer(monkeypatch) -> None:
    """A clear signal on a large grid stops after the pilot replicates with their own Monte
    Carlo p-value 1/(pilot + 1), valid without a normal approximation and below SIGNAL_LEVEL
    as the full run's 1/(draws + 1); a grid with no signal stops at the SIGNAL_STOP-th
    replicate reaching the observed statistic (Besag and Clifford's p-value), above
    SIGNAL_LEVEL as the full run."""
    from dpcli.algorithms import degenerate as dg

    assert 1 / (dg.SIGNAL_PILOT + 1) < dg.SIGNAL_LEVEL
    strong, null = _grid(3000, True, 1), _grid(3000, False, 2)
    early = dg.signal_p_value(strong, 4.0), dg.signal_p_value(null, 4.0)
    assert early[0] == 1 / (dg.SIGNAL_PILOT + 1)
    assert early[1] > dg.SIGNAL_LEVEL
    assert early[1] == dg.SIGNAL_STOP / round(dg.SIGNAL_STOP / early[1])   # SIGNAL_STOP / l
    monkeypatch.setattr(dg, "SIGNAL_STOP", 10**9)        # the full runs
    monkeypatch.setattr(dg, "SIGNAL_MARGIN", np.inf)
    full = dg.signal_p_value(strong, 4.0), dg.signal_p_value(null, 4.0)
    assert full[0] == 1 / (dg.SIGNAL_DRAWS + 1)   # the same decision: signal
    assert full[1] > dg.SIGNAL_LEVEL


def test_the_signal_test_is_a_function_of_the_released_counts() -> None:
    from dpcli.algorithms.degenerate import signal_p_value

    counts = np.array([[30, 4], [10, 9], [0, 2], [50, 1]])
    assert signal_p_value(counts, 3.0) == signal_p_value(counts.copy(), 3.0)
    assert signal_p_value(np.array([[10, 5]]), 3.0) == 1.0    # one cell: nothing to compare
    assert signal_p_value(np.array([[10, 0], [7, 0]]), 3.0) == 1.0   # one class only


def test_a_released_threshold_moves_the_verdict() -> None:
    """A model with a decision threshold predicts class 1 above it, not above 0: a threshold
    above the whole log-odds range makes it a one-class model, and the verdict says so."""
    model = _nb(np.random.default_rng(5))
    lo, hi = check(model).log_odds
    model.threshold = hi + 1.0
    verdict = check(model)
    assert verdict.never == ("1",) and verdict.degenerate
    model.threshold = lo - 1.0
    assert check(model).never == ("0",)
    model.threshold = (lo + hi) / 2
    assert not check(model).degenerate


def test_one_class_on_rows_reads_the_count_with_its_noise_interval() -> None:
    """(almost) none or (almost) all of the rows, widened by the 95 % half-width; the rule is
    shared with validate's check (halfwidth 0 there)."""
    from dpcli.algorithms.degenerate import one_class_on_rows

    assert one_class_on_rows(1, 1000) == "negative"            # ≤ 0.1 % of the rows
    assert one_class_on_rows(2, 1000) is None
    assert one_class_on_rows(999, 1000) == "positive"
    assert one_class_on_rows(100, 1000, halfwidth=99) == "negative"   # within noise of 0
    assert one_class_on_rows(100, 1000, halfwidth=98) is None
    assert one_class_on_rows(950, 1000, halfwidth=50) == "positive"   # within noise of n
    # the noise spans both ends: one class may take every row, the count cannot tell which
    # (a tester's model was called "negative" while it predicted 300 of 300 rows positive)
    assert one_class_on_rows(400, 1000, halfwidth=700) == EITHER
    assert one_class_on_rows(600, 1000, halfwidth=700) == EITHER
    assert "cannot tell which" in one_class_words(EITHER)
    assert one_class_words("positive") == "predict (almost) every row positive"
    assert one_class_on_rows(-5, 1000) == "negative"           # noise can go below 0
    assert one_class_on_rows(3, 0) is None                     # no rows: nothing to judge


def test_the_released_check_on_the_rows_makes_a_domain_useful_model_degenerate() -> None:
    """A model both of whose classes are reachable over the domain is still reported when the
    released count of training rows predicted positive is within noise of 0; stderr line and
    JSON both say so."""
    from dpcli.algorithms.degenerate import RowsCheck

    model = _nb(np.random.default_rng(5))
    lo, hi = check(model).log_odds
    model.threshold = (lo + hi) / 2
    model.rows_check = RowsCheck(predicted_positive=12, rows=1000, halfwidth=20.0, epsilon=0.1)
    verdict = check(model)
    assert not verdict.never and not verdict.constant
    assert verdict.degenerate and verdict.one_class_on_rows == "negative"
    assert "(almost) no row positive" in verdict.problem()
    out = verdict.to_json()
    assert out["degenerate"] and out["one_class_on_rows"] == "negative"
    assert out["on_training_rows"]["predicted_positive"] == 12
    model.rows_check = RowsCheck(predicted_positive=300, rows=1000, halfwidth=20.0, epsilon=0.1)
    verdict = check(model)
    assert not verdict.degenerate and verdict.problem() is None
    assert verdict.to_json()["on_training_rows"]["share_predicted_positive"] == 0.3


def test_a_cut_where_the_probability_saturates_is_reported() -> None:
    """A released cut beyond log-odds ±ln 10⁴ decides where the model's probability is below
    1e-4: its score column is near-constant there (post-processing of the cut)."""
    model = _nb(np.random.default_rng(5))
    model.threshold = -12.0
    verdict = check(model)
    assert verdict.saturated and verdict.degenerate
    assert "probabilities are uncalibrated" in verdict.problem()
    assert verdict.to_json()["uncalibrated_score"] is True
    model.threshold = -9.0
    assert not check(model).saturated


@pytest.mark.parametrize(("positive", "distribution"),
                         [("1", "truncated"), ("0", "gaussian"), ("0", "truncated")])
def test_the_naive_bayes_range_from_the_scorer_is_the_model_s_own_bit_for_bit(
        monkeypatch, positive: str, distribution: str) -> None:
    # check() scores a naive Bayes model with nb_threshold's Scorer (tables built once): the
    # range is the one joint_log_likelihood's per-batch log-odds give, float for float
    from dpcli.algorithms import degenerate
    from tests.algorithms.test_nb_threshold import _mixed_model

    model = _mixed_model(positive, distribution)
    fast = check(model)
    monkeypatch.setattr(degenerate, "_log_odds_of",
                        lambda m: lambda batch: _log_odds(m, batch))
    slow = check(model)
    assert fast is not None and slow is not None
    assert fast.log_odds == slow.log_odds and fast == slow


def test_a_far_statistic_on_a_huge_grid_stops_after_the_pilot(monkeypatch) -> None:
    """On a grid so large that a chunk holds fewer than SIGNAL_PILOT replicates, the chunks
    end exactly at the pilot: the test stops after 20 replicates, not 36 (publish-grid at
    5·10⁶ rows spent 1.1 s there), with the Monte Carlo p-value 1/21."""
    from dpcli.algorithms import degenerate as dg

    cells = 150_000
    rng = np.random.default_rng(3)
    pos = rng.integers(0, 2, cells) * 5
    counts = np.stack([5 - pos, pos], axis=1).astype(float)   # the label is the cell
    drawn: list[int] = []
    real = np.random.default_rng

    class Counting:
        def __init__(self, seed: int) -> None:
            self.g = real(seed)

        def binomial(self, n, p):
            drawn.append(np.shape(n)[0])
            return self.g.binomial(n, p)

        def geometric(self, p, size):
            return self.g.geometric(p, size)

    monkeypatch.setattr(np.random, "default_rng", Counting)
    assert dg.signal_p_value(counts, 1.0) == pytest.approx(1 / (dg.SIGNAL_PILOT + 1))
    assert sum(drawn) == dg.SIGNAL_PILOT
