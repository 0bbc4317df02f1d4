"""Predictions from any released dpcli model, streamed batch by batch.

A model is already a differentially private release: using it spends no
budget. Predicting on *private* rows produces per-row outputs that are the
custodian's, not a release: they must not leave the custodian's hands as if
they were private.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from dpcli.data.encode import EncodedBatch
from dpcli.data.schema import Schema
from dpcli.errors import DataError, UsageError
from dpcli.io import read_envelope

OUTPUT_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


class Model(Protocol):
    schema: Schema
    columns: tuple[str, ...]

    def predict_proba(self, batch: EncodedBatch) -> np.ndarray: ...


def _naive_bayes(payload: dict[str, Any], path: Path) -> Model:
    from dpcli.algorithms.naive_bayes import NaiveBayesModel

    return NaiveBayesModel.from_payload(payload, path)


def _grid(payload: dict[str, Any], path: Path) -> Model:
    from dpcli.algorithms.synopsis import GridModel

    return GridModel.from_payload(payload, path)


def _brc(payload: dict[str, Any], path: Path) -> Model:
    from dpcli.algorithms.brc import BRCModel

    return BRCModel.from_payload(payload, path)


def _logistic(payload: dict[str, Any], path: Path) -> Model:
    from dpcli.algorithms.validate import LogRegModel

    return LogRegModel.from_payload(payload, path)


LOADERS: dict[str, Callable[[dict[str, Any], Path], Model]] = {
    "naive_bayes": _naive_bayes, "grid_synopsis": _grid, "brc": _brc,
    "logistic_regression": _logistic}


def model_file(path: Path) -> Path:
    """The file behind a ``--model`` / MODEL argument, the one rule of every command: a
    publish-grid folder stands for the synopsis it holds (its ``grid.json``); a file is
    itself. A folder without one is a DataError (exit 65) naming what it lacks."""
    from dpcli.algorithms.synopsis import GRID_FILE

    path = Path(path)
    if path.is_dir():
        if not (path / GRID_FILE).is_file():
            raise DataError(f"{path}: a folder without {GRID_FILE}: not a publish-grid "
                            "synopsis (a model is a JSON file, or the folder publish-grid "
                            "wrote)")
        return path / GRID_FILE
    return path


def load_model(path: Path) -> tuple[Model, dict[str, Any]]:
    """The model in a dpcli JSON envelope, and the envelope itself.

    A folder stands for the grid synopsis it holds (:func:`model_file`).
    """
    path = model_file(path)
    envelope = read_envelope(path)
    kind = envelope.get("kind")
    if kind not in LOADERS:
        raise DataError(f"{path}: holds a {kind!r}, which is not a model dpcli can predict "
                        f"with (models: {', '.join(LOADERS)})")
    return load_payload(kind, envelope, path), envelope


def load_payload(kind: str, envelope: dict[str, Any], path: Path) -> Model:
    """The model of ``kind`` in ``envelope``, checked in full (:mod:`dpcli.model_check`).

    A DataError (exit 65) ``malformed model PATH: …`` when anything is missing,
    of the wrong shape or not a finite number: before any charge, since every
    command loads its model before it reserves budget.
    """
    from dpcli.errors import SpecError
    from dpcli.model_check import check

    try:
        model = LOADERS[kind](envelope["payload"], path)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, SpecError,
            UsageError) as exc:
        # a model file is a release (no private values), so the missing key may be named
        raise DataError(f"malformed model {path}: {kind} payload "
                        f"({type(exc).__name__}: {exc})") from None
    check(kind, model, path)
    return model


def load_grid(path: Path) -> Any:
    """The grid synopsis in a publish-grid folder (or its grid.json), checked in full."""
    return load_grid_envelope(path)[0]


def load_grid_envelope(path: Path) -> tuple[Any, dict[str, Any]]:
    """The grid synopsis (as :func:`load_grid`) and its envelope (for its cautions)."""
    from dpcli.algorithms.synopsis import KIND

    path = model_file(path)
    env = read_envelope(path, KIND)
    return load_payload(KIND, env, path), env


def classify(model: Model, batch: EncodedBatch) -> tuple[np.ndarray, np.ndarray]:
    """Class probabilities and each record's predicted class code, in one evaluation.

    The code is the model's own rule if it has one (brc predicts the sign of
    its ensemble, as the paper does: ``model.classify``), else the most
    probable class.
    """
    own = getattr(model, "classify", None)
    if own is not None:
        return own(batch)
    proba = model.predict_proba(batch)
    return proba, proba.argmax(axis=1)


def output_columns(model: Model) -> list[str]:
    classes = model.schema.label.classes
    extra = ["prediction"]
    if len(classes) == 2:
        extra.append("score")
    return extra + [f"proba_{c}" for c in classes]


def is_prediction_header(header: list[str]) -> bool:
    """Whether a CSV header ends as predict's output does: ``prediction``, ``score`` (binary
    labels) and one ``proba_<class>`` per class. A copy of the input data cannot end so
    (predict refuses data that holds these columns), so predict replaces such a file."""
    if "prediction" not in header:
        return False
    at = len(header) - 1 - header[::-1].index("prediction")
    tail = header[at + 1:]
    if tail[:1] == ["score"]:
        tail = tail[1:]
    return bool(tail) and all(name.startswith("proba_") for name in tail)


def predict_batch(model: Model, raw: pa.RecordBatch, encoded: EncodedBatch) -> pa.RecordBatch:
    """``raw`` with the predicted class, the positive-class score and every class probability."""
    proba, codes = classify(model, encoded)
    classes = model.schema.label.classes
    arrays = list(raw.columns)
    names = list(raw.schema.names)
    label = model.schema.label
    if label.class_type == "int":  # classes declared as integers stay integers (not "0"/"1")
        arrays.append(pa.array(np.asarray([int(c) for c in classes], dtype=np.int64)[codes]))
        if label.column in names:
            at = names.index(label.column)
            arrays[at] = _as_int(arrays[at], label.column)
    else:
        arrays.append(pa.array(np.asarray(classes, dtype=object)[codes], pa.string()))
    names.append("prediction")
    if len(classes) == 2:
        pos = model.schema.label.positive_index
        arrays.append(pa.array(proba[:, 1 if pos is None else pos]))
        names.append("score")
    for k, c in enumerate(classes):
        arrays.append(pa.array(proba[:, k]))
        names.append(f"proba_{c}")
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _as_int(array: pa.Array, column: str) -> pa.Array:
    """A text label column (CSV reads undeclared text) as int64, empty values as nulls.

    Every batch must come out with the same type, so a value that is not an integer
    is an error (naming the column, not the value) rather than a column left as text.
    """
    import pyarrow.compute as pc

    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        return array
    trimmed = pc.utf8_trim_whitespace(array)
    trimmed = pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, trimmed.type), trimmed)
    try:
        return pc.cast(trimmed, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise DataError(f"label column {column!r} holds a value that is not an integer, "
                        "but the model's classes are declared as integers") from None


def write_predictions(model: Model, data: Path, out: Path, tmp: Path, *,
                      rng: np.random.Generator, progress: Callable[[int], None]) -> int:
    """Stream ``data`` through ``model`` into ``tmp`` (renamed to ``out`` by the caller).

    Returns the number of rows written. Memory stays bounded by one batch.
    """
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from dpcli.data import DataSource
    from dpcli.protect import output_mark

    fmt = OUTPUT_FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise UsageError(f"{out}: unknown output format (use {', '.join(OUTPUT_FORMATS)})")
    # tokens are read in full at prediction time: the per-row cap bounds a *training* record
    source = DataSource(data, _uncapped(model.schema), label=False)
    structure = source.check_structure(model.columns)
    clash = set(output_columns(model)) & (set(structure.present) | set(structure.extra))
    if clash:
        raise UsageError(f"{data}: already has column(s) {', '.join(sorted(clash))}; "
                         "rename them before predicting")
    writer: Any = None
    rows = 0
    try:
        for raw, encoded in source.prediction_batches(model.columns, rng=rng):
            batch = predict_batch(model, raw, encoded)
            if fmt == "csv":
                batch = _lists_as_text(batch)
            if writer is None:
                # the mark lets a rerun replace this file (dpcli.protect.check_own_output)
                writer = (pq.ParquetWriter(tmp, batch.schema.with_metadata(output_mark("predict")))
                          if fmt == "parquet"
                          else pacsv.CSVWriter(tmp, batch.schema))
            writer.write_batch(batch)
            rows += batch.num_rows
            progress(batch.num_rows)
    finally:
        if writer is not None:
            writer.close()
    if writer is None:
        raise DataError(f"{data}: holds no rows to predict")
    return rows


def _lists_as_text(batch: pa.RecordBatch) -> pa.RecordBatch:
    """CSV has no lists: a list of strings becomes its items joined by single spaces
    (the form dpcli reads tokens from CSV)."""
    import pyarrow.compute as pc

    arrays = [pc.binary_join(a.cast(pa.list_(pa.string())), " ")
              if pa.types.is_list(a.type) or pa.types.is_large_list(a.type) else a
              for a in batch.columns]
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names)


def _uncapped(schema: Schema) -> Schema:
    from dataclasses import replace

    from dpcli.data.schema import TokensColumn

    cols = tuple(replace(c, max_per_row=None) if isinstance(c, TokensColumn) else c
                 for c in schema.columns)
    return Schema(columns=cols, label=schema.label, source=schema.source)


def labelled_schema(model: Model, spec_schema: Schema, path: Path) -> Schema:
    """The schema to read a labelled test file under ``model``: the model's, tokens uncapped.

    The spec's label must be the model's (column, classes, positive class):
    otherwise scores and labels would not refer to the same classes.
    """
    mine, theirs = model.schema.label, spec_schema.label
    if (mine.column, tuple(mine.classes), mine.positive) != (
            theirs.column, tuple(theirs.classes), theirs.positive):
        raise UsageError(f"{path}: the model's label ({mine.column!r}, classes "
                         f"{list(mine.classes)}, positive {mine.positive!r}) is not the spec's "
                         f"({theirs.column!r}, classes {list(theirs.classes)}, positive "
                         f"{theirs.positive!r})")
    return _uncapped(model.schema)


def score_schema(spec_schema: Schema, column: str, lower: float, upper: float) -> Schema:
    """The spec's schema with ``column`` declared numeric in [lower, upper] (missing: error)."""
    from dpcli.data.schema import NumericColumn

    if column == spec_schema.label.column:
        raise UsageError(f"--score-column {column!r} is the label column")
    if not lower < upper:
        raise UsageError(f"the score range must have lower < upper, got [{lower}, {upper}]")
    declared = spec_schema.column(column) if spec_schema.has(column) else None
    missing, fill = (declared.missing, declared.fill) if isinstance(declared, NumericColumn) \
        else ("error", None)
    kept = tuple(c for c in spec_schema.columns if c.name != column)
    score = NumericColumn(column, float(lower), float(upper), missing=missing, fill=fill)
    return Schema(columns=(*kept, score), label=spec_schema.label, source=spec_schema.source)


