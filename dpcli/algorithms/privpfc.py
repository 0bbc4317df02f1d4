"""PrivPfC: a private synopsis for classification (Su et al., "PrivPfC", Algorithm 1).

Every candidate column has a taxonomy hierarchy (:mod:`dpcli.data.taxonomy`).
A *grid* picks one level per column (level 0, the root, leaves the column
out); its cells are the products of the chosen levels' nodes. PrivPfC

1. sets a cell threshold T from n and ε: the noise of a count should be at
   most a fifth of an average cell (:func:`cell_threshold`);
2. enumerates the pool of every grid with at most T cells (:func:`pool`);
3. if the pool holds ``max_pool`` grids or more, first selects k columns by
   PrivPfC's χ² (Cor = Σ|o − e|) with the exponential mechanism and
   enumerates again over them (ε split 30/30/40; otherwise 3:4 between the
   next two steps);
4. selects one grid with the exponential mechanism on its expected number
   of misclassified records (Lemma 1, :func:`misclassification`);
5. releases the chosen grid's two class counts per cell with discrete
   Laplace noise, clamped at 0.

Where dpcli departs from the paper, and why:

- Replace-one neighbours (docs/design.md rule 1). The histogram's L1 sensitivity
  is 2, so counts get scale 2/ε_hist, and T = ⌊0.2·n/scale⌋ = ⌊n·ε_hist/10⌋
  (the paper's T = δ·N·ε/2 with δ = 0.2 and ε_hist ≈ ε/2 under
  add/remove). The quality's sensitivity is re-derived for replace-one
  (:func:`quality_sensitivity`) and sits in the exponent (rule 7): grids are
  sampled ∝ exp(−ε_sel·q/(2Δq)); the paper's pseudo-code omits Δq.
- Counts get discrete Laplace noise (rule 6). The quality keeps Lemma 1's
  continuous-Laplace expectation: it is a score, and the sensitivity used
  is that of the score as computed.
- k. The paper's k = ⌈2 log T / log b⌉ (b the median first branching
  factor) can exceed the number of columns (it is 22 on Adult), and k
  columns can still have a pool above the cap. k is therefore also capped
  so that the product of the k largest heights — a bound on any k-column
  pool — stays below ``max_pool``. Both caps are public.
- Rows whose value falls in no leaf (an undeclared category when the
  taxonomy places no ``other`` leaf) are in no cell. Under replace-one
  such a row is one removal or addition for the histogram, within the
  sensitivities below.

Speed: the data are read once, into the sparse joint histogram of every
candidate's leaves (R distinct leaf tuples: about 25,000 on resampled Adult at
any n). The pool grows with T = ⌊n·ε_hist/10⌋ until the pre-selection caps it
(k columns, a pool below the product of their heights), and T bounds a grid's
cells, so a dense cube costs pool × T: 8.7·10⁸ cells at 10⁶ rows of Adult.
But a grid never has more non-empty cells than R, and empty cells add 0 to
the quality, so :func:`score_pool` keeps only non-empty cells (bit-packed keys,
two counts): a grid whose one-level refinement is in the pool is rolled up from
that refinement's cells (a map of one column's nodes, a sort, a sum per run of
equal keys); the maximal grids from the table projected on their used columns.
It walks the forest a batch of maximal grids at a time, level by level, each
batch on one of the pass's worker threads, so no Python runs per grid (2·10⁷
cells in all at 10⁶ rows, against 8.7·10⁸). :func:`score_pool_dense` is the
former dense cube, one Python step per grid: the reference the tests compare with. A
pool of many small grids (:data:`DENSE_BELOW`) gets its floats bit for bit from
:func:`dpcli.algorithms.grid_cube.score_pool_cube`, a batch of grids at a time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from dpcli.budget import Budget
from dpcli.checks import Where
from dpcli.data.schema import BinaryColumn, CategoricalColumn, Schema, TokensColumn
from dpcli.data.taxonomy import Hierarchy, hierarchy
from dpcli.errors import SpecError, UsageError
from dpcli.mechanisms import (
    Plan,
    discrete_laplace_mechanism,
    exponential_mechanism,
    exponential_top_k,
)
from dpcli.stats.engine import JointTable

MAX_POOL = 200_000
NOISE_FRACTION = 0.2          # average |noise| at most this share of an average cell (Eq. 9)
HIST_SENSITIVITY = 2          # one record leaves one (cell, class) count and enters another
CHI2_SENSITIVITY = 4.0        # Cor under replace-one (feature_selection.sensitivity("chi2"))
SELECT_COLUMNS, SELECT_GRID, HISTOGRAM = "select_columns", "select_grid", "histogram"
SHARES = {SELECT_GRID: Fraction(3, 7), HISTOGRAM: Fraction(4, 7)}
SHARES_WITH_SELECTION = {SELECT_COLUMNS: Fraction(3, 10), SELECT_GRID: Fraction(3, 10),
                         HISTOGRAM: Fraction(4, 10)}


# ------------------------------------------------------------------- public design
def candidate_hierarchies(schema: Schema, columns: Sequence[str] = ()) -> list[Hierarchy]:
    """The candidates' hierarchies, checked against the declared domains (before any charge).

    Default candidates: every column that declares a taxonomy, and every
    categorical or binary column (flat hierarchy). SpecError naming the
    column's ``taxonomy`` key if a hierarchy does not fit its domain.
    """
    where = Where(schema.source or Path("schema"), "columns")
    if not columns:
        columns = [c.name for c in schema.columns
                   if getattr(c, "taxonomy", None) is not None
                   or isinstance(c, CategoricalColumn | BinaryColumn)]
        if not columns:
            numeric = [c.name for c in schema.columns][:1] or ["age"]
            raise SpecError(   # the schema's own domains allow no grid (exit 78)
                f"{schema.source}: no column can be a grid axis: declare a 'taxonomy:' for "
                f"numeric columns (or add categorical ones), for example equal-width levels "
                f"of the declared bounds (each bin count a multiple of the one before):\n"
                f"  {numeric[0]}:\n    type: numeric\n    bounds: [...]\n"
                f"    taxonomy: {{bins: [2, 4, 8]}}\n"
                f"or nested '(low, high]' intervals (see configs/adult_taxonomy.json)")
    out = []
    for name in columns:
        col = schema.column(name)
        if isinstance(col, TokensColumn):
            raise UsageError(f"column '{name}' is a tokens column: it cannot be a grid axis")
        out.append(hierarchy(col, where / name / "taxonomy"))
    return out


def cell_threshold(n: int, eps_hist: float) -> int:
    """T: the most cells a grid may have so that E|noise| ≤ 0.2 · n / T (at least 1)."""
    scale = HIST_SENSITIVITY / eps_hist
    return max(1, math.floor(NOISE_FRACTION * n / scale + 1e-9))


def pool(sizes: Sequence[Sequence[int]], threshold: int, cap: int | None = None) -> np.ndarray:
    """Every grid (one level index per column) with at most ``threshold`` cells.

    ``sizes[j][l]`` is the number of nodes of column j's level l (increasing in
    l). Rows are in lexicographic order of levels: public and data-independent.
    With ``cap``, stops as soon as the pool is known to hold ``cap`` grids or
    more and returns the first ``cap`` rows found so far (a prefix of the
    lexicographic order is NOT guaranteed: use it only to compare with cap).
    """
    levels = np.zeros((1, 0), dtype=np.int8)
    cells = np.ones(1, dtype=np.int64)
    for column in sizes:
        parts_levels, parts_cells = [], []
        for level, size in enumerate(column):
            keep = cells * int(size) <= threshold
            if not keep.any():
                break
            parts_levels.append(np.column_stack(
                [levels[keep], np.full(int(keep.sum()), level, dtype=np.int8)]))
            parts_cells.append(cells[keep] * int(size))
        levels = np.concatenate(parts_levels)
        cells = np.concatenate(parts_cells)
        order = np.lexsort(levels.T[::-1])
        levels, cells = levels[order], cells[order]
        if cap is not None and len(levels) >= cap:   # every prefix extends to a grid (roots)
            tail = np.zeros((len(levels), len(sizes) - levels.shape[1]), dtype=np.int8)
            return np.column_stack([levels, tail])[:cap]
    return levels


def pool_size(sizes: Sequence[Sequence[int]], threshold: int, cap: int) -> int:
    """``len(pool(sizes, threshold, cap))`` without building the pool: only the cell counts
    of the prefixes, unsorted (the order does not change a count). The design asks for it
    at every ε a forecast's verdict tries; building and sorting a 200,000-grid pool each time
    was most of publish-grid's fixed cost on small files."""
    cells = np.ones(1, dtype=np.int64)
    for column in sizes:
        parts = []
        for size in column:
            keep = cells[cells * int(size) <= threshold]
            if not len(keep):
                break
            parts.append(keep * int(size))
        cells = np.concatenate(parts)
        if len(cells) >= cap:   # every prefix extends to a grid (roots), as in pool()
            return cap
    return len(cells)


