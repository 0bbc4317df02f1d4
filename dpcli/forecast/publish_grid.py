"""publish-grid's forecast: the per-cell noise next to n/T, and the classifier's noise loss.

Closed form. PrivPfC (:mod:`dpcli.algorithms.privpfc`) gives the histogram
ε_hist of its plan and allows grids of at most T = ⌊0.2·n·ε_hist/Δ⌋ cells
(Δ = 2), so every cell's count gets discrete Laplace noise of scale Δ/ε_hist
and a grid's average cell holds at least n/T records. Metrics:

- ``cell``: a cell count's error (exact discrete Laplace quantiles);
- ``relative``: that error over the mean cell count of the finest grid
  allowed, n/max(T, 2) — a grid needs two cells to classify anything. At
  another ε (the verdict's, ``dpcli plan --target``'s) T stays the one of
  this ε: PrivPfC spends more ε on finer grids at the same relative noise
  (T grows with ε), so the question solved is how well grids of this size
  are estimated;
- ``loss``: a bound on the expected extra misclassification rate the noise
  causes in the synopsis' histogram classifier: a cell of margin x flips its
  majority with probability e^(−rx)(1 + rx/2)/2 (r = ε_hist/Δ; PrivPfC's
  Lemma 1), costing x records; x·P(flip) is at most 0.587/(2r) (at rx = √2),
  so T cells lose at most T·0.587/(2r·n). A bound, reached only when every
  cell's margin is the worst one: its ``interval`` is [0, bound].

- ``selection``: how many records (as a share of n) the chosen grid may
  misclassify beyond the best grid of the pool, from the exponential
  mechanism's utility bound: with probability 0.95 it picks a grid within
  2·Δq·(ln K + ln 10)/ε_select of the best quality (K grids in the pool, Δq
  :func:`privpfc.quality_sensitivity`), w.p. 0.9. 1 when T < 2 or the pool
  holds only the one-cell grid. At another ε it is the design of a run at that
  ε (T, K and Δq grow with ε).

Headline ``selection``: usable when at most :data:`SELECTION_TARGET`. It
depends on n, unlike ``relative``: T is proportional to n·ε_hist, so the noise
over the finest grid's mean cell is the same at every n (PrivPfC's own rule
keeps it under 0.2 of an average cell), and a verdict on it said "usable from
ε ≥ 0.54" for 527 records and for 15,590 alike (tester 11; the small file then
released one-cell grids). ``relative`` is kept as a metric. At another ε
the histogram keeps the share of ε it has at this one (the column
pre-selection, used only for very large pools, changes it); ``loss`` keeps
this ε's T; ``selection`` is evaluated with each ε's own design (T, K and Δq
grow with ε; bumps where T admits many more grids are a few per cent).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from dpcli.forecast._noise import count_error
from dpcli.forecast.core import Forecast, MetricForecast, make_forecast
from dpcli.mechanisms import Plan

TARGET = 0.14
#: the selection's excess misclassification (share of n) a usable run stays within
SELECTION_TARGET = 0.05
SELECTION_FAILURE = 0.10   # the bound holds w.p. 0.9, the forecasts' level
#: max over y of y·e^(−y)(1 + y/2), at y = √2
FLIP_MAX = math.sqrt(2.0) * math.exp(-math.sqrt(2.0)) * (1.0 + math.sqrt(2.0) / 2.0)

METHOD = "closed form (discrete Laplace quantiles; PrivPfC's flip probability)"


def design(spec: Any, section: Any, n: int, hierarchies: Any = None) -> Any:
    """PrivPfC's design (T, pool, plan) at ``section.epsilon`` on n records (reads no data);
    ``hierarchies`` are the candidate taxonomies when the caller has loaded them already."""
    from dpcli.algorithms import privpfc
    from dpcli.budget import Budget

    if hierarchies is None:
        hierarchies = _hierarchies(spec, section.columns)
    # the spend's plan and its forecast ask for the same design (public inputs only); the
    # hierarchies are kept in the entry, so their id cannot be reused while it is
    key = (id(hierarchies), max(int(n), 1), float(section.epsilon), section.max_pool)
    if key not in _DESIGNS:
        if len(_DESIGNS) > 64:
            _DESIGNS.clear()
        _DESIGNS[key] = (hierarchies, privpfc.design(hierarchies, max(int(n), 1),
                                                     Budget(section.epsilon),
                                                     section.max_pool))
    return _DESIGNS[key][1]


#: the taxonomies a forecast loaded, by (spec file, spec digest, columns): `dpcli plan` asks
#: publish-grid's forecast and plan at many ε, and parsing the taxonomy files (Adult's: about
#: 0.3 s) is most of their cost. In-process only: public inputs, no data.
_LOADED: dict[tuple[str, str, Any], Any] = {}
_DESIGNS: dict[tuple[int, int, float, Any], tuple[Any, Any]] = {}


def _hierarchies(spec: Any, columns: Any) -> Any:
    from dpcli.algorithms import privpfc

    key = (str(getattr(spec, "path", "")), str(getattr(spec, "digest", id(spec))),
           None if columns is None else tuple(columns))
    if key not in _LOADED:
        _LOADED[key] = privpfc.candidate_hierarchies(spec.schema, columns)
    return _LOADED[key]


def plan(spec: Any, section: Any, n: int, **context: Any) -> Plan:
    """publish-grid's plan at ``section.epsilon`` on n records (the one its api spends)."""
    result: Plan = design(spec, section, n, context.get("hierarchies")).plan
    return result


