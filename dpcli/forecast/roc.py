"""roc's forecast and error bars: the AUC's error and the curve's, from n, ε and the plan.

AUC (released from a noisy signed pair count D and a noisy count of
positives n1, :mod:`dpcli.algorithms.roc_scale`): simulation of exactly that
release — ½ + (D + Z_D)/(2·ñ1·(n − ñ1)), ñ1 = n1 + Z_n clipped to
[1, n − 1], the AUC clipped to [0, 1] — over :data:`AUC_DRAWS` fixed draws, at
stated public assumptions: the positive class at a share of
:data:`PREVALENCE` and a true AUC of :data:`AUC` (``prevalence=`` and
``auc=`` override them; with a released naive Bayes model the command
passes the model's own class share, public). Its median agrees with roc_scale's first-order
``auc_error`` (the error the roc module already states) when |AUC − ½| is
at its bound; the simulation keeps the sign, so it gives an interval.

Curve: simulation of the curve's counts and their post-processing
(:func:`dpcli.algorithms.roc.curve_from_prefix`) on synthetic binormal
scores of the same AUC and prevalence, binned into the plan's bins over
[−4, μ + 4] (μ = √2·Φ⁻¹(AUC)); with recursive-median thresholds the bins
stand for the noisy medians. ``tpr`` and ``fpr`` are the signed errors at
a threshold, pooled over :data:`CURVE_DRAWS` draws and the curve's points
whose true rate lies within (0.05, 0.95) (where the curve is informative).
The score transform only moves where the bins fall on the score; the
errors come from the counts' noise, which does not depend on it.

Headline ``auc``: usable when its median error is at most :data:`TARGET`.

Error bars on a release use the same simulations with the released values
as the truth (parametric bootstrap, post-processing, free): the AUC from
the released AUC and ñ1 (the central interval of the simulated error);
each curve point from the per-bin counts the released curve implies, as
± the ``level`` quantile of its simulated |error| (symmetric: the central
interval of a bootstrap around an isotonic, already smoothed curve covered
only about 75 % in simulation; the symmetric one about 95 %, conservative).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from dpcli.forecast._noise import SEED, noise, uniforms
from dpcli.forecast.core import (
    LEVEL,
    Forecast,
    LazyMetrics,
    MetricForecast,
    from_samples,
    make_forecast,
    shared,
)
from dpcli.mechanisms import Plan

TARGET = 0.02
PREVALENCE = 0.25
AUC = 0.85
AUC_DRAWS = 4000
CURVE_DRAWS = 40
BAR_DRAWS = 200


def config(section: Any) -> Any:
    from dpcli.algorithms.roc import ROCConfig

    return ROCConfig(**section.config_values())


def plan(spec: Any, section: Any, n: int, **context: Any) -> Plan:
    """roc's plan at ``section.epsilon`` on n records (the one its api module spends)."""
    from dpcli.algorithms import roc as pr
    from dpcli.budget import Budget

    return pr.plan(config(section), max(int(n), 2), Budget(section.epsilon))


def auc_errors(n: int, auc: float, positives: float, run_plan: Plan,
               draws: int = AUC_DRAWS, clip: bool = True) -> np.ndarray:
    """Signed errors of the released AUC when the truth is (``auc``, ``positives``) (public);
    with ``clip=False``, of the unclipped estimate ½ + D̃/(2·ñ1·ñ0) (the error bars')."""
    from dpcli.algorithms import roc_scale

    eps_d = float(run_plan.step("auc").budget.epsilon)
    eps_n = float(run_plan.step("auc_positives").budget.epsilon)
    n1 = float(min(max(round(positives), 1), max(n - 1, 1)))
    d = (auc - 0.5) * 2.0 * n1 * (n - n1)
    u = uniforms((2, draws))
    z_d = noise((u[0][0], u[1][0]), roc_scale.pair_sensitivity(n) / eps_d)
    z_n = noise((u[0][1], u[1][1]), 1.0 / eps_n)
    m1 = np.clip(n1 + z_n, 1.0, max(n - 1.0, 1.0))
    m0 = np.maximum(n - m1, 1.0)
    released = 0.5 + (d + z_d) / (2.0 * m1 * m0)
    return np.asarray((np.clip(released, 0.0, 1.0) if clip else released) - auc)


