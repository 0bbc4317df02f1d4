"""Consistency post-processing: released noisy values made to obey public constraints.

Everything here is a function of already released values and public facts
(a tree's shape, a public total), so it costs no budget. Each step is a
least-squares projection onto the constraint set, which never increases the
L2 distance to the true values when they satisfy the constraints.
"""

from __future__ import annotations

import numpy as np


def isotonic_increasing(values: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence nearest ``values`` in L2 (pool-adjacent-violators).

    Used for the cumulative TP and FP counts of an ROC curve, which are
    non-decreasing in the number of bins counted (Hay et al. 2010, §4).
    """
    y = np.asarray(values, dtype=np.float64)
    if y.ndim != 1:
        raise ValueError("values must be one-dimensional")
    if y.size < 2:
        return y.copy()
    # pool adjacent violators with a stack of blocks (mean, size): each value is pushed once
    # and merged at most once, O(n). Written out because scipy.optimize's import alone cost
    # roc about 0.5 s of start-up (docs/scale.md).
    means: list[float] = []
    sizes: list[int] = []
    for v in y.tolist():
        mean, size = v, 1
        while means and means[-1] > mean:
            m, k = means.pop(), sizes.pop()
            mean, size = (m * k + mean * size) / (k + size), k + size
        means.append(mean)
        sizes.append(size)
    return np.repeat(np.asarray(means, dtype=np.float64), sizes)


def tree_inference(levels: list[np.ndarray], branching: int) -> np.ndarray:
    """Least-squares consistent leaves of a noisy complete b-ary tree of counts.

    ``levels[0]`` holds the noisy leaves and ``levels[-1]`` the root, each of
    shape (..., b^(h-i)); every node was released with the same noise
    variance. Returns the leaves of the tree nearest the noisy one in L2
    among trees whose every node equals the sum of its children (Hay,
    Rastogi, Miklau & Suciu 2010, Theorem 3: a bottom-up weighted average,
    then a top-down pass that shares each parent's discrepancy equally).
    """
    b = int(branching)
    if b < 2:
        raise ValueError("branching must be at least 2")
    z = [np.asarray(levels[0], dtype=np.float64)]
    for i in range(1, len(levels)):  # height i+1 in Hay et al.'s numbering (leaves at 1)
        height = i + 1
        weight = (b**height - b ** (height - 1)) / (b**height - 1)
        children = _sum_children(z[-1], b)
        z.append(weight * np.asarray(levels[i], dtype=np.float64) + (1.0 - weight) * children)
    consistent = z[-1]
    for i in range(len(levels) - 2, -1, -1):
        children = _sum_children(z[i], b)
        gap = (consistent - children) / b
        consistent = z[i] + np.repeat(gap, b, axis=-1)
    return consistent


def nonnegative_with_total(values: np.ndarray, total: float) -> np.ndarray:
    """The vector nearest ``values`` in L2 with entries >= 0 that sum to ``total`` (>= 0).

    Euclidean projection onto the scaled simplex (sort-based, O(n log n)):
    subtract the one shift τ that makes the positive parts sum to ``total``.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    if total < 0:
        raise ValueError("total must be non-negative")
    if v.size == 0:
        raise ValueError("values must not be empty")
    if total == 0:
        return np.zeros(np.shape(values))
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - total
    index = np.arange(1, v.size + 1)
    # the largest ρ with u_ρ > (Σ_{i<=ρ} u_i - total)/ρ; the first always qualifies in exact
    # arithmetic (total > 0); rounding can lose it only when total is below the values'
    # float resolution (no answer is then exact; this one does not crash)
    candidates = np.flatnonzero(u - cumulative / index > 0)
    rho = candidates[-1] if candidates.size else 0
    tau = cumulative[rho] / (rho + 1)
    return np.maximum(v - tau, 0.0).reshape(np.shape(values))


def round_with_total(values: np.ndarray, total: int) -> np.ndarray:
    """Non-negative reals summing to ``total`` rounded to integers with the same sum.

    Largest remainder: floor everything, then give the missing units to the
    largest fractional parts (ties to the earlier entry).
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    floors = np.floor(v + 1e-9).astype(np.int64)
    missing = int(total) - int(floors.sum())
    if missing > 0:
        order = np.argsort(-(v - floors), kind="stable")
        floors[order[:missing]] += 1
    elif missing < 0:
        order = np.argsort(v - floors, kind="stable")
        taken = 0
        for i in order:
            if taken == -missing:
                break
            if floors[i] > 0:
                floors[i] -= 1
                taken += 1
    return floors.reshape(np.shape(values))


def _sum_children(level: np.ndarray, b: int) -> np.ndarray:
    return level.reshape(*level.shape[:-1], level.shape[-1] // b, b).sum(axis=-1)
