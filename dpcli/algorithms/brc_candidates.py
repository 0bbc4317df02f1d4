"""A selecting round's K candidates, fast and exact: drawn in bulk, scored in blocks.

Two pieces of :func:`dpcli.algorithms.brc.train` that dominated its time at Adult's size
(K = 139 candidates a round on 30,162 records; docs/algorithms/brc.md § Selecting rounds,
*Scoring the candidates*):

* :func:`draw_pool` draws the K random hyperplanes with one generator call for the lot
  and decides "constant on the domain" for all of them at once, instead of K calls of
  :func:`~dpcli.algorithms.brc.random_hyperplane` (ten generator calls and a dozen small
  array operations each). The same doubles, in the same order, make the same hyperplanes.
* :func:`add_cell_sums` adds every candidate's class-and-right/wrong weight sums of one
  batch, the statistic :func:`~dpcli.algorithms.brc.balanced_edges` reads, from a
  (records × candidates) block of margins that stays in cache, instead of one candidate at
  a time with ``np.add.at``.

Neither releases anything nor changes what is released: a seeded run writes the same model
file, byte for byte, as the candidate-at-a-time code. Two facts make that exact:

1. A candidate's vote reads only the *sign* of its margin. The fast margin sums the same
   terms (x_j·w_j, the intercept, one level weight per categorical column) in another
   order, so it may differ from the reference margin (:meth:`Hyperplane.margin`) in the
   last bits, by at most ``margin_tolerance`` (twice the classic γ_m·Σ|term| bound of a
   sum of m rounded terms in any order, doubled again). Where the fast margin lies within
   that tolerance of 0, the sign is taken from the reference margin instead; everywhere
   else both have the same sign.
2. Each sum is accumulated record by record in file order, as ``np.add.at`` does: a
   record that is not in a cell adds an exact 0.0, and numpy reduces a C-ordered
   (rows × columns ≥ 2) array along its rows one row after another, each column on its
   own (tests/algorithms/test_brc_candidates.py checks that fold against a Python loop).
   The running sums of earlier batches enter as the first row, so the result does not
   depend on where the batches split.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpcli.algorithms.inputs import Inputs

#: at most this many level combinations in one joint look-up table (per candidate): two or
#: more categorical columns whose levels multiply to at most this share one look-up a record
MAX_COMBINATIONS = 512
#: records × candidates in one block of margins: 32,768 doubles (256 KiB) fit in L2
BLOCK_CELLS = 32_768
#: unit roundoff of float64
UNIT = 2.0 ** -53


# ------------------------------------------------------------------ drawing


class Pool:
    """A round's K candidates as one (K, 1 + d + Σ levels) parameter matrix: per row the
    intercept, the numeric coefficients, then each coded column's level weights (the order
    they are drawn in). ``pool[k]`` is candidate k as a :class:`Hyperplane`, made when first
    asked for (a round needs the chosen one; making all K cost a tenth of a round)."""

    def __init__(self, params: np.ndarray, x: Inputs) -> None:
        self.params = params
        self._layout = (len(x.numeric_names), dict(x.n_levels))
        self._made: dict[int, Any] = {}

    def __len__(self) -> int:
        return int(self.params.shape[0])

    def __getitem__(self, k: int) -> Any:
        if k not in self._made:
            self._made[k] = _hyperplane(self.params[k], *self._layout)
        return self._made[k]

    @property
    def hyperplanes(self) -> list[Any]:
        return [self[k] for k in range(len(self))]

    def part(self, rows: slice) -> Pool:
        """Candidates ``rows`` as a pool of their own."""
        out = Pool.__new__(Pool)
        out.params, out._layout, out._made = self.params[rows], self._layout, {}
        return out


def draw_pool(x: Inputs, rng: np.random.Generator, k: int, max_draws: int) -> Pool:
    """``k`` random hyperplanes: the ones ``k`` calls of ``random_hyperplane(x, rng)``
    return, drawing the same doubles from ``rng`` (none more), with ``max_draws`` its
    redraw limit.

    Reads no data (sizes only). A hyperplane's draw is 1 + d + Σ levels uniform doubles
    on [-1, 1] (intercept, numeric coefficients, each coded column's level weights, in
    that order); a constant one (:meth:`Hyperplane.constant`) is replaced by the next
    draw. Drawn here as many at a time as slots are still empty, so the generator never
    runs ahead of the one-at-a-time code.
    """

    width = 1 + len(x.numeric_names) + sum(x.n_levels.values())
    rows: list[np.ndarray] = []
    draws = 0   # draws for the slot being filled
    while len(rows) < k:
        block = rng.uniform(-1.0, 1.0, size=(k - len(rows), width))
        constant = _constant_rows(block, x)
        for row, const in zip(block, constant, strict=True):
            draws += 1
            if const and draws < max_draws:
                continue
            rows.append(row)
            draws = 0
    return Pool(np.array(rows).reshape(k, width), x)


def _hyperplane(row: np.ndarray, d: int, n_levels: dict[str, int]) -> Any:
    """The :class:`Hyperplane` of one drawn row (copies: it outlives the matrix)."""
    from dpcli.algorithms.brc import Hyperplane

    levels: dict[str, np.ndarray] = {}
    at = 1 + d
    for name, size in n_levels.items():
        levels[name] = row[at:at + size].copy()
        at += size
    return Hyperplane(float(row[0]), row[1:1 + d].copy(), levels)


def _constant_rows(block: np.ndarray, x: Inputs) -> np.ndarray:
    """Whether each drawn row is a hyperplane constant on the declared domain, decided as
    :meth:`Hyperplane.constant` decides it (numeric inputs in [-1, 1]).

    The least and greatest margins are summed here in another order; where either lies
    within the rounding tolerance of 0, the hyperplane's own method decides."""

    d = len(x.numeric_names)
    numeric = np.abs(block[:, 1:1 + d]).sum(axis=1)
    lo = block[:, 0] - numeric
    hi = block[:, 0] + numeric
    scale = np.abs(block[:, 0]) + numeric
    at = 1 + d
    terms = 1 + d
    for size in x.n_levels.values():
        if size:
            part = block[:, at:at + size]
            lo = lo + part.min(axis=1)
            hi = hi + part.max(axis=1)
            scale = scale + np.abs(part).max(axis=1)
            terms += 1
        at += size
    tol = margin_tolerance(terms, scale)
    constant = (lo >= 0) | (hi < 0)
    unsure = ((np.abs(lo) <= tol) | (np.abs(hi) <= tol)) | ~np.isfinite(tol)
    for i in np.flatnonzero(unsure):
        constant[i] = _hyperplane(block[i], len(x.numeric_names), x.n_levels).constant()
    return constant


