"""k-means clustering of points that have already been released privately.

This is post-processing, and it costs nothing: :func:`kmeans` must only ever
be given points that a mechanism released (for ``select-features --method
cluster``: per-feature count vectors with discrete Laplace noise).

Why not the paper's private k-means (Stoddard et al. 2014, Algorithm 1, after
Blum et al.'s SuLQ k-means) on the exact count vectors: (1) the noisy cluster
sums were calibrated to Δ(Q) = r, but one replaced record can move a feature
across a cluster boundary, which changes two cluster sums by that feature's
whole count vector (up to n), not by r; (2) the features finally accepted are
those whose *exact* point falls in an accepted cluster, an unperturbed
comparison that fails exactly as Private Threshold Testing does (two
features with equal counts always share a cluster on D, and can be split on
a neighbour). Releasing the points once with noise and clustering the
released points keeps the paper's idea (decide per cluster, on a centre
averaged over many features) with a proof.
"""

from __future__ import annotations

import numpy as np

from dpcli.mechanisms.rng import check_int, check_real_array, check_rng


def kmeans(points: np.ndarray, centers: int, rounds: int,
           rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd's k-means with k-means++ seeding on *released* points; returns (centres, labels).

    Releases nothing new and costs nothing (post-processing of ``points``).
    ``centres`` has shape (k, d) with k = min(centers, number of distinct
    points); ``labels[i]`` is the cluster of point i. A cluster that empties
    keeps its previous centre. Runs exactly ``rounds`` assignment/update
    steps (fewer if the assignment stops changing).
    """
    x = check_real_array("points", points)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError("points must be a non-empty (n, d) array")
    if not np.all(np.isfinite(x)):
        raise ValueError("points must be finite")
    k = check_int("centers", centers, minimum=1)
    rounds = check_int("rounds", rounds, minimum=1)
    rng = check_rng(rng)
    k = min(k, len(np.unique(x, axis=0)))
    centres = _plus_plus(x, k, rng)
    labels = _assign(x, centres)
    for _ in range(rounds):
        for j in range(k):
            members = labels == j
            if members.any():
                centres[j] = x[members].mean(axis=0)
        new = _assign(x, centres)
        if np.array_equal(new, labels):
            break
        labels = new
    return centres, labels


def _assign(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    # ||x − c||² = ||x||² − 2x·c + ||c||²; the ||x||² term does not change the argmin
    d = -2.0 * x @ centres.T + (centres * centres).sum(axis=1)[None, :]
    return np.argmin(d, axis=1)


def _plus_plus(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding (Arthur & Vassilvitskii 2007): D² sampling."""
    centres = np.empty((k, x.shape[1]))
    centres[0] = x[rng.integers(len(x))]
    d2 = ((x - centres[0]) ** 2).sum(axis=1)
    for j in range(1, k):
        total = d2.sum()
        i = rng.integers(len(x)) if total <= 0 else rng.choice(len(x), p=d2 / total)
        centres[j] = x[i]
        d2 = np.minimum(d2, ((x - centres[j]) ** 2).sum(axis=1))
    return centres