def reference_counts(n: int, bins: int, *, prevalence: float, auc: float) -> np.ndarray:
    """(2, bins) counts of positives and negatives by DEcreasing score (the order PriROC
    counts in) of binormal scores with the given AUC, binned equally over [−4, μ + 4]."""
    from statistics import NormalDist

    from dpcli.mechanisms.consistency import round_with_total

    mu = math.sqrt(2.0) * NormalDist().inv_cdf(min(max(auc, 1e-6), 1 - 1e-6))
    edges = np.linspace(-4.0, mu + 4.0, bins + 1)
    edges[0], edges[-1] = -np.inf, np.inf
    cdf = np.vectorize(NormalDist().cdf)
    n1 = int(min(max(round(prevalence * n), 1), max(n - 1, 1)))
    pos = round_with_total(np.diff(cdf(edges - mu)) * n1, n1)
    neg = round_with_total(np.diff(cdf(edges)) * (n - n1), n - n1)
    return np.stack([pos, neg])[:, ::-1].astype(np.int64)


def curve_errors(counts: np.ndarray, cfg: Any, run_plan: Plan,
                 draws: int = CURVE_DRAWS) -> tuple[np.ndarray, np.ndarray]:
    """Signed TPR and FPR errors (draws × points) of the curve released from ``counts``:
    the real prefix-sum mechanism and post-processing, a fixed public seed."""
    tpr, fpr, _ = _curve_errors(counts, cfg, run_plan, draws)
    return tpr, fpr


def _curve_errors(counts: np.ndarray, cfg: Any, run_plan: Plan,
                  draws: int) -> tuple[np.ndarray, np.ndarray, Any]:
    from dpcli.algorithms.roc import CHANGES, curve_from_prefix
    from dpcli.mechanisms.range_queries import noisy_prefix_sums

    counts = np.asarray(counts, dtype=np.int64)
    n = int(counts.sum())
    bins = counts.shape[1]
    thresholds = np.arange(1, bins, dtype=np.float64)
    truth = curve_from_prefix(np.cumsum(counts, axis=1), thresholds, n=n, upper=float(bins))
    eps = float(run_plan.step("counts").budget.epsilon)
    rng = np.random.default_rng(SEED)
    tpr = np.empty((draws, truth.tpr.size))
    fpr = np.empty_like(tpr)
    # every draw's noise in one call (the mechanism takes (..., bins) arrays); the
    # post-processing per draw, as released
    prefixes = noisy_prefix_sums(np.broadcast_to(counts, (draws, *counts.shape)),
                                 strategy=cfg.counts, epsilon=eps, rng=rng, changes=CHANGES,
                                 branching=cfg.branching)
    for i in range(draws):
        c = curve_from_prefix(prefixes[i], thresholds, n=n, upper=float(bins))
        tpr[i], fpr[i] = c.tpr - truth.tpr, c.fpr - truth.fpr
    return tpr, fpr, truth


