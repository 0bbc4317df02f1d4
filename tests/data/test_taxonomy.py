"""Taxonomy hierarchies (dpcli.data.taxonomy.hierarchy): levels, leaves, and declaration errors.

Columns are built directly; ``where`` is the position errors name.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dpcli.algorithms import privpfc
from dpcli.checks import Where
from dpcli.data.schema import BinaryColumn, CategoricalColumn, NumericColumn
from dpcli.data.taxonomy import Hierarchy, hierarchy
from dpcli.errors import SpecError
from dpcli.spec import load_spec

ADULT_SPEC = Path(__file__).resolve().parents[2] / "configs" / "adult.yaml"

# declared order differs from the taxonomy's depth-first order on purpose
NESTED_CATEGORIES = ("c", "a", "e", "b", "d")
NESTED = {"Any": {"G1": {"a": {}, "H": {"b": {}, "c": {}}}, "d": {}, "G2": ["e"]}}


@pytest.fixture
def where(tmp_path: Path) -> Where:
    return Where(tmp_path / "s.yaml", "columns.x.taxonomy")


def _level_counts(h: Hierarchy, leaf_counts: np.ndarray) -> list[np.ndarray]:
    """Counts per node of every level, from counts per leaf."""
    return [np.bincount(h.leaf_level[level], weights=leaf_counts, minlength=size)
            for level, size in enumerate(h.sizes)]


def _assert_rolls_up(h: Hierarchy, seed: int = 0) -> None:
    """np.add.reduceat over level l+1 at starts(l) gives level l, for random leaf counts."""
    rng = np.random.default_rng(seed)
    for _ in range(5):
        per_level = _level_counts(h, rng.integers(0, 1000, h.n_leaves).astype(float))
        for level in range(h.height - 1):
            rolled = np.add.reduceat(per_level[level + 1], h.starts(level))
            np.testing.assert_array_equal(rolled, per_level[level])


# ------------------------------------------------------------------ categorical
def test_nested_groups_levels_and_depth_first_leaves(where: Where) -> None:
    h = hierarchy(CategoricalColumn("x", NESTED_CATEGORIES, taxonomy=NESTED), where)
    assert h.kind == "categorical" and h.column == "x"
    assert h.sizes == (1, 3, 4, 5) and h.height == 4 and h.n_leaves == 5
    assert h.names == (("Any",), ("G1", "d", "G2"), ("a", "H", "d", "e"),
                       ("a", "b", "c", "d", "e"))
    # node of each level holding leaves a, b, c, d, e
    np.testing.assert_array_equal(h.leaf_level[0], [0, 0, 0, 0, 0])
    np.testing.assert_array_equal(h.leaf_level[1], [0, 0, 0, 1, 2])
    np.testing.assert_array_equal(h.leaf_level[2], [0, 1, 1, 2, 3])
    np.testing.assert_array_equal(h.leaf_level[3], [0, 1, 2, 3, 4])
    assert h.notes == ()


def test_a_shallow_leaf_stays_itself_at_deeper_levels(where: Where) -> None:
    h = hierarchy(CategoricalColumn("x", NESTED_CATEGORIES, taxonomy=NESTED), where)
    d = h.names[-1].index("d")
    for level in (1, 2, 3):
        assert h.names[level][h.leaf_level[level][d]] == "d"
    # and "e" (a leaf under G2) is G2 at level 1, itself below
    e = h.names[-1].index("e")
    assert [h.names[lv][h.leaf_level[lv][e]] for lv in range(4)] == ["Any", "G2", "e", "e"]


def test_starts_roll_each_level_up_to_the_one_above(where: Where) -> None:
    h = hierarchy(CategoricalColumn("x", NESTED_CATEGORIES, taxonomy=NESTED), where)
    np.testing.assert_array_equal(h.starts(0), [0])
    np.testing.assert_array_equal(h.starts(1), [0, 2, 3])  # G1 → a, H; d → d; G2 → e
    np.testing.assert_array_equal(h.starts(2), [0, 1, 3, 4])  # H → b, c
    _assert_rolls_up(h)


def test_leaves_maps_codes_and_other_to_none(where: Where) -> None:
    col = CategoricalColumn("x", NESTED_CATEGORIES, taxonomy=NESTED)
    h = hierarchy(col, where)
    codes = np.arange(len(col.levels))  # declared categories, then `other`
    leaves = h.leaves(codes)
    assert leaves.dtype == np.int64
    assert [h.names[-1][i] for i in leaves[:-1]] == list(NESTED_CATEGORIES)
    assert leaves[-1] == -1  # `other` is in no leaf
    assert h.places_other is False


def test_a_leaf_named_other_holds_the_undeclared_values(where: Where) -> None:
    col = CategoricalColumn("x", ("a", "b", "c"),
                            taxonomy={"Any": {"G": ["a", "b"], "R": ["c", "other"]}})
    h = hierarchy(col, where)
    assert h.places_other is True
    assert h.sizes == (1, 2, 4) and h.names[-1] == ("a", "b", "c", "other")
    np.testing.assert_array_equal(h.leaves(np.arange(4)), [0, 1, 2, 3])
    assert h.names[1][h.leaf_level[1][h.leaves(np.array([3]))[0]]] == "R"
    _assert_rolls_up(h)


def test_a_list_of_leaves_stands_for_a_mapping_of_empty_ones(where: Where) -> None:
    cats = ("a", "b", "c", "d")
    spelled = hierarchy(CategoricalColumn("x", cats, taxonomy={
        "Any": {"G": {"a": {}, "b": {}}, "H": {"c": {}, "d": {}}}}), where)
    short = hierarchy(CategoricalColumn("x", cats, taxonomy={
        "Any": {"G": ["a", "b"], "H": ["c", "d"]}}), where)
    nulls = hierarchy(CategoricalColumn("x", cats, taxonomy={  # YAML's `a:` is None
        "Any": {"G": {"a": None, "b": None}, "H": {"c": None, "d": None}}}), where)
    for other in (short, nulls):
        assert other.names == spelled.names == (("Any",), ("G", "H"), cats)
        for mine, theirs in zip(other.leaf_level, spelled.leaf_level, strict=True):
            np.testing.assert_array_equal(mine, theirs)
        np.testing.assert_array_equal(other.leaves(np.arange(5)), [0, 1, 2, 3, -1])


def test_a_leaf_that_is_not_a_declared_category_is_dropped_with_a_note(where: Where) -> None:
    col = CategoricalColumn("x", ("a", "b", "c"),
                            taxonomy={"Any": {"G": ["a", "b", "zz"], "Junk": ["yy"], "c": {}}})
    h = hierarchy(col, where)
    assert h.names[-1] == ("a", "b", "c")
    assert h.sizes == (1, 2, 3)  # the group holding only "yy" is gone too
    assert len(h.notes) == 2
    assert "'zz'" in h.notes[0] and "not a declared category" in h.notes[0]
    assert h.notes[0].startswith("x:") and "'yy'" in h.notes[1]
    np.testing.assert_array_equal(h.leaves(np.arange(4)), [0, 1, 2, -1])
    _assert_rolls_up(h)


def test_a_declared_category_missing_from_the_taxonomy_is_an_error(where: Where) -> None:
    col = CategoricalColumn("shade", ("a", "b", "c"), taxonomy={"Any": {"G": ["a", "b"]}})
    with pytest.raises(SpecError) as err:
        hierarchy(col, where)
    message = str(err.value)
    assert "'c'" in message and "'shade'" in message
    assert "columns.x.taxonomy" in message and str(where.file) in message
    assert "'a'" not in message


def test_two_roots_are_an_error(where: Where) -> None:
    col = CategoricalColumn("x", ("a", "b"), taxonomy={"A": ["a"], "B": ["b"]})
    with pytest.raises(SpecError, match="exactly one root, got 2"):
        hierarchy(col, where)


@pytest.mark.parametrize("taxonomy", [
    {"Any": {"G": ["a", "b"], "H": ["a", "c"]}},
    {"Any": {"G": {"a": {}, "b": {}}, "a": {}, "c": {}}},
])
def test_a_duplicate_leaf_is_an_error(where: Where, taxonomy: dict) -> None:
    col = CategoricalColumn("x", ("a", "b", "c"), taxonomy=taxonomy)
    with pytest.raises(SpecError, match="names the leaf 'a' twice"):
        hierarchy(col, where)


def test_a_leaf_listed_twice_in_one_list_is_an_error(where: Where) -> None:
    col = CategoricalColumn("x", ("a", "b"), taxonomy={"Any": {"G": ["a", "b", "a"]}})
    with pytest.raises(SpecError, match="lists 'a' twice"):
        hierarchy(col, where)


def test_categorical_without_taxonomy_is_flat(where: Where) -> None:
    col = CategoricalColumn("x", ("red", "green", "blue"))
    h = hierarchy(col, where)
    assert h.sizes == (1, 4) and h.names[1] == ("red", "green", "blue", "other")
    np.testing.assert_array_equal(h.leaves(np.arange(4)), [0, 1, 2, 3])
    assert h.places_other is True and h.notes == ()


def test_binary_is_flat_over_its_two_values(where: Where) -> None:
    h = hierarchy(BinaryColumn("m", ("no", "yes")), where)
    assert h.sizes == (1, 2) and h.names == (("Any",), ("no", "yes"))
    np.testing.assert_array_equal(h.leaves(np.array([1, 0, 1])), [1, 0, 1])
    assert h.kind == "categorical"


# ---------------------------------------------------------------------- numeric
INTERVALS = {"(0, 10]": {"(5, 10]": {}, "(0, 5]": {"(2, 5]": {}, "(0, 2]": {}}}}


def test_intervals_are_sorted_and_give_the_edges(where: Where) -> None:
    h = hierarchy(NumericColumn("x", 0, 10, taxonomy=INTERVALS), where)
    assert h.kind == "numeric" and h.sizes == (1, 2, 3)
    assert h.names == (("(0, 10]",), ("(0, 5]", "(5, 10]"), ("(0, 2]", "(2, 5]", "(5, 10]"))
    assert h.edges is not None
    np.testing.assert_array_equal(h.edges, [0, 2, 5, 10])
    assert h.leaf_labels() == [[0.0, 2.0], [2.0, 5.0], [5.0, 10.0]]
    _assert_rolls_up(h)


def test_numeric_leaves_are_left_open_right_closed(where: Where) -> None:
    h = hierarchy(NumericColumn("x", 0, 10, taxonomy=INTERVALS), where)
    values = np.array([0.0, 1.0, 2.0, 2.0001, 5.0, 5.0001, 10.0])
    np.testing.assert_array_equal(h.leaves(values), [0, 0, 0, 1, 1, 2, 2])
    # (clamped numbers only reach here, but beyond the edges is the nearest leaf)
    np.testing.assert_array_equal(h.leaves(np.array([-3.0, 12.0])), [0, 2])


def _search_leaves(h: Hierarchy, values: np.ndarray) -> np.ndarray:
    """The reference: a binary search over the edges."""
    assert h.edges is not None
    return np.clip(np.searchsorted(h.edges, np.asarray(values, dtype=float), side="left") - 1,
                   0, h.n_leaves - 1)


def _edge_values(edges: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Every edge, its float neighbours, values beyond both ends, and random ones."""
    e = np.asarray(edges, dtype=float)
    near = np.concatenate([e, np.nextafter(e, -np.inf), np.nextafter(e, np.inf)])
    span = e[-1] - e[0]
    return np.concatenate([near, [e[0] - span, e[-1] + span, -0.0, 0.0],
                           rng.uniform(e[0] - 0.1 * span, e[-1] + 0.1 * span, 20_000)])


