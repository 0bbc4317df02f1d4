"""evaluate's forecast and error bars: a simulation of the confusion-matrix mechanism.

Simulation (no closed form survives the post-processing). The mechanism is
run as released — discrete Laplace of scale 2/ε on each of the K×K cells,
then the nearest non-negative matrix summing to n, rounded with the same
sum (:mod:`dpcli.algorithms.evaluate`) — on a synthetic confusion matrix of
n records drawn from stated public assumptions: the declared K classes,
the positive class at a share of :data:`PREVALENCE` (binary; balanced
otherwise; ``prevalence=`` overrides it: the commands pass a released
model's own class share, :func:`model_prevalence`) and every class recognised at
:data:`ACCURACY` (the rest spread evenly over the other classes;
``accuracy=`` overrides it). Errors are released − true of accuracy, and
of the positive class's (binary; else the first class's) precision and
recall, over :data:`DRAWS` fixed draws. Headline ``accuracy``: usable when
its median error is at most :data:`TARGET`.

Error bars on a release use the same simulation with the *released* matrix
as the truth (a parametric bootstrap: post-processing of released values,
free): the interval [m − e_hi, m − e_lo] of each metric m, e_lo and e_hi
the 5 % and 95 % quantiles of the simulated error.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dpcli.forecast._noise import noise, uniforms
from dpcli.forecast.core import LEVEL, Forecast, MetricForecast, from_samples, make_forecast
from dpcli.mechanisms import Plan

TARGET = 0.01
PREVALENCE = 0.25
ACCURACY = 0.8
DRAWS = 1000
BAR_DRAWS = 2000

METRICS = ("accuracy", "precision", "recall")


def plan(spec: Any, section: Any, n: int, **context: Any) -> Plan:
    """evaluate's plan at ``section.epsilon`` (the one its api module spends)."""
    from dpcli.algorithms import evaluate as ev
    from dpcli.budget import Budget

    return ev.plan(Budget(section.epsilon), spec.schema.n_classes)


def model_prevalence(model: Any, positive: int) -> float | None:
    """The class ``positive``'s share by a released model's own noisy class counts (public,
    already released): naive Bayes' class counts, validate's noisy count of positives among
    its rows (the threshold step's), brc's calibration count; None for a model without any
    (then the stated default)."""
    counts = getattr(model, "class_counts", None)
    if counts is not None:
        c = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
        # a class whose released count is 0 (noise clipped) says nothing of its share: a
        # reviewer's ε = 0.02 model [3076, 0] made roc forecast "a smaller class of about 2
        # rows, ε ≥ 160" where the run was fine
        if c.size != 2 or c.min() <= 0:
            return None
        return _clip(c[positive] / c.sum())
    share = _released_positive_share(model)
    if share is None:
        return None
    label_positive = model.schema.label.positive_index
    label_positive = 1 if label_positive is None else label_positive
    return _clip(share if positive == label_positive else 1.0 - share)


#: a released count is trusted as the class share only when its noise's scale (1/ε: Δ = 1)
#: is at most this share of the rows; a noisier one can be further off than the default
RELIABLE_SCALE = 0.02


def _released_positive_share(model: Any) -> float | None:
    """The label's positive class share from a logistic or brc model's released count of
    positives, when that count's noise is small next to its rows (RELIABLE_SCALE)."""
    report = getattr(model, "report", None)
    if isinstance(report, dict):   # validate: the threshold's noisy count of positives
        threshold = report.get("threshold")
        # over its training rows (a --validation file's rows, when there is one, are in the
        # count's N too: the share is then a little high, good enough for a forecast)
        rows = int(report.get("n_train") or 0)
        eps = next((float(step.get("epsilon", 0)) for step in report.get("breakdown") or []
                    if isinstance(step, dict) and step.get("step") == "threshold_prior"), 0.0)
        if isinstance(threshold, dict) and threshold.get("noisy_positives") is not None \
                and rows > 0 and eps * rows * RELIABLE_SCALE >= 1:
            return float(threshold["noisy_positives"]) / rows
    calibration = getattr(model, "calibration", None)   # brc
    n = getattr(model, "n", None)
    if calibration is not None and getattr(calibration, "positives", None) is not None and n:
        from dpcli.algorithms.brc import CLASS_COUNT_SHARE

        eps = float(getattr(model, "epsilon", 0.0)) * float(CLASS_COUNT_SHARE)
        if eps * float(n) * RELIABLE_SCALE >= 1:
            return float(calibration.positives) / float(n)
    return None


def _clip(share: float) -> float:
    return float(min(max(share, 0.001), 0.999))


