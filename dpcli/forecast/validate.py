"""validate's forecast: the class cut's selection noise, the grid's, and the model's perturbation.

Closed forms from public facts (n, m, N, d, ε and the run's public decision,
:func:`dpcli.algorithms.validate.decide`), except the perturbation's shape,
drawn once from a fixed public seed:

- ``threshold`` (the headline): the class cut is the exponential mechanism
  over K = 4096 candidate logits with a utility of sensitivity 1 at ε_em (¾ of
  the threshold's ε); it loses at most 2(ln K + ln 1/β)/ε_em of the utility
  with probability 1 − β, given here as a share of the N rows (the utility
  counts rows): median β = ½, interval [−bound at β = 0.1, 0]. It is the
  worst case over utility landscapes (a real landscape with many near-best
  cuts loses less). A cut that misses by more than the minority's share puts
  every row in one class: the verdict's target is the command's own warning
  level (10 % of N at β = 0.05) in median terms.
- ``selection`` (the λ grid, searched only where ``decide`` says so): the
  stability method adds exponential noise of mean μ = 2β/ε2 to each score, so
  two scores' noises differ by a Laplace(μ) variable, over the score range β2
  (1 for ramp); the baselines' exponential mechanism on 0/1 error counts adds
  Gumbel noise of scale 2/ε, two differ by a logistic variable, over m; the
  ``random`` baseline's choice is all noise (1). 0 when no grid is searched.
- ``margin``: the log-odds change of a unit-norm row from the model's
  perturbation. Both trainers add a vector of norm ~ Gamma(d, θ) in a uniform
  direction (θ = 2/ε′ for objective perturbation, moving the minimiser by at
  most its norm over n(λ + Δ); 2/(nλε) for output perturbation); a unit row
  reads its first coordinate. The λ is the decision's (the grid's smallest when
  searched: the largest noise). An upper bound for objective perturbation: the
  loss's curvature only shrinks the move. With ``lambda: auto`` λ0 holds this
  near 0.34 by construction, trading noise for regularisation bias, which no
  data-free forecast sees.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from typing import Any

import numpy as np

from dpcli.forecast.core import Forecast, MetricForecast, make_forecast

COMMAND = "validate"
HEADLINE = "threshold"
#: the perturbation's shape is drawn with this public seed: a forecast is not a release, so a
#: fixed seed reveals nothing and makes every forecast of the same facts the same
SEED = 20271127
DRAWS = 4000


def plan(spec: Any, section: Any, n: int, **context: Any) -> Any:
    """The plan the command shows at ``section.epsilon`` on ``n`` rows of DATA (context:
    ``columns``, ``validation_rows`` — the --validation file's row count)."""
    from dpcli.api.validate import plan_at

    return plan_at(spec, section, n, columns=context.get("columns"),
                   validation_rows=context.get("validation_rows")).plan


def forecast(spec: Any, section: Any, n: int, **context: Any) -> Forecast:
    """The class cut's, the grid's and the model's noise at ``section.epsilon`` on n rows.

    Costs nothing: public facts only (the plan's own decision, ``columns`` and
    ``validation_rows`` from ``context``).
    """
    from dpcli.algorithms import validate as tuning

    columns, m_file = context.get("columns"), context.get("validation_rows")
    now = _planned(spec, section, n, columns, m_file)

    def metrics_at(e: float) -> dict[str, MetricForecast]:
        planned = _planned(spec, replace(section, epsilon=e), n, columns, m_file)
        return {HEADLINE: _threshold(planned), "selection": _selection(planned),
                "margin": _margin(planned)}

    # the command warns above FORECAST_WARNING of N at β = 0.05; the same cut in median terms
    target = tuning.FORECAST_WARNING * _em_loss(0.5) / _em_loss(tuning.THRESHOLD_FAILURE)
    decision = now.decision
    extra = {"lambda_rule": decision.mode,
             "lambda": decision.lam if decision.lam is not None else min(now.config.grid),
             "n_train": now.n, "n_validation": now.m, "n_threshold": now.n_all}
    return make_forecast(COMMAND, section.epsilon, now.n_all, "closed form", metrics_at,
                         headline=HEADLINE, target=target,
                         note="the class cut's noise can put (almost) every row in one "
                              "class: expect near-chance output",
                         extra=extra)


def _planned(spec: Any, section: Any, n: int, columns: Any, m_file: int | None) -> Any:
    from dpcli.api.validate import plan_at

    return plan_at(spec, section, n, columns=columns, validation_rows=m_file)


def _em_loss(beta: float) -> float:
    """2(ln K + ln 1/β) at ε_em·N = 1: the exponential mechanism's loss bound."""
    from dpcli.algorithms import validate as tuning

    return 2.0 * (math.log(tuning.THRESHOLD_CANDIDATES) + math.log(1.0 / beta))


def _threshold(planned: Any) -> MetricForecast:
    from dpcli.algorithms import validate as tuning

    eps_t = float(planned.decision.epsilon_threshold)
    what = "class cut's utility loss / N"
    if eps_t <= 0:
        return MetricForecast(what + " (0.5 cut: none released)", 0.0, (0.0, 0.0))
    scale = 1.0 / (eps_t * float(tuning.CUT_PART) * planned.n_all)
    return MetricForecast(what, _em_loss(0.5) * scale, (-_em_loss(0.1) * scale, 0.0))


def _selection(planned: Any) -> MetricForecast:
    from dpcli.algorithms import validate as tuning

    config, decision = planned.config, planned.decision
    what = "λ selection noise / score range"
    if decision.mode != "select":
        return MetricForecast(what + " (no search)", 0.0, (0.0, 0.0))
    eps = float(decision.epsilon_model)
    if config.method == "random":
        return MetricForecast(what + " (random: no data)", 1.0, (-1.0, 1.0))
    if config.method == "stability":
        c = tuning.stability_constants(config, planned.n, planned.m, planned.d, eps / 2)
        mu = tuning.selection_noise_mean(config, eps, planned.n, planned.m, planned.d) / c.beta2
        # the difference of two Exp(μ) noises is Laplace(μ)
        return MetricForecast(what, mu * math.log(2.0),
                              (-mu * math.log(10.0), mu * math.log(10.0)))
    # alpha-split, data-split: Gumbel(2/ε) on 0/1 error counts; differences are logistic
    beta = 2.0 / eps / max(planned.m, 1)
    return MetricForecast(what, beta * math.log(3.0),
                          (-beta * math.log(19.0), beta * math.log(19.0)))


def _margin(planned: Any) -> MetricForecast:
    from dpcli.mechanisms.erm import objective_constants

    config, decision = planned.config, planned.decision
    eps = float(decision.epsilon_model)
    n = decision.n_model if decision.mode != "select" else planned.n
    lam = decision.lam if decision.lam is not None else min(config.grid)
    if decision.mode == "select":
        if config.method == "stability":
            eps = eps / 2
        elif config.method == "alpha-split":
            eps = eps / config.k
        elif config.method == "data-split":
            n = max(n // config.k, 1)
    if config.trainer == "objective":
        eps_prime, extra = objective_constants(eps, n, lam)
        scale = 2.0 / (eps_prime * n * (lam + extra))
    else:
        scale = 2.0 / (n * lam * eps)
    shape = _unit_margins(planned.d)
    lo, hi = np.quantile(shape, [0.05, 0.95])
    return MetricForecast("log-odds error of a unit-norm row", float(np.median(np.abs(shape)))
                          * scale, (float(lo) * scale, float(hi) * scale))


@functools.lru_cache(maxsize=32)
def _unit_margins(d: int) -> np.ndarray:
    """Gamma(d, 1) norms times a uniform direction's first coordinate: the margin change of a
    unit-norm row under a perturbation of scale 1 (fixed public seed, see SEED)."""
    rng = np.random.default_rng(SEED)
    norms = rng.gamma(d, 1.0, DRAWS)
    z = rng.standard_normal((DRAWS, d))
    first = z[:, 0] / np.linalg.norm(z, axis=1)
    out = norms * first
    out.setflags(write=False)
    return out