def selection_k(hierarchies: Sequence[Hierarchy], threshold: int, max_pool: int) -> int:
    """k columns to pre-select: the paper's ⌈2 log T / log b⌉, capped (module doc)."""
    firsts = sorted(h.sizes[1] for h in hierarchies if h.height > 1)
    b = max(2.0, float(np.median(firsts))) if firsts else 2.0
    k = math.ceil(2 * math.log(max(threshold, 2)) / math.log(b))
    heights = sorted((h.height for h in hierarchies), reverse=True)
    bound, cap = 1, 0
    for height in heights:
        if bound * height >= max_pool:
            break
        bound *= height
        cap += 1
    return max(1, min(k, cap, len(hierarchies) - 1 if len(hierarchies) > 1 else 1))


@dataclass(frozen=True)
class Design:
    """The public shape of a run, computed from n, ε, the hierarchies and ``max_pool``.

    ``select_k`` is None unless the pool reached ``max_pool`` (then columns
    are pre-selected, and ``threshold`` is the one for the smaller ε_hist).
    """

    n: int
    max_pool: int
    threshold: int
    pool_size: int
    select_k: int | None
    plan: Plan

    def to_json(self) -> dict[str, Any]:
        out = {"n": self.n, "max_pool": self.max_pool, "threshold": self.threshold,
               "pool_size": self.pool_size}
        if self.select_k is not None:
            out["select_k"] = self.select_k
        return out


def design(hierarchies: Sequence[Hierarchy], n: int, total: Budget,
           max_pool: int | None = None) -> Design:
    """The branch, T, k and the ε plan; reads no data (n is public under replace-one).

    ``max_pool`` defaults to :data:`MAX_POOL` (the paper's 200,000).
    """
    max_pool = MAX_POOL if max_pool is None else max_pool
    if max_pool < 1:
        raise UsageError(f"max_pool must be at least 1, got {max_pool}")
    sizes = [h.sizes for h in hierarchies]
    plain = Plan.split(total, {SELECT_GRID: ("exponential", SHARES[SELECT_GRID]),
                               HISTOGRAM: ("discrete_laplace", SHARES[HISTOGRAM])})
    t = cell_threshold(n, plain.step(HISTOGRAM).budget.eps)
    size = pool_size(sizes, t, max_pool)
    if size < max_pool:
        return Design(n, max_pool, t, size, None, _notes(plain, t, size, None, len(sizes)))
    plan = Plan.split(total, {
        SELECT_COLUMNS: ("exponential_top_k", SHARES_WITH_SELECTION[SELECT_COLUMNS]),
        SELECT_GRID: ("exponential", SHARES_WITH_SELECTION[SELECT_GRID]),
        HISTOGRAM: ("discrete_laplace", SHARES_WITH_SELECTION[HISTOGRAM])})
    t = cell_threshold(n, plan.step(HISTOGRAM).budget.eps)
    k = selection_k(hierarchies, t, max_pool)
    return Design(n, max_pool, t, size, k, _notes(plan, t, size, k, len(sizes)))


