"""The signal test's in-place replicates give the p-values of the former copying code."""

from __future__ import annotations

import numpy as np
import pytest

from dpcli.algorithms import degenerate as dg


def _reference(counts: np.ndarray, noise_scale: float, draws: int = dg.SIGNAL_DRAWS) -> float:
    """signal_p_value as it was before the in-place replicates (round 10)."""
    counts = np.asarray(counts, dtype=float)
    rows = counts.sum(axis=1)
    n = rows.sum()
    if counts.shape[0] < 2 or n <= 0 or counts[:, 1].sum() <= 0 or counts[:, 0].sum() <= 0:
        return 1.0
    t = float(np.exp(-1.0 / noise_scale)) if noise_scale > 0 else 0.0
    variance = 2.0 * t / (1.0 - t) ** 2

    def statistic(c: np.ndarray) -> np.ndarray:
        r = c.sum(axis=-1)
        p = c[..., 1].sum(axis=-1, keepdims=True) / np.maximum(r.sum(axis=-1, keepdims=True), 1)
        return (((c[..., 1] - r * p) ** 2) / (r * p * (1 - p) + variance + 1e-12)).sum(axis=-1)

    observed = float(statistic(counts))
    rng = np.random.default_rng(0)
    size = np.rint(rows).astype(np.int64)
    share = counts[:, 1].sum() / n
    exceed = done = 0
    seen: list[np.ndarray] = []
    chunk = max(1, min(draws, 2_000_000 // size.size))
    if chunk < dg.SIGNAL_PILOT and size.size >= dg.SIGNAL_NORMAL_CELLS:
        chunk = dg.SIGNAL_PILOT // -(-dg.SIGNAL_PILOT // chunk)
    for start in range(0, draws, chunk):
        m = min(chunk, draws - start)
        positive = rng.binomial(np.broadcast_to(size, (m, size.size)), share)
        null = np.stack([size - positive, positive], axis=-1).astype(float)
        if t > 0:
            null += rng.geometric(1 - t, null.shape) - rng.geometric(1 - t, null.shape)
        stats = statistic(np.maximum(null, 0.0))
        hits = np.cumsum(stats >= observed) + exceed
        if hits[-1] >= dg.SIGNAL_STOP:
            return dg.SIGNAL_STOP / (done + 1 + int(np.argmax(hits >= dg.SIGNAL_STOP)))
        exceed, done = int(hits[-1]), done + m
        seen.append(stats)
        if exceed == 0 and done >= dg.SIGNAL_PILOT and size.size >= dg.SIGNAL_NORMAL_CELLS:
            pilot = np.concatenate(seen)
            if observed > pilot.mean() + dg.SIGNAL_MARGIN * pilot.std(ddof=1):
                return 1 / (dg.SIGNAL_PILOT + 1)
    return (1 + exceed) / (draws + 1)


@pytest.mark.parametrize(("cells", "scale", "signal", "seed"), [
    (40, 2.0, 0.0, 1), (40, 0.0, 0.0, 2), (300, 3.5, 0.05, 3), (5_000, 2.0, 0.0, 4),
    (5_000, 2.0, 0.3, 5), (150_000, 3.5, 0.0, 6), (150_000, 0.0, 0.02, 7)])
def test_p_value_is_the_former_codes_exactly(cells: int, scale: float, signal: float,
                                             seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = rng.integers(0, 40, cells)
    p = np.clip(0.25 + signal * rng.standard_normal(cells), 0, 1)
    pos = rng.binomial(size, p)
    counts = np.column_stack([size - pos, pos]).astype(np.int64)
    if scale > 0:   # released counts: noisy, clamped at 0
        counts = np.maximum(counts + rng.integers(-3, 4, counts.shape), 0)
    assert dg.signal_p_value(counts, scale) == _reference(counts, scale)
