"""Sufficient statistics in one streaming pass, behind a small engine interface."""

from dpcli.stats.accumulators import (
    ClassCountAccumulator,
    ContingencyAccumulator,
    HistogramAccumulator,
    JointAccumulator,
    MomentsAccumulator,
    StatsAccumulator,
    ValuesAccumulator,
    histogram_edges,
    n_levels,
)
from dpcli.stats.engine import (
    Engine,
    JointTable,
    LeafMap,
    Moments,
    Stats,
    StatsRequest,
    available_engines,
    get_engine,
    register_engine,
)
from dpcli.stats.local import LocalEngine, compute_batches

__all__ = [
    "ClassCountAccumulator",
    "ContingencyAccumulator",
    "Engine",
    "HistogramAccumulator",
    "JointAccumulator",
    "JointTable",
    "LeafMap",
    "LocalEngine",
    "Moments",
    "MomentsAccumulator",
    "Stats",
    "StatsAccumulator",
    "StatsRequest",
    "ValuesAccumulator",
    "available_engines",
    "compute_batches",
    "get_engine",
    "histogram_edges",
    "n_levels",
    "register_engine",
]