def fold(source: Any, columns: tuple[str, ...], fn: Callable[[EncodedBatch], np.ndarray],
         add: Callable[[np.ndarray, np.ndarray], None], *, rng: np.random.Generator,
         progress: Callable[[int], None]) -> int:
    """One pass: ``add(fn(batch), label codes)`` for every encoded batch; returns the row count.

    Nothing is kept between batches: memory is whatever ``add`` accumulates
    (bounded statistics, for ``roc`` and ``evaluate``). Both arguments of
    ``add`` are private. Raises DataError when the file holds no rows.
    """
    rows = 0
    parallel = getattr(source, "map_encoded", None)
    if parallel is None:  # a source that reads in one thread only
        for batch in source.batches(columns, rng=rng):
            add(fn(batch), batch.label)
            rows += batch.n
            progress(batch.n)
    else:
        # fn (scoring: numpy over the batch) runs on every core; add folds in file order
        for value, label, n in parallel(columns, lambda b: (fn(b), b.label, b.n), rng=rng):
            add(value, label)
            rows += n
            progress(n)
    if rows == 0:
        raise DataError(f"{source.path}: holds no rows")
    return rows


def collect(source: Any, columns: tuple[str, ...],
            fn: Callable[[EncodedBatch], np.ndarray], *, rng: np.random.Generator,
            progress: Callable[[int], None]) -> tuple[np.ndarray, np.ndarray]:
    """``fn`` of every encoded batch, concatenated, with the label codes (both private).

    Holds one value per row: for passes that can fold batches into bounded
    statistics, use :func:`fold`.
    """
    values: list[np.ndarray] = []
    labels: list[np.ndarray] = []

    def keep(value: np.ndarray, label: np.ndarray) -> None:
        values.append(value)
        labels.append(label)

    fold(source, columns, fn, keep, rng=rng, progress=progress)
    return np.concatenate(values), np.concatenate(labels)
