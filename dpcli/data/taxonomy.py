"""Taxonomy hierarchies: declared generalisations of a column's domain (PrivPfC's grids).

A hierarchy is public knowledge about a domain, never read off the data
(docs/design.md rule 2). A column declares it in the schema as ``taxonomy:``:

- categorical: nested groups with the declared categories as leaves,
  ``{Any: {Gov: {State-gov: {}, Federal-gov: {}}, Private: {}}}``; a list
  of leaves may stand for a mapping of empty ones (``Gov: [State-gov,
  Federal-gov]``). A leaf named ``other`` holds the undeclared values;
  without one, rows with an undeclared value fall in no cell (and are
  counted in the report).
- numeric: nested intervals ``"(low, high]"`` (the published Adult form),
  or ``{bins: [2, 4, 8]}``: equal-width bins of the declared bounds, level
  by level, each count a multiple of the one before.
- a file (JSON or YAML) holding hierarchies keyed by column name; ``-`` and
  ``_`` in names are read alike (the published Adult file says
  ``capital-gain`` where the data says ``capital_gain``).

Columns without a taxonomy: categorical and binary ones get the flat
hierarchy root → values (with ``other`` for a categorical column's
undeclared values); numeric ones need a declared one.

Levels are numbered from 0 (the root: one node, the attribute is not used)
to height − 1 (the leaves). A leaf shallower than the deepest stays itself
at the deeper levels. Nodes of every level are in depth-first order, so the
children of a node are contiguous at the next level: rolling a histogram up
one level is one ``np.add.reduceat`` (:meth:`Hierarchy.starts`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from dpcli import checks
from dpcli.checks import Where
from dpcli.data.schema import (
    OTHER,
    BinaryColumn,
    CategoricalColumn,
    Column,
    NumericColumn,
)

_INTERVAL = re.compile(r"^\s*\(\s*([-+0-9.eE]+)\s*,\s*([-+0-9.eE]+)\s*\]\s*$")
MAX_LEVELS = 32


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """One column's levels: which node of each level every leaf belongs to.

    ``leaf_level[l][i]`` is the node of level l holding leaf i; ``names[l]``
    the node names of level l. Categorical leaves are single values
    (``values`` of the column, ``other`` included when the taxonomy places
    it); ``code_to_leaf`` maps the data layer's level codes to leaves (−1:
    in no leaf). Numeric leaves are intervals between consecutive ``edges``,
    ``(e_i, e_i+1]``, the first one closed on the left too.
    """

    column: str
    kind: str
    names: tuple[tuple[str, ...], ...]
    leaf_level: tuple[np.ndarray, ...]
    code_to_leaf: np.ndarray | None = None
    edges: np.ndarray | None = None
    notes: tuple[str, ...] = field(default=())
    places_other: bool = True

    @property
    def height(self) -> int:
        return len(self.names)

    @property
    def n_leaves(self) -> int:
        return len(self.names[-1])

    @cached_property
    def sizes(self) -> tuple[int, ...]:
        """Number of nodes of each level, root (1) first."""
        return tuple(len(n) for n in self.names)

    def starts(self, level: int) -> np.ndarray:
        """Where each node of ``level`` starts among the nodes of ``level + 1``."""
        parent = np.zeros(len(self.names[level + 1]), dtype=np.int64)
        parent[self.leaf_level[level + 1]] = self.leaf_level[level]
        return np.searchsorted(parent, np.arange(len(self.names[level])))

    def leaves(self, values: np.ndarray) -> np.ndarray:
        """Leaf index (int64, −1 for none) of encoded values: codes, or clamped numbers.

        A number's leaf is ``searchsorted(edges, x, side="left") − 1`` clipped to the
        leaves, computed by :meth:`_leaf_cells` where it can (exactly the same index)."""
        if self.edges is not None:
            x = np.asarray(values, dtype=np.float64)
            cells = self._leaf_cells
            if cells is not None and len(x):
                lower, scale, base, edge = cells
                t = np.subtract(x, lower)
                t *= scale
                np.clip(t, 0, len(base) - 1, out=t)
                if not np.isnan(t.max()):
                    cell = t.astype(np.int64)
                    leaf = base[cell] + (x > edge[cell])
                    return np.clip(leaf, 0, self.n_leaves - 1, out=leaf)
            leaf = np.searchsorted(self.edges, x, side="left") - 1
            return np.clip(leaf, 0, self.n_leaves - 1)
        assert self.code_to_leaf is not None
        return self.code_to_leaf[np.asarray(values, dtype=np.int64)]

    @cached_property
    def _leaf_cells(self) -> tuple[float, float, np.ndarray, np.ndarray] | None:
        """A table that finds a number's leaf with one comparison instead of a binary search
        (about 28 ns a value on the pass's hot path, for the Adult taxonomies).

        cell(x) = ⌊clip((x − e₀)·scale, 0, M − 1)⌋ is non-decreasing in x (every step is
        a monotone float operation), so an edge in a lower cell than x's is below x, one in
        a higher cell above it, and the edges below x are ``count[cell(x)]`` (those in lower
        cells) plus those of x's own cell below x. With at most one edge per cell (M grown
        until so, else None: the search) that is one comparison, ``x > edge[cell]`` (+inf
        for a cell with none): the search's ``side="left"`` count, exactly.
        """
        e = np.asarray(self.edges, dtype=np.float64)
        if len(e) < 2 or not np.isfinite(e).all() or not e[-1] > e[0]:
            return None
        cells = 1 << max(6, len(e).bit_length() + 2)
        while cells <= 1 << 16:
            scale = cells / (float(e[-1]) - float(e[0]))
            t = np.clip((e - float(e[0])) * scale, 0, cells - 1).astype(np.int64)
            per_cell = np.bincount(t, minlength=cells)
            if per_cell.max() <= 1:
                edge = np.full(cells, np.inf)
                edge[t] = e
                below = np.cumsum(per_cell) - per_cell         # edges in lower cells
                return float(e[0]), scale, below - 1, edge
            cells <<= 1
        return None

    def leaf_labels(self) -> list[Any]:
        """Per leaf: its value (categorical) or its [low, high] interval (numeric)."""
        if self.edges is not None:
            return [[float(a), float(b)] for a, b in zip(self.edges[:-1], self.edges[1:],
                                                         strict=True)]
        return list(self.names[-1])

    def nodes(self, level: int) -> list[dict[str, Any]]:
        """The public description of ``level``'s nodes (what a grid file carries)."""
        members: list[list[int]] = [[] for _ in self.names[level]]
        for leaf, node in enumerate(self.leaf_level[level]):
            members[int(node)].append(leaf)
        out = []
        labels = self.leaf_labels()
        for name, leaves in zip(self.names[level], members, strict=True):
            if self.edges is not None:
                out.append({"name": name, "interval": [labels[leaves[0]][0],
                                                       labels[leaves[-1]][1]]})
            else:
                out.append({"name": name, "values": [labels[i] for i in leaves]})
        return out


