"""Feature-selection methods, configuration, schema handling and loading a selection.

The statistics are built by hand (a :class:`Stats` with contingency tables),
so every true score is known. With ε = 1e6 the noise is negligible and every
method must return the true answer:

- perturb: the discrete Laplace noise is exactly 0 (its geometric draws
  have success probability 1 − exp(−1e6/6) = 1 in float64); the Laplace
  noise for ig/chi2 has scale < 1e-5, far below the gaps between scores;
- threshold: noise scales < 1e-4 against score gaps ≥ 0.5 to τ;
- topk: Gumbel noise of scale 2Δk/ε < 1e-4 against score gaps ≥ 1;
- cluster: noise 0 (discrete Laplace as above).

So those assertions are deterministic. With a small ε only the shape of the
answer is checked (valid, distinct candidates; sizes within k / the cap),
which holds for every noise draw.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dpcli.algorithms import feature_selection as fs
from dpcli.budget import Budget
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Label,
    NumericColumn,
    Schema,
    TokensColumn,
)
from dpcli.errors import DataError, SpecError, UsageError
from dpcli.io import envelope
from dpcli.mechanisms import make_rng
from dpcli.stats import Stats

VOCAB = ("w0", "w1", "w2", "w3", "w4", "w5")
N0, N1 = 60, 40                      # class sizes: "neg", "pos" (positive)
N = N0 + N1
# per word: (a0, a1) = rows containing the word in class neg / pos
WORD_COUNTS = np.array([[30, 20],    # w0 tc 50, dc 10
                        [3, 2],      # w1 tc 5,  dc 1
                        [8, 22],     # w2 tc 30, dc 14
                        [2, 0],      # w3 tc 2,  dc 2
                        [40, 1],     # w4 tc 41, dc 39
                        [10, 2]])    # w5 tc 12, dc 8
B_COUNTS = np.array([25, 35])        # binary column b: rows with b = "yes" per class (tc 60)
C_TABLE = np.array([[20, 20, 10, 10],   # categorical c: (classes × levels incl. other)
                    [5, 30, 5, 0]])
HUGE = 1e6


def make_schema(max_per_row: int | None = 2, source: Path | None = None) -> Schema:
    return Schema(
        columns=(
            TokensColumn("t", VOCAB, Path("vocab.txt"), max_per_row=max_per_row),
            BinaryColumn("b", ("no", "yes")),
            CategoricalColumn("c", ("p", "q", "r")),
            NumericColumn("x", 0.0, 1.0),
        ),
        label=Label("y", ("neg", "pos"), positive="pos"),
        source=source or Path("spec.yaml"),
    )


def make_stats() -> Stats:
    return Stats(
        n=N,
        class_counts=np.array([N0, N1]),
        contingency={
            "t": WORD_COUNTS.T.copy(),                                   # (classes, words)
            "b": np.array([[N0 - B_COUNTS[0], B_COUNTS[0]], [N1 - B_COUNTS[1], B_COUNTS[1]]]),
            "c": C_TABLE.copy(),
        },
        histograms={"x": np.array([[30, 20, 10], [5, 5, 30]])},
    )


SCHEMA = make_schema()
COLUMNS = ("t", "b")                  # the binary candidates: 6 words + b
NAMES = [f"t:{w}" for w in VOCAB] + ["b"]
ALL_COUNTS = np.vstack([WORD_COUNTS, B_COUNTS[None, :]])


def true_scores(score: str) -> np.ndarray:
    return fs.binary_scores(score, ALL_COUNTS, N1, N)


def run(config: fs.FSConfig, epsilon: float = HUGE, seed: int = 0,
        columns: tuple[str, ...] = COLUMNS) -> fs.Selection:
    schema = fs.selection_schema(SCHEMA, columns, config.r)
    p = fs.plan(schema, columns, Budget(epsilon), config)
    assert p.step(fs.STEP).budget.eps == pytest.approx(epsilon)
    return fs.select(make_stats(), schema, columns, p, config, make_rng(seed))


def names(selection: fs.Selection) -> list[str]:
    return [c.name for c in selection.selected]


# ---------------------------------------------------------- scores from Stats
def test_candidates_counts_and_row_cap() -> None:
    cands = fs.candidates(SCHEMA, COLUMNS)
    assert [c.name for c in cands] == NAMES
    assert fs.row_cap(SCHEMA, COLUMNS) == 3                      # r = 2 plus one binary
    assert fs.row_cap(make_schema(max_per_row=50), COLUMNS) == 7  # capped at |vocabulary|
    np.testing.assert_array_equal(fs.binary_counts(make_stats(), SCHEMA, COLUMNS), ALL_COUNTS)


@pytest.mark.parametrize("score", fs.BINARY_SCORES)
def test_compute_scores_of_binary_candidates(score: str) -> None:
    got = fs.compute_scores(make_stats(), SCHEMA, COLUMNS, score)
    np.testing.assert_allclose(got, true_scores(score))
    if score == "tc":
        assert got.tolist() == [50, 5, 30, 2, 41, 12, 60]


def test_compute_scores_chi2_every_column_kind() -> None:
    stats = make_stats()
    got = fs.compute_scores(stats, SCHEMA, ("t", "b", "c", "x"), "chi2")
    assert got.shape == (len(VOCAB) + 3,)
    np.testing.assert_allclose(got[:7], true_scores("chi2"))     # words and b via 2 × 2
    assert got[6] == pytest.approx(fs.chi2_score(stats.contingency["b"], 1))
    assert got[7] == pytest.approx(fs.chi2_score(C_TABLE, 1))
    assert got[8] == pytest.approx(fs.chi2_score(stats.histograms["x"], 1))
    assert np.all(got >= 0)


def test_positive_class_is_required() -> None:
    schema = Schema(columns=SCHEMA.columns, label=Label("y", ("a", "b", "c")),
                    source=Path("s.yaml"))
    with pytest.raises(SpecError, match="positive"):
        fs.compute_scores(make_stats(), schema, COLUMNS, "tc")


# ------------------------------------------------------ huge ε: the true answer
@pytest.mark.parametrize("seed", range(3))
def test_threshold_returns_true_set_when_within_cap(seed: int) -> None:
    # tc above 35.5: w0 (50), w4 (41), b (60) — three, the cap is 3
    sel = run(fs.FSConfig(score="tc", method="threshold", threshold=35.5, k=3), seed=seed)
    assert names(sel) == ["t:w0", "t:w4", "b"]                   # candidate order
    # dc above 9.5: w0 (10), w2 (14), w4 (39), b (|35 − 25| = 10)
    sel = run(fs.FSConfig(score="dc", method="threshold", threshold=9.5, k=4), seed=seed)
    assert names(sel) == ["t:w0", "t:w2", "t:w4", "b"]
    # a cap larger than the set changes nothing; a threshold above all gives nothing
    sel = run(fs.FSConfig(score="tc", method="threshold", threshold=35.5, k=6), seed=seed)
    assert names(sel) == ["t:w0", "t:w4", "b"]
    sel = run(fs.FSConfig(score="tc", method="threshold", threshold=1000, k=2), seed=seed)
    assert sel.selected == []


def test_threshold_with_binding_cap_returns_a_subset_of_the_true_set() -> None:
    truth = {"t:w0", "t:w4", "b", "t:w2"}                        # tc above 25.5
    seen = set()
    for seed in range(40):
        sel = run(fs.FSConfig(score="tc", method="threshold", threshold=25.5, k=2), seed=seed)
        assert len(sel.selected) == 2 and set(names(sel)) <= truth
        seen |= set(names(sel))
    assert seen == truth      # the order of the queries is random: every one gets its turn


@pytest.mark.parametrize("score", fs.SCORES)
def test_topk_returns_true_top_k_in_order(score: str) -> None:
    scores = true_scores(score)
    sel = run(fs.FSConfig(score=score, method="topk", k=3))
    expected = [NAMES[i] for i in np.argsort(-scores, kind="stable")[:3]]
    if score == "tc":
        assert expected == ["b", "t:w0", "t:w4"]
    ordered = sorted(scores, reverse=True)
    if ordered[2] > ordered[3] and len(set(ordered[:3])) == 3:  # no ties: the order is unique
        assert names(sel) == expected
    else:
        assert sorted(scores[[NAMES.index(n) for n in names(sel)]], reverse=True) == ordered[:3]


@pytest.mark.parametrize("score", fs.SCORES)
def test_perturb_returns_true_set_above_threshold(score: str) -> None:
    scores = true_scores(score)
    tau = float(np.median(scores)) + 1e-3
    sel = run(fs.FSConfig(score=score, method="perturb", threshold=tau))
    assert set(names(sel)) == {NAMES[i] for i in np.flatnonzero(scores > tau)}
    got = [scores[NAMES.index(n)] for n in names(sel)]
    assert got == sorted(got, reverse=True)                      # best first
    # with k: the top k of those
    sel = run(fs.FSConfig(score=score, method="perturb", threshold=tau, k=2))
    assert len(sel.selected) == 2
    assert sorted([scores[NAMES.index(n)] for n in names(sel)], reverse=True) == \
        sorted(scores[scores > tau], reverse=True)[:2]


def test_perturb_topk_only() -> None:
    sel = run(fs.FSConfig(score="tc", method="perturb", k=4))
    assert names(sel) == ["b", "t:w0", "t:w4", "t:w2"]


# clearly separated count vectors (a0, a1) for the cluster method: n = 200, 100 per class
CLUSTER_VOCAB = tuple(f"v{i}" for i in range(10))
TC_POINTS = np.array([[50, 48], [47, 52], [51, 50], [49, 49],            # tc ≈ 100
                      [1, 2], [0, 1], [2, 0], [1, 1], [3, 2], [2, 2]])  # tc ≤ 5
DC_POINTS = np.array([[5, 80], [6, 78], [4, 82], [5, 79],                # dc ≈ 75
                      [1, 2], [0, 1], [2, 0], [1, 1], [3, 2], [2, 2]])  # dc ≤ 2


def run_cluster(points: np.ndarray, config: fs.FSConfig, seed: int) -> list[str]:
    schema = Schema(columns=(TokensColumn("t", CLUSTER_VOCAB, Path("v.txt"), max_per_row=3),),
                    label=Label("y", ("neg", "pos"), positive="pos"),
                    source=Path("spec.yaml"))
    stats = Stats(n=200, class_counts=np.array([100, 100]), contingency={"t": points.T.copy()})
    p = fs.plan(schema, ("t",), Budget(HUGE), config)
    sel = fs.select(stats, schema, ("t",), p, config, make_rng(seed))
    assert sel.row_cap == 3 and sel.sensitivity["l1"] == 6.0
    return [c.word for c in sel.selected if c.word is not None]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("centers", [2, 5])
def test_cluster_returns_high_group(seed: int, centers: int) -> None:
    high = ["v0", "v1", "v2", "v3"]
    tc = fs.FSConfig(score="tc", method="cluster", threshold=50, centers=centers)
    assert run_cluster(TC_POINTS, tc, seed) == high
    dc = fs.FSConfig(score="dc", method="cluster", threshold=40, centers=centers)
    assert run_cluster(DC_POINTS, dc, seed) == high
    # the same points under the other score: tc of DC_POINTS' high group is 85, dc of
    # TC_POINTS' high group ≤ 5
    assert run_cluster(DC_POINTS, tc, seed) == high
    assert run_cluster(TC_POINTS, dc, seed) == []
    # τ above every centre: nothing; below every centre: everything
    too_high = fs.FSConfig(score="tc", method="cluster", threshold=150, centers=centers)
    assert run_cluster(TC_POINTS, too_high, seed) == []
    too_low = fs.FSConfig(score="tc", method="cluster", threshold=-1, centers=centers)
    assert run_cluster(TC_POINTS, too_low, seed) == list(CLUSTER_VOCAB)


def test_selection_record() -> None:
    sel = run(fs.FSConfig(score="tc", method="threshold", threshold=35.5, k=3))
    assert sel.candidates == 7 and sel.row_cap == 3
    assert sel.sensitivity == {"per_feature": 1.0, "l1": 6.0}
    assert sel.parameters == {"threshold": 35.5, "k": 3}
    assert sel.columns == ["b"] and sel.words == {"t": ["w0", "w4"]}
    payload = sel.to_payload()
    assert payload["n_selected"] == 3
    assert payload["selected"] == [{"column": "t", "word": "w0"}, {"column": "t", "word": "w4"},
                                   {"column": "b"}]
    json.dumps(payload)                                           # serialisable


# ------------------------------------------------------------ small ε: valid shapes
@pytest.mark.parametrize("score", fs.SCORES)
def test_small_epsilon_results_are_valid(score: str) -> None:
    configs = [fs.FSConfig(score=score, method="topk", k=3),
               fs.FSConfig(score=score, method="threshold", threshold=20, k=2),
               fs.FSConfig(score=score, method="perturb", threshold=20),
               fs.FSConfig(score=score, method="perturb", k=2),
               fs.FSConfig(score=score, method="perturb", threshold=1, k=3)]
    if score in fs.CLUSTER_SCORES:
        configs.append(fs.FSConfig(score=score, method="cluster", threshold=20))
    for config in configs:
        for seed in range(10):
            sel = run(config, epsilon=0.3, seed=seed)
            chosen = names(sel)
            assert len(set(chosen)) == len(chosen)
            assert set(chosen) <= set(NAMES)
            if config.method == "topk":
                assert len(chosen) == 3
            elif config.k is not None:
                assert len(chosen) <= config.k
            if config.method in ("threshold", "cluster"):
                assert chosen == [n for n in NAMES if n in chosen]


def test_topk_k_larger_than_candidates_takes_all() -> None:
    sel = run(fs.FSConfig(score="tc", method="topk", k=50), epsilon=0.5)
    assert sorted(names(sel)) == sorted(NAMES)


# ------------------------------------------------------------------ configuration
@pytest.mark.parametrize(("kwargs", "message"), [
    ({"method": "topk"}, "needs --k"),
    ({"method": "threshold", "threshold": 3.0}, "--threshold and --k"),
    ({"method": "threshold", "k": 3}, "--threshold and --k"),
    ({"method": "perturb"}, "--threshold, --k or both"),
    ({"method": "cluster"}, "needs --threshold"),
    ({"method": "cluster", "score": "pi", "threshold": 1.0}, "cluster works with the scores"),
    ({"method": "cluster", "score": "ig", "threshold": 1.0}, "no ig"),
    ({"score": "gini", "k": 1}, "score must be one of"),
    ({"method": "greedy", "k": 1}, "method must be one of"),
    ({"method": "topk", "k": 0}, "k must be a positive integer"),
    ({"method": "topk", "k": True}, "k must be a positive integer"),
    ({"method": "topk", "k": 2, "r": -1}, "r must be a positive integer"),
    ({"method": "topk", "k": 2, "bins": 1.5}, "bins must be a positive integer"),
    ({"method": "perturb", "threshold": float("nan")}, "threshold must be a finite number"),
])
def test_config_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        fs.FSConfig(**kwargs)


def test_config_parameters() -> None:
    assert fs.FSConfig(method="topk", k=3, threshold=2.0).parameters() == {"k": 3}
    assert fs.FSConfig(method="cluster", threshold=2.0, k=9).parameters() == {
        "threshold": 2.0, "centers": 5, "rounds": 20}
    assert fs.FSConfig(score="chi2", method="perturb", k=2, r=4, bins=7).parameters() == {
        "k": 2, "r": 4, "bins": 7}


# ---------------------------------------------------------------- columns, schema
def test_scored_columns() -> None:
    assert fs.scored_columns(SCHEMA, (), "tc") == ("t", "b")
    assert fs.scored_columns(SCHEMA, (), "chi2") == ("t", "b", "c", "x")
    assert fs.scored_columns(SCHEMA, ("c",), "chi2") == ("c",)
    assert fs.scored_columns(SCHEMA, ("x", "b"), "chi2") == ("x", "b")
    with pytest.raises(UsageError, match="column 'c' is categorical"):
        fs.scored_columns(SCHEMA, ("t", "c"), "tc")
    with pytest.raises(UsageError, match="column 'x' is numeric"):
        fs.scored_columns(SCHEMA, ("x",), "ig")
    only_categorical = Schema(columns=(CategoricalColumn("c", ("p",)),),
                              label=SCHEMA.label, source=Path("s.yaml"))
    with pytest.raises(UsageError, match="declares none"):
        fs.scored_columns(only_categorical, (), "dc")


def test_selection_schema_caps_tokens_with_r() -> None:
    capped = fs.selection_schema(make_schema(max_per_row=None), ("t", "b"), 3)
    col = capped.column("t")
    assert isinstance(col, TokensColumn) and col.max_per_row == 3
    assert fs.row_cap(capped, ("t", "b")) == 4
    # r overrides a declared cap; without r the declared cap stays
    assert fs.selection_schema(SCHEMA, ("t",), 5).column("t").max_per_row == 5
    assert fs.selection_schema(SCHEMA, ("t",), None).column("t").max_per_row == 2
    # other columns are untouched
    assert capped.column("b") == SCHEMA.column("b")


def test_selection_schema_refuses_uncapped_tokens() -> None:
    schema = make_schema(max_per_row=None, source=Path("my-spec.yaml"))
    with pytest.raises(SpecError, match=r"my-spec.yaml: columns.t.max_per_row"):
        fs.selection_schema(schema, ("t", "b"), None)
    # not scored: no cap needed
    assert fs.selection_schema(schema, ("b",), None) is schema


def test_plan_notes_and_mechanism() -> None:
    p = fs.plan(SCHEMA, COLUMNS, Budget(2),
                fs.FSConfig(score="tc", method="threshold", threshold=3.0, k=2))
    step = p.step(fs.STEP)
    assert step.mechanism == "sparse_vector" and step.budget.eps == 2.0
    assert "cap c=2" in step.note
    p = fs.plan(SCHEMA, COLUMNS, Budget(1), fs.FSConfig(score="dc", method="perturb", k=2))
    assert p.step(fs.STEP).mechanism == "discrete_laplace"
    assert "Δ1=6" in p.step(fs.STEP).note


# --------------------------------------------------------------- load_selection
def write_selection(path: Path, selected: list[dict]) -> Path:
    payload = {"score": "tc", "method": "topk", "parameters": {"k": len(selected)},
               "candidates": 7, "row_cap": 3, "sensitivity": {}, "n_selected": len(selected),
               "selected": selected}
    doc = envelope("feature_selection", payload, dataset="demo", spec_digest="0" * 64,
                   epsilon=1.0, delta=0.0, run_id="run-1", seeded=True)
    path.write_text(json.dumps(doc))
    return path


def test_load_selection_round_trip(tmp_path: Path) -> None:
    sel = fs.Selection(
        selected=[fs.Candidate("t", "w4"), fs.Candidate("c"), fs.Candidate("t", "w1"),
                  fs.Candidate("b")],
        score="tc", method="topk", parameters={"k": 4}, candidates=10, row_cap=3)
    doc = envelope("feature_selection", sel.to_payload(), dataset="demo",
                   spec_digest="0" * 64, epsilon=1.0, delta=0.0, run_id="r", seeded=True)
    path = tmp_path / "selection.json"
    path.write_text(json.dumps(doc))
    schema, columns = fs.load_selection(path, SCHEMA)
    t = schema.column("t")
    assert isinstance(t, TokensColumn)
    assert t.vocabulary == ("w1", "w4")               # vocabulary order, not selection order
    assert t.max_per_row == 2
    assert columns == ("t", "b", "c")                 # schema order
    assert schema.column("b") == SCHEMA.column("b")
    assert schema.column("x") == SCHEMA.column("x")   # still declared, just not selected
    assert SCHEMA.column("t").vocabulary == VOCAB     # the input schema is not modified


def test_load_selection_whole_columns_only(tmp_path: Path) -> None:
    path = write_selection(tmp_path / "s.json", [{"column": "x"}, {"column": "b"}])
    schema, columns = fs.load_selection(path, SCHEMA)
    assert columns == ("b", "x")
    assert schema.column("t").vocabulary == VOCAB


@pytest.mark.parametrize(("selected", "message"), [
    ([{"column": "t", "word": "zzz"}], "word 'zzz' is not in the declared vocabulary"),
    ([{"column": "nope"}], "column 'nope' is not a declared feature column"),
    ([{"column": "y"}], "column 'y' is not a declared feature column"),   # the label
    ([{"column": "t"}], "a word is needed"),
    ([{"column": "b", "word": "w0"}], "it has no words"),
    ([], "selects no features"),
    ([{"word": "w0"}], "must be a list of"),
    (["t"], "must be a list of"),
])
def test_load_selection_rejects_what_is_not_declared(tmp_path: Path, selected: list,
                                                     message: str) -> None:
    path = write_selection(tmp_path / "bad-selection.json", selected)
    with pytest.raises(DataError, match=message) as info:
        fs.load_selection(path, SCHEMA)
    assert str(path) in str(info.value)


def test_load_selection_wrong_kind(tmp_path: Path) -> None:
    doc = envelope("naive_bayes", {}, dataset="demo", spec_digest="0" * 64, epsilon=1.0,
                   delta=0.0, run_id="r", seeded=False)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(DataError, match="expected a 'feature_selection'"):
        fs.load_selection(path, SCHEMA)
