#!/usr/bin/env python3
"""Rebuild dpcli's shipped samples from the full public datasets.

Usage (from anywhere)::

    python sample_data/make_samples.py [SOURCE_DIR]

SOURCE_DIR defaults to ``../shared/data`` relative to the repository root
(the folder that holds ``sample_data/``). Files are written into the folder
this script lives in. The output is deterministic: every source file is
sampled with its own fresh ``numpy.random.default_rng(20261121)``, so the
rows of one sample do not depend on the order in which the others are made.

Rows are drawn uniformly without replacement and kept in their original
order. Parquet files keep the source column types; each CSV holds exactly the
same values (header line, no index column). For the tweets only ``tokens``
and ``label`` are kept: the free text, id and timestamp are dropped, and in
the CSV the token list becomes one string of the tokens joined by single
spaces (tokens never contain whitespace; a row with no tokens becomes an
empty field).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SEED = 20261121
HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
DEFAULT_SOURCE = REPO_ROOT.parent / "shared" / "data"

# (source file, output stem, rows) for the tabular datasets.
TABULAR = [
    ("adult_train.parquet", "adult_train", 3000),
    ("adult_test.parquet", "adult_test", 1500),
    ("credit_default_train.parquet", "credit_train", 3000),
    ("credit_default_test.parquet", "credit_test", 1000),
]
TWEETS_SOURCE = "tweets.parquet"
TWEETS_TRAIN_ROWS = 2000
TWEETS_TEST_ROWS = 1000
TWEETS_COLUMNS = ["tokens", "label"]


def _rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


def _read(path: Path) -> pa.Table:
    if not path.is_file():
        sys.exit(f"make_samples: missing source file {path}")
    return pq.read_table(path)


def _take(table: pa.Table, rows: np.ndarray) -> pa.Table:
    # Sorted so that a sample keeps the source's row order; pandas metadata
    # is dropped because it can describe columns the sample no longer has.
    taken = table.take(pa.array(np.sort(rows), type=pa.int64()))
    return taken.replace_schema_metadata(None)


def _write_parquet(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path)


def _write_csv(table: pa.Table, path: Path) -> None:
    frame = table.to_pandas()
    frame.to_csv(path, index=False, lineterminator="\n")


def _tokens_as_text(table: pa.Table) -> pa.Table:
    joined = [
        " ".join(tokens) if tokens is not None else None
        for tokens in table.column("tokens").to_pylist()
    ]
    index = table.schema.get_field_index("tokens")
    return table.set_column(index, pa.field("tokens", pa.string()), pa.array(joined, pa.string()))


def make_tabular(source: Path, out: Path) -> None:
    for filename, stem, n in TABULAR:
        table = _read(source / filename)
        if table.num_rows < n:
            sys.exit(f"make_samples: {filename} has {table.num_rows} rows, need {n}")
        rows = _rng().choice(table.num_rows, size=n, replace=False)
        sample = _take(table, rows)
        _write_parquet(sample, out / f"{stem}.parquet")
        _write_csv(sample, out / f"{stem}.csv")
        print(f"{stem}: {sample.num_rows} rows from {filename}")


def make_tweets(source: Path, out: Path) -> None:
    table = _read(source / TWEETS_SOURCE).select(TWEETS_COLUMNS)
    need = TWEETS_TRAIN_ROWS + TWEETS_TEST_ROWS
    if table.num_rows < need:
        sys.exit(f"make_samples: {TWEETS_SOURCE} has {table.num_rows} rows, need {need}")
    # One permutation: its first rows are the training sample, the next ones
    # the test sample, so the two are disjoint by construction.
    order = _rng().permutation(table.num_rows)
    splits = {
        "tweets_train": order[:TWEETS_TRAIN_ROWS],
        "tweets_test": order[TWEETS_TRAIN_ROWS:need],
    }
    for stem, rows in splits.items():
        sample = _take(table, rows)
        _write_parquet(sample, out / f"{stem}.parquet")
        _write_csv(_tokens_as_text(sample), out / f"{stem}.csv")
        print(f"{stem}: {sample.num_rows} rows from {TWEETS_SOURCE}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "source",
        nargs="?",
        type=Path,
        default=DEFAULT_SOURCE,
        help=f"folder holding the full datasets (default: {DEFAULT_SOURCE})",
    )
    args = parser.parse_args(argv)
    make_tabular(args.source, HERE)
    make_tweets(args.source, HERE)


if __name__ == "__main__":
    main()
