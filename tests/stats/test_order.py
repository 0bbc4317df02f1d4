"""Order statistics from a fine histogram and a banded second pass (dpcli.stats.order).

Everything is checked against the sorted class sample it replaces: the
histogram's bounds hold every order statistic, the banded sample returns the
sorted array's values at every rank it holds and refuses the others, the
window moments agree to summation error, merging partitions and compacting
change nothing, and a file that changed between the passes is an error.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import NumericColumn
from dpcli.errors import DataError
from dpcli.mechanisms.smooth_stats import distances_needed
from dpcli.stats import order
from dpcli.stats.accumulators import HistogramAccumulator
from dpcli.stats.order import ORDER_BINS, Band, BandAccumulator, HistogramBounds, collect

COL = NumericColumn("x", -2.0, 6.0)
K = 3


def _batches(x: np.ndarray, label: np.ndarray, size: int = 997) -> list[EncodedBatch]:
    return [EncodedBatch(n=len(x[i:i + size]), label=label[i:i + size],
                         columns={"x": x[i:i + size]}) for i in range(0, len(x), size)]


def _histogram(batches: list[EncodedBatch], bins: int) -> tuple[np.ndarray, np.ndarray]:
    acc = HistogramAccumulator(COL, bins, K)
    for batch in batches:
        acc.update(batch)
    return acc.result(), acc.edges


def _data(rng: np.random.Generator, n: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    label = rng.integers(0, K, n).astype(np.int32)
    if kind == "continuous":
        x = rng.normal(1.0, 1.5, n)
    elif kind == "ties":
        x = rng.integers(-2, 7, n).astype(float)
    elif kind == "edges":  # values exactly on bin edges of a 64-bin histogram, and the bounds
        x = -2.0 + 8.0 * rng.integers(0, 65, n) / 64
    else:
        x = np.full(n, 0.7)
    return np.clip(x, COL.lower, COL.upper), label


def _sample(x: np.ndarray, label: np.ndarray, c: int) -> np.ndarray:
    return np.sort(x[label == c])


def _gather(batches, histogram, edges, ms, distances) -> list[order.BandedSample]:
    bands = []
    for c in range(K):
        bounds = HistogramBounds(histogram[c], edges, lower=COL.lower, upper=COL.upper)
        bands.append(Band.plan(bounds, m=ms[c], distances=distances[c]))
    acc = BandAccumulator(COL, edges, histogram, bands)
    return collect(iter(batches), {"x": acc})["x"]


@pytest.mark.parametrize("kind", ["continuous", "ties", "edges", "equal"])
@pytest.mark.parametrize("bins", [1, 64, ORDER_BINS])
def test_histogram_bounds_hold_every_order_statistic(kind: str, bins: int) -> None:
    rng = np.random.default_rng(1)
    x, label = _data(rng, 3_000, kind)
    histogram, edges = _histogram(_batches(x, label), bins)
    for c in range(K):
        xs = _sample(x, label, c)
        n = xs.size
        bounds = HistogramBounds(histogram[c], edges, lower=COL.lower, upper=COL.upper)
        assert bounds.size == n
        j = np.arange(-3, n + 4)
        exact = np.concatenate([np.full(4, COL.lower), xs, np.full(3, COL.upper)])
        assert np.all(bounds.at_least(j) <= exact) and np.all(exact <= bounds.at_most(j))
        outside = (j <= 0) | (j > n)
        assert np.array_equal(bounds.at_least(j)[outside], exact[outside])
        assert np.array_equal(bounds.at_most(j)[outside], exact[outside])
        if bins == ORDER_BINS and kind == "continuous":  # tight: one bin width
            assert np.max(bounds.at_most(j) - bounds.at_least(j)) <= 8.0 / bins * (1 + 1e-9)


def test_histogram_bounds_refuse_other_edges() -> None:
    with pytest.raises(ValueError, match="declared bounds"):
        HistogramBounds(np.ones(4), np.linspace(-2.0, 6.5, 5), lower=-2.0, upper=6.0)
    with pytest.raises(ValueError, match="b \\+ 1 edges"):
        HistogramBounds(np.ones(4), np.linspace(-2.0, 6.0, 4), lower=-2.0, upper=6.0)


@pytest.mark.parametrize("kind", ["continuous", "ties", "edges", "equal"])
def test_banded_sample_is_the_sorted_sample_where_it_holds_ranks(kind: str) -> None:
    rng = np.random.default_rng(2)
    x, label = _data(rng, 6_000, kind)
    batches = _batches(x, label)
    histogram, edges = _histogram(batches, 256)
    ms, distances = [0, 150, 900], [40, 300, 5]
    samples = _gather(batches, histogram, edges, ms, distances)
    for c, sample in enumerate(samples):
        xs, m, d = _sample(x, label, c), ms[c], distances[c]
        n = xs.size
        assert sample.size == n and sample.m == m
        wanted = np.concatenate([np.arange(m - d, m + 2), np.arange(n - m, n - m + 2 + d),
                                 [-5, 0, n + 1, n + 9]])
        exact = np.where(wanted <= 0, COL.lower,
                         np.where(wanted > n, COL.upper, xs[np.clip(wanted - 1, 0, n - 1)]))
        assert np.array_equal(sample.order_stat(wanted), exact)
        # values are distinct, with multiplicities adding up to the kept bins' counts
        assert np.all(np.diff(sample.values) > 0)
        assert sample.counts.sum() == histogram[c][sample.keep].sum()
        count, mean, m2 = sample.window_moments(m)
        window = xs[m:n - m]
        assert count == window.size
        assert mean == pytest.approx(np.mean(window), rel=1e-12, abs=1e-12)
        assert m2 == pytest.approx(np.sum((window - np.mean(window)) ** 2), rel=1e-10,
                                   abs=1e-9)
        not_held = [j for j in range(1, n + 1)
                    if not sample.keep[np.searchsorted(sample.cumulative, j)]]
        if not_held:  # a rank in no kept bin is refused, never guessed
            with pytest.raises(LookupError):
                sample.order_stat(np.array([not_held[len(not_held) // 2]]))
        with pytest.raises(ValueError, match="gathered for m"):
            sample.window_moments(m + 1)


def test_band_with_the_distances_needed_serves_the_smooth_bounds() -> None:
    """Band.plan with distances_needed's K holds every rank both bounds read."""
    from dpcli.mechanisms.smooth_stats import (
        SortedSample,
        smooth_trimmed_mean_of,
        smooth_trimmed_variance_of,
        trimmed_of,
    )

    rng = np.random.default_rng(3)
    for kind in ("continuous", "ties", "edges", "equal"):
        x, label = _data(rng, 9_000, kind)
        batches = _batches(x, label)
        histogram, edges = _histogram(batches, ORDER_BINS)
        ms = [int(rng.integers(0, 1_600)) for _ in range(K)]
        distances = []
        for c in range(K):
            bounds = HistogramBounds(histogram[c], edges, lower=COL.lower, upper=COL.upper)
            distances.append(distances_needed(bounds, m=ms[c], mean_beta=0.002,
                                              variance_beta=0.02))
        for c, banded in enumerate(_gather(batches, histogram, edges, ms, distances)):
            full = SortedSample(_sample(x, label, c), lower=COL.lower, upper=COL.upper)
            m = ms[c]
            assert smooth_trimmed_mean_of(banded, m=m, beta=0.002) == \
                smooth_trimmed_mean_of(full, m=m, beta=0.002)
            assert smooth_trimmed_variance_of(banded, m=m, beta=0.02) == \
                smooth_trimmed_variance_of(full, m=m, beta=0.02)
            t_band, t_full = trimmed_of(banded, m=m), trimmed_of(full, m=m)
            assert t_band.window == t_full.window
            assert t_band.mean == pytest.approx(t_full.mean, rel=1e-12, abs=1e-12)
            assert t_band.variance == pytest.approx(t_full.variance, rel=1e-12, abs=1e-12)


