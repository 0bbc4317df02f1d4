"""Which classes a released model can predict, decided exactly (dpcli.algorithms.predictable)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from dpcli.algorithms import naive_bayes as nb
from dpcli.algorithms import predictable
from dpcli.algorithms.synopsis import GridModel
from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Label,
    NumericColumn,
    Schema,
    schema_to_dict,
)
from dpcli.predict import classify

LABEL = Label("y", ("0", "1"), positive="1")
COLOR = CategoricalColumn("c", ("r", "g", "b"))   # codes 0..2, 3 is 'other'


def _grid(counts: list[list[float]], nodes: list[list[str]], decision: str) -> GridModel:
    payload = {"schema": schema_to_dict(Schema((COLOR,), LABEL)), "n": 100,
               "decision": decision,
               "grid": [{"column": "c", "nodes": [{"values": v} for v in nodes]}]}
    return GridModel(payload, np.asarray(counts, dtype=float), Path("grid.json"))


def _every_color(model: GridModel) -> set[int]:
    """The model's own predictions on every code the encoder can give the column."""
    codes = np.arange(len(COLOR.levels), dtype=np.int32)
    batch = EncodedBatch(codes.size, np.zeros(codes.size, dtype=np.int32), {"c": codes})
    return {int(c) for c in classify(model, batch)[1]}


@pytest.mark.parametrize("decision", ["balanced", "majority"])
def test_a_grid_predicts_exactly_its_cells_classes(decision: str) -> None:
    """Counts (negative, positive) per node: under 'majority' every cell says 0; under
    'balanced' the second cell's positive share beats the overall one."""
    model = _grid([[40, 10], [30, 20]], [["r"], ["g", "b", "other"]], decision)
    found = predictable.of_model(model)
    assert found is not None and found.codes == _every_color(model)
    assert found.never(2) == ((1,) if decision == "majority" else ())
    assert "2 released cells" in found.how


@pytest.mark.parametrize("decision", ["balanced", "majority"])
def test_a_value_in_no_node_adds_the_overall_shares_decision(decision: str) -> None:
    """'b' and 'other' lie in no node: such a row gets the overall shares, whose decision is
    counted (a weighted mean of the cells, it gives no class the cells do not: checked
    against the model's own predictions on every code)."""
    for counts in ([[10, 40], [20, 30]], [[40, 10], [20, 30]], [[0, 0], [20, 30]]):
        model = _grid(counts, [["r"], ["g"]], decision)
        assert model.has_values_in_no_node()
        found = predictable.of_model(model)
        assert found is not None and found.codes == _every_color(model)
        assert "no node" in found.how


def test_a_one_cell_grid_predicts_one_class() -> None:
    payload = {"schema": schema_to_dict(Schema((), LABEL)), "n": 50, "decision": "balanced",
               "grid": []}
    model = GridModel(payload, np.array([[35.0, 15.0]]), Path("grid.json"))
    found = predictable.of_model(model)
    assert found is not None and found.codes == {0} and found.never(2) == (1,)
    assert "1 released cell" in found.how


SMALL = Schema((COLOR, BinaryColumn("m", ("no", "yes"))), LABEL)


def _nb(class_counts: tuple[float, ...], seed: int, classes: tuple[str, ...] = ("0", "1"),
        schema: Schema = SMALL) -> nb.NaiveBayesModel:
    rng = np.random.default_rng(seed)
    label = Label("y", classes, positive="1" if len(classes) == 2 else None)
    k = len(classes)
    return nb.NaiveBayesModel(
        schema=Schema(schema.columns, label), columns=tuple(c.name for c in schema.columns),
        config=nb.NBConfig(threshold="none"), class_counts=np.array(class_counts),
        tables={"c": rng.integers(1, 30, (k, 4)).astype(float),
                "m": rng.integers(1, 30, (k, 2)).astype(float)}, numeric={})