def margin_tolerance(terms: int, scale: np.ndarray) -> np.ndarray:
    """How far two float sums of the same ``terms`` rounded terms can lie apart, in any
    order, when the terms' absolute values sum to at most ``scale``: each lies within
    γ_m·scale of the exact sum (γ_m = m·u/(1 − m·u), m = terms + 1 counting the products'
    rounding), so within twice that of each other; doubled again for safety."""
    m = terms + 1
    gamma = m * UNIT / (1.0 - m * UNIT)
    return 4.0 * gamma * np.asarray(scale, dtype=np.float64)


# ------------------------------------------------------------------ scoring


@dataclass
class Prepared:
    """One batch's records arranged for scoring: negatives first, then positives (file
    order within each class), with the categorical columns joined into look-up groups.
    Data only: the same for every round (records in memory keep it between passes)."""

    order: np.ndarray                   # row indices of the batch: negatives, positives
    negatives: int                      # how many rows of ``order`` are negative
    numeric: np.ndarray                 # (n, d) float64, rows in ``order``
    groups: list[tuple[list[str], list[int]]]   # columns joined in each look-up, and strides
    codes: list[np.ndarray]             # each group's joint code per row, rows in ``order``
    largest: float                      # max |x| over the numeric inputs (inf if not finite)

    @property
    def n(self) -> int:
        return int(self.order.size)


