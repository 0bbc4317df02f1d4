"""Privacy rule 4: the claimed L1 sensitivities hold on replace-one neighbours.

Neighbours: two datasets of the same size n that differ in one record, the
record at position i replaced by ANY record of the domain — its class may
change, its numeric value may lie at or beyond the declared bounds (the data
layer clamps), its categorical/binary value may be undeclared or missing
(imputed), its tokens may be out of vocabulary or more than the cap. Both
datasets are encoded with the same seed (the token cap's random choice of a
record depends only on the seed, the record's position and its own tokens).

What is asserted, for every neighbour pair (L1 = sum of absolute changes
over all classes and levels; l = -3, u = 5 the numeric bounds, M = max(|l|,
|u|) = 5; token cap r = 2 on column t, none on column w; vocabulary size 6):

- class counts:                          L1 ≤ 2
- contingency table (categorical c):     L1 ≤ 2
- contingency table (binary b):          L1 ≤ 2
- token contingency (t, cap r):          L1 ≤ 2r = 4
- token contingency (w, no cap):         L1 ≤ 2·|vocabulary| = 12
- histogram of x (per class, 4 bins):    L1 ≤ 2
- per-class counts of x (moments):       L1 ≤ 2
- per-class sums of x:                   L1 ≤ 2·M = 10 (record changes class:
                                         |x| + |x'|), and ≤ u − l = 8 when the
                                         replacement keeps the class
- per-class sums of squares of x:        L1 ≤ 2·M² = 50

Each bound is also shown to be attained (tight) by the brute-force
neighbours, so the test cannot pass vacuously. The bounds asserted are the
``l1_sensitivity`` values the accumulators declare.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dpcli.data.encode import BatchEncoder
from dpcli.data.report import DataReport
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Label,
    NumericColumn,
    Schema,
    TokensColumn,
)
from dpcli.stats import (
    ClassCountAccumulator,
    ContingencyAccumulator,
    HistogramAccumulator,
    MomentsAccumulator,
    Stats,
    StatsAccumulator,
    StatsRequest,
)

VOCAB = ("a", "b", "c", "d", "e", "f")
R = 2
SCHEMA = Schema(
    columns=(
        NumericColumn("x", -3.0, 5.0, missing="impute", fill=1.0),
        CategoricalColumn("c", ("p", "q", "r"), missing="impute"),
        BinaryColumn("b", ("n", "y"), missing="impute"),
        TokensColumn("t", VOCAB, Path("vocab.txt"), max_per_row=R, missing="impute"),
        TokensColumn("w", VOCAB, Path("vocab.txt"), missing="impute"),
    ),
    label=Label("y", ("0", "1", "2")),
)
REQUEST = StatsRequest(contingency=("c", "b", "t", "w"), histograms=(("x", 4),),
                       moments=("x",))
X_COL = SCHEMA.column("x")
assert isinstance(X_COL, NumericColumn)
M = max(abs(X_COL.lower), abs(X_COL.upper))
TOL = 1e-9

Row = tuple[str, float | None, str | None, str | None, list[str] | None]

CLAIMS: dict[str, float] = {
    "class_counts": ClassCountAccumulator.l1_sensitivity,
    "c": ContingencyAccumulator(SCHEMA.column("c"), 3).l1_sensitivity,
    "b": ContingencyAccumulator(SCHEMA.column("b"), 3).l1_sensitivity,
    "t": ContingencyAccumulator(SCHEMA.column("t"), 3).l1_sensitivity,
    "w": ContingencyAccumulator(SCHEMA.column("w"), 3).l1_sensitivity,
    "hist": HistogramAccumulator(X_COL, 4, 3).l1_sensitivity,
    **{f"x_{k}": v for k, v in MomentsAccumulator(X_COL, 3).l1_sensitivity.items()},
}


def test_claims_are_the_documented_values() -> None:
    claims = dict(CLAIMS)
    assert claims == {"class_counts": 2, "c": 2, "b": 2, "t": 2 * R, "w": 2 * len(VOCAB),
                      "hist": 2, "x_count": 2, "x_sum": 2 * M, "x_sum_squares": 2 * M * M,
                      "x_sum_same_class": X_COL.upper - X_COL.lower}


def compute(rows: list[Row]) -> Stats:
    y, x, c, b, t = (list(col) for col in zip(*rows, strict=True))
    batch = pa.record_batch({
        "y": pa.array(y, pa.string()), "x": pa.array(x, pa.float64()),
        "c": pa.array(c, pa.string()), "b": pa.array(b, pa.string()),
        "t": pa.array(t, pa.list_(pa.string())), "w": pa.array(t, pa.list_(pa.string())),
    })
    encoder = BatchEncoder(SCHEMA, REQUEST.columns(), report=DataReport(),
                           rng=np.random.default_rng(2024))
    acc = StatsAccumulator(SCHEMA, REQUEST)
    acc.update(encoder.encode(batch))
    return acc.result()


def changes(a: Stats, b: Stats) -> dict[str, float]:
    """Observed L1 change of every statistic between two neighbouring datasets."""
    def l1(u: np.ndarray, v: np.ndarray) -> float:
        return float(np.abs(u.astype(np.float64) - v.astype(np.float64)).sum())

    ma, mb = a.moments["x"], b.moments["x"]
    out = {"class_counts": l1(a.class_counts, b.class_counts),
           "hist": l1(a.histograms["x"], b.histograms["x"]),
           "x_count": l1(ma.count, mb.count), "x_sum": l1(ma.sum, mb.sum),
           "x_sum_squares": l1(ma.sum_squares, mb.sum_squares)}
    for name in ("c", "b", "t", "w"):
        out[name] = l1(a.contingency[name], b.contingency[name])
    return out


def check_pair(d: list[Row], i: int, replacement: Row, worst: dict[str, float],
               stats_d: Stats | None = None) -> None:
    d2 = [*d[:i], replacement, *d[i + 1:]]
    observed = changes(compute(d) if stats_d is None else stats_d, compute(d2))
    if d[i][0] == replacement[0]:
        observed["x_sum_same_class"] = observed["x_sum"]
    for name, value in observed.items():
        assert value <= CLAIMS[name] + TOL, (name, value, CLAIMS[name], d, i, replacement)
        worst[name] = max(worst.get(name, 0.0), value)


# --------------------------------------------------------------- domains

X_VALUES: list[float | None] = [-10.0, -3.0, -1.0, 0.0, 2.5, 5.0, 7.0, None]
C_VALUES: list[str | None] = ["p", "q", "r", "zz", None]
B_VALUES: list[str | None] = ["n", "y", "maybe", None]
TOKEN_LISTS: list[list[str] | None] = [
    [], ["a"], ["a", "a", "b"], ["c", "d", "e"], ["oov", "b"],
    ["a", "b", "c", "d", "e", "f", "zz"], ["f", "e", "d", "c"], None,
]


def random_row(rng: np.random.Generator) -> Row:
    x = X_VALUES[rng.integers(len(X_VALUES))] if rng.random() < 0.6 else float(
        rng.uniform(-12, 12))
    tokens: list[str] | None
    if rng.random() < 0.5:
        tokens = TOKEN_LISTS[rng.integers(len(TOKEN_LISTS))]
    else:
        pool = [*VOCAB, "oov1", "oov2"]
        tokens = [pool[j] for j in rng.integers(0, len(pool), rng.integers(0, 10))]
    return (str(rng.integers(3)), x, C_VALUES[rng.integers(len(C_VALUES))],
            B_VALUES[rng.integers(len(B_VALUES))], tokens)


# ----------------------------------------------------------------- tests


def test_random_neighbours_never_exceed_claims() -> None:
    """600 random neighbour pairs of random datasets of 1–8 records (seed fixed)."""
    rng = np.random.default_rng(12345)
    worst: dict[str, float] = {}
    for _ in range(600):
        n = int(rng.integers(1, 9))
        d = [random_row(rng) for _ in range(n)]
        check_pair(d, int(rng.integers(n)), random_row(rng), worst)
    assert set(worst) == set(CLAIMS)


def test_brute_force_neighbours_never_exceed_claims_and_are_tight() -> None:
    """Every replacement from a grid of domain records, at every position of a
    small dataset whose records sit at the extremes (bounds, full vocabulary)."""
    base: list[Row] = [
        ("0", 7.0, "p", "y", ["a", "b", "c", "d", "e", "f"]),   # above u, full vocabulary
        ("1", -10.0, "zz", None, ["a"]),                        # below l, undeclared, missing
        ("2", None, None, "maybe", None),                       # everything missing/undeclared
    ]
    grid = itertools.product(
        ("0", "1", "2"), (-10.0, -3.0, 1.0, 5.0, 9.0, None), ("p", "zz", None),
        ("y", "maybe"),
        (["a", "b", "c", "d", "e", "f"], ["b", "oov"], [], None),
    )
    worst: dict[str, float] = {}
    stats_base = compute(base)
    for replacement in grid:
        for i in range(len(base)):
            check_pair(base, i, replacement, worst, stats_base)  # type: ignore[arg-type]
    for name, claim in CLAIMS.items():
        assert worst[name] == pytest.approx(claim), name


def test_cap_keeps_other_records_unchanged() -> None:
    """The coupling behind the 2r bound: replacing record i leaves every other
    record's kept tokens unchanged (same seed)."""
    rng = np.random.default_rng(7)
    for _ in range(50):
        n = 6
        d = [random_row(rng) for _ in range(n)]
        i = int(rng.integers(n))
        d2 = [*d[:i], random_row(rng), *d[i + 1:]]
        encoded = []
        for rows in (d, d2):
            _, _, _, _, t = zip(*rows, strict=True)
            enc = BatchEncoder(SCHEMA, ["t"], report=DataReport(),
                               rng=np.random.default_rng(99))
            batch = pa.record_batch({"y": [r[0] for r in rows],
                                     "t": pa.array(list(t), pa.list_(pa.string()))})
            encoded.append(enc.encode(batch).columns["t"])
        for j in range(n):
            if j != i:
                np.testing.assert_array_equal(encoded[0].row(j), encoded[1].row(j))