def reference_matrix(n: int, classes: int, *, prevalence: float = PREVALENCE,
                     accuracy: float = ACCURACY, positive: int = 1) -> np.ndarray:
    """The synthetic confusion matrix of the stated assumptions (rows true, columns predicted;
    integers summing to n)."""
    from dpcli.mechanisms.consistency import round_with_total

    if classes == 2:
        share = np.array([1.0 - prevalence, prevalence]) if positive == 1 else \
            np.array([prevalence, 1.0 - prevalence])
    else:
        share = np.full(classes, 1.0 / classes)
    off = (1.0 - accuracy) / max(classes - 1, 1)
    rates = np.full((classes, classes), off)
    np.fill_diagonal(rates, accuracy)
    return np.asarray(round_with_total(n * share[:, None] * rates, n), dtype=np.int64)


def metrics_of(matrix: np.ndarray, cls: int) -> np.ndarray:
    """(accuracy, precision, recall) of class ``cls``; NaN where undefined."""
    m = np.asarray(matrix, dtype=np.float64)
    n = m.sum()
    tp, predicted, actual = m[cls, cls], m[:, cls].sum(), m[cls, :].sum()
    return np.array([np.trace(m) / n if n > 0 else np.nan,
                     tp / predicted if predicted > 0 else np.nan,
                     tp / actual if actual > 0 else np.nan])


def simulate(truth: np.ndarray, epsilon: float, cls: int, draws: int = DRAWS,
             exact_zero: tuple[int, ...] = ()) -> np.ndarray:
    """Signed errors (draws × 3) of the released metrics when the true matrix is ``truth``:
    the real mechanism and post-processing, fixed public draws (costs nothing).
    ``exact_zero``: columns released as exact zeros (the mechanism runs on the others)."""
    from dpcli.algorithms.evaluate import SENSITIVITY
    from dpcli.mechanisms.consistency import nonnegative_with_total, round_with_total

    truth = np.asarray(truth, dtype=np.int64)
    if exact_zero:
        kept = [j for j in range(truth.shape[1]) if j not in exact_zero]
        base = metrics_of(truth, cls)
        z = noise(uniforms((draws, truth.shape[0], len(kept))), SENSITIVITY / epsilon)
        n = int(truth.sum())
        full = np.zeros((draws, *truth.shape))
        if n > 0:
            flat = (truth[:, kept].reshape(1, -1) + z.reshape(draws, -1)).astype(np.float64)
            full[:, :, kept] = rounded_with_total(projected_with_total(flat, n),
                                                  n).reshape(z.shape)
        return batch_metrics(full, cls) - base
    n = int(truth.sum())
    z = noise(uniforms((draws, *truth.shape)), SENSITIVITY / epsilon)
    base = metrics_of(truth, cls)
    if n <= 0:   # nothing to release but zeros: the per-draw functions handle the edge
        out = np.empty((draws, len(METRICS)))
        for i in range(draws):
            released = round_with_total(nonnegative_with_total(truth + z[i], n), n)
            out[i] = metrics_of(released, cls) - base
        return out
    flat = (truth.reshape(1, -1) + z.reshape(draws, -1)).astype(np.float64)
    released = rounded_with_total(projected_with_total(flat, n), n).reshape(z.shape)
    return batch_metrics(released, cls) - base


def projected_with_total(v: np.ndarray, total: float) -> np.ndarray:
    """:func:`dpcli.mechanisms.consistency.nonnegative_with_total` on every row of ``v``
    (total > 0) at once: the same sort-based projection, vectorised (the forecast simulates
    the release 1,000 times before every spend)."""
    u = -np.sort(-v, axis=1)
    cumulative = np.cumsum(u, axis=1) - total
    index = np.arange(1, v.shape[1] + 1)
    ok = u - cumulative / index > 0
    # the last qualifying position per row (0 when none: as the scalar version)
    rho = np.where(ok.any(axis=1), v.shape[1] - 1 - np.argmax(ok[:, ::-1], axis=1), 0)
    tau = cumulative[np.arange(v.shape[0]), rho] / (rho + 1)
    return np.asarray(np.maximum(v - tau[:, None], 0.0))


def rounded_with_total(v: np.ndarray, total: int) -> np.ndarray:
    """:func:`dpcli.mechanisms.consistency.round_with_total` on every row of ``v`` at once
    (largest remainder, ties to the earlier entry; a surplus taken from the smallest
    remainders among entries above 0)."""
    floors = np.floor(v + 1e-9).astype(np.int64)
    missing = int(total) - floors.sum(axis=1)
    rows = np.arange(v.shape[0])[:, None]
    frac = v - floors
    up = np.argsort(-frac, axis=1, kind="stable")
    rank = np.arange(v.shape[1])[None, :]
    add = rank < np.maximum(missing, 0)[:, None]
    floors[rows, up] += add.astype(np.int64)
    if (missing < 0).any():
        down = np.argsort(frac, axis=1, kind="stable")
        eligible = floors[rows, down] > 0
        take = eligible & (np.cumsum(eligible, axis=1) <= np.maximum(-missing, 0)[:, None])
        floors[rows, down] -= take.astype(np.int64)
    return floors