def _notes(plan: Plan, t: int, size: int, k: int | None, d: int) -> Plan:
    hist = plan.step(HISTOGRAM).budget.eps
    rate = hist / HIST_SENSITIVITY
    notes = {SELECT_GRID: (f"expected misclassification of grids with ≤ {t:,} cells, "
                           f"Δq={quality_sensitivity(rate):.3g}"),
             HISTOGRAM: f"2 counts per cell, Δ1={HIST_SENSITIVITY}, scale "
                        f"{HIST_SENSITIVITY / hist:.3g}"}
    if k is None:
        notes[SELECT_GRID] = f"pool of {size:,} grids: " + notes[SELECT_GRID]
    else:
        notes[SELECT_COLUMNS] = (f"pool ≥ {size:,} grids: top {k} of {d} columns by χ², "
                                 f"Δ={CHI2_SENSITIVITY:g}, {k} rounds of ε/k")
    sens = {SELECT_GRID: quality_sensitivity(rate), HISTOGRAM: float(HIST_SENSITIVITY)}
    if k is not None:
        sens[SELECT_COLUMNS] = float(CHI2_SENSITIVITY)
    return plan.with_notes(notes).with_sensitivities(sens)


# ------------------------------------------------------------------------ quality
def _flip_term(x: np.ndarray | float, rate: float) -> np.ndarray | float:
    """x·P(majority flips): P(Z2 − Z1 > x) = e^(−rx)(1 + rx/2)/2 for iid Laplace of rate r."""
    rx = rate * np.asarray(x, dtype=float)
    return np.asarray(x, dtype=float) * np.exp(-rx) * (1.0 + rx / 2.0) / 2.0


#: differences |n+ − n−| below this take their flip term from a table (:func:`_flip_terms`)
FLIP_TABLE = 1 << 16


@lru_cache(maxsize=8)
def _flip_table(rate: float) -> np.ndarray:
    table = np.asarray(_flip_term(np.arange(FLIP_TABLE, dtype=float), rate))
    table.flags.writeable = False
    return table


def _flip_terms(x: np.ndarray, rate: float) -> np.ndarray:
    """:func:`_flip_term` of each count difference x ≥ 0 (integers, or floats holding
    integers): the same floats, read from :func:`_flip_table` below FLIP_TABLE (about
    1 ns a cell against 40 for the exponential; the table is that function's own output on
    the same inputs), computed above it. Non-integer floats are computed."""
    whole = x if x.dtype.kind in "iu" else x.astype(np.int64)
    if x.ndim == 0 or (whole is not x and not np.array_equal(whole, x)):
        return np.asarray(_flip_term(x, rate))
    table = _flip_table(rate)
    large = whole >= FLIP_TABLE
    if not large.any():
        return table[whole]
    out = table[np.minimum(whole, FLIP_TABLE - 1)]
    out[large] = _flip_term(x[large], rate)
    return out


def misclassification(hist: np.ndarray, rate: float) -> float:
    """PrivPfC's quality (Lemma 1): expected misclassified records of the noisy grid.

    ``hist[..., 0]`` and ``hist[..., 1]`` are the two classes' counts per
    cell. A cell misclassifies min(n+, n−) records if noise keeps its
    majority and max(n+, n−) if noise flips it, so its expectation is
    min + x·P(flip) with x = |n+ − n−|. Lower is better. Private: a
    function of exact counts, released only through :func:`select_grid`.
    """
    a, b = hist[..., 0], hist[..., 1]
    return float(np.minimum(a, b).sum() + np.sum(_flip_term(np.abs(a - b), rate)))


@lru_cache(maxsize=64)
def quality_sensitivity(rate: float) -> float:
    """Δq: the most :func:`misclassification` changes between replace-one neighbours.

    Proof. q = Σ_c f(n+_c, n−_c) with f(u, v) = min(u, v) + h(|u − v|),
    h(x) = x·e^(−rx)(1 + rx/2)/2. Replacing a record is removing it (to a
    dataset of n − 1 records; f is defined for any counts) and adding the
    new one, so q(D′) − q(D) = A′ − A for two increments A, A′ of f by one
    record added to one class of one cell (A evaluated after the removal).
    Adding to the larger (or an equal) class changes f by D(x) = h(x+1) −
    h(x), x ≥ 0; adding to the smaller one by 1 − D(x − 1), x ≥ 1. So
    |Δq| ≤ sup I − inf I over I = {D(x)} ∪ {1 − D(x)}, x = 0, 1, … A record
    that moves into or out of no cell (a value in no leaf of a used column)
    changes q by one increment, at most max(sup I, −inf I) ≤ sup I − inf I
    because inf I < 0 < sup I (1 − D(0) ≥ 1/2, and D < 0 where h decays).
    The extremes are found on the integers: all of x ≤ 60/r + 100 when that
    is at most 2·10^6 (beyond, h and D are below e^(−60)), else a coarse
    scan refined to every integer around each extreme (D is smooth and has
    one minimum and one maximum there). A relative slack of 1e-9 covers the
    rounding of q's floating-point sum. (The paper's B(ε), Lemma 3, is the
    add/remove sup, 1 − inf D; replace-one adds the other side.)
    Tested by brute force in tests/algorithms/test_privpfc.py.
    """
    if not (rate > 0 and math.isfinite(rate)):
        raise ValueError("rate must be positive and finite")
    last = int(60.0 / rate) + 100
    if last <= 2_000_000:
        x = np.arange(0, last + 1, dtype=float)
    else:
        coarse = np.unique(np.linspace(0, last, 200_001).astype(np.int64))
        d = np.diff(_flip_term(coarse.astype(float), rate)) / np.diff(coarse)
        step = int(np.diff(coarse).max()) + 2
        near = [coarse[int(np.argmin(d))], coarse[int(np.argmax(d))], 0]
        x = np.unique(np.concatenate([np.arange(max(0, c - step), c + step + 1)
                                      for c in near])).astype(float)
    h = _flip_term(x, rate)
    step_up = _flip_term(x + 1.0, rate) - h
    values = np.concatenate([step_up, 1.0 - step_up])
    return float(values.max() - values.min()) * (1.0 + 1e-9)