# ---------------------------------------------------------------------------- parse
def hierarchy(column: Column, where: Where) -> Hierarchy:
    """The declared hierarchy of ``column`` (flat for categorical and binary without one).

    SpecError naming ``where`` (the column's ``taxonomy`` key) if it does not
    fit the declared domain.
    """
    raw = getattr(column, "taxonomy", None)
    if isinstance(raw, Path):
        raw = _from_file(raw, column.name, where)
    if isinstance(column, NumericColumn):
        if raw is None:
            raise where.error(f"column '{column.name}' is numeric and declares no taxonomy: "
                              "add e.g. 'taxonomy: {bins: [2, 4, 8]}' (equal-width levels of "
                              "its bounds) or nested '(low, high]' intervals")
        if isinstance(raw, Mapping) and set(raw) == {"bins"}:
            return _equal_width(column, raw["bins"], where / "bins")
        return _numeric(column, raw, where)
    if isinstance(column, CategoricalColumn):
        if raw is None:   # flat: every declared category, and `other` for the rest
            return _categorical(column, {"Any": {c: {} for c in column.levels}}, where)
        return _categorical(column, raw, where)
    if isinstance(column, BinaryColumn):
        return _build(column.name, "categorical", [["Any", v] for v in column.values],
                      code_to_leaf=np.arange(2, dtype=np.int64))
    raise where.error(f"column '{column.name}' is {column.kind}: it has no hierarchy")


