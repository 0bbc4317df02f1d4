"""select-features' forecast: the selection's noise against the score gaps (closed form).

The released selection is right where the noise keeps two candidates' scores
in the order of their exact scores. The forecast is the noise on the
difference of two candidates' scores, per record (a share of n for the count
scores and chi2, nats for ig: the unit of ``min_effect``), from public facts
only: n, the selection's ε (the split rule's share under ``--total-epsilon``),
the number of candidates m, the row cap s, k, the score's sensitivity and the
method (:func:`dpcli.algorithms.feature_selection.resolution`):

- topk: each of the k rounds is the exponential mechanism at ε/k, Gumbel noise
  of scale β = 2kΔ/ε; two Gumbels differ by a logistic variable: median
  |difference| β·ln 3, P(difference > g) = 1/(1 + e^(g/β));
- perturb, threshold, cluster: a sum of independent Laplace terms (two, the
  sparse vector's query and threshold noise, or four), its quantiles from the
  numerical convolution the noise check uses.

The interval is the central 90 % interval, as every other forecast's (a
difference beyond it happens 1 time in 20 on each side). The noise check's
resolution — the gap kept in order with probability 0.9, one-sided, the bound
of the central 80 % interval — is in ``extra["resolution"]``; the verdict's
target is ``min_effect`` scaled by median/resolution, so "usable" is the noise
check's pass (docs/forecast.md, "select-features").
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from dpcli.forecast.core import LEVEL, Forecast, MetricForecast, make_forecast

COMMAND = "select-features"
HEADLINE = "selection"


def plan(spec: Any, section: Any, n: int, **context: Any) -> Any:
    """The plan the command shows at ``section.epsilon`` on ``n`` records.

    ``total_epsilon`` in ``context``: the section's ε is a total split by the rule."""
    from dpcli.api.select_features import plan_at

    return plan_at(spec, _with_columns(section, context), n,
                   total_epsilon=section.epsilon if context.get("total_epsilon") else None)


def forecast(spec: Any, section: Any, n: int, **context: Any) -> Forecast:
    """The noise between two candidates' scores, per record, at ``section.epsilon``.

    ``context``: ``columns`` (the candidates' columns), ``total_epsilon`` (true: the
    section's ε is the total of ``--total-epsilon``). Costs nothing: public facts only.
    """
    from dpcli.algorithms import feature_selection as fs
    from dpcli.api.select_features import selection_epsilon, setup

    section = _with_columns(section, context)
    total = bool(context.get("total_epsilon"))
    schema, chosen, config, _ = setup(spec, section)
    m, s = len(fs.candidates(schema, chosen)), fs.row_cap(schema, chosen)
    n = max(int(n), 1)
    per_record = 1.0 if config.score == "ig" else 1.0 / n
    # every noise scale is ∝ 1/ε: the quantiles at ε = 1, divided by ε (a fast inversion)
    median1, resolution1, bound1 = _unit_quantiles(config.score, config.method, m, s, n,
                                                   config.k)
    effect = config.effect()

    def metrics_at(e: float) -> dict[str, MetricForecast]:
        eps, _ = selection_epsilon(schema, chosen, config, n, e, e if total else None)
        med, half = median1 / eps * per_record, bound1 / eps * per_record
        return {HEADLINE: MetricForecast(
            "noise on the score gap between two candidates, per record", med, (-half, half),
            LEVEL)}

    eps_now, split = selection_epsilon(schema, chosen, config, n, section.epsilon,
                                       section.epsilon if total else None)
    check = fs.noise_check(schema, chosen, config, n, eps_now)
    # usable ⇔ resolution ≤ min_effect ⇔ median ≤ min_effect·median/resolution (a fixed ratio)
    target = effect * median1 / resolution1
    extra: dict[str, Any] = {
        "min_effect": effect, "selection_epsilon": eps_now, "candidates": m,
        # the noise check's resolution per record: kept in order with probability 0.9
        "resolution": resolution1 / eps_now * per_record,
        "noise_check_passes": check.passes}
    if split is not None:
        extra["split"] = split.to_json()
    return make_forecast(COMMAND, section.epsilon, n, "closed form", metrics_at,
                         headline=HEADLINE, target=target,
                         note=f"the noise exceeds the meaningful score gap min_effect = "
                              f"{effect:g} per record: expect a selection made by noise",
                         extra=extra)


def _with_columns(section: Any, context: dict[str, Any]) -> Any:
    columns = context.get("columns")
    return replace(section, columns=tuple(columns)) if columns else section


def _unit_quantiles(score: str, method: str, m: int, s: int, n: int, k: int | None
                    ) -> tuple[float, float, float]:
    """(median |D|, the g with P(D > g) = 0.1, the g with P(D > g) = (1 − LEVEL)/2) at ε = 1,
    D the difference of two candidates' noisy-score noise on the score's own scale (the terms
    of ``fs.resolution``)."""
    from dpcli.algorithms import feature_selection as fs
    from dpcli.mechanisms.sparse_vector import sparse_vector_split

    per, l1 = fs.sensitivity(score, m, s, n)
    tail = 1.0 - fs.RESOLUTION_PROBABILITY
    if method == "topk":
        beta = 2.0 * max(1, k or 1) * per
        # logistic(β): P(|D| > g) = 2/(1 + e^(g/β)) = 1/2 at g = β·ln 3
        return (beta * math.log(3.0), beta * math.log((1.0 - tail) / tail),
                beta * math.log((1.0 + LEVEL) / (1.0 - LEVEL)))
    if method == "threshold":
        eps1, eps2 = sparse_vector_split(1.0, k or 1)
        scales: tuple[float, ...] = (2.0 * (k or 1) * per / eps2, per / eps1)
    elif method == "cluster":
        scales = (2.0 * s,) * 4
    else:
        scales = (l1,) * 2
    # symmetric: P(|D| > g) = 1/2 ⇔ P(D > g) = 1/4
    return (fs._laplace_difference_tail(scales, 0.25),
            fs._laplace_difference_tail(scales, tail),
            fs._laplace_difference_tail(scales, (1.0 - LEVEL) / 2.0))