def forecast(spec: Any, section: Any, n: int, **context: Any) -> Forecast:
    """``auc`` (median |error|, 90 % interval), ``tpr`` and ``fpr`` at a curve point."""
    cfg = config(section)
    prevalence = float(context.get("prevalence", PREVALENCE))
    auc = float(context.get("auc", AUC))
    n = max(int(n), 2)
    counts = reference_counts(n, cfg.bins(n), prevalence=prevalence, auc=auc)

    def metrics_at(eps: float) -> LazyMetrics:
        p = plan(spec, dataclasses.replace(section, epsilon=eps), n)

        curve = shared(lambda: _curve_errors(counts, cfg, p, CURVE_DRAWS))

        # the points where the curve says something: true rate within (0.05, 0.95) (the ends
        # are pinned by the isotonic step and the clipping, and would flatter the median)
        def tpr() -> MetricForecast:
            errors, _, truth = curve()
            return from_samples(errors[:, _informative(truth.tpr)].ravel(),
                                "TPR error at a curve point")

        def fpr() -> MetricForecast:
            _, errors, truth = curve()
            return from_samples(errors[:, _informative(truth.fpr)].ravel(),
                                "FPR error at a curve point")

        def area() -> MetricForecast:
            if "auc" in {s.name for s in p}:
                e = auc_errors(n, auc, prevalence * n, p)
            else:   # the trapezoid AUC of the noisy curve
                from dpcli.algorithms.roc import trapezoid_auc

                truth = trapezoid_auc(
                    np.concatenate(([0.0], np.cumsum(counts[1]) / counts[1].sum())),
                    np.concatenate(([0.0], np.cumsum(counts[0]) / counts[0].sum())))
                e = _trapezoid_errors(counts, cfg, p) - truth
            return from_samples(e, "AUC error")  # signed: its interval has two signs

        # lazy: the verdict, its inversion and `dpcli plan --target roc.auc` read the AUC
        # only (4,000 vectorised draws, milliseconds); the curve's simulation (40 noisy
        # curves, each post-processed as released) runs when the table, the JSON or the
        # envelope reads tpr or fpr
        return LazyMetrics({"auc": area, "tpr": tpr, "fpr": fpr})

    whose = (context.get("prevalence_source", "the model's") if "prevalence" in context
             else "assumed")
    scope = curve_scope(cfg, n, plan(spec, section, n), prevalence, float(section.epsilon),
                        whose)
    method = (f"simulation on synthetic scores: positive share {prevalence:.3g} ({whose}), an "
              f"assumed true AUC of {auc:g}; {AUC_DRAWS} AUC draws, {CURVE_DRAWS} curves")
    return make_forecast("roc", section.epsilon, n, method, metrics_at, headline="auc",
                         target=TARGET, note="the AUC is mostly noise", scope=scope,
                         extra={"assumptions": {"prevalence": prevalence, "auc": auc},
                                "bins": cfg.bins(n)})


#: the named ε's margin over the run's own curve test: the test reads the released class
#: sizes of the evaluation file, whose smaller class may be 20 % below the share the
#: forecast assumes (the model's own, from its training file): 1 / (1 − 0.2)
CURVE_MARGIN = 1.25


def curve_scope(cfg: Any, n: int, run_plan: Plan, prevalence: float, epsilon: float,
                whose: str) -> str:
    """What the AUC's verdict does not judge, when it matters: the curve's own noise.

    The run warns "this curve is mostly noise" when the counts' noise scale exceeds
    CURVE_NOISE_SHARE of the smaller released class. Both are known before the spend
    from public facts (the plan's ε and Δ; n times the positive share, the model's own
    or assumed), so the forecast says it too: a tester's rare class (7.5 %) was told
    "usable" by the AUC and then "mostly noise" by the run, 8 runs of 8. The noise scale
    is Δ/ε_counts, so the ε that brings it under the bound is ε·scale/bound; the ε named
    has the margin :data:`CURVE_MARGIN` (at the bound itself, 1 run of 3 still warned:
    the evaluation file's class is not exactly the model's share), and a run within that
    margin is told it may be."""
    from dpcli.algorithms.roc import CURVE_NOISE_SHARE, count_noise_scale

    smaller = min(prevalence, 1 - prevalence) * n
    scale = count_noise_scale(cfg, n, run_plan)
    bound = CURVE_NOISE_SHARE * smaller
    if scale * CURVE_MARGIN <= bound:
        return ""
    need = epsilon * scale * CURVE_MARGIN / bound if bound > 0 else math.inf
    expected = ("is expected to be mostly noise" if scale > bound else
                "may be mostly noise (its noise is within the margin of the run's own test)")
    return (f"the curve itself {expected}: its counts' noise scale "
            f"{scale:.3g} against a smaller class of about {smaller:,.0f} rows (positive "
            f"share {prevalence:.3g}, {whose}); a clean curve needs ε ≥ {need:.3g} or more "
            "rows, or fewer bins (--k)")


def _informative(rate: np.ndarray) -> np.ndarray:
    """The points whose true rate is within (0.05, 0.95); every point when none is (tiny n)."""
    keep = (rate > 0.05) & (rate < 0.95)
    return keep if keep.any() else np.ones(rate.shape, dtype=bool)