def prepare_batch(x: Inputs, y: np.ndarray) -> Prepared:
    """:class:`Prepared` for the records ``x`` with labels ``y`` (±1)."""
    negative = y <= 0
    order = np.concatenate([np.flatnonzero(negative), np.flatnonzero(~negative)])
    numeric = x.numeric.take(order, axis=0)
    for name, levels in x.n_levels.items():
        column = x.codes[name]
        # a joint code would turn an undeclared code into another combination; the
        # reference look-up (Hyperplane.margin) raises instead, and so does this
        if column.size and (int(column.min()) < 0 or int(column.max()) >= levels):
            raise IndexError(f"{name}: a code outside its {levels} declared levels")
    groups = _groups(x.n_levels)
    codes = []
    for names, strides in groups:
        # intp: a narrow code type (int8, int32) would overflow a joint code
        joint = np.asarray(x.codes[names[0]], dtype=np.intp) * strides[0]
        for name, stride in zip(names[1:], strides[1:], strict=True):
            joint += np.asarray(x.codes[name], dtype=np.intp) * stride
        codes.append(joint.take(order))
    largest = max(-float(numeric.min()), float(numeric.max())) if numeric.size else 0.0
    if not math.isfinite(largest):   # NaN too: max() of NaN and a float is either
        largest = math.inf
    return Prepared(order, int(order.size - np.count_nonzero(y > 0)), numeric, groups,
                    codes, largest)


def _groups(n_levels: dict[str, int]) -> list[tuple[list[str], list[int]]]:
    """Coded columns joined into groups of at most :data:`MAX_COMBINATIONS` level
    combinations (columns in order; a column with more levels is a group of its own)."""
    groups: list[tuple[list[str], list[int]]] = []
    names: list[str] = []
    size = 1
    for name, levels in n_levels.items():
        if names and size * max(levels, 1) > MAX_COMBINATIONS:
            groups.append((names, _strides(names, n_levels)))
            names, size = [], 1
        names.append(name)
        size *= max(levels, 1)
    if names:
        groups.append((names, _strides(names, n_levels)))
    return groups


def _strides(names: list[str], n_levels: dict[str, int]) -> list[int]:
    strides = []
    step = 1
    for name in reversed(names):
        strides.append(step)
        step *= max(n_levels[name], 1)
    return strides[::-1]


def _columns(pool: Pool, x: Inputs) -> dict[str, np.ndarray]:
    """Each coded column's (levels, K) weights, from the pool's parameter matrix."""
    out = {}
    at = 1 + len(x.numeric_names)
    for name, size in x.n_levels.items():
        out[name] = np.ascontiguousarray(pool.params[:, at:at + size].T)
        at += size
    return out


def _tables(pool: Pool, prepared: Prepared, columns: dict[str, np.ndarray]
            ) -> list[np.ndarray]:
    """Each group's (combinations, K) table of summed level weights; the intercept is
    folded into the first group's (or is a table of one row)."""
    k = len(pool)
    intercept = pool.params[:, 0]
    tables = []
    for g, (names, _) in enumerate(prepared.groups):
        table = np.zeros((1, k))
        for name in names:
            table = (table[:, None, :] + columns[name][None, :, :]).reshape(-1, k)
        if g == 0:
            table = table + intercept
        tables.append(np.ascontiguousarray(table))
    if not tables:
        tables.append(intercept[None, :].copy())
    return tables


def add_cell_sums(pool: Pool, x: Inputs, prepared: Prepared, w: np.ndarray,
                  sums: np.ndarray) -> None:
    """Add one batch to ``sums`` (K, 4): for each candidate h_k, the weights ``w`` of the
    records in cell 2·positive + wrong (h_k wrong where it predicts another class than the
    label), summed record by record in file order after the earlier batches — the same
    floats as ``np.add.at(sums[k], 2·positive + wrong, w)`` for each k.

    ``x``: the batch's inputs (the reference margin where a sign is in doubt); ``prepared``:
    :func:`prepare_batch` of them. Needs K ≥ 2 (a one-column reduction is not a row-by-row
    fold in numpy). Each candidate's sums are its own: a caller may split the pool and add
    the parts on threads (benchmarks/brc_speed_r9.py measures it) with the same floats.
    """
    if len(pool) < 2:
        raise ValueError("add_cell_sums needs at least 2 candidates")
    _add_cell_sums(pool, x, prepared, w, sums)


