"""train-brc's forecast: each round's noise against the weighted error's range (closed form).

Selecting rounds (the default, ``candidates`` > 1): the headline is the scale of the
exponential noise round t's selection adds to the candidates' balanced edges, c2·T/(m·ε_r)
(:func:`dpcli.algorithms.brc.noise_scale`), at the balanced proxy m = n/2; T set after the
class count only falls with a smaller class, which keeps the scale at most EDGE/3
(:func:`dpcli.algorithms.brc.select_rounds`). |Laplace(b)| and the exponential noise of
scale b have one law (median b·ln 2, 90 % quantile b·ln 10), so the Laplace reading is
exact for each candidate's noise. The paper's round
(``candidates: 1``) is read as follows.

Round t releases the weighted error of a random classifier, in [0, 1], with
Laplace noise of scale b = ρ·c1·c2·T/(ε_r·n) (:func:`dpcli.algorithms.brc.noise_scale`;
ε_r the rounds' share of ε, T the rounds, ``auto`` resolved at n as the command
does). What the error must resolve is a random hyperplane's edge |err − ½|,
typically about 0.1 (:data:`dpcli.algorithms.brc.EDGE`): the verdict calls a
release usable when the median |noise| is at most half of it (0.05). The
class-weight ratio ρ is set by the released positive count (private): the
forecast takes the cap ρ may reach (:func:`dpcli.algorithms.brc.weight_cap`, a
public function of n, ε, T, c1, c2), which unbalanced labels reach (Adult's
24 % positives ask for ρ = 3.2; measured in benchmarks/results/forecast_learners.md:
with ρ = 1 the forecast was 2-3.5 times too small at ε = 0.5 and 1); balanced
labels get less noise than forecast.

Also forecast: the calibration histogram's noise on a class total, over the
smaller class (n/2, the balanced proxy), which the command's near-chance
warning reads (:func:`dpcli.algorithms.brc.calibration_noise`), and, with a
private label, the noisy positive count as a share of n.

With ``rounds: auto`` T grows with ε so that the noise stays below the edge,
and the cap on ρ takes what T leaves: ρ·b is 0.1/√2 wherever 1 ≤ ρ ≤ 20 and
falls with ε elsewhere, so the forecast never grows with ε; more ε buys more
rounds and class weights, not less noise per round. (At ρ = 1 alone, b is a
saw-tooth just under 0.1/√2 inside T's range.)
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from dpcli.forecast.core import Forecast, MetricForecast, laplace_error, make_forecast

COMMAND = "train-brc"
HEADLINE = "round_error"
#: the verdict's target: median |noise| on a round's error at most half a typical edge
TARGET = 0.05
#: the normal quantiles of a sum of many Laplace terms: median |·| and the 90 % bound
_MEDIAN_Z, _BOUND_Z = 0.6745, 1.6449


def plan(spec: Any, section: Any, n: int, **context: Any) -> Any:
    """The plan the command shows at ``section.epsilon`` on ``n`` records."""
    from dpcli.api.train_brc import plan_at

    return plan_at(spec, section, n, columns=context.get("columns"))


def forecast(spec: Any, section: Any, n: int, **context: Any) -> Forecast:
    """Each round's noise on its released error at ``section.epsilon`` (``columns`` in
    ``context``: the chosen columns). Costs nothing: public facts only."""
    from dpcli.algorithms import brc
    from dpcli.api.train_brc import base_config, config_at

    n = max(int(n), 1)
    base = base_config(spec, section, context.get("columns"))

    def metrics_at(e: float) -> dict[str, MetricForecast]:
        config = config_at(replace(section, epsilon=e), n, base)
        # ρ at the cap the class weights may take (public): the weights spend what the
        # rounds leave of the noise room, and unbalanced labels (the usual case) reach it
        if config.candidates > 1:
            # selecting: the exponential noise on each round's balanced edges, at the
            # balanced proxy (smaller class n/2; T after the count only falls with it)
            out = {HEADLINE: laplace_error(brc.noise_scale(config, e, n),
                                           "noise on each round's selection (balanced "
                                           "edges, smaller class n/2)")}
        else:
            rho = brc.weight_cap(config, e, n)
            out = {HEADLINE: laplace_error(brc.noise_scale(config, e, n, rho),
                                           "noise on each round's weighted error (class "
                                           "weights at their cap)")}
        # a class total of the margin histogram sums its `bins` counts, each with discrete
        # Laplace noise of scale 2/ε_cal (variance 2·scale²): close to normal
        cal_eps = float(e * brc.CALIBRATION_SHARE)
        bins = (brc.FINE_BINS if brc.fine_bins(config.voted, n / 2.0, cal_eps)
                else brc.CALIBRATION_BINS)   # at the balanced proxy, as below
        sd = math.sqrt(bins * 2.0) * brc.HIST_SENSITIVITY / cal_eps
        rel = sd / max(n / 2.0, 1.0)
        out["calibration"] = MetricForecast("calibration class-total noise relative to the "
                                            "smaller class (n/2)",
                                            _MEDIAN_Z * rel, (-_BOUND_Z * rel, _BOUND_Z * rel))
        if config.counted:
            out["class_count"] = laplace_error(
                brc.COUNT_SENSITIVITY / float(e * brc.CLASS_COUNT_SHARE),
                "positive share error", sensitivity_scale=1.0 / n)
        return out

    config = config_at(section, n, base)
    extra = {"rounds": config.rounds,
             "class_ratio_cap": brc.weight_cap(config, section.epsilon, n),
             "edge": brc.EDGE}
    made = make_forecast(COMMAND, section.epsilon, n, "closed form", metrics_at,
                         headline=HEADLINE, target=TARGET,
                         note=f"each round's noise exceeds half a random classifier's edge "
                              f"({brc.EDGE:g}): expect near-chance output",
                         scope="judged on each round's noise against a typical edge, not on "
                               "the final model: weak features can still give one barely "
                               "better than guessing",
                         extra=extra)
    # the class cut is the other way a brc model comes out near chance: the command warns
    # when the calibration's noise exceeds CALIBRATION_NOISE_LIMIT of the smaller class as
    # released; the verdict says so beforehand at the balanced proxy (n/2), which an
    # unbalanced label only makes worse (a new user saw "usable", then that warning)
    cut = _MEDIAN_Z * brc.CALIBRATION_NOISE_LIMIT
    if made.metrics["calibration"].expected <= cut:
        return made
    by_cut = make_forecast(COMMAND, section.epsilon, n, "closed form", metrics_at,
                           headline="calibration", target=cut,
                           note="the class cut's noise can move most of the smaller class: "
                                "expect (almost) every record in one class",
                           extra=extra)
    if made.verdict.usable:
        return by_cut
    # both fail: usable from the larger of the two ε (None: not within reach)
    needs = (made.verdict.epsilon_usable, by_cut.verdict.epsilon_usable)
    worst = None if None in needs else max(e for e in needs if e is not None)
    return replace(made, verdict=replace(made.verdict, epsilon_usable=worst))
