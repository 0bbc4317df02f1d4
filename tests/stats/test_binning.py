"""Arithmetic binning lands every value where the edges (and a binary search) put it."""

from __future__ import annotations

import numpy as np
import pytest

from dpcli.stats.accumulators import bin_index, histogram_edges


@pytest.mark.parametrize(("lower", "upper", "bins"), [
    (0.0, 1.0, 10), (17.0, 90.0, 10), (-1e6, 3.3, 7), (0.0, 1e-300, 3),
    (12285.0, 1490400.0, 64), (0.0, 1.0, 1), (-5.0, 5.0, 1024), (0.1, 0.7, 3),
])
def test_bin_index_matches_searchsorted_on_and_around_every_edge(lower: float, upper: float,
                                                                 bins: int) -> None:
    edges = np.linspace(lower, upper, bins + 1)
    rng = np.random.default_rng(bins)
    x = np.concatenate([rng.uniform(lower, upper, 20_000), edges,
                        np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf)])
    x = np.clip(x, lower, upper)  # the accumulators bin clamped values
    expected = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
    assert np.array_equal(bin_index(x, edges), expected)


def test_top_edge_goes_to_the_last_bin_and_lower_to_the_first() -> None:
    from dpcli.data.schema import NumericColumn

    edges = histogram_edges(NumericColumn("age", 17.0, 90.0), 4)
    assert bin_index(np.array([17.0, 90.0, 35.25, np.nextafter(35.25, 0)]), edges).tolist() \
        == [0, 3, 1, 0]