def _trapezoid_errors(counts: np.ndarray, cfg: Any, run_plan: Plan) -> np.ndarray:
    from dpcli.algorithms.roc import CHANGES, curve_from_prefix
    from dpcli.mechanisms.range_queries import noisy_prefix_sums

    n = int(counts.sum())
    bins = counts.shape[1]
    thresholds = np.arange(1, bins, dtype=np.float64)
    eps = float(run_plan.step("counts").budget.epsilon)
    rng = np.random.default_rng(SEED + 1)
    prefixes = noisy_prefix_sums(np.broadcast_to(counts, (CURVE_DRAWS, *counts.shape)),
                                 strategy=cfg.counts, epsilon=eps, rng=rng, changes=CHANGES,
                                 branching=cfg.branching)
    return np.array([curve_from_prefix(p, thresholds, n=n, upper=float(bins)).auc
                     for p in prefixes])


def released_counts(curve: Any) -> np.ndarray:
    """The (2, bins) per-bin counts, by decreasing score, that a released curve implies."""
    tp = np.asarray(curve.tpr[1:], dtype=np.float64) * float(curve.positives)
    fp = np.asarray(curve.fpr[1:], dtype=np.float64) * float(curve.negatives)
    prefix = np.round(np.stack([tp, fp]))
    return np.maximum(np.diff(prefix, axis=1, prepend=0.0), 0.0).astype(np.int64)


def error_bars(curve: Any, cfg: Any, run_plan: Plan, n: int,
               level: float = LEVEL) -> dict[str, Any]:
    """90 % intervals of the released AUC and of each curve point's TPR and FPR, from the
    released values and the noise alone (parametric bootstrap; post-processing, free)."""
    tpr, fpr = curve_errors(released_counts(curve), cfg, run_plan, BAR_DRAWS)

    def band(point: np.ndarray, errors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # symmetric: the isotonic step biases a bootstrap around an already smoothed curve,
        # and central quantiles of its errors covered only ~75 % in simulation; ± the
        # ``level`` quantile of |error| covered ~95 % (tests/forecast/test_commands.py)
        half = np.quantile(np.abs(errors), level, axis=0)
        return np.clip(point - half, 0.0, 1.0), np.clip(point + half, 0.0, 1.0)

    tpr_lo, tpr_hi = band(np.asarray(curve.tpr), tpr)
    fpr_lo, fpr_hi = band(np.asarray(curve.fpr), fpr)
    centre = float(curve.auc)
    if curve.auc_release is not None:
        # around the UNclipped estimate too, with unclipped errors: an interval centred on
        # an AUC clipped to 0 or 1 covered the truth in 1 of 7 such runs (a new user's 80
        # seeded runs); the unclipped one covers as often as anywhere
        centre = float(curve.auc_release.unclipped)
        e = auc_errors(n, float(curve.auc), float(curve.auc_release.positives), run_plan,
                       clip=False)
    else:
        e = _trapezoid_errors(released_counts(curve), cfg, run_plan) - float(curve.auc)
    # symmetric, as evaluate's and each point's: ± the ``level`` quantile of |error|. The
    # reflected interval [auc − e_hi, auc − e_lo] collapsed to [1, 1] around a released AUC
    # clipped at 1 (every simulated error ≤ 0 there): a zero-width bar on the noisiest release
    half = float(np.quantile(np.abs(e), level))
    # the union of the intervals around the unclipped estimate and around the released
    # (clipped) AUC, cut to [0, 1]: the first covers when the release was clipped, the
    # second keeps the width when the noise is so large that centre ± half lies wholly
    # outside [0, 1] (cut alone, it would collapse to [1, 1] and read as certainty)
    auc = float(curve.auc)
    lo = min(max(min(centre, auc) - half, 0.0), 1.0)
    hi = min(max(max(centre, auc) + half, 0.0), 1.0)
    return {"level": level,
            "method": "parametric bootstrap of the noise around the released values",
            "auc": [float(lo), float(hi)],
            "tpr_lower": tpr_lo, "tpr_upper": tpr_hi, "fpr_lower": fpr_lo,
            "fpr_upper": fpr_hi}
