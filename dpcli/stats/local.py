"""The in-process statistics engine (the default).

Why: most datasets fit comfortably through one process when read in
batches; one streaming pass with vectorised numpy accumulators is fast and
needs memory proportional to a batch (plus the tables, plus any
``keep_values`` columns). Larger data can use a distributed engine behind
the same :class:`~dpcli.stats.engine.Engine` interface.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import closing
from typing import ClassVar

import numpy as np
import pyarrow as pa

from dpcli.data.encode import EncodedBatch
from dpcli.data.reader import DataSource
from dpcli.data.report import DataReport
from dpcli.data.schema import Schema
from dpcli.data.source import Source
from dpcli.errors import DataError
from dpcli.stats.accumulators import StatsAccumulator
from dpcli.stats.engine import Engine, Stats, StatsRequest


def compute_batches(schema: Schema, request: StatsRequest, batches: Iterable[EncodedBatch],
                    *, report: DataReport | None = None,
                    progress: Callable[[int], None] | None = None) -> Stats:
    """Fold already-encoded batches into :class:`Stats` (validates the request first)."""
    request.validate(schema)
    acc = StatsAccumulator(schema, request)
    for batch in batches:
        acc.update(batch)
        if progress is not None:
            progress(batch.n)
    return acc.result(report)


class LocalEngine(Engine):
    """One streaming pass in this process over :meth:`DataSource.batches`."""

    name: ClassVar[str] = "local"

    def compute(self, source: Source, request: StatsRequest, *,
                rng: np.random.Generator,
                progress: Callable[[int], None] | None = None) -> Stats:
        if not isinstance(source, DataSource):  # the engine a source names reads it
            raise TypeError(f"the local engine reads a local DataSource, not {type(source)}")
        request.validate(source.schema)
        schema = source.schema

        def fold(batch: EncodedBatch) -> StatsAccumulator:
            part = StatsAccumulator(schema, request)
            part.update(batch)
            return part

        # every core encodes and folds batches (pyarrow and numpy release the GIL); the
        # per-batch partial statistics are merged here in file order. Merging a batch's
        # fresh accumulator is the same arithmetic as updating with the batch, so the
        # statistics are those of a one-thread loop bit for bit, whatever the core count
        # (and a seeded run releases the same output on 1 core or 16)
        try:
            total = StatsAccumulator(schema, request)
            # closed on any exit: its worker threads are joined here, not at garbage collection
            with closing(source.map_encoded(request.columns(), fold, rng=rng)) as parts:
                for part in parts:
                    total.merge(part)
                    if progress is not None:
                        progress(part.n)
            stats = total.result()
        except (pa.ArrowException, IndexError) as exc:
            # a data page the pre-charge pass did not decode (e.g. a corrupt Parquet page in a
            # feature column); pyarrow's text may quote values, so only its type is named
            raise DataError(f"{source.path}: could not decode the data "
                            f"({type(exc).__name__}); the file may be corrupt") from None
        stats.report = source.report  # the pass starts a fresh report: read it after the pass
        return stats