def test_numeric_leaves_by_table_equal_the_binary_search(where: Where) -> None:
    """The one-comparison table gives the search's leaf at and next to every edge, beyond
    both ends, on integers and at random, for the shipped Adult taxonomies, equal-width
    bins, and edges crowded into one corner (the table grows or gives way to the search)."""
    rng = np.random.default_rng(11)
    spec = load_spec(ADULT_SPEC)
    numeric = [h for h in privpfc.candidate_hierarchies(spec.schema) if h.edges is not None]
    assert numeric
    crowded = {"(0, 10]": {f"({a:.17g}, {b:.17g}]": {} for a, b in zip(
        [0.0, 1e-12, 2e-12, 3e-12], [1e-12, 2e-12, 3e-12, 10.0], strict=True)}}
    many = {"bins": [2, 8, 64, 1024]}
    for taxonomy, hi in ((crowded, 10.0), (many, 1000.0), (INTERVALS, 10.0)):
        numeric.append(hierarchy(NumericColumn("x", 0, hi, taxonomy=taxonomy), where))
    used_table = 0
    for h in numeric:
        assert h.edges is not None
        values = np.concatenate([_edge_values(h.edges, rng),
                                 np.arange(np.floor(h.edges[0]) - 2, np.ceil(h.edges[-1]) + 3,
                                           max(1.0, float(h.edges[-1] - h.edges[0]) / 5000))])
        np.testing.assert_array_equal(h.leaves(values), _search_leaves(h, values))
        np.testing.assert_array_equal(h.leaves(values.astype(np.float32)),
                                      _search_leaves(h, values.astype(np.float32)))
        used_table += h._leaf_cells is not None
    assert used_table >= len(numeric) - 1     # the crowded edges may need the search
    h = numeric[-1]
    with_nan = np.array([1.0, np.nan, 7.0])   # never encoded, but never a wrong leaf either
    np.testing.assert_array_equal(h.leaves(with_nan), _search_leaves(h, with_nan))
    assert h.leaves(np.zeros(0)).tolist() == []


