"""The dense cube's grid qualities, a batch of grids per numpy call (publish-grid's scoring
of pools of small grids; docs/algorithms/privpfc.md, "Scoring the pool").

:func:`dpcli.algorithms.privpfc.score_pool_dense` builds one dense histogram per grid and
scores it with :func:`~dpcli.algorithms.privpfc.misclassification`: Python runs per grid,
about 90 µs each on Adult's 120,614 grids. :func:`score_pool_cube` returns the same
floats, bit for bit, with numpy calls per batch of grids:

- Counts. A grid's cells hold exact integers whichever way they are summed, so a grid may
  be counted from any finer source. The pool's maximal grids are counted from the joint
  table projected on their used columns (leaf tuples with summed counts; a set's
  projection comes from a projected superset with one more column when there is one: a
  few thousand rows instead of the table's), the other grids rolled up from their
  one-level refinement's non-empty cells. A cell is its position in the grid's dense C
  order (the "in no leaf" node last on a column where some row has it); a roll-up maps
  positions by arithmetic and sums by a bincount over the children's dense cells, whose
  non-zero entries are the children's cells, in order.
- Qualities. Σ min(n+, n−) is an exact integer. The flip terms' sum is the one rounding,
  so it is taken as the reference takes it: numpy's pairwise sum of the grid's dense
  array of real cells in C order, zeros included. Grids with as many real cells are
  summed as the rows of one array along its last axis, which numpy sums as it sums each
  row alone (tests/algorithms/test_privpfc.py checks both against the reference).

- Threads. A set's maximal grids are counted in tasks of at most CHUNK_PAIRS (grid,
  row) pairs, each writing its own grids' slices of the batch's histograms, and each
  batch's levels below them are walked (rolled up and scored) as one task, on worker
  threads (numpy's gathers, products, bincounts and sorts release the GIL); the main
  thread projects the sets and lays out the next batch. Counts are exact integers and
  each grid's flip terms are summed by one call, so the floats are those of one thread.
- Memory. A batch of maximal grids holds at most CHUNK_DENSE dense cells, which bounds
  every level walked from it; the pool's levels stay int8, its sizes int16 and strides
  int32 where they fit.

Private: exact qualities, released only through the exponential mechanism
(:func:`dpcli.algorithms.privpfc.select_grid`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from dpcli.data.taxonomy import Hierarchy
from dpcli.stats.engine import JointTable

#: dense cells (extra nodes included) counted per bincount: the maximal grids of a batch,
#: or the children of a chunk. Bounds the memory of one step (8 bytes a cell per channel)
#: and, through the batch, of the levels walked from it (2^20 held 66 MiB at the peak on
#: Adult's pool, 2^18 47 MiB, 2^17 43 MiB, the CPU within the noise)
CHUNK_DENSE = 1 << 18
#: source cells gathered per roll-up chunk
CHUNK_CELLS = 1 << 18
#: (grid, projected row) pairs counted per task of the maximal grids: bounds a task's
#: temporaries (about 28 bytes a pair: int32 positions and their scratch, bincount's
#: intp copy, the float weights), whatever a set's projection and run of grids
CHUNK_PAIRS = 1 << 19
#: both counts go in one float channel (rest·2^k + positive, k the bits of n) when its
#: sums stay exact: below this
PACK_BELOW = 1 << 53
#: positions stay below this for the float divisions of :func:`_roll` to be exact
#: (a dense grid of 2^40 cells is far beyond any pool the dense cube scores)
EXACT_BELOW = 1 << 40


@dataclass
class _Layer:
    """Non-empty cells of the grids ``ids``: grid i's are ``start[i]:start[i] + count[i]``
    of ``pos`` (dense C-order positions, increasing) and ``chans`` (counts: one packed
    channel rest·2^k + positive, or the two counts; int64)."""

    ids: np.ndarray
    pos: np.ndarray
    chans: np.ndarray
    start: np.ndarray
    count: np.ndarray


class _Shape:
    """Per grid (rows) and column: the dense size with the extra node (``ext``; the extra
    node only on columns where some row is in no leaf), the real size (``real``; 1 for an
    unused column), C-order strides of the first (``stride``), and the totals."""

    def __init__(self, hierarchies: Sequence[Hierarchy], g: np.ndarray,
                 extra: Sequence[bool]) -> None:
        # int16 sizes when every level has fewer than 2^15 − 1 nodes: 2 bytes a (grid,
        # column), not 4 (Adult's pool: 120,614 × 14 of each)
        top = max((max(h.sizes) for h in hierarchies), default=1)
        small = np.int16 if top + 1 < 2**15 else np.int32
        self.real = np.ones(g.shape, dtype=small)
        self.ext = np.ones(g.shape, dtype=small)
        for j, h in enumerate(hierarchies):
            sizes = np.array(h.sizes, dtype=small)
            used = g[:, j] > 0
            self.real[:, j] = np.where(used, sizes[g[:, j]], 1)
            self.ext[:, j] = np.where(used, sizes[g[:, j]] + int(extra[j]), 1)
        # int32 strides when every position fits (each grid below 2^31 dense cells): 8
        # bytes a (grid, column) less on pools of 10^5 grids
        self.ext_total = self.ext.prod(axis=1, dtype=np.int64)
        self.real_total = self.real.prod(axis=1, dtype=np.int64)
        kind = np.int32 if len(g) and int(self.ext_total.max()) < 2**31 else np.int64
        self.stride = _strides(self.ext, kind)


def _strides(sizes: np.ndarray, kind: type = np.int64) -> np.ndarray:
    """C-order strides of dense arrays of ``sizes`` (one row per array), a column at a
    time (no temporary of the whole table); ``kind`` must hold every array's size."""
    stride: np.ndarray = np.ones(sizes.shape, dtype=kind)
    for j in range(sizes.shape[1] - 2, -1, -1):
        np.multiply(stride[:, j + 1], sizes[:, j + 1], out=stride[:, j], casting="unsafe")
    return stride


