"""Shared pytest fixtures (keep small: every test directory may add to this file)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from dpcli.data.schema import (
    BinaryColumn,
    CategoricalColumn,
    Label,
    NumericColumn,
    Schema,
    TokensColumn,
)
from dpcli.stats import StatsRequest

#: a request touching every kind of statistic of :class:`MixedData`'s columns (the engine tests')
MIXED_REQUEST = StatsRequest(
    contingency=("colour", "smoker", "zip", "words"),
    histograms=(("age", 7), ("income", 4)),
    moments=("age", "income"),
    keep_values=("income",),
)


@dataclass
class MixedData:
    """A random dataset with every column type, its schema, and writers."""

    schema: Schema
    frame: pd.DataFrame  # raw values; "words" holds Python lists of tokens

    def table(self, tokens_as_text: bool = False) -> pa.Table:
        df = self.frame.copy()
        if tokens_as_text:
            df["words"] = [None if w is None else " ".join(w) for w in df["words"]]
            return pa.Table.from_pandas(df, preserve_index=False)
        table = pa.Table.from_pandas(df.drop(columns=["words"]), preserve_index=False)
        words = pa.array(list(df["words"]), pa.list_(pa.string()))
        return table.append_column("words", words)

    def write_parquet(self, path: Path, **kwargs: object) -> Path:
        pq.write_table(self.table(), path, **kwargs)
        return path

    def write_csv(self, path: Path) -> Path:
        pacsv.write_csv(self.table(tokens_as_text=True), path)
        return path


def make_mixed(tmp_path: Path, n: int = 500, seed: int = 0,
               max_per_row: int | None = None) -> MixedData:
    """Columns: label y (3 classes), age/income numeric, colour categorical,
    smoker binary, zip categorical over integers, words tokens (20-word
    vocabulary, 30 words used). Values outside every domain occur."""
    rng = np.random.default_rng(seed)
    vocab = tuple(f"w{i}" for i in range(20))
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    schema = Schema(
        columns=(
            NumericColumn("age", 0.0, 100.0),
            NumericColumn("income", -10.0, 10.0, missing="impute", fill=1.5),
            CategoricalColumn("colour", ("red", "green", "blue"), missing="impute"),
            BinaryColumn("smoker", ("no", "yes")),
            CategoricalColumn("zip", ("1", "2", "3")),
            TokensColumn("words", vocab, tmp_path / "vocab.txt", max_per_row=max_per_row),
        ),
        label=Label("y", ("a", "b", "c"), positive=None),
    )
    income = rng.normal(0, 8, n)
    income[rng.random(n) < 0.1] = np.nan
    colour = rng.choice(["red", "green", "blue", "purple", "pink"], n).astype(object)
    colour[rng.random(n) < 0.1] = None
    words = []
    for _ in range(n):
        k = int(rng.integers(0, 9))
        words.append([f"w{j}" for j in rng.integers(0, 30, k)])
    frame = pd.DataFrame({
        "y": rng.choice(["a", "b", "c"], n, p=[0.5, 0.3, 0.2]),
        "age": np.round(rng.normal(50, 40, n), 3),
        "income": income,
        "colour": colour,
        "smoker": rng.choice(["no", "yes", "maybe"], n, p=[0.6, 0.3, 0.1]),
        "zip": rng.integers(1, 6, n),
        "extra": rng.random(n),
        "words": words,
    })
    return MixedData(schema=schema, frame=frame)


@pytest.fixture
def mixed_data(tmp_path: Path) -> Callable[..., MixedData]:
    """Factory: ``mixed_data(n=500, seed=0, max_per_row=None)`` → :class:`MixedData`."""
    def factory(n: int = 500, seed: int = 0, max_per_row: int | None = None) -> MixedData:
        return make_mixed(tmp_path, n, seed, max_per_row)
    return factory
