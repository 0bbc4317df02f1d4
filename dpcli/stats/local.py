"""The in-process statistics engine (the default).

Why: most datasets fit comfortably through one process when read in
batches; one streaming pass with vectorised numpy accumulators is fast and
needs memory proportional to a batch (plus the tables, plus any
``keep_values`` columns). Larger data can use a distributed engine behind
the same :class:`~dpcli.stats.engine.Engine` interface.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import ClassVar

import numpy as np

from dpcli.data.encode import EncodedBatch
from dpcli.data.reader import DataSource
from dpcli.data.report import DataReport
from dpcli.data.schema import Schema
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

    def compute(self, source: DataSource, request: StatsRequest, *,
                rng: np.random.Generator,
                progress: Callable[[int], None] | None = None) -> Stats:
        request.validate(source.schema)
        acc = StatsAccumulator(source.schema, request)
        for batch in source.batches(request.columns(), rng=rng):
            acc.update(batch)
            if progress is not None:
                progress(batch.n)
        return acc.result(source.report)