#: parsed taxonomy files by (path, size, modification time): one file usually holds the
#: hierarchies of every column, and parsing it once per column cost seconds (pure-Python YAML)
_FILES: dict[tuple[str, int, int], Any] = {}


def _load_file(path: Path) -> Any:
    """The parsed file, parsed once per process while it is unchanged."""
    try:
        st = path.stat()
    except OSError:
        return checks.load_yaml(path)  # the error names the file
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _FILES:
        _FILES[key] = checks.load_yaml(path)
    return _FILES[key]


def _from_file(path: Path, name: str, where: Where) -> Any:
    import copy

    data = _load_file(path)
    fw = Where(path)
    data = checks.mapping(data, fw)
    for key in (name, name.replace("_", "-"), name.replace("-", "_")):
        if key in data:
            return copy.deepcopy(data[key])  # the cached tree is shared: hand out a copy
    raise fw.error(f"holds no hierarchy for column '{name}' (it has: {', '.join(data)})")


def _paths(tree: Any, where: Where) -> list[list[str]]:
    """Root-to-leaf name paths in depth-first order."""
    tree = _children(tree, where)
    if len(tree) != 1:
        raise where.error(f"must have exactly one root, got {len(tree)}: {', '.join(tree)}")
    out: list[list[str]] = []

    def walk(name: str, sub: Any, path: list[str], w: Where) -> None:
        path = [*path, name]
        if len(path) > MAX_LEVELS:
            raise w.error(f"is deeper than {MAX_LEVELS} levels")
        kids = _children(sub, w)
        if not kids:
            out.append(path)
        for child, grand in kids.items():
            walk(child, grand, path, w / child)

    (root, sub), = tree.items()
    walk(root, sub, [], where / root)
    return out


def _children(value: Any, where: Where) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, list):
        names = [checks.scalar_label(v, where / i) for i, v in enumerate(value)]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise where.error(f"lists {', '.join(repr(n) for n in twice)} twice")
        return {name: {} for name in names}
    value = checks.mapping(value, where)
    return {str(k): v for k, v in value.items()}


def _categorical(column: CategoricalColumn, raw: Any, where: Where) -> Hierarchy:
    paths = _paths(raw, where)
    declared = {c: i for i, c in enumerate(column.levels)}
    seen: set[str] = set()
    kept, notes = [], []
    for path in paths:
        leaf = path[-1]
        if leaf in seen:
            raise where.error(f"names the leaf {leaf!r} twice")
        seen.add(leaf)
        if leaf in declared:
            kept.append(path)
        else:
            notes.append(f"{column.name}: taxonomy leaf {leaf!r} is not a declared category; "
                         "left out")
    missing = [c for c in column.categories if c not in seen]
    if missing:
        raise where.error(f"does not place the declared categories "
                          f"{', '.join(repr(m) for m in missing)} of column '{column.name}'")
    code_to_leaf = np.full(len(column.levels), -1, dtype=np.int64)
    for i, path in enumerate(kept):
        code_to_leaf[declared[path[-1]]] = i
    return _build(column.name, "categorical", kept, code_to_leaf=code_to_leaf, notes=notes,
                  places_other=OTHER in seen)


def _interval(name: str, where: Where) -> tuple[float, float]:
    m = _INTERVAL.match(name)
    if m is None:
        raise where.error(f"{name!r} is not an interval '(low, high]'")
    low, high = float(m.group(1)), float(m.group(2))
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise where.error(f"{name!r} must have finite low < high")
    return low, high