def forecast(spec: Any, section: Any, n: int, **context: Any) -> Forecast:
    """``relative`` (headline), ``cell`` and the ``loss`` bound (closed form); context
    ``hierarchies=`` saves loading the taxonomies again."""
    from dpcli.algorithms import privpfc

    d = design(spec, section, n, context.get("hierarchies"))
    share = float(d.plan.step(privpfc.HISTOGRAM).budget.epsilon) / float(section.epsilon)
    n = max(int(n), 1)

    # the grid size allowed at this ε (at least 2), fixed at every other ε: PrivPfC turns more
    # ε into finer grids at a constant relative noise, so the forecast asks instead how well
    # grids of THIS size are estimated (monotone in ε, which solving for ε needs)
    t = max(d.threshold, 2)
    hierarchies = context.get("hierarchies")

    def selection_at(eps: float) -> float:
        # the design a run at eps would have (T, the pool and Δq all grow with ε; frozen at
        # the spec's ε the solver advertised an ε at which the run was still not usable)
        de = design(spec, replace(section, epsilon=eps), n, hierarchies)
        if de.threshold < 2 or de.pool_size < 2:
            return 1.0          # no grid that can classify, or only the one-cell grid
        rate = float(de.plan.step(privpfc.HISTOGRAM).budget.epsilon) / privpfc.HIST_SENSITIVITY
        spread = 2.0 * privpfc.quality_sensitivity(rate) * (
            math.log(min(de.pool_size, de.max_pool)) + math.log(1 / SELECTION_FAILURE))
        return min(spread / (float(de.plan.step(privpfc.SELECT_GRID).budget.epsilon) * n),
                   1.0)

    def metrics_at(eps: float) -> dict[str, MetricForecast]:
        eps_hist = share * eps
        scale = privpfc.HIST_SENSITIVITY / eps_hist
        bound = min(t * FLIP_MAX * scale / (2.0 * n), 1.0)
        lost = selection_at(eps)
        return {"selection": MetricForecast(
                    "records the chosen grid may misclassify beyond the pool's best (share of "
                    f"n, w.p. {1 - SELECTION_FAILURE:g})", lost, (0.0, lost), bound_only=True),
                "relative": count_error(scale, "cell count error relative to the mean cell "
                                        "count of the finest grid allowed (n/T)", per=n / t),
                "cell": count_error(scale, "cell count error"),
                "loss": MetricForecast("extra misclassification rate the noise causes",
                                       bound, (0.0, bound), bound_only=True)}

    return make_forecast("publish-grid", section.epsilon, n, METHOD, metrics_at,
                         headline="selection", target=SELECTION_TARGET,
                         note="too few records for the grid's selection: the chosen grid may "
                              "be far from the best (a one-cell grid predicts one class)",
                         extra={"cells_at_most": d.threshold, "pool": d.pool_size})
