"""One-sided range queries (prefix sums) over histograms: Privelet, hierarchical, Laplace.

The workload: for histograms x (one or several over the same bins), every
prefix sum q_j(x) = x_0 + ... + x_j. An ROC curve's TP and FP counts are
exactly these (Stoddard, Chen & Machanavajjhala 2014, §4.2.1).

Each strategy releases a linear image of the histograms with integer
entries, under discrete Laplace noise (docs/design.md rule 6), then answers the
prefix sums from it by post-processing:

- ``privelet``: the Haar wavelet (Xiao, Wang & Gehrke 2010) written with
  sums instead of averages — the grand total and, for every internal node of
  the dyadic tree over the (zero-padded) bins, left-half sum minus right-half
  sum. Privelet's weighted coefficient noise λ/W(c) is exactly uniform noise
  λ on these integer sums and differences, since each difference is the
  average-based coefficient times its weight W(c). One unit in one bin
  enters the total and one difference per level: 1 + log2(P) coordinates,
  P the padded size. Error of a prefix sum: O(log³ P / ε²).
- ``hierarchical``: every node count of a complete b-ary tree over the bins
  (Hay, Rastogi, Miklau & Suciu 2010); one unit enters one node per level,
  h + 1 coordinates for h = ceil(log_b bins). The noisy tree is made
  consistent by least squares (:func:`dpcli.mechanisms.consistency.tree_inference`).
- ``laplace``: the prefix sums themselves (the paper's baseline); one unit
  in bin i enters every q_j with j >= i, up to ``bins`` coordinates, so the
  noise grows linearly with the number of bins.

Sensitivity: a neighbour moves ``changes`` units between cells of the
histograms (replace-one over a partition: 2, one unit out of the old
record's cell and one into the new one's, possibly in another histogram).
The released vector's L1 sensitivity is ``changes`` times the coordinates
one unit touches; :func:`sensitivity` gives it.
"""

from __future__ import annotations

import numpy as np

from dpcli.mechanisms.consistency import tree_inference
from dpcli.mechanisms.laplace import discrete_laplace_mechanism
from dpcli.mechanisms.rng import check_int, check_positive, check_rng
from dpcli.params import ROC_COUNTS as STRATEGIES


def padded_size(bins: int, base: int) -> tuple[int, int]:
    """(P, h): the smallest P = base^h >= bins."""
    bins = check_int("bins", bins, minimum=1)
    h = 0
    while base**h < bins:
        h += 1
    return base**h, h


def sensitivity(strategy: str, bins: int, *, changes: int = 2, branching: int = 16) -> int:
    """L1 sensitivity of the vector ``strategy`` releases for histograms over ``bins`` bins."""
    changes = check_int("changes", changes, minimum=1)
    if strategy == "privelet":
        return changes * (1 + padded_size(bins, 2)[1])
    if strategy == "hierarchical":
        return changes * (1 + padded_size(bins, _branching(branching))[1])
    if strategy == "laplace":
        return changes * check_int("bins", bins, minimum=1)
    raise ValueError(f"unknown strategy {strategy!r} (use {', '.join(STRATEGIES)})")


def haar_coefficients(counts: np.ndarray) -> np.ndarray:
    """[total, d_0, d_1, ...]: the grand total, then left-minus-right sums level by level.

    ``counts`` has shape (..., bins) and is zero-padded to P = 2^h bins; the
    result has shape (..., P), integer if the counts are.
    """
    x = np.asarray(counts)
    size, h = padded_size(x.shape[-1], 2)
    level = _pad(x, size)
    differences = []
    for _ in range(h):
        differences.append(level[..., 0::2] - level[..., 1::2])
        level = level[..., 0::2] + level[..., 1::2]
    return np.concatenate([level, *reversed(differences)], axis=-1)


def haar_leaves(coefficients: np.ndarray, bins: int) -> np.ndarray:
    """Invert :func:`haar_coefficients` and keep the first ``bins`` leaves (float64)."""
    c = np.asarray(coefficients, dtype=np.float64)
    level = c[..., :1]
    start = 1
    while start < c.shape[-1]:
        d = c[..., start:start + level.shape[-1]]
        start += d.shape[-1]
        nxt = np.empty((*level.shape[:-1], 2 * level.shape[-1]))
        nxt[..., 0::2] = (level + d) / 2.0
        nxt[..., 1::2] = (level - d) / 2.0
        level = nxt
    return level[..., :bins]


def tree_levels(counts: np.ndarray, branching: int = 16) -> list[np.ndarray]:
    """Node counts of the complete b-ary tree over the zero-padded bins, leaves first."""
    b = _branching(branching)
    x = np.asarray(counts)
    size, h = padded_size(x.shape[-1], b)
    levels = [_pad(x, size)]
    for _ in range(h):
        last = levels[-1]
        levels.append(last.reshape(*last.shape[:-1], last.shape[-1] // b, b).sum(axis=-1))
    return levels


def noisy_prefix_sums(counts: np.ndarray, *, strategy: str, epsilon: float,
                      rng: np.random.Generator, changes: int = 2,
                      branching: int = 16) -> np.ndarray:
    """Release every prefix sum of each histogram in ``counts``: ε-DP.

    Releases: for ``counts`` of shape (..., bins), float64 estimates of
    q_j = counts[..., 0] + ... + counts[..., j] for every j (same shape).
    Sensitivity: :func:`sensitivity` (``changes`` unit moves between cells of
    the histograms per neighbour). Noise: discrete Laplace with scale
    sensitivity / ε on each released integer coordinate (module docstring).
    Cost: ε = ``epsilon`` (δ = 0) for all the histograms together.
    """
    x = np.asarray(counts)
    if x.ndim < 1 or x.shape[-1] < 1:
        raise ValueError("counts must have at least one bin")
    epsilon = check_positive("epsilon", epsilon)
    rng = check_rng(rng)
    bins = x.shape[-1]
    delta = sensitivity(strategy, bins, changes=changes, branching=branching)
    if strategy == "privelet":
        noisy = discrete_laplace_mechanism(haar_coefficients(x), sensitivity=delta,
                                           epsilon=epsilon, rng=rng)
        return np.cumsum(haar_leaves(noisy, bins), axis=-1)
    if strategy == "hierarchical":
        levels = [discrete_laplace_mechanism(level, sensitivity=delta, epsilon=epsilon, rng=rng)
                  for level in tree_levels(x, branching)]
        return np.cumsum(tree_inference(levels, branching)[..., :bins], axis=-1)
    return np.asarray(discrete_laplace_mechanism(np.cumsum(x, axis=-1), sensitivity=delta,
                                                 epsilon=epsilon, rng=rng), dtype=np.float64)


def prefix_error_scale(strategy: str, bins: int, *, epsilon: float, changes: int = 2,
                       branching: int = 16) -> float:
    """The noise scale Δ/ε each released coordinate gets (for plans and reports)."""
    return sensitivity(strategy, bins, changes=changes, branching=branching) / epsilon


def _pad(x: np.ndarray, size: int) -> np.ndarray:
    if x.shape[-1] == size:
        return x
    pad = [(0, 0)] * (x.ndim - 1) + [(0, size - x.shape[-1])]
    return np.pad(x, pad)


def _branching(branching: int) -> int:
    b = check_int("branching", branching, minimum=2)
    if b > 1024:
        raise ValueError("branching must be at most 1024")
    return b

