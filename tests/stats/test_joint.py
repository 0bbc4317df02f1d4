"""The sparse joint histogram of a statistics pass: exact, mergeable, sensitivity 2."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpcli.checks import Where
from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import CategoricalColumn, NumericColumn
from dpcli.data.taxonomy import hierarchy
from dpcli.stats import JointAccumulator

WHERE = Where(Path("spec.yaml"), "columns.x.taxonomy")
COLOR = CategoricalColumn("color", ("red", "green", "blue"),
                          taxonomy={"Any": {"warm": ["red"], "cool": ["green", "blue"]}})
AGE = NumericColumn("age", 0.0, 100.0, taxonomy={"bins": [2, 4]})
MAPS = (hierarchy(COLOR, WHERE), hierarchy(AGE, WHERE))


def batch(rng: np.random.Generator, n: int) -> EncodedBatch:
    return EncodedBatch(n=n, label=rng.integers(0, 2, n).astype(np.int32),
                        columns={"color": rng.integers(0, 4, n).astype(np.int32),  # 3 = other
                                 "age": rng.uniform(0, 100, n)})


def dense(acc: JointAccumulator) -> np.ndarray:
    """The joint table as a dense (color leaf + none, age leaf + none, class) array."""
    table = acc.result()
    out = np.zeros((4, 5, 2), dtype=np.int64)
    for leaves, counts in zip(table.leaves, table.counts, strict=True):
        out[leaves[0], leaves[1]] += counts
    return out


def brute(batches: list[EncodedBatch]) -> np.ndarray:
    out = np.zeros((4, 5, 2), dtype=np.int64)
    for b in batches:
        color = MAPS[0].leaves(b.columns["color"])
        color = np.where(color < 0, 3, color)
        age = MAPS[1].leaves(b.columns["age"])
        np.add.at(out, (color, age, b.label), 1)
    return out


def test_joint_table_counts_every_row_once_with_no_leaf_as_an_extra_index() -> None:
    rng = np.random.default_rng(0)
    batches = [batch(rng, 300), batch(rng, 17)]
    acc = JointAccumulator(MAPS, 2)
    for b in batches:
        acc.update(b)
    got = dense(acc)
    np.testing.assert_array_equal(got, brute(batches))
    assert got.sum() == 317 and got[3].sum() > 0       # 'other' colour: leaf index 3
    table = acc.result()
    assert len(np.unique(table.leaves, axis=0)) == len(table.leaves)   # tuples are distinct


def test_merge_and_the_unpacked_key_path_agree() -> None:
    rng = np.random.default_rng(1)
    batches = [batch(rng, 200) for _ in range(4)]
    one = JointAccumulator(MAPS, 2)
    for b in batches:
        one.update(b)
    left, right = JointAccumulator(MAPS, 2), JointAccumulator(MAPS, 2)
    for b in batches[:2]:
        left.update(b)
    for b in batches[2:]:
        right.update(b)
    left.merge(right)
    rows = JointAccumulator(MAPS, 2)
    rows.packed = False                  # the path for leaf products beyond 62 bits
    for b in batches:
        rows.update(b)
    np.testing.assert_array_equal(dense(one), dense(left))
    np.testing.assert_array_equal(dense(one), dense(rows))


def test_replace_one_changes_the_dense_table_by_at_most_two() -> None:
    rng = np.random.default_rng(2)
    worst = 0
    for _ in range(200):
        b = batch(rng, int(rng.integers(1, 20)))
        i = int(rng.integers(b.n))
        c = EncodedBatch(n=b.n, label=b.label.copy(),
                         columns={k: v.copy() for k, v in b.columns.items()})
        c.label[i] = rng.integers(0, 2)
        c.columns["color"][i] = rng.integers(0, 4)
        c.columns["age"][i] = rng.uniform(0, 100)
        acc_b, acc_c = JointAccumulator(MAPS, 2), JointAccumulator(MAPS, 2)
        acc_b.update(b)
        acc_c.update(c)
        worst = max(worst, int(np.abs(dense(acc_b) - dense(acc_c)).sum()))
    assert worst == JointAccumulator.l1_sensitivity == 2


def test_merging_one_batch_at_a_time_as_the_pass_does_is_exact() -> None:
    """The local engine folds each batch into a fresh accumulator and merges it into the
    total (sorted, distinct parts: a search per key): the table of one accumulator."""
    rng = np.random.default_rng(4)
    batches = [batch(rng, int(rng.integers(1, 400))) for _ in range(30)]
    one, total = JointAccumulator(MAPS, 2), JointAccumulator(MAPS, 2)
    for b in batches:
        one.update(b)
        part = JointAccumulator(MAPS, 2)
        part.update(b)
        total.merge(part)
    np.testing.assert_array_equal(dense(total), dense(one))
    np.testing.assert_array_equal(dense(total), brute(batches))
    table = total.result()
    assert np.all(np.diff(total.keys[0]) > 0) and table.counts.sum() == sum(b.n for b in batches)
    capped = JointAccumulator(MAPS, 2, limit=5)     # 40 cells occur: past the limit
    for b in batches:
        part = JointAccumulator(MAPS, 2, limit=5)
        part.update(b)
        capped.merge(part)
    assert capped.overflow and capped.result() is None
