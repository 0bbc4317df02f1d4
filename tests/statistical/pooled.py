"""A chi-square test on outcomes pooled into cells that each expect enough draws."""

from __future__ import annotations

import numpy as np
from scipy import stats


def pooled_chi2(observed: np.ndarray, probabilities: np.ndarray,
                min_expected: float = 20.0) -> tuple[float, int]:
    """(p-value, number of cells): adjacent outcomes pooled until each cell expects at least
    ``min_expected`` draws; the remainder joins the last cell."""
    expected = probabilities * observed.sum()
    cells, start, total = [], 0, 0.0
    for i, e in enumerate(expected):
        total += e
        if total >= min_expected:
            cells.append((start, i + 1))
            start, total = i + 1, 0.0
    cells[-1] = (cells[-1][0], expected.size)
    obs = np.array([observed[a:b].sum() for a, b in cells])
    exp = np.array([expected[a:b].sum() for a, b in cells])
    return float(stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue), len(cells)
