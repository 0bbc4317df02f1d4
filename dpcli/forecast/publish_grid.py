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

- ``degenerate``: the chance that the run's own degeneracy check flags the
  released synopsis (:func:`dpcli.algorithms.degenerate.signal_p_value`: "its class
  counts are indistinguishable from noise", p > 0.05 — the check that fired on
  real releases at the ε the selection's bound named). From public facts only,
  on synthetic data, never the records: a score z ~ N(0, 1) with a cell's
  positive log-odds c + d·z (d = √2·Φ⁻¹(:data:`AUC`), a binormal AUC, roc's
  assumption; c puts the positive share at ``prevalence``: the spec's
  ``forecast: positive_share``, else :data:`PREVALENCE` assumed, as roc's and
  train-nb's forecasts); a grid of m cells is m equal-mass bins of z. The grid
  is chosen as the exponential mechanism would: among the pool's grids, counted
  by size from the taxonomies (:func:`pool_by_cells`), weighted by
  e^(−ε_select·q/(2Δq)) with q PrivPfC's quality of the synthetic grid of that
  size. For each size the test's statistic (Pearson's, widened by the noise
  variance) is taken as normal with its first two moments under binomial
  counts plus discrete Laplace noise, null and alternative (clamping at 0 left
  out: within ±0.2 of a Monte Carlo of the check itself, tests/forecast). A
  grid of more than n/:data:`MIN_CELL` cells is tested as n/5 cells of 5
  records; the one-cell grid is flagged (a constant score).
- ``failure`` (headline): the larger of two chances, each a way a run named
  usable would not be: the chosen grid misclassifies more than
  :data:`SELECTION_TARGET` of n beyond the pool's best (the exponential
  mechanism's tail, K·e^(−ε_select·0.05·n/(2Δq)): ≤ 0.1 exactly where
  ``selection`` ≤ 0.05, the previous rule), and ``degenerate``. **Usable** when it is at most
  :data:`FAILURE_TARGET`: a release at the ε the verdict names is, with probability
  about 0.9 or more under the stated assumptions, within 0.05 of the pool's best and
  not flagged degenerate by its own check. ``loss`` is no condition: by PrivPfC's T
  rule it is T·0.587/(2r·n) ≈ 0.059 at every n and ε (the design's, stated as
  the ``scope``), so it cannot tell one ε from another.