def _add_cell_sums(pool: Pool, x: Inputs, prepared: Prepared, w: np.ndarray,
                   sums: np.ndarray) -> None:
    """One group of candidates: :func:`add_cell_sums` on one thread."""
    k = len(pool)
    d = prepared.numeric.shape[1]
    weights = np.ascontiguousarray(pool.params[:, 1:1 + d].T) if d else None
    columns = _columns(pool, x)
    tables = _tables(pool, prepared, columns)
    # Σ|term| of any record's margin is at most this: |b| + max|x|·Σ|w_j| + Σ_c max|W_c|
    scale = np.abs(pool.params[:, 0])
    if weights is not None:
        scale = scale + prepared.largest * np.abs(weights).sum(axis=0)
    for table in columns.values():
        if table.size:
            scale = scale + np.abs(table).max(axis=0)
    # one tolerance for all (a vector costs 3x more per comparison than a scalar)
    tol = float(margin_tolerance(1 + d + len(columns), scale).max())
    w_ordered = w[prepared.order]
    exact: np.ndarray | None = None
    if not math.isfinite(tol):   # inputs not finite: every sign from the reference margin
        exact = np.stack([h.margin(x) >= 0 for h in pool.hyperplanes], axis=1)[prepared.order]
    reference: dict[int, np.ndarray] = {}
    rows = max(1, BLOCK_CELLS // k)
    # row 0: the sums so far; below, per record its weight where h_k predicts positive
    # (``up``) and where it predicts negative (``down``), an exact 0.0 elsewhere: one fold
    # down the rows adds them after the earlier records
    up = np.empty((rows + 1, k))
    down = np.empty((rows + 1, k))
    for cls, start, stop in ((0, 0, prepared.negatives), (1, prepared.negatives, prepared.n)):
        # a negative record is wrong where predicted positive, a positive one where negative
        wrong, right = 2 * cls + 1, 2 * cls
        to_up, to_down = (wrong, right) if cls == 0 else (right, wrong)
        acc_up = sums[:, to_up].copy()
        acc_down = sums[:, to_down].copy()
        for s in range(start, stop, rows):
            e = min(s + rows, stop)
            if exact is not None:
                positive = exact[s:e]
            else:
                z = _margins(prepared, tables, weights, s, e)
                # beyond tol from 0, z and the reference margin have one sign
                positive = z > tol
                unsure = z >= -tol
                if not np.array_equal(positive, unsure):
                    for i, j in zip(*np.nonzero(positive != unsure), strict=True):
                        if j not in reference:
                            reference[j] = pool[j].margin(x)
                        positive[i, j] = reference[j][prepared.order[s + i]] >= 0
            b = e - s
            up[0] = acc_up
            down[0] = acc_down
            np.multiply(w_ordered[s:e, None], positive, out=up[1:b + 1])
            np.subtract(w_ordered[s:e, None], up[1:b + 1], out=down[1:b + 1])
            acc_up = np.add.reduce(up[:b + 1], axis=0)
            acc_down = np.add.reduce(down[:b + 1], axis=0)
        sums[:, to_up] = acc_up
        sums[:, to_down] = acc_down


def _margins(prepared: Prepared, tables: list[np.ndarray], weights: np.ndarray | None,
             s: int, e: int) -> np.ndarray:
    """The (e − s, K) block of margins of rows s..e of ``prepared`` (any summation order)."""
    codes = prepared.codes
    if weights is not None:
        z = prepared.numeric[s:e] @ weights
        if codes:
            z += tables[0].take(codes[0][s:e], axis=0)
        else:
            z += tables[0]
    elif codes:
        z = tables[0].take(codes[0][s:e], axis=0)
    else:
        z = np.repeat(tables[0], e - s, axis=0)
    for table, code in zip(tables[1:], codes[1:], strict=True):
        z += table.take(code[s:e], axis=0)
    return z
