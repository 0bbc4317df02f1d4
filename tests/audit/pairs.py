"""Neighbouring datasets for the audits, and the statistics that read released outputs.

Every pair is replace-one: the same n rows, row 0 replaced. Data go through the
real encoder (clamping, ``other``, token caps) and the local statistics engine,
as a command's pass does; the pair's exact statistics are computed once, and
only the mechanism is run many times.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa

from dpcli.data.encode import BatchEncoder, EncodedBatch
from dpcli.data.report import DataReport
from dpcli.data.schema import Schema
from dpcli.mechanisms import make_rng
from dpcli.stats import Stats, StatsRequest, compute_batches


def replace_first(rows: dict[str, list[Any]], record: dict[str, Any]) -> dict[str, list[Any]]:
    """The neighbour of ``rows`` whose row 0 is ``record`` (same n)."""
    out = {name: list(values) for name, values in rows.items()}
    for name, value in record.items():
        out[name][0] = value
    return out


def encode(schema: Schema, rows: dict[str, list[Any]], columns: Sequence[str]) -> EncodedBatch:
    """One encoded batch of ``rows`` (the label and ``columns``), as a pass encodes it."""
    encoder = BatchEncoder(schema, columns, report=DataReport(), rng=make_rng(0))
    return encoder.encode(pa.table(rows))


def stats_of(schema: Schema, request: StatsRequest, rows: dict[str, list[Any]]) -> Stats:
    """The exact statistics a command's pass computes for ``request`` on ``rows``."""
    return compute_batches(schema, request, [encode(schema, rows, request.columns())])


def sides(released: np.ndarray, on_d: np.ndarray, on_dp: np.ndarray) -> float:
    """Σ over coordinates where D and D' differ: +1 if the released value lies at or beyond
    D's exact value (away from D'), −1 if at or beyond D''s, else 0.

    For one Laplace-type coordinate these are the events of largest privacy-loss
    ratio; their sum over the changed coordinates reaches the whole ε of the step
    when every changed coordinate sits on the same side.
    """
    y, a, b = (np.asarray(v, dtype=float).ravel() for v in (released, on_d, on_dp))
    changed = a != b
    direction = np.sign(a - b)[changed]
    y, a, b = y[changed], a[changed], b[changed]
    return float(np.sum((y - a) * direction >= 0) - np.sum((y - b) * direction <= 0))


@contextmanager
def scaled_epsilon(module: Any, name: str, factor: float = 2.0) -> Iterator[None]:
    """Positive control: ``module.name`` (a mechanism taking ``epsilon=``) run with
    ``factor``·ε while the plan still claims ε, i.e. 1/factor of the noise."""
    original = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["epsilon"] = kwargs["epsilon"] * factor
        return original(*args, **kwargs)

    with mock.patch.object(module, name, wrapper):
        yield


@contextmanager
def noiseless(module: Any, name: str, value: Callable[..., Any]) -> Iterator[None]:
    """``module.name`` replaced by ``value`` (the exact statistic), to read what a run releases
    before noise."""
    with mock.patch.object(module, name, value):
        yield