def _numeric(column: NumericColumn, raw: Any, where: Where) -> Hierarchy:
    paths = _paths(raw, where)
    spans = {}
    for path in paths:
        for depth in range(len(path)):
            key = tuple(path[:depth + 1])
            if key not in spans:
                spans[key] = _interval(path[depth], where / ".".join(path[:depth + 1]))
    # children must tile their parent; sort every level by interval so leaves ascend
    kids: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for key in spans:
        if len(key) > 1:
            kids.setdefault(key[:-1], []).append(key)
    for parent, children in kids.items():
        children.sort(key=lambda k: spans[k][0])
        low, high = spans[parent]
        cursor = low
        for child in children:
            a, b = spans[child]
            if a != cursor:
                raise where.error(f"the children of {parent[-1]!r} must tile it without gaps "
                                  f"or overlaps: {child[-1]!r} starts at {a:g}, expected "
                                  f"{cursor:g}")
            cursor = b
        if cursor != high:
            raise where.error(f"the children of {parent[-1]!r} end at {cursor:g}, not {high:g}")
    ordered: list[list[str]] = []

    def walk(key: tuple[str, ...]) -> None:
        if key not in kids:
            ordered.append(list(key))
        for child in kids.get(key, []):
            walk(child)

    walk((paths[0][0],))
    edges = np.array([spans[tuple(p)][0] for p in ordered] + [spans[tuple(ordered[-1])][1]])
    _check_cover(column, edges, where)
    return _build(column.name, "numeric", ordered, edges=edges)


def _equal_width(column: NumericColumn, raw: Any, where: Where) -> Hierarchy:
    if not isinstance(raw, list) or not raw:
        raise where.error("must be a list of bin counts per level, e.g. [2, 4, 8]")
    counts = [checks.integer(v, where / i, minimum=2) for i, v in enumerate(raw)]
    if len(counts) >= MAX_LEVELS:
        raise where.error(f"must list fewer than {MAX_LEVELS} levels")
    for i in range(1, len(counts)):
        if counts[i] % counts[i - 1] or counts[i] == counts[i - 1]:
            raise (where / i).error(f"{counts[i]} must be a larger multiple of {counts[i - 1]} "
                                    "so that each level splits the one before")
    if counts[-1] > 1_000_000:
        raise (where / (len(counts) - 1)).error("must be at most 1,000,000 bins")
    finest = counts[-1]
    edges = np.linspace(column.lower, column.upper, finest + 1)
    paths = []
    for leaf in range(finest):
        path = [_name(column.lower, column.upper)]
        for c in counts:
            k = leaf * c // finest
            path.append(_name(edges[k * finest // c], edges[(k + 1) * finest // c]))
        paths.append(path)
    return _build(column.name, "numeric", paths, edges=edges)


def _name(low: float, high: float) -> str:
    """"(low, high]" with every digit a float needs: names are node identities."""
    return f"({_digits(low)}, {_digits(high)}]"


def _digits(x: float) -> str:
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def _check_cover(column: NumericColumn, edges: np.ndarray, where: Where) -> None:
    if edges[0] > column.lower or edges[-1] < column.upper:
        raise where.error(f"covers [{edges[0]:g}, {edges[-1]:g}], which does not contain the "
                          f"declared bounds [{column.lower:g}, {column.upper:g}] of column "
                          f"'{column.name}'")


def _build(column: str, kind: str, paths: Sequence[Sequence[str]], *,
           code_to_leaf: np.ndarray | None = None, edges: np.ndarray | None = None,
           notes: Sequence[str] = (), places_other: bool = True) -> Hierarchy:
    height = max(len(p) for p in paths)
    names: list[tuple[str, ...]] = []
    leaf_level: list[np.ndarray] = []
    for level in range(height):
        index: dict[tuple[str, ...], int] = {}
        of_leaf = np.empty(len(paths), dtype=np.int64)
        for i, path in enumerate(paths):
            key = tuple(path[:level + 1])
            of_leaf[i] = index.setdefault(key, len(index))
        names.append(tuple(k[-1] for k in index))
        leaf_level.append(of_leaf)
    return Hierarchy(column=column, kind=kind, names=tuple(names), leaf_level=tuple(leaf_level),
                     code_to_leaf=code_to_leaf, edges=edges, notes=tuple(notes),
                     places_other=places_other)