def test_kept_values_do_not_grow_with_rows() -> None:
    """Integer data over a declared range under 2^16 units: at most one distinct value per
    kept bin, however many rows (the sorted sample would hold every row)."""
    rng = np.random.default_rng(4)
    kept = []
    for n in (20_000, 200_000):
        label = rng.integers(0, K, n).astype(np.int32)
        x = np.clip(np.round(rng.normal(2.0, 1.0, n) * 100) / 100, COL.lower, COL.upper)
        batches = _batches(x, label, size=65_536)
        histogram, edges = _histogram(batches, ORDER_BINS)
        samples = _gather(batches, histogram, edges, [n // 60] * K, [4_095] * K)
        for sample in samples:
            assert sample.values.size <= np.count_nonzero(sample.keep)
            assert sample.values.size <= 801  # the distinct values 0.01 apart in [-2, 6]
        kept.append(sum(s.values.size for s in samples))
    assert kept[1] < 2 * kept[0] and kept[1] < 200_000 / 50


def test_merge_and_compaction_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    x, label = _data(rng, 8_000, "ties")
    x = np.where(rng.random(x.size) < 0.5, x, rng.uniform(COL.lower, COL.upper, x.size))
    batches = _batches(x, label, size=300)
    histogram, edges = _histogram(batches, 64)
    bands = [Band.plan(HistogramBounds(histogram[c], edges, lower=COL.lower, upper=COL.upper),
                       m=400, distances=300) for c in range(K)]
    whole = BandAccumulator(COL, edges, histogram, bands)
    for batch in batches:
        whole.update(batch)
    monkeypatch.setattr(order, "_COMPACT_AT", 8)  # compact after nearly every batch
    parts = [BandAccumulator(COL, edges, histogram, bands) for _ in range(3)]
    for i, batch in enumerate(batches):
        parts[i % 3].update(batch)
    parts[0].merge(parts[1])
    parts[0].merge(parts[2])
    for a, b in zip(whole.result(), parts[0].result(), strict=True):
        assert np.array_equal(a.values, b.values) and np.array_equal(a.counts, b.counts)
        assert np.array_equal(a.first, b.first)
        assert a.inside[0] == b.inside[0]
        assert a.inside[1] == pytest.approx(b.inside[1], rel=1e-12)
        assert a.inside[2] == pytest.approx(b.inside[2], rel=1e-10)


def test_data_changed_between_the_passes_is_an_error() -> None:
    rng = np.random.default_rng(6)
    x, label = _data(rng, 2_000, "continuous")
    batches = _batches(x, label)
    histogram, edges = _histogram(batches, 64)
    bands = [Band.plan(HistogramBounds(histogram[c], edges, lower=COL.lower, upper=COL.upper),
                       m=10, distances=20) for c in range(K)]
    changed = x.copy()
    changed[17] = COL.upper if x[17] < 0 else COL.lower  # one value moved to another bin
    acc = BandAccumulator(COL, edges, histogram, bands)
    with pytest.raises(DataError, match="changed between the two reads"):
        collect(_batches(changed, label), {"x": acc})
    acc = BandAccumulator(COL, edges, histogram, bands)
    with pytest.raises(DataError, match="changed between the two reads"):
        collect(_batches(x, label)[1:], {"x": acc})  # a batch missing