def batch_metrics(m: np.ndarray, cls: int) -> np.ndarray:
    """:func:`metrics_of` of each of the (draws, K, K) matrices: (draws, 3), NaN where
    undefined."""
    m = np.asarray(m, dtype=np.float64)
    n = m.sum(axis=(1, 2))
    tp = m[:, cls, cls]
    predicted, actual = m[:, :, cls].sum(axis=1), m[:, cls, :].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.stack([np.where(n > 0, np.trace(m, axis1=1, axis2=2) / n, np.nan),
                         np.where(predicted > 0, tp / predicted, np.nan),
                         np.where(actual > 0, tp / actual, np.nan)], axis=1)


def _metric(errors: np.ndarray, what: str) -> MetricForecast:
    e = errors[np.isfinite(errors)]
    if e.size == 0:   # undefined in every draw (an empty class): no error to speak of
        return MetricForecast(what, 0.0, (0.0, 0.0))
    return from_samples(e, what)


def forecast(spec: Any, section: Any, n: int, **context: Any) -> Forecast:
    """Median |error| and 90 % interval of accuracy, precision and recall (simulation)."""
    k = spec.schema.n_classes
    positive = spec.schema.label.positive_index if k == 2 else None
    cls = 0 if positive is None else positive
    prevalence = float(context.get("prevalence", PREVALENCE))
    accuracy = float(context.get("accuracy", ACCURACY))
    truth = reference_matrix(max(n, 1), k, prevalence=prevalence, accuracy=accuracy,
                             positive=cls)
    which = "the positive class" if positive is not None else "the first class"

    def metrics_at(eps: float) -> dict[str, MetricForecast]:
        e = simulate(truth, dataclasses.replace(section, epsilon=eps).epsilon, cls)
        return {"accuracy": _metric(e[:, 0], "accuracy error"),
                "precision": _metric(e[:, 1], f"precision error of {which}"),
                "recall": _metric(e[:, 2], f"recall error of {which}")}

    whose = (context.get("prevalence_source", "the model's") if "prevalence" in context
             else "assumed")
    method = (f"simulation: {DRAWS} draws of the mechanism on a synthetic {k}×{k} matrix, "
              + (f"positive share {prevalence:.3g} ({whose}), " if k == 2
                 else "balanced classes, ")
              + f"an assumed true accuracy of {accuracy:g}")
    return make_forecast("evaluate", section.epsilon, n, method, metrics_at, headline="accuracy",
                         target=TARGET, note="the accuracy is mostly noise",
                         extra={"assumptions": {"prevalence": prevalence if k == 2 else None,
                                                "accuracy": accuracy}})


def error_bars(matrix: np.ndarray, epsilon: float, classes: tuple[str, ...],
               level: float = LEVEL, exact_zero: tuple[int, ...] = ()) -> dict[str, Any]:
    """90 % intervals of accuracy and each class's precision and recall from the released
    matrix alone (parametric bootstrap; post-processing, free). ``exact_zero``: columns
    released without noise (a never-predicted class), kept at zero in every draw."""
    m = np.asarray(matrix, dtype=np.int64)
    out: dict[str, Any] = {"level": level, "method": "parametric bootstrap of the noise "
                           f"around the released matrix ({BAR_DRAWS} draws)"}
    per_class: dict[str, Any] = {}
    for cls, name in enumerate(classes):
        e = simulate(m, epsilon, cls, BAR_DRAWS, exact_zero)
        point = metrics_of(m, cls)
        bars: list[list[float] | None] = []
        for j in range(len(METRICS)):
            ej = e[:, j][np.isfinite(e[:, j])]
            if not np.isfinite(point[j]) or ej.size == 0:
                bars.append(None)
                continue
            # symmetric: ± the level-quantile of |error|. The reflected (basic bootstrap)
            # interval collapsed to a point at a boundary: a released accuracy of 1 has
            # bootstrap errors ≤ 0 only, and [1 − 0, 1] missed a true 0.997 (a new user's run)
            # at the quantile (1 + level)/2, not ``level``: the bootstrap is centred on a
            # noisy, projected matrix and ± its 90 % quantile covered only 81–92 % of runs
            # (a new user's 80 runs; tests/forecast/test_commands.py), ± its 95 % quantile
            # 90–97 %: the stated level is then what a user sees
            half = float(np.quantile(np.abs(ej), (1.0 + level) / 2.0))
            bars.append([float(max(point[j] - half, 0.0)), float(min(point[j] + half, 1.0))])
        if cls == 0:
            out["accuracy"] = bars[0]
        per_class[name] = {"precision": bars[1], "recall": bars[2]}
    out["per_class"] = per_class
    return out