def _brute(model: nb.NaiveBayesModel) -> set[int]:
    rows = np.array(list(itertools.product(range(4), range(2))))
    batch = EncodedBatch(len(rows), np.zeros(len(rows), dtype=np.int32),
                         {"c": rows[:, 0].astype(np.int32), "m": rows[:, 1].astype(np.int8)})
    return {int(c) for c in classify(model, batch)[1]}


@pytest.mark.parametrize("seed", range(5))
def test_a_model_on_a_small_coded_domain_is_decided_input_by_input(seed: int) -> None:
    """Balanced priors: whatever the model predicts on the 8 inputs; a prior that swamps
    every feature: one class only. Three classes are decided the same way."""
    for counts in [(50.0, 50.0), (1e9, 1.0)]:
        model = _nb(counts, seed)
        found = predictable.of_model(model)
        assert found is not None and found.codes == _brute(model)
        assert "8 inputs" in found.how
    swamped = predictable.of_model(_nb((1e9, 1.0), seed))
    assert swamped is not None and swamped.never(2) == (1,)
    three = _nb((1.0, 1e9, 1.0), seed, classes=("a", "b", "c"))
    found = predictable.of_model(three)
    assert found is not None and found.codes == _brute(three) == {1}
    assert found.never(3) == (0, 2)


def test_a_numeric_column_or_a_large_domain_is_not_decided(monkeypatch) -> None:
    numeric = Schema((NumericColumn("x", 0.0, 1.0),), LABEL)
    model = nb.NaiveBayesModel(
        schema=numeric, columns=("x",), config=nb.NBConfig(distribution="gaussian",
                                                          threshold="none"),
        class_counts=np.array([1e9, 1.0]), tables={},
        numeric={"x": nb.NumericParams(0.0, 1.0, np.array([0.4, 0.6]), np.array([1.0, 1.0]))})
    assert predictable.of_model(model) is None
    monkeypatch.setattr(predictable, "ENUMERATION_LIMIT", 7)   # the domain holds 8 inputs
    assert predictable.of_model(_nb((1e9, 1.0), 0)) is None


def test_enumeration_in_batches_covers_every_input(monkeypatch) -> None:
    """Batches smaller than the domain: the last, partial batch is read too (a model that
    predicts 1 only on the last input, c = 'other' and m = 'yes', is found to predict it)."""
    monkeypatch.setattr(predictable, "_BATCH", 3)
    model = _nb((50.0, 50.0), 0)
    model.tables["c"] = np.array([[9.0, 9.0, 9.0, 1.0], [1.0, 1.0, 1.0, 9.0]])
    model.tables["m"] = np.array([[9.0, 1.0], [1.0, 9.0]])
    assert _brute(model) == {0, 1}
    found = predictable.of_model(model)
    assert found is not None and found.codes == {0, 1}


@pytest.mark.parametrize("positive", [0, 1])
def test_a_cutoff_at_the_top_of_the_score_range_never_predicts_positive(positive: int) -> None:
    top = predictable.of_cutoff(positive, 1.0, 1.0)
    assert top.codes == {1 - positive} and top.never(2) == (positive,)
    assert "does not exceed the cutoff" in top.how
    inside = predictable.of_cutoff(positive, 1.0, 0.999)
    assert inside.codes == {0, 1} and inside.never(2) == ()


def test_a_logistic_regression_on_coded_columns_is_decided_too() -> None:
    """Zero weights: σ(0) = 1/2 is not above the cut, so class 0 everywhere (a tie goes to
    class 0); other weights: whatever the model's own decisions on the 8 inputs are."""
    from dpcli.algorithms.inputs import model_schema
    from dpcli.algorithms.validate import LogRegModel

    schema = model_schema(SMALL, ("c", "m"))
    flat = LogRegModel(schema, ("c", "m"), np.zeros(7), {})
    found = predictable.of_model(flat)
    assert found is not None and found.codes == _brute(flat) == {0}
    sloped = LogRegModel(schema, ("c", "m"), np.arange(7) - 2.0, {})
    found = predictable.of_model(sloped)
    assert found is not None and found.codes == _brute(sloped) == {0, 1}