@pytest.mark.parametrize(("taxonomy", "message"), [
    ({"(0, 10]": {"(0, 4]": {}, "(5, 10]": {}}}, "starts at 5, expected 4"),  # gap
    ({"(0, 10]": {"(0, 6]": {}, "(5, 10]": {}}}, "starts at 5, expected 6"),  # overlap
    ({"(0, 10]": {"(0, 4]": {}, "(4, 8]": {}}}, "end at 8, not 10"),
    ({"(0, 10]": {"(1, 4]": {}, "(4, 10]": {}}}, "starts at 1, expected 0"),
    ({"[0, 10]": {}}, "is not an interval"),
    ({"(10, 0]": {}}, "finite low < high"),
])
def test_children_must_tile_their_parent(where: Where, taxonomy: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(")) as err:
        hierarchy(NumericColumn("x", 0, 10, taxonomy=taxonomy), where)
    assert "columns.x.taxonomy" in str(err.value)


@pytest.mark.parametrize("root", ["(1, 10]", "(0, 9]", "(2, 8]"])
def test_intervals_must_cover_the_declared_bounds(where: Where, root: str) -> None:
    with pytest.raises(SpecError) as err:
        hierarchy(NumericColumn("age", 0, 10, taxonomy={root: {}}), where)
    message = str(err.value)
    assert "[0, 10]" in message and "'age'" in message and "does not contain" in message


def test_intervals_wider_than_the_bounds_are_fine(where: Where) -> None:
    h = hierarchy(NumericColumn("x", 1, 9, taxonomy=INTERVALS), where)
    assert h.sizes == (1, 2, 3)
    np.testing.assert_array_equal(h.leaves(np.array([1.0, 9.0])), [0, 2])


def test_equal_width_bins(where: Where) -> None:
    h = hierarchy(NumericColumn("age", 17, 90, taxonomy={"bins": [2, 4, 8]}), where)
    assert h.sizes == (1, 2, 4, 8) and h.kind == "numeric"
    assert h.edges is not None and len(h.edges) == 9
    assert h.edges[0] == 17 and h.edges[-1] == 90
    np.testing.assert_allclose(np.diff(h.edges), 73 / 8)
    assert h.names[0] == ("(17, 90]",)
    assert h.names[1] == ("(17, 53.5]", "(53.5, 90]")
    for level in range(3):
        np.testing.assert_array_equal(h.starts(level), np.arange(0, 2 ** (level + 1), 2))
    # every level's nodes are equal-width too: each node holds 8 / size leaves
    for level, size in enumerate(h.sizes):
        np.testing.assert_array_equal(np.bincount(h.leaf_level[level]), [8 // size] * size)
    _assert_rolls_up(h)
    np.testing.assert_array_equal(h.leaves(np.array([17.0, 26.125, 26.2, 90.0])), [0, 0, 1, 7])


@pytest.mark.parametrize(("lower", "upper", "bins"), [
    (1_000_000, 1_000_010, [2, 4]),          # narrow bins far from 0
    (1_704_067_200, 1_735_689_600, [366, 8784]),  # a unix-time year by days, then hours
])
def test_equal_width_bins_stay_distinct_nodes(where: Where, lower: float, upper: float,
                                              bins: list[int]) -> None:
    """Every bin is its own leaf, whatever its bounds' digits (nodes are not merged by name)."""
    h = hierarchy(NumericColumn("t", lower, upper, taxonomy={"bins": bins}), where)
    assert h.edges is not None
    assert h.sizes == (1, *bins)
    assert h.n_leaves == len(h.edges) - 1 == bins[-1]
    middles = (h.edges[:-1] + h.edges[1:]) / 2
    np.testing.assert_array_equal(h.leaves(middles), np.arange(bins[-1]))
    _assert_rolls_up(h)


@pytest.mark.parametrize(("bins", "key"), [
    ([2, 3], "bins[1]"), ([2, 4, 4], "bins[2]"), ([3, 6, 8], "bins[2]"), ([1, 2], "bins[0]"),
    ([], "bins"), ("8", "bins"),
])
def test_bin_counts_must_be_increasing_multiples(where: Where, bins, key: str) -> None:
    with pytest.raises(SpecError) as err:
        hierarchy(NumericColumn("x", 0, 10, taxonomy={"bins": bins}), where)
    assert f"columns.x.taxonomy.{key}" in str(err.value)


def test_numeric_without_taxonomy_is_an_error(where: Where) -> None:
    with pytest.raises(SpecError) as err:
        hierarchy(NumericColumn("age", 17, 90), where)
    message = str(err.value)
    assert "bins" in message and "'age'" in message and "columns.x.taxonomy" in message


# ------------------------------------------------------------------------ files
CAPITAL_GAIN = {"(-1, 100]": {"(-1, 50]": {}, "(50, 100]": {"(50, 75]": {}, "(75, 100]": {}}}}


def test_a_file_taxonomy_matches_hyphens_and_underscores(tmp_path: Path, where: Where) -> None:
    path = tmp_path / "tax.json"
    path.write_text(json.dumps({"capital-gain": CAPITAL_GAIN, "other-col": {"(0, 1]": {}}}))
    h = hierarchy(NumericColumn("capital_gain", 0, 99, taxonomy=path), where)
    assert h.column == "capital_gain" and h.sizes == (1, 2, 3)
    assert h.edges is not None
    np.testing.assert_array_equal(h.edges, [-1, 50, 75, 100])


def test_a_yaml_file_taxonomy_for_a_categorical_column(tmp_path: Path, where: Where) -> None:
    path = tmp_path / "tax.yaml"
    path.write_text("marital-status:\n  Any:\n    Married: [m1, m2]\n    Single:\n")
    col = CategoricalColumn("marital_status", ("m1", "m2", "Single"), taxonomy=path)
    h = hierarchy(col, where)
    assert h.sizes == (1, 2, 3) and h.names[-1] == ("m1", "m2", "Single")


def test_a_file_without_the_column_is_an_error(tmp_path: Path, where: Where) -> None:
    path = tmp_path / "tax.json"
    path.write_text(json.dumps({"capital-loss": CAPITAL_GAIN}))
    with pytest.raises(SpecError) as err:
        hierarchy(NumericColumn("capital_gain", 0, 99, taxonomy=path), where)
    message = str(err.value)
    assert str(path) in message and "'capital_gain'" in message
    assert "capital-loss" in message  # what the file does hold


# ------------------------------------------------------------- published Adult file
ADULT_SIZES = {
    "age": (1, 2, 4, 8, 16),
    "workclass": (1, 2, 3, 5, 8),
    "fnlwgt": (1, 6, 11),
    "education": (1, 3, 7, 16),
    "education_num": (1, 2, 4),
    "marital_status": (1, 2, 3, 7),
    "occupation": (1, 3, 14),
    "relationship": (1, 4, 6),
    "race": (1, 2, 5),
    "sex": (1, 2),
    "capital_gain": (1, 5, 20),
    "capital_loss": (1, 2, 5, 10),
    "hours_per_week": (1, 5, 10),
    "native_country": (1, 6, 19, 41),
}


@pytest.fixture(scope="module")
def adult() -> dict[str, Hierarchy]:
    spec = load_spec(ADULT_SPEC)
    return {h.column: h for h in privpfc.candidate_hierarchies(spec.schema)}


def test_every_adult_column_gets_a_hierarchy(adult: dict[str, Hierarchy]) -> None:
    assert set(adult) == set(ADULT_SIZES)


@pytest.mark.parametrize(("column", "sizes"), sorted(ADULT_SIZES.items()))
def test_adult_hierarchy_sizes(adult: dict[str, Hierarchy], column: str,
                               sizes: tuple[int, ...]) -> None:
    h = adult[column]
    assert h.sizes == sizes
    _assert_rolls_up(h)


def test_adult_education_drops_post_grad(adult: dict[str, Hierarchy]) -> None:
    h = adult["education"]
    assert "Post-grad" not in h.names[-1]
    assert len(h.notes) == 1 and "'Post-grad'" in h.notes[0]
    assert all(not other.notes for name, other in adult.items() if name != "education")


def test_adult_categorical_leaves_are_the_declared_categories(
        adult: dict[str, Hierarchy]) -> None:
    spec = load_spec(ADULT_SPEC)
    for col in spec.schema.columns:
        h = adult[col.name]
        if isinstance(col, CategoricalColumn):
            leaves = h.leaves(np.arange(len(col.categories)))
            assert sorted(leaves.tolist()) == list(range(len(col.categories))), col.name
            assert [h.names[-1][i] for i in leaves] == list(col.categories)
        else:
            assert h.edges is not None, col.name
            assert h.edges[0] <= col.lower and h.edges[-1] >= col.upper, col.name


def test_a_taxonomy_file_is_parsed_once_for_all_its_columns(tmp_path: Path, where: Where,
                                                              monkeypatch) -> None:
    """One file holds every column's hierarchy: it is parsed once (while unchanged), each
    column gets its own copy of its tree, and an edited file is read again."""
    from dpcli import checks
    from dpcli.data import taxonomy

    path = tmp_path / "tax.json"
    path.write_text(json.dumps({"x": NESTED, "y-z": {"Any": {"p": {}, "q": {}}}}))
    parsed: list[Path] = []
    real = checks.load_yaml
    monkeypatch.setattr(checks, "load_yaml", lambda p: parsed.append(p) or real(p))
    x = CategoricalColumn("x", NESTED_CATEGORIES, taxonomy=path)
    y = CategoricalColumn("y_z", ("p", "q"), taxonomy=path)
    first = hierarchy(x, where)
    hierarchy(y, where)
    again = hierarchy(x, where)
    assert len(parsed) == 1
    assert first.names == again.names
    tree = taxonomy._from_file(path, "x", where)
    tree["Any"]["G1"] = {}   # a caller that changes its copy changes nobody else's
    assert hierarchy(x, where).names == first.names
    path.write_text(json.dumps({"x": {"Any": {c: {} for c in NESTED_CATEGORIES}}}) + " ")
    assert hierarchy(x, where).names != first.names
    assert len(parsed) == 2