# ------------------------------------------------------------------------ scoring
@dataclass(frozen=True)
class CellRows:
    """Rows of (leaf tuple, class) with a weight: a joint table split by class.

    ``leaves`` (rows, columns) may hold a column's "in no leaf" index
    ``n_leaves``; such a row is in no cell of a grid that uses that column
    (and in its cell of a grid that does not). ``positive`` is 1 for the
    positive class and 0 for the rest; ``weight`` is the count (1 for raw
    rows, which makes the naive rescan).
    """

    leaves: np.ndarray
    positive: np.ndarray
    weight: np.ndarray


def cell_rows(table: JointTable, positive: int) -> CellRows:
    """The table split into (rest, positive) rows with non-zero weight."""
    counts = table.counts
    pos = counts[:, positive]
    rest = counts.sum(axis=1) - pos
    both = np.concatenate([table.leaves, table.leaves]).astype(np.int64)
    cls = np.repeat(np.array([0, 1], dtype=np.int32), len(table.leaves))
    weight = np.concatenate([rest, pos]).astype(float)
    nz = weight > 0
    return CellRows(both[nz], cls[nz], weight[nz])


def _node_codes(h: Hierarchy, level: int) -> np.ndarray:
    """Node of ``level`` per leaf, with the "in no leaf" index mapped to the extra node."""
    return np.append(h.leaf_level[level], h.sizes[level]).astype(np.int64)


def grid_histogram(rows: CellRows, hierarchies: Sequence[Hierarchy], grid: Sequence[int],
                   node_codes: list[list[np.ndarray]] | None = None) -> np.ndarray:
    """Dense histogram of ``grid`` over its used columns (level > 0), with the class last.

    Axis i has the used column's level size + 1: the extra last node holds
    rows whose value is in no leaf. [..., 0] counts the rest, [..., 1] the
    positive class. ``node_codes[j][l]``, if given, caches column j's node
    at level l per row (extra node included). :func:`cells_of` gives the
    released region.
    """
    used = [j for j, level in enumerate(grid) if level > 0]
    shape = tuple(hierarchies[j].sizes[int(grid[j])] + 1 for j in used)
    cells = math.prod(shape)
    kind = np.int32 if 2 * cells < 2**31 else np.int64   # int32 halves the memory traffic
    flat: np.ndarray = np.zeros(len(rows.leaves), dtype=kind)
    for j, size in zip(used, shape, strict=True):
        level = int(grid[j])
        code = (node_codes[j][level] if node_codes is not None
                else _node_codes(hierarchies[j], level)[rows.leaves[:, j]])
        flat = flat * kind(size) + code
    flat = flat * kind(2) + rows.positive
    hist = np.bincount(flat, weights=rows.weight, minlength=2 * cells)
    return hist.reshape(*shape, 2)


def cells_of(hist: np.ndarray) -> np.ndarray:
    """The real cells of a :func:`grid_histogram` (the extra "no leaf" nodes cut off)."""
    return hist[tuple(slice(0, n - 1) for n in hist.shape[:-1])]


def score_pool_dense(table: JointTable, hierarchies: Sequence[Hierarchy], grids: np.ndarray,
                     rate: float, positive: int,
                     progress: Callable[[int], None] | None = None) -> np.ndarray:
    """Quality (:func:`misclassification`) of every grid, as a dense data cube: the
    reference :func:`score_pool` is tested against, and what it uses for pools of small
    grids or when the sparse keys would need over 48 bits.

    Private: exact qualities; release only through :func:`select_grid`.
    """
    rows = cell_rows(table, positive)
    codes = [[_node_codes(h, level).astype(np.int32)[rows.leaves[:, j]]
              for level in range(h.height)] for j, h in enumerate(hierarchies)]
    parent, axis = _refinements(hierarchies, grids)
    g = grids.astype(np.int64)
    by_parent = np.argsort(parent, kind="stable")
    bounds = np.searchsorted(parent[by_parent], np.arange(-1, len(g) + 1))
    starts = [[np.append(h.starts(level), h.sizes[level + 1]) for level in range(h.height - 1)]
              for h in hierarchies]
    quality = np.full(len(g), np.nan)
    done = 0

    def children(i: int) -> np.ndarray:
        return by_parent[bounds[i + 1]:bounds[i + 2]]

    for root in children(-1):
        hist = grid_histogram(rows, hierarchies, g[root], codes)
        stack = [(int(root), hist)]
        while stack:
            node, hist = stack.pop()
            quality[node] = misclassification(cells_of(hist), rate)
            for child in children(node):
                j = int(axis[child])
                at = int((g[child, :j] > 0).sum())          # column j's axis among used ones
                level = int(g[child, j])
                rolled = (np.add.reduceat(hist, starts[j][level], axis=at) if level > 0
                          else hist.sum(axis=at))
                stack.append((int(child), rolled))
            done += 1
            if progress is not None and done % 4096 == 0:
                progress(4096)
    if progress is not None:
        progress(done % 4096)
    if not np.isfinite(quality).all():
        raise RuntimeError("a grid of the pool was not scored")  # never release on a gap
    return quality