class _Maps:
    """Node maps as flat tables. ``leaf[j]`` (height, n_leaves + 1): column j's node of each
    level per leaf, the "in no leaf" index to the extra node (to 0 at the root).
    ``node[offset[j, ls, lt] + v]``: the level-lt node of column j's level-ls node v (the
    extra node included), as a float (positions are computed in floats)."""

    def __init__(self, hierarchies: Sequence[Hierarchy]) -> None:
        top = max((h.height for h in hierarchies), default=1)
        self.leaf = []
        parts = [np.zeros(1)]
        self.offset = np.zeros((len(hierarchies), top, top), dtype=np.int64)
        at = 1
        for j, h in enumerate(hierarchies):
            leaf = np.zeros((h.height, h.n_leaves + 1), dtype=np.int64)
            for lt in range(1, h.height):
                leaf[lt, :-1] = h.leaf_level[lt]
                leaf[lt, -1] = h.sizes[lt]
            self.leaf.append(leaf)
            for ls in range(1, h.height):
                for lt in range(ls):
                    table = np.zeros(h.sizes[ls] + 1)
                    if lt > 0:
                        table[h.leaf_level[ls]] = h.leaf_level[lt]
                        table[-1] = h.sizes[lt]
                    self.offset[j, ls, lt] = at
                    parts.append(table)
                    at += len(table)
        self.node = np.concatenate(parts)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of arange(s, s + n) for each (s, n)."""
    before = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(starts - before, lengths)


def _cut(sizes: np.ndarray, limit: int) -> list[np.ndarray]:
    """Consecutive index runs whose ``sizes`` add up to about ``limit`` (one item at least)."""
    if not len(sizes):
        return []
    group = (np.cumsum(sizes) - sizes) // max(1, limit)
    return np.split(np.arange(len(sizes)), np.flatnonzero(np.diff(group)) + 1)


def _from_dense(hists: list[np.ndarray], ids: np.ndarray, offsets: np.ndarray) -> _Layer:
    """The non-empty cells of grids laid out one after another from ``offsets``."""
    total = hists[0] if len(hists) == 1 else hists[0] + hists[1]
    nz = np.flatnonzero(total)
    start = np.searchsorted(nz, offsets)
    count = np.diff(start, append=len(nz))
    chans = np.column_stack([h[nz] for h in hists]).astype(np.int64)
    return _Layer(ids, nz - np.repeat(offsets, count), chans, start, count)


def _concat(layers: list[_Layer], channels: int) -> _Layer:
    if not layers:
        empty = np.zeros(0, dtype=np.int64)
        return _Layer(empty, empty, np.zeros((0, channels), dtype=np.int64), empty, empty)
    count = np.concatenate([la.count for la in layers])
    return _Layer(np.concatenate([la.ids for la in layers]),
                  np.concatenate([la.pos for la in layers]),
                  np.concatenate([la.chans for la in layers]), np.cumsum(count) - count,
                  count)


def score_pool_cube(table: JointTable, hierarchies: Sequence[Hierarchy], grids: np.ndarray,
                    rate: float, positive: int,
                    progress: Callable[[int], None] | None = None, *,
                    threads: int | None = None) -> np.ndarray:
    """:func:`dpcli.algorithms.privpfc.score_pool_dense`'s qualities, the same floats,
    computed a batch of grids at a time (module doc), the large numpy steps on ``threads``
    worker threads (default: the pass's, :func:`dpcli.data.prefetch.usable_cores`).
    Private: exact qualities; release only through
    :func:`dpcli.algorithms.privpfc.select_grid`."""
    from dpcli.algorithms.privpfc import _refinements, score_pool_dense
    from dpcli.data.prefetch import settle, usable_cores

    # levels as they come (int8 from privpfc.pool): an int64 copy is 8 bytes a (grid,
    # column), 13 MiB on Adult's pool, and every use below is an index
    g = np.asarray(grids).reshape(len(grids), len(hierarchies))
    d = g.shape[1]
    counts = np.asarray(table.counts, dtype=np.int64)
    leaves = np.asarray(table.leaves, dtype=np.int64).reshape(len(counts), d)
    pos_ = counts[:, positive] if counts.shape[1] else np.zeros(len(counts), dtype=np.int64)
    rest = counts.sum(axis=1) - pos_
    keep = (pos_ + rest) > 0
    leaves, pos_, rest = leaves[keep], pos_[keep], rest[keep]
    bits = [max(1, int(h.n_leaves).bit_length()) for h in hierarchies]
    extra = [bool((leaves[:, j] == h.n_leaves).any()) for j, h in enumerate(hierarchies)]
    shape = _Shape(hierarchies, g, extra)
    if (len(g) == 0 or sum(bits) > 62
            or (len(g) and int(shape.ext_total.max()) >= EXACT_BELOW)):
        return score_pool_dense(table, hierarchies, grids, rate, positive, progress)
    n = int(pos_.sum() + rest.sum())
    k = max(1, n.bit_length())
    if (n + 1) << k < PACK_BELOW:     # both counts in one float channel
        chans = (rest << k | pos_)[:, None]
    else:
        chans = np.column_stack([rest, pos_])
    shift = (np.cumsum(bits[::-1])[::-1] - np.array(bits)).astype(np.int64)
    field = [((1 << b) - 1) << int(s) for b, s in zip(bits, shift.tolist(), strict=True)]
    key = np.zeros(len(leaves), dtype=np.int64)
    for j in range(d):
        key |= leaves[:, j] << shift[j]
    maps = _Maps(hierarchies)
    scorer = _Scorer(shape, rate, k if chans.shape[1] == 1 else None, extra)
    quality = np.full(len(g), np.nan)

    parent, axis = _refinements(hierarchies, grids)
    by_parent = np.argsort(parent, kind="stable")
    bounds = np.searchsorted(parent[by_parent], np.arange(-1, len(g) + 1))
    roots = np.flatnonzero(parent < 0)
    sets, set_of = np.unique(g[roots] > 0, axis=0, return_inverse=True)
    set_of = set_of.reshape(-1)
    masks = [sum((field[j] for j in np.flatnonzero(s)), 0) for s in sets]
    index = {m: i for i, m in enumerate(masks)}
    # a set's projection comes from a set of the pool with one more column when there is
    # one, else from the table: sets in depth-first order down the "one column fewer"
    # links from the largest, each projected from the set it was reached from, so the
    # projections held at once are those of one path (at most a set's size of them)
    subsets = [[index[m & ~field[c]] for c in np.flatnonzero(s) if (m & ~field[c]) in index]
               for s, m in zip(sets, masks, strict=True)]
    source = np.full(len(sets), -1, dtype=np.int64)
    rank = np.full(len(sets), -1, dtype=np.int64)
    end = np.zeros(len(sets), dtype=np.int64)
    placed = 0
    for top in np.lexsort((np.arange(len(sets)), -sets.sum(axis=1))).tolist():
        if rank[top] >= 0:
            continue
        rank[top], placed = placed, placed + 1
        path = [(top, iter(subsets[top]))]
        while path:
            node, rest = path[-1]
            nxt = next((c for c in rest if rank[c] < 0), None)
            if nxt is None:
                end[node] = placed
                path.pop()
                continue
            rank[nxt], source[nxt], placed = placed, node, placed + 1
            path.append((nxt, iter(subsets[nxt])))
    order = np.lexsort((*g[roots].T[::-1], rank[set_of]))
    roots, set_of = roots[order], set_of[order]
    kept: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def projection(s: int) -> tuple[np.ndarray, np.ndarray]:
        if s in kept:
            return kept[s]
        for c in [c for c in kept if end[c] <= rank[s]]:
            del kept[c]                         # its subtree is done
        src_key, src_chans = kept[int(source[s])] if source[s] >= 0 else (key, chans)
        x = src_key & masks[s]
        o = np.argsort(x, kind="stable")    # timsort: the runs a superset leaves
        x = x[o]
        first = np.flatnonzero(np.concatenate([[True], x[1:] != x[:-1]])) if len(x) \
            else np.zeros(0, dtype=np.int64)
        kept[s] = (x[first], np.add.reduceat(src_chans[o], first, axis=0) if len(first)
                   else src_chans[:0])
        return kept[s]

    def count(ids: np.ndarray, offsets: np.ndarray, cols: list[int], p_key: np.ndarray,
              weights: np.ndarray, hists: list[np.ndarray]) -> None:
        """Writes the dense histograms of the maximal grids ``ids`` (one set, its used
        columns ``cols``) into their slices of ``hists`` (from ``offsets``), from the set's
        projection (keys ``p_key``, channels ``weights``). Large numpy calls only (they
        release the GIL), and slices no other task writes: runs on a worker thread. A
        queued task holds only the projection, not its node tables."""
        first = int(offsets[0])
        span = int(offsets[-1] + shape.ext_total[ids[-1]]) - first
        kind = np.int32 if span < 2**31 else np.int64     # half the memory traffic
        rows = weights.shape[1]
        # position = Σ node · stride over the used columns, for every (grid, row)
        idx = np.repeat((offsets - first).astype(kind), rows).reshape(len(ids), rows)
        tmp = np.empty_like(idx)
        for j in cols:
            codes = maps.leaf[j].astype(kind)[:, (p_key >> shift[j]) & ((1 << bits[j]) - 1)]
            np.take(codes, g[ids, j], axis=0, out=tmp)
            np.multiply(tmp, shape.stride[ids, j].astype(kind)[:, None], out=tmp)
            idx += tmp
        del tmp
        flat = idx.reshape(-1)
        for hist, w in zip(hists, weights, strict=True):
            hist[first:first + span] = np.bincount(flat, weights=np.tile(w, len(ids)),
                                                   minlength=span)

    def maximal(batch: np.ndarray) -> _Layer:
        """The cells of the maximal grids ``roots[batch]`` (consecutive by set): each set's
        grids counted in tasks of about CHUNK_PAIRS (grid, row) pairs, on the workers
        while this thread projects the next sets. A cell's count is an exact integer
        (PACK_BELOW), so how the grids are split between tasks changes no float."""
        ids = roots[batch]
        offsets = np.cumsum(shape.ext_total[ids]) - shape.ext_total[ids]
        total = int(shape.ext_total[ids].sum())
        hists = [np.zeros(total) for _ in range(chans.shape[1])]
        runs = np.flatnonzero(np.diff(set_of[batch], prepend=-1))
        tasks: list[Future[None]] = []
        for lo, hi in zip(runs.tolist(), [*runs[1:].tolist(), len(batch)], strict=True):
            s = int(set_of[batch[lo]])
            p_key, p_chans = projection(s)
            cols = np.flatnonzero(sets[s]).tolist()
            weights = np.ascontiguousarray(p_chans.T, dtype=float)
            step = max(1, CHUNK_PAIRS // max(1, len(p_key)))
            for a in range(lo, hi, step):
                b = min(hi, a + step)
                args = (ids[a:b], offsets[a:b], cols, p_key, weights, hists)
                if workers_ is None:
                    count(*args)
                else:
                    tasks.append(workers_.submit(count, *args))
        for task in tasks:
            task.result()
        return _from_dense(hists, ids, offsets)

    def roll(layer: _Layer, ft: np.ndarray, cid: np.ndarray) -> _Layer:
        """The cells of grids ``cid``, each rolled up from ``layer``'s grid ``ft`` (its
        one-level refinement: one column one level finer)."""
        p = layer.ids[ft]
        j = axis[cid]
        low = shape.stride[p, j].astype(float)
        s_s = shape.ext[p, j].astype(float)
        s_t = shape.ext[cid, j].astype(float)
        moff = maps.offset[j, g[p, j], g[cid, j]]
        offsets = np.cumsum(shape.ext_total[cid]) - shape.ext_total[cid]
        sizes = layer.count[ft]
        take = _ranges(layer.start[ft], sizes)
        pos = layer.pos[take].astype(float)
        q = np.floor((pos + 0.5) * np.repeat(1.0 / low, sizes))      # pos // low
        lo = pos - q * np.repeat(low, sizes)
        hi = np.floor((q + 0.5) * np.repeat(1.0 / s_s, sizes))       # q // s_s
        node = maps.node[np.repeat(moff, sizes) + (q - hi * np.repeat(s_s, sizes))
                         .astype(np.int64)]
        new = ((hi * np.repeat(s_t, sizes) + node) * np.repeat(low, sizes) + lo
               + np.repeat(offsets.astype(float), sizes)).astype(np.int64)
        total = int(shape.ext_total[cid].sum())
        w = layer.chans[take].astype(float)
        hists = [np.bincount(new, weights=w[:, c], minlength=total) for c in range(w.shape[1])]
        return _from_dense(hists, cid, offsets)

    def walk(frontier: _Layer) -> int:
        """Scores the maximal grids ``frontier`` and every grid below them, level by level
        (each level's roll-ups in chunks of CHUNK_DENSE dense cells); returns how many.
        Batches write disjoint entries of ``quality``: any thread, any order."""
        quality[frontier.ids] = scorer.score(frontier)
        scored = len(frontier.ids)
        while len(frontier.ids):
            lo, hi = bounds[frontier.ids + 1], bounds[frontier.ids + 2]
            cid = by_parent[_ranges(lo, hi - lo)]
            ft = np.repeat(np.arange(len(frontier.ids), dtype=np.int64), hi - lo)
            gathered = frontier.count[ft]
            parts = []
            for part in _cut(np.maximum(shape.ext_total[cid], gathered * CHUNK_DENSE
                                        // CHUNK_CELLS), CHUNK_DENSE):
                child = roll(frontier, ft[part], cid[part])
                quality[child.ids] = scorer.score(child)
                scored += len(child.ids)
                parts.append(child)
            frontier = _concat(parts, chans.shape[1])
        return scored

    workers = usable_cores() if threads is None else max(1, threads)
    # the main thread projects the sets and lays out each batch; the workers count its
    # maximal grids (tasks of CHUNK_PAIRS pairs) and walk the batches below them, at most
    # ``workers`` − 1 walks waiting while the next batch is counted (memory: that many
    # batches' levels and one batch's histograms). Every grid's quality
    # is computed by the same calls whichever thread runs them
    workers_ = ThreadPoolExecutor(workers) if workers > 1 and len(g) > 1 else None
    waiting: deque[Future[int]] = deque()

    try:
        for batch in _cut(shape.ext_total[roots], CHUNK_DENSE):
            frontier = maximal(batch)
            if workers_ is None:
                scored = walk(frontier)
                if progress is not None:
                    progress(scored)
                continue
            waiting.append(workers_.submit(walk, frontier))
            settle(waiting, workers - 1, progress)
        settle(waiting, 0, progress)
    finally:
        if workers_ is not None:
            workers_.shutdown(cancel_futures=True)
    if not np.isfinite(quality).all():
        raise RuntimeError("a grid of the pool was not scored")  # never release on a gap
    return quality


class _Scorer:
    """:func:`~dpcli.algorithms.privpfc.misclassification` of a layer's grids, the
    reference's floats (module doc)."""

    def __init__(self, shape: _Shape, rate: float, packed: int | None,
                 extra: Sequence[bool]) -> None:
        self.shape, self.rate, self.packed = shape, rate, packed
        self.extra = np.array(extra, dtype=bool)

    def score(self, layer: _Layer) -> np.ndarray:
        from dpcli.algorithms.privpfc import _flip_terms

        shape, ids = self.shape, layer.ids
        if self.packed is not None:
            a, b = layer.chans[:, 0] >> self.packed, layer.chans[:, 0] & ((1 << self.packed) - 1)
        else:
            a, b = layer.chans[:, 0], layer.chans[:, 1]
        owner = np.repeat(np.arange(len(ids), dtype=np.int64), layer.count)
        rpos = layer.pos
        extra = self.extra & (shape.ext[ids] > 1).any(axis=0)
        if extra.any():            # positions among the real cells; cells in no leaf out
            valid = np.ones(len(rpos), dtype=bool)
            rpos = np.zeros(len(rpos), dtype=np.int64)
            real_stride = _strides(shape.real[ids])
            for j in range(len(self.extra)):
                node = (layer.pos // shape.stride[ids, j][owner]) % shape.ext[ids, j][owner]
                if extra[j]:
                    valid &= node < shape.real[ids, j][owner]
                rpos += node * real_stride[owner, j]
            a, b, owner, rpos = a[valid], b[valid], owner[valid], rpos[valid]
        low = np.bincount(owner, weights=np.minimum(a, b).astype(float), minlength=len(ids))
        n = shape.real_total[ids]
        order = np.argsort(n, kind="stable")
        sizes = n[order]
        at = np.empty(len(ids), dtype=np.int64)
        at[order] = np.cumsum(sizes) - sizes
        flat = np.zeros(int(sizes.sum()))
        flat[at[owner] + rpos] = _flip_terms(np.abs(a - b), self.rate)
        flips = np.empty(len(ids))
        runs = np.flatnonzero(np.diff(sizes, prepend=-1))
        for lo, hi in zip(runs.tolist(), [*runs[1:].tolist(), len(ids)], strict=True):
            width = int(sizes[lo])
            first = int(at[order[lo]])
            flips[order[lo:hi]] = flat[first:first + (hi - lo) * width].reshape(
                hi - lo, width).sum(axis=1)
        return low + flips
