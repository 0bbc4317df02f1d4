"""What a source of private records offers the run that reads it: the one seam between the
spend (dpcli.api.spend) and the engines.

Every source — a local file or folder (:class:`dpcli.data.DataSource`) or a path Spark
reads (:class:`dpcli.stats.spark.SparkSource`) — is checked before the charge and names the
engine that computes its statistics. A :class:`BatchSource` is also read batch by batch in
this process (passes that score rows with a released model, order statistics): only the
local engine does that.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from dpcli.data.encode import EncodedBatch
    from dpcli.data.reader import StructureReport
    from dpcli.data.report import DataReport


@runtime_checkable
class Source(Protocol):
    """Private records under a schema: checked before the charge, read once charged."""

    report: DataReport

    @property
    def engine(self) -> str:
        """The statistics engine that reads this kind of source (a class attribute will do)."""
        ...

    def check_structure(self, columns: Sequence[str], *,
                        raise_errors: bool = True) -> StructureReport:
        """File, format, columns and types, reading no value."""
        ...

    def check_values(self, columns: Sequence[str]) -> int:
        """The pre-charge validation pass; returns n (public under replace-one)."""
        ...

    def num_rows_hint(self) -> int | None:
        """n from metadata when known cheaply (progress only)."""
        ...


@runtime_checkable
class BatchSource(Source, Protocol):
    """A source this process reads batch by batch."""

    def batches(self, columns: Sequence[str], *,
                rng: np.random.Generator) -> Iterator[EncodedBatch]:
        ...

    def raw_batches(self, columns: Sequence[str], *, rng: np.random.Generator
                    ) -> Iterator[tuple[pa.RecordBatch, EncodedBatch]]:
        ...