def _refinements(hierarchies: Sequence[Hierarchy],
                 grids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per grid: the index of a refinement by one level of one column that is in the pool
    (−1 if none: the grid is maximal), and that column.

    The last refinable column whose refinement is in the pool is taken: the least
    significant of a sparse key, so a roll-up leaves its cells in longer sorted runs. Grids
    are keyed as mixed-radix integers when the heights' product fits in 62
    bits, as level tuples otherwise.
    """
    g = np.asarray(grids)     # levels as they come (int8 from pool): no int64 copy
    heights = [h.height for h in hierarchies]
    parent = np.full(len(g), -1, dtype=np.int64)
    axis = np.full(len(g), -1, dtype=np.int64)
    if math.prod(heights) < 2**62:
        radix = np.cumprod([1, *heights[:-1]]).astype(np.int64)
        keys = np.zeros(len(g), dtype=np.int64)
        for j in range(g.shape[1]):                  # g @ radix, a column at a time
            keys += g[:, j].astype(np.int64) * radix[j]
        order = np.argsort(keys)
        sorted_keys = keys[order]
        for j in reversed(range(g.shape[1])):
            open_ = (parent < 0) & (g[:, j] + 1 < heights[j])
            want = keys + radix[j]
            at = np.minimum(np.searchsorted(sorted_keys, want), len(keys) - 1)
            hit = open_ & (sorted_keys[at] == want)
            parent[hit] = order[at[hit]]
            axis[hit] = j
        return parent, axis
    index = {tuple(row): i for i, row in enumerate(g.tolist())}
    for i, row in enumerate(g.tolist()):
        for j in reversed(range(len(row))):
            if row[j] + 1 < heights[j]:
                finer = index.get((*row[:j], row[j] + 1, *row[j + 1:]))
                if finer is not None:
                    parent[i], axis[i] = finer, j
                    break
    return parent, axis


# ------------------------------------------------------------------ sparse scoring
#: cells gathered per chunk of the sparse cube walk: bounds the memory of a chunk and
#: gives the worker threads pieces of comparable size
CHUNK_CELLS = 1 << 18
#: below this mean of dense cells per grid (extra nodes included) the dense cube is
#: faster (measured in round 8, with the dense cube one Python step per grid: Adult's 14
#: columns at n = 30,162, ε = 1: 120,614 grids of 3,981 cells on average, dense 14 s of
#: CPU, sparse 33 s; 9 columns at 10⁶ rows: 22,911 grids of 38,000, dense 18 s, sparse
#: 6 s). Kept as it was: moving it would change which floats a pool gets (the sparse
#: cube's flip sums skip the empty cells' zeros)
DENSE_BELOW = 8192
#: table rows × used-column sets projected and walked together (the maximal grids of
#: those sets and their subtrees, level by level): bounds the cells held at once
BATCH_CELLS = 1 << 20


@dataclass(frozen=True)
class _Keys:
    """Bit-packed cell keys over all candidates: column j's node in ``bits[j]`` bits at
    ``shift[j]`` (column 0 most significant), the "in no leaf" node as the field's all-ones
    value (above every real node), so a key's order over a grid's used columns is the C
    order of its dense histogram, and a cell is in no real cell of its grid exactly when
    one of its fields is all ones (:meth:`valid`: a column at level 0 holds 0 there).
    ``table[offset[j] + ((ls·H + lt) << bits[j] | v)]`` is the level-lt node of column
    j's level-ls node v (the extra node to the extra node, every node to 0 at the root);
    ``table[0] = 0`` serves a pass that changes nothing. ``low``/``high``: each field's
    lowest/highest bit."""

    shift: np.ndarray
    bits: np.ndarray
    height: np.ndarray
    offset: np.ndarray
    table: np.ndarray
    total_bits: int
    low: int
    high: int

    def valid(self, key: np.ndarray) -> np.ndarray:
        """Which keys have no all-ones field (a real cell): a field of ``x = ~key`` is zero
        exactly when ``(x − low) & ~x & high`` sets its high bit; a borrow only crosses a
        field that is zero, so "some field is zero" is exact (the classic haszero)."""
        x = ~key & ((1 << self.total_bits) - 1)
        return ((x - self.low) & ~x & self.high) == 0


def _keys(hierarchies: Sequence[Hierarchy]) -> _Keys | None:
    bits = np.array([max(1, int(h.n_leaves).bit_length()) for h in hierarchies],
                    dtype=np.int64)                     # n_leaves + 1 nodes: 0 … n_leaves
    total = int(bits.sum())
    if total > 48:          # leaves 14 bits for the grid index within a chunk
        return None
    shift = (total - np.cumsum(bits)).astype(np.int64)
    maps = []
    for h, width in zip(hierarchies, bits.tolist(), strict=True):
        hh = h.height
        table = np.zeros((hh, hh, 1 << width), dtype=np.int64)
        for ls in range(hh):
            for lt in range(1, ls + 1):
                table[ls, lt, h.leaf_level[ls]] = h.leaf_level[lt]
                table[ls, lt, (1 << width) - 1] = (1 << width) - 1   # "in no leaf" stays out
        maps.append(table.reshape(-1))
    heights = np.array([h.height for h in hierarchies], dtype=np.int64)
    lengths = np.array([len(m) for m in maps], dtype=np.int64)
    offset = 1 + np.cumsum(lengths) - lengths
    low = sum(1 << int(s) for s in shift)
    high = sum(1 << int(s + w - 1) for s, w in zip(shift, bits, strict=True))
    return _Keys(shift, bits, heights, offset,
                 np.concatenate([np.zeros(1, dtype=np.int64), *maps]), total, low, high)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The concatenation of arange(s, s + n) for each (s, n)."""
    total = int(lengths.sum())
    before = np.cumsum(lengths) - lengths
    return (np.arange(total, dtype=np.int64) + np.repeat(starts - before, lengths)).astype(
        np.int64)


@dataclass
class _Cells:
    """Non-empty cells of several grids: grid i's cells are ``start[i]:start[i] + count[i]``
    of ``key`` and ``counts``, in key order. ``counts``: the (rest, positive) counts, packed
    as rest·2^32 + positive in one int64 when every grid holds fewer than 2^31 records (so
    a sum of packed counts is the packed sums), else (cells, 2)."""

    key: np.ndarray
    counts: np.ndarray
    start: np.ndarray
    count: np.ndarray

    def split(self, select: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rest, positive) of the selected cells."""
        c = self.counts[select]
        if c.ndim == 1:
            return c >> 32, c & 0xFFFFFFFF
        return c[:, 0], c[:, 1]


def _roll(src: _Cells, src_levels: np.ndarray, of: np.ndarray, levels: np.ndarray,
          k: _Keys) -> _Cells:
    """Cells of the grids ``levels`` (each coarser than or equal to its source grid
    ``src_levels[of[t]]`` column by column), summed from the source's cells."""
    sizes = src.count[of]
    take = _ranges(src.start[of], sizes)
    owner = np.repeat(np.arange(len(of), dtype=np.int64), sizes)
    key = src.key[take]
    lsrc = src_levels[of]
    change = lsrc != levels                               # (targets, columns)
    # one pass per changed column of a target (one for a roll-up, up to all for the
    # maximal grids), in runs of consecutive targets that change the same column between
    # the same levels (the callers order targets so): scalar shift, mask and map per run
    rank = np.cumsum(change, axis=1) - 1
    ends = np.cumsum(sizes)
    every = np.arange(len(of))
    top = int(k.height.max())
    for i in range(int(change.sum(axis=1).max(initial=0))):
        pick = change & (rank == i)
        col = np.argmax(pick, axis=1)
        code = np.where(pick[every, col],
                        (col * top + lsrc[every, col]) * top + levels[every, col] + 1, 0)
        runs = np.flatnonzero(np.diff(code, prepend=-1))
        for lo, hi in zip(runs.tolist(), [*runs[1:].tolist(), len(of)], strict=True):
            e0, e1 = int(ends[lo] - sizes[lo]), int(ends[hi - 1])
            if code[lo] == 0 or e0 == e1:
                continue
            j, ls, lt = int(col[lo]), int(lsrc[lo, col[lo]]), int(levels[lo, col[lo]])
            width, shift = int(k.bits[j]), int(k.shift[j])
            at = int(k.offset[j]) + ((ls * int(k.height[j]) + lt) << width)
            table = k.table[at:at + (1 << width)]
            part = key[e0:e1]
            node = (part >> shift) & ((1 << width) - 1)
            part += (table[node] - node) << shift
    combined = (owner << k.total_bits) | key
    order = np.argsort(combined, kind="stable")   # timsort: uses the runs a roll-up leaves
    combined = combined[order]
    first = np.flatnonzero(np.concatenate([[True], combined[1:] != combined[:-1]])) \
        if len(combined) else np.zeros(0, dtype=np.int64)
    counts = src.counts[take][order]              # gathered in runs, then permuted once
    counts = (np.add.reduceat(counts, first, axis=0) if len(first) else counts[:0])
    head = combined[first]
    cell_owner = head >> k.total_bits
    count = np.bincount(cell_owner, minlength=len(of)).astype(np.int64)
    return _Cells(head & ((1 << k.total_bits) - 1), counts, np.cumsum(count) - count, count)


def _quality(cells: _Cells, n_grids: int, rate: float, k: _Keys) -> np.ndarray:
    """:func:`misclassification` of each grid from its non-empty cells; cells in the extra
    node of a used column are in no real cell and left out."""
    owner = np.repeat(np.arange(n_grids, dtype=np.int64), cells.count)
    valid = k.valid(cells.key)
    (a, b), owner = cells.split(valid), owner[valid]
    count = np.bincount(owner, minlength=n_grids)
    out = np.zeros(n_grids)
    full = np.flatnonzero(count > 0)
    if len(full):
        first = (np.cumsum(count) - count)[full]
        low = np.add.reduceat(np.minimum(a, b), first)
        flips = np.add.reduceat(_flip_terms(np.abs(a - b), rate), first)
        out[full] = low.astype(float) + flips
    return out


def score_pool(table: JointTable, hierarchies: Sequence[Hierarchy], grids: np.ndarray,
               rate: float, positive: int,
               progress: Callable[[int], None] | None = None, *,
               threads: int | None = None, method: str = "auto") -> np.ndarray:
    """Quality (:func:`misclassification`) of every grid, as a sparse data cube.

    Private: exact qualities; release only through :func:`select_grid`. Each grid's
    non-empty cells are summed from those of its one-level refinement in the pool (or,
    for the pool's maximal grids, from the table projected on their used columns), a
    whole level of the refinement forest at a time, batches of maximal grids on
    ``threads`` worker threads (default: the pass's,
    :func:`dpcli.data.prefetch.usable_cores`). A grid
    never holds more cells than the table has rows, so the work is the pool's non-empty
    cells, not its dense cells. Equal to :func:`score_pool_dense` but for the rounding
    of the flip terms' sum (the same terms, over the non-empty cells only).

    ``method``: "sparse", "dense", or "auto": dense when the pool's grids average fewer
    than DENSE_BELOW dense cells (many small grids: the dense cube's one roll-up per grid
    is cheaper than the sparse chunks) or the keys need over 48 bits; a choice from the
    pool and the taxonomies, public facts. "dense" is :func:`score_pool_dense`'s floats,
    bit for bit, computed a batch of grids at a time
    (:func:`dpcli.algorithms.grid_cube.score_pool_cube`).
    """
    k = _keys(hierarchies)
    if method == "auto" and len(grids):
        dense_cells = np.ones(len(grids))
        for j, h in enumerate(hierarchies):
            dense_cells *= np.array([1, *(s + 1 for s in h.sizes[1:])], dtype=float)[
                grids[:, j].astype(np.int64)]
        method = "dense" if dense_cells.mean() < DENSE_BELOW else "sparse"
    if k is None or len(grids) == 0 or method == "dense":
        from dpcli.algorithms.grid_cube import score_pool_cube

        return score_pool_cube(table, hierarchies, grids, rate, positive, progress,
                               threads=threads)
    from collections import deque
    from concurrent.futures import Future, ThreadPoolExecutor

    from dpcli.data.prefetch import settle, usable_cores

    workers = usable_cores() if threads is None else max(1, threads)
    g = grids.astype(np.int64)
    counts = np.asarray(table.counts)
    b0 = counts[:, positive].astype(np.int64)
    a0 = counts.sum(axis=1).astype(np.int64) - b0
    leaves = np.asarray(table.leaves, dtype=np.int64)
    raw_key = np.zeros(len(leaves), dtype=np.int64)
    for j, h in enumerate(hierarchies):
        field = np.where(leaves[:, j] == h.n_leaves, (1 << int(k.bits[j])) - 1, leaves[:, j])
        raw_key |= field << k.shift[j]
    top = (k.height - 1)[None, :]
    pack = int(a0.sum()) + int(b0.sum()) < 2**31    # then both counts add up as one int64
    raw = _Cells(raw_key, (a0 << 32 | b0) if pack else np.column_stack([a0, b0]),
                 np.zeros(1, dtype=np.int64), np.array([len(raw_key)], dtype=np.int64))
    parent, axis = _refinements(hierarchies, grids)
    quality = np.full(len(g), np.nan)

    def job(src: _Cells, src_levels: np.ndarray, of: np.ndarray, levels: np.ndarray,
            score: bool) -> tuple[_Cells, np.ndarray]:
        cells = _roll(src, src_levels, of, levels, k)
        return cells, (_quality(cells, len(of), rate, k) if score else np.zeros(0))

    def run(src: _Cells, src_levels: np.ndarray, of: np.ndarray, levels: np.ndarray,
            score: bool = True) -> tuple[_Cells, np.ndarray]:
        """:func:`_roll` (and :func:`_quality` if ``score``) in chunks of about
        CHUNK_CELLS gathered cells (a bound on the memory of one step), joined in order."""
        sizes = src.count[of]
        chunk_of = np.cumsum(sizes) // CHUNK_CELLS
        limit = 1 << (62 - k.total_bits)                      # owner << bits must fit
        chunk_of = np.maximum(chunk_of, np.arange(len(of)) // limit)
        cuts = np.flatnonzero(np.diff(chunk_of)) + 1
        if not len(cuts):
            return job(src, src_levels, of, levels, score)
        done = [job(src, src_levels, of[p], levels[p], score)
                for p in np.split(np.arange(len(of)), cuts)]
        count = np.concatenate([c.count for c, _ in done])
        return (_Cells(np.concatenate([c.key for c, _ in done]),
                       np.concatenate([c.counts for c, _ in done]), np.cumsum(count) - count,
                       count),
                np.concatenate([q for _, q in done]))

    def walk(projected: _Cells, span: np.ndarray, first_set: int, batch: np.ndarray) -> int:
        """Scores the subtrees of the maximal grids ``roots[batch]``, level by level, from
        their sets' projections; returns how many grids it scored. Batches write disjoint
        entries of ``quality``, so they run on any thread, in any order."""
        frontier = roots[batch]
        cells, quality[frontier] = run(projected, span, set_of[batch] - first_set,
                                       g[frontier])
        scored = 0
        while len(frontier):
            scored += len(frontier)
            lo, hi = bounds[frontier + 1], bounds[frontier + 2]
            slots = _ranges(lo, hi - lo)
            if not len(slots):
                break
            children = by_parent[slots]
            of = np.repeat(np.arange(len(frontier), dtype=np.int64), hi - lo)
            by_axis = np.lexsort((g[frontier][of, axis[children]], axis[children]))
            children, of = children[by_axis], of[by_axis]    # alike children in runs
            cells, quality[children] = run(cells, g[frontier], of, g[children])
            frontier = children
        return scored

    # the pool's maximal grids: from the table projected on each used-column set.
    # Their subtrees are independent: walk them a batch of sets at a time, so the
    # memory held is a batch's projections and widest level, not the whole pool's
    roots = np.flatnonzero(parent < 0)
    sets, set_of = np.unique(g[roots] > 0, axis=0, return_inverse=True)
    set_of = set_of.reshape(-1)
    order = np.lexsort((*g[roots].T[::-1], set_of))      # by set, alike roots in runs
    roots, set_of = roots[order], set_of[order]
    set_levels = np.where(sets, top, 0)
    by_parent = np.argsort(parent, kind="stable")
    bounds = np.searchsorted(parent[by_parent], np.arange(-1, len(g) + 1))
    set_batch = np.arange(len(sets)) * max(len(raw_key), 1) // BATCH_CELLS
    # the workers each walk whole batches (no barrier per level, and the bookkeeping
    # between numpy calls runs on the workers too); the main thread projects the next
    # sets meanwhile. At most 2 batches per worker wait, so memory stays bounded
    pool_ = ThreadPoolExecutor(workers) if workers > 1 else None
    waiting: deque[Future[int]] = deque()

    try:
        for first_set in np.flatnonzero(np.diff(set_batch, prepend=-1)).tolist():
            last_set = int(np.searchsorted(set_batch, set_batch[first_set], side="right"))
            span = set_levels[first_set:last_set]
            projected, _ = run(raw, top, np.zeros(len(span), dtype=np.int64), span, False)
            in_span = np.flatnonzero((set_of >= first_set) & (set_of < last_set))
            sizes = np.cumsum(projected.count[set_of[in_span] - first_set])
            # BATCH_CELLS bounds a batch; with workers, at least 4 batches each
            parts = max(int(sizes[-1]) // BATCH_CELLS + 1 if len(sizes) else 1,
                        min(len(in_span), 4 * workers) if workers > 1 else 1)
            for batch in np.split(in_span, np.flatnonzero(np.diff(
                    sizes * parts // (int(sizes[-1]) + 1) if len(sizes) else sizes)) + 1):
                if pool_ is None:
                    scored = walk(projected, span, first_set, batch)
                    if progress is not None:
                        progress(scored)
                    continue
                waiting.append(pool_.submit(walk, projected, span, first_set, batch))
                settle(waiting, 2 * workers, progress)
        settle(waiting, 0, progress)
    finally:
        if pool_ is not None:
            for future in waiting:
                future.cancel()
            pool_.shutdown()
    if not np.isfinite(quality).all():
        raise RuntimeError("a grid of the pool was not scored")  # never release on a gap
    return quality


# -------------------------------------------------------------------- mechanisms
def column_scores(table: JointTable, hierarchies: Sequence[Hierarchy],
                  positive: int) -> np.ndarray:
    """PrivPfC's Cor(A, R) = Σ|o − e| of every column (private; see :func:`select_columns`).

    Each column's (class × leaf) table counts rows in no leaf as one more
    level, so every table holds all n rows.
    """
    from dpcli.algorithms.feature_selection import chi2_score

    scores = []
    for j, h in enumerate(hierarchies):
        per_class = np.stack([np.bincount(table.leaves[:, j], weights=table.counts[:, k],
                                          minlength=h.n_leaves + 1)
                              for k in range(table.counts.shape[1])])
        scores.append(chi2_score(per_class, positive))
    return np.array(scores)


def select_columns(table: JointTable, hierarchies: Sequence[Hierarchy], k: int, epsilon: float,
                   positive: int, rng: np.random.Generator, *,
                   sensitivity: float = CHI2_SENSITIVITY) -> np.ndarray:
    """Indices of k columns, best first, by PrivPfC's χ² top-k: ε-DP.

    Releases: which columns (never a score).
    Statistic: :func:`column_scores` (select-features' chi2 on leaf tables).
    Sensitivity: 4 per column under replace-one (proof in
    :mod:`dpcli.algorithms.feature_selection`; tested on neighbours here
    and there).
    Noise: k rounds of the exponential mechanism at ε/k, as one-shot Gumbel
    top-k (:func:`dpcli.mechanisms.exponential_top_k`). Cost: ε.
    """
    return exponential_top_k(column_scores(table, hierarchies, positive), k,
                             sensitivity=sensitivity, epsilon=epsilon, rng=rng)


def select_grid(quality: np.ndarray, rate: float, epsilon: float,
                rng: np.random.Generator, *, sensitivity: float | None = None) -> int:
    """Index of one grid, sampled ∝ exp(−ε·q/(2Δq)): ε-DP.

    Releases: which grid (never a quality). Sensitivity: Δq =
    :func:`quality_sensitivity` of the histogram's noise rate.
    Noise: the exponential mechanism on the scores −q. Cost: ε. ``sensitivity``: the plan
    step's (the same Δq, computed once where the plan is made).
    """
    delta_q = quality_sensitivity(rate) if sensitivity is None else sensitivity
    return exponential_mechanism(-quality, sensitivity=delta_q, epsilon=epsilon, rng=rng)


def noisy_counts(hist: np.ndarray, epsilon: float, rng: np.random.Generator, *,
                 sensitivity: int = HIST_SENSITIVITY) -> np.ndarray:
    """The grid's (cells, 2) counts with discrete Laplace noise, clamped at 0: ε-DP.

    Releases: every cell's two counts, empty cells included.
    Sensitivity: L1 2 under replace-one (a record leaves one (cell, class)
    count and enters one; a record in no cell changes only one count).
    Noise: discrete Laplace of scale 2/ε on each count; rounding to
    non-negative integers is post-processing. Cost: ε.
    """
    exact = np.rint(hist.reshape(-1, 2)).astype(np.int64)
    noisy = discrete_laplace_mechanism(exact, sensitivity=sensitivity, epsilon=epsilon,
                                       rng=rng)
    return np.maximum(np.asarray(noisy), 0)


# ------------------------------------------------------------------------ publish
@dataclass
class Synopsis:
    """The released grid: per column its level, and the noisy (rest, positive) counts per cell.

    ``counts`` is int64 (cells, 2) in row-major order over the used columns
    (level > 0), in hierarchy order.
    """

    hierarchies: tuple[Hierarchy, ...]
    levels: tuple[int, ...]
    counts: np.ndarray
    design: Design
    selected: tuple[str, ...] | None
    pool_size: int

    @property
    def used(self) -> list[int]:
        return [j for j, level in enumerate(self.levels) if level > 0]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.hierarchies[j].sizes[self.levels[j]] for j in self.used)


def publish(table: JointTable, hierarchies: Sequence[Hierarchy], d: Design, positive: int,
            rng: np.random.Generator,
            progress: Callable[[int], None] | None = None, *,
            plan: Plan | None = None) -> Synopsis:
    """Algorithm 1 on the sparse joint table of every candidate; costs ``d.plan.total``.

    ``plan``: the run's spending plan (``d.plan`` by default), each step drawn once.
    """
    spend = d.plan if plan is None else plan
    hierarchies = tuple(hierarchies)
    selected: tuple[str, ...] | None = None
    columns = list(range(len(hierarchies)))
    if d.select_k is not None:
        fs_step = spend.draw(SELECT_COLUMNS)
        chosen = select_columns(table, hierarchies, d.select_k, fs_step.budget.eps, positive,
                                rng, sensitivity=fs_step.noise_sensitivity())
        columns = sorted(int(c) for c in chosen)
        selected = tuple(hierarchies[j].column for j in columns)
    sub = [hierarchies[j] for j in columns]
    sub_table = JointTable(tuple(h.column for h in sub), table.leaves[:, columns], table.counts)
    hist_step = spend.draw(HISTOGRAM)   # drawn once: the histogram's noise below
    eps_hist = hist_step.budget.eps
    rate = eps_hist / hist_step.noise_sensitivity()
    grids = pool([h.sizes for h in sub], d.threshold)
    quality = score_pool(sub_table, sub, grids, rate, positive, progress)
    grid_step = spend.draw(SELECT_GRID)
    best = select_grid(quality, rate, grid_step.budget.eps, rng,
                       sensitivity=grid_step.noise_sensitivity())
    hist = cells_of(grid_histogram(cell_rows(sub_table, positive), sub, grids[best]))
    levels = [0] * len(hierarchies)
    for j, level in zip(columns, grids[best], strict=True):
        levels[j] = int(level)
    counts = noisy_counts(hist, eps_hist, rng, sensitivity=hist_step.integer_sensitivity())
    return Synopsis(hierarchies, tuple(levels), counts, d, selected, len(grids))