Why not ``selection`` alone (round 11): at the ε it named, releases of a rare
class (ISLP's Default, 3 % positives) were flagged degenerate in 2–5 runs of 5:
the selection's bound says the grid is near the best grid, not that the best
grid's noisy counts carry the signal. Why not ``relative``: T is proportional to
n·ε_hist, so the noise over the finest grid's mean cell is the same at every n
(PrivPfC's own rule keeps it under 0.2 of an average cell), and a verdict on it
said "usable from ε ≥ 0.54" for 527 records and for 15,590 alike (tester 11; the
small file then released one-cell grids). ``relative`` is kept as a metric. At
another ε the histogram keeps the share of ε it has at this one (the column
pre-selection, used only for very large pools, changes it); ``loss`` keeps this
ε's T; ``selection``, ``degenerate`` and ``failure`` are evaluated with each ε's own
design (T, K and Δq grow with ε; bumps where T admits many more grids are a few
per cent).
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from dpcli.forecast._noise import count_error
from dpcli.forecast.core import Forecast, LazyMetrics, MetricForecast, make_forecast, shared
from dpcli.mechanisms import Plan

TARGET = 0.14
#: the selection's excess misclassification (share of n) a usable run stays within
SELECTION_TARGET = 0.05
SELECTION_FAILURE = 0.10   # the bound holds w.p. 0.9, the forecasts' level
#: the headline's target: a run named usable fails (a grid far from the best, or flagged
#: degenerate by its own check) with probability at most this
FAILURE_TARGET = 0.10
#: the positive share assumed when the spec declares none (roc's and train-nb's: 25 %)
PREVALENCE = 0.25
#: the signal assumed over the finest grid: a binormal AUC (roc's forecast assumes the same)
AUC = 0.85
#: max over y of y·e^(−y)(1 + y/2), at y = √2
FLIP_MAX = math.sqrt(2.0) * math.exp(-math.sqrt(2.0)) * (1.0 + math.sqrt(2.0) / 2.0)

METHOD = ("closed form (discrete Laplace quantiles; PrivPfC's flip probability; the signal "
          "test's moments on a synthetic grid)")


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
    """``failure`` (headline), ``degenerate``, ``selection``, ``relative``, ``cell`` and the
    ``loss`` bound (closed forms, public inputs only); context ``hierarchies=`` saves loading
    the taxonomies again, ``prevalence=`` (the spec's ``forecast: positive_share``) replaces
    the assumed positive share."""
    from dpcli.algorithms import privpfc

    d = design(spec, section, n, context.get("hierarchies"))
    share = float(d.plan.step(privpfc.HISTOGRAM).budget.epsilon) / float(section.epsilon)
    n = max(int(n), 1)

    # the grid size allowed at this ε (at least 2), fixed at every other ε: PrivPfC turns more
    # ε into finer grids at a constant relative noise, so the forecast asks instead how well
    # grids of THIS size are estimated (monotone in ε, which solving for ε needs)
    t = max(d.threshold, 2)
    hierarchies = context.get("hierarchies")

    prevalence = min(max(float(context.get("prevalence") or PREVALENCE), 1e-4), 1 - 1e-4)
    whose = context.get("prevalence_source", "the caller's") if context.get("prevalence") \
        else "assumed"

    def selection_at(eps: float) -> tuple[float, float]:
        """The selection's excess (share of n, w.p. 0.9) and the chance it exceeds
        SELECTION_TARGET, at the design a run at eps would have (T, the pool and Δq all grow
        with ε; frozen at the spec's ε the solver advertised an ε at which the run was still
        not usable)."""
        de = design(spec, replace(section, epsilon=eps), n, hierarchies)
        if de.threshold < 2 or de.pool_size < 2:
            return 1.0, 1.0     # no grid that can classify, or only the one-cell grid
        rate = float(de.plan.step(privpfc.HISTOGRAM).budget.epsilon) / privpfc.HIST_SENSITIVITY
        dq = privpfc.quality_sensitivity(rate)
        k = min(de.pool_size, de.max_pool)
        eps_select = float(de.plan.step(privpfc.SELECT_GRID).budget.epsilon)
        spread = 2.0 * dq * (math.log(k) + math.log(1 / SELECTION_FAILURE))
        # P(quality gap > x·n) ≤ K·e^(−ε_select·x·n/(2Δq)): the bound above, solved for the
        # probability at x = SELECTION_TARGET instead of for x at 0.1
        tail = math.log(k) - eps_select * SELECTION_TARGET * n / (2.0 * dq)
        return min(spread / (eps_select * n), 1.0), min(math.exp(min(tail, 0.0)), 1.0)

    loaded = hierarchies if hierarchies is not None else _hierarchies(spec, section.columns)

    def degenerate_at(eps: float) -> float:
        de = design(spec, replace(section, epsilon=eps), n, hierarchies)
        return degenerate_chance(n, de, loaded, prevalence)

    def metrics_at(eps: float) -> LazyMetrics:
        eps_hist = share * eps
        scale = privpfc.HIST_SENSITIVITY / eps_hist
        bound = min(t * FLIP_MAX * scale / (2.0 * n), 1.0)
        lost, missed = selection_at(eps)
        flagged = shared(lambda: degenerate_at(eps))

        def failure() -> MetricForecast:
            # a selection's tail of 1 decides alone: the solver's low ε skip the flag's chance
            worse = 1.0 if missed >= 1.0 else max(missed, flagged())
            return MetricForecast(
                f"chance a run is not useful (its grid over {SELECTION_TARGET:g} of n worse "
                f"than the pool's best, or flagged degenerate by its own check)", worse,
                (0.0, worse), chance=True)

        return LazyMetrics({
            "failure": failure,
            "degenerate": lambda: MetricForecast(
                "chance the run's own check flags the synopsis degenerate (class counts "
                "indistinguishable from noise)", flagged(), (0.0, flagged()), chance=True),
            "selection": MetricForecast(
                "records the chosen grid may misclassify beyond the pool's best (share of "
                f"n, w.p. {1 - SELECTION_FAILURE:g})", lost, (0.0, lost), bound_only=True),
            "relative": count_error(scale, "cell count error relative to the mean cell "
                                    "count of the finest grid allowed (n/T)", per=n / t),
            "cell": count_error(scale, "cell count error"),
            "loss": MetricForecast("extra misclassification rate the noise causes",
                                   bound, (0.0, bound), bound_only=True)})

    loss_at_design = min(t * FLIP_MAX * privpfc.HIST_SENSITIVITY
                         / (share * float(section.epsilon) * 2.0 * n), 1.0)
    assumed = (f"positives at {prevalence * 100:.3g}% of the rows ({whose}"
               + ("; declare a published rate as forecast: positive_share in the spec, never one "
                  "computed from this file)"
                  if whose == "assumed" else ")") + f" and a signal of AUC {AUC:g} (a "
               "weaker one needs more ε)")
    return make_forecast("publish-grid", section.epsilon, n, METHOD, metrics_at,
                         headline="failure", target=FAILURE_TARGET,
                         note="too few records or too little ε: the chosen grid may be far "
                              "from the best, or its noisy counts drown the label's signal "
                              "(the run would flag it degenerate)",
                         scope=f"degeneracy judged with {assumed}; the noise's extra "
                               f"misclassification is at most {loss_at_design:.2g} at every ε "
                               "(PrivPfC's T rule)",
                         extra={"cells_at_most": d.threshold, "pool": d.pool_size,
                                "assumptions": {"prevalence": prevalence, "auc": AUC}})


#: the resolution of :func:`pool_by_cells`' log₂(cells) (rounding errors add over columns)
OCTAVE_BINS = 32


@lru_cache(maxsize=256)
def pool_by_cells(sizes: tuple[tuple[int, ...], ...],
                  threshold: int) -> tuple[np.ndarray, np.ndarray]:
    """How many grids of the pool have about m cells: (m, count) per half octave of m ≤
    ``threshold`` (public: the taxonomies' level sizes only). A dynamic programme over
    log₂(cells) in 1/OCTAVE_BINS of an octave (each column's level multiplies the cells),
    then summed by half octave: the count of a 200,000-grid pool without building it."""
    top = max(math.floor(math.log2(max(threshold, 1)) * OCTAVE_BINS + 0.5), 0)
    counts = np.zeros(top + 1)
    counts[0] = 1.0
    for column in sizes:
        grown = np.zeros_like(counts)
        for size in column:
            step = round(math.log2(max(int(size), 1)) * OCTAVE_BINS)
            if step > top:
                break
            grown[step:] += counts[:top + 1 - step]
        counts = grown
    halves = np.add.reduceat(counts, np.arange(0, top + 1, OCTAVE_BINS // 2))
    # each half octave at its geometric middle; the first holds the one-cell grid only
    m = np.minimum(np.rint(2.0 ** ((np.arange(len(halves)) + 0.5) / 2.0)), threshold)
    m[0] = 1
    keep = halves > 0
    sizes_kept, counts_kept = m[keep].astype(np.int64), halves[keep]
    sizes_kept.flags.writeable = counts_kept.flags.writeable = False   # kept and shared
    return sizes_kept, counts_kept


#: the synthetic grid's cells hold at least this many records in the signal test (Pearson's
#: rule of thumb): a grid of more cells than n/5 has most of them (nearly) empty, and the
#: test's signal is in the occupied ones (equal masses of n/m < 1 record carried none)
MIN_CELL = 5.0
#: fine quantiles of the synthetic score (a cell of m ≤ FINE cells averages FINE/m of them)
FINE = 256


@lru_cache(maxsize=16)
def synthetic_shares(prevalence: float) -> np.ndarray:
    """The positive share at FINE equal-mass quantiles z of a standard normal score: log-odds
    c + d·z, d = √2·Φ⁻¹(AUC) (a binormal likelihood ratio's slope), c solved so the mean is
    the prevalence. Public: no record is read."""
    from statistics import NormalDist

    unit = NormalDist()
    z = np.array([unit.inv_cdf((j + 0.5) / FINE) for j in range(FINE)])
    d = math.sqrt(2.0) * unit.inv_cdf(AUC)
    c = math.log(prevalence / (1.0 - prevalence))
    for _ in range(50):   # Newton on the mean share
        pk = 1.0 / (1.0 + np.exp(-(c + d * z)))
        gap = float(pk.mean()) - prevalence
        if abs(gap) < 1e-12:
            break
        c -= gap / max(float((pk * (1.0 - pk)).mean()), 1e-12)
    result: np.ndarray = 1.0 / (1.0 + np.exp(-(c + d * z)))
    result.flags.writeable = False   # kept (lru_cache) and shared
    return result


def grid_cells(shares: np.ndarray, cells: int, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    """A synthetic grid of ``cells`` equal-mass cells of n records: (each represented cell's
    size, its positive share, how many cells each stands for)."""
    fine = len(shares)
    if cells >= fine:
        return np.full(fine, n / cells), shares, cells / fine
    starts = np.floor(np.arange(cells) * fine / cells).astype(np.int64)
    width = np.diff(np.append(starts, fine))
    return n * width / fine, np.add.reduceat(shares, starts) / width, 1.0


def no_signal_chance(n: int, cells: int, scale: float, shares: np.ndarray) -> float:
    """The chance that the degeneracy check's signal test (p > 0.05) finds no signal in a
    synthetic grid of ``cells`` equal-mass cells of n records (:func:`grid_cells` of
    ``shares``) whose two class counts get discrete Laplace noise of ``scale``
    (:func:`_no_signal`). Public inputs only: no record is read. One cell: 1 (a constant
    score)."""
    if cells < 2 or n < 2:
        return 1.0
    size, pk, weight = grid_cells(shares, max(min(cells, int(n / MIN_CELL)), 2), n)
    return float(_no_signal(size, pk, np.full(len(size), weight), np.zeros(1, np.int64),
                            float(shares.mean()), scale)[0])


def synthetic_quality(n: int, cells: int, rate: float, shares: np.ndarray) -> float:
    """PrivPfC's quality (:func:`privpfc.misclassification`, expected misclassified records
    under the histogram's noise) of the synthetic grid of ``cells`` cells."""
    size, pk, weight = grid_cells(shares, cells, n)
    return float(_quality(size, pk, np.full(len(size), weight), np.zeros(1, np.int64),
                          rate)[0])


def _quality(size: np.ndarray, pk: np.ndarray, weight: np.ndarray, starts: np.ndarray,
             rate: float) -> np.ndarray:
    """:func:`privpfc.misclassification` of synthetic grids laid end to end (cells of
    ``size`` records, positive share ``pk``, each standing for ``weight`` cells; a grid per
    entry of ``starts``): min(n+, n−) plus PrivPfC's flip term, per grid."""
    from dpcli.algorithms.privpfc import _flip_term

    pos, neg = size * pk, size * (1.0 - pk)
    return np.add.reduceat(weight * (np.minimum(pos, neg) + _flip_term(np.abs(pos - neg), rate)),
                           starts)


def _no_signal(size: np.ndarray, pk: np.ndarray, weight: np.ndarray, starts: np.ndarray,
               p: float, scale: float) -> np.ndarray:
    """Per synthetic grid (laid out as in :func:`_quality`), the chance that the degeneracy
    check's signal test finds no signal when each class count gets discrete Laplace noise of
    ``scale`` and the overall positive share is ``p``.

    The test's statistic S = Σ (O − R·p)²/(R·p(1 − p) + v) (v the noise variance; O a
    cell's positives, R its size) is taken as normal with the moments of a sum of squares
    of binomial plus Laplace terms (Laplace's fourth moment: 6v²): its null mean plus 1.645
    null standard deviations is the test's 5 % critical value, and the chance is that of
    the alternative falling below it. Normal, not a scaled χ²: the released counts are
    clamped at 0, which thins the statistic's tails (null and alternative alike); against a
    Monte Carlo of the check on clamped counts the normal form erred by at most ±0.2, the
    χ² form by up to +0.45."""
    from statistics import NormalDist

    from dpcli.algorithms.degenerate import SIGNAL_LEVEL

    q = math.exp(-1.0 / scale) if scale > 0 else 0.0
    v = 2.0 * q / (1.0 - q) ** 2          # the discrete Laplace variance of one count
    # O − R̃·p carries the positive count's noise times (1 − p) and the negative one's times p
    nu = v * ((1.0 - p) ** 2 + p ** 2)
    denom = size * p * (1.0 - p) + v

    def moments(share: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
        mu = size * (share - p)
        beta = size * share * (1.0 - share)
        mean = weight * (mu ** 2 + beta + nu) / denom
        var = weight * (2 * beta ** 2 + 4 * beta * nu + 5 * nu ** 2
                        + 4 * mu ** 2 * (beta + nu)) / denom ** 2
        return np.add.reduceat(mean, starts), np.add.reduceat(var, starts)

    mean0, var0 = moments(p)
    mean1, var1 = moments(pk)
    unit = NormalDist()
    critical = mean0 + unit.inv_cdf(1.0 - SIGNAL_LEVEL) * np.sqrt(var0)
    return np.array([unit.cdf(z) for z in (critical - mean1) / np.sqrt(np.maximum(var1,
                                                                                  1e-300))])


@lru_cache(maxsize=64)
def _stacked(cells: tuple[int, ...], prevalence: float) -> tuple[np.ndarray, ...]:
    """:func:`grid_cells` of every size in ``cells`` at once, for one record (sizes as
    shares of n): (size, share, weight) of every represented cell end to end, and where
    each grid's cells start (for ``np.add.reduceat``). Public, kept per (sizes, share): the
    verdict's solver asks the same half octaves at every ε."""
    shares = synthetic_shares(prevalence)
    parts = [grid_cells(shares, k, 1) for k in cells]
    sizes = np.concatenate([part[0] for part in parts])
    pk = np.concatenate([part[1] for part in parts])
    weight = np.concatenate([np.full(len(part[0]), part[2]) for part in parts])
    starts = np.cumsum([0] + [len(part[0]) for part in parts[:-1]])
    return sizes, pk, weight, starts


def degenerate_chance(n: int, d: Any, hierarchies: Any, prevalence: float) -> float:
    """The chance that a run of design ``d`` releases a synopsis its own check flags as
    indistinguishable from noise, on the synthetic data of :func:`synthetic_shares`: the
    grid is chosen as the exponential mechanism would among the pool's grids (counted by
    size, :func:`pool_by_cells`; with a column pre-selection, over the first select_k
    columns, as the chosen ones are private) by their synthetic quality
    (:func:`synthetic_quality`), and :func:`no_signal_chance` is averaged over that choice
    (both computed here for every size at once: the same floats' sums)."""
    from dpcli.algorithms import privpfc

    if d.threshold < 2 or n < 2:
        return 1.0
    columns = hierarchies if d.select_k is None else hierarchies[:d.select_k]
    m, count = pool_by_cells(tuple(tuple(h.sizes) for h in columns), d.threshold)
    eps_hist = float(d.plan.step(privpfc.HISTOGRAM).budget.epsilon)
    eps_select = float(d.plan.step(privpfc.SELECT_GRID).budget.epsilon)
    rate = eps_hist / privpfc.HIST_SENSITIVITY
    dq = privpfc.quality_sensitivity(rate)
    # each size's synthetic quality and no-signal chance, all sizes at once
    size, pk, weight, starts = _stacked(tuple(int(k) for k in m), prevalence)
    quality = _quality(n * size, pk, weight, starts, rate)
    chosen = count * np.exp(-eps_select * (quality - quality.min()) / (2.0 * dq))
    tested = tuple(max(min(int(k), int(n / MIN_CELL)), 2) for k in m)
    size, pk, weight, starts = _stacked(tested, prevalence)
    flagged = _no_signal(n * size, pk, weight, starts,
                         float(synthetic_shares(prevalence).mean()), 1.0 / rate)
    flagged[m < 2] = 1.0   # the one-cell grid: a constant score
    return float((chosen * flagged).sum() / chosen.sum())
