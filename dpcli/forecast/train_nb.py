"""train-nb's forecast: each parameter's relative error and the accuracy the noise costs.

Public facts only: n, ε and the plan's split (:func:`dpcli.algorithms.naive_bayes.plan`,
the same rule the run uses), the sensitivities, the declared domains and the
column kinds. The true class sizes are private, so every count is taken at the
balanced proxy n_c = n/K (as :mod:`dpcli.algorithms.nb_allocation` does).

Per parameter (closed form, the worst column of each kind):

- ``prior``: a class count's noise (discrete Laplace, Δ = 2) over n/K;
- ``counts``: a table cell's noise (Δ of the table) over its expected count
  n/(K·L) (L cells a class; a tokens column's word: n·r/(K·V));
- ``mean``: a class mean's noise (class sums of x − mid, Δ' of the grid
  Laplace) over n/K, in units of the typical class spread σ = (U − L)/6;
- ``variance``: a class variance's noise (Δ' of h²) over n/K, relative to the
  typical variance σ², plus the noisy class count's, which divides the sum of
  (x − mid)² − h²/2 (with the class mean at mid: (h²/2 − σ²)·δn/n_c); a column
  whose variance the plan does not release uses the public (U − L)²/12, three
  times σ² (relative error 2).

The class means are taken at the middle of the bounds (their offsets are
private): an offset d adds d·δn/n_c to a mean's error.

The smooth method's noise depends on the data (the smooth bound); its
columns are forecast with the global method's error times the smooth factor
of :func:`dpcli.algorithms.nb_allocation.smooth_factor`, an upper bound.

``accuracy`` and ``edge_lost`` (the headline), by simulation: a synthetic naive Bayes model on
the declared domains (fixed public seed; a forecast is not a release, so a
fixed seed reveals nothing), balanced classes, each categorical column's
class distributions a shared Dirichlet(1) draw tilted by e^(0.5·z) per class,
each numeric column's class means mid + 0.5·σ·z with σ = (U − L)/6. Its exact
statistics at n get the plan's noise (the same scales and post-processing as
``fit``: clipped counts, smoothing, clipped means and variances, the prior's
noisy counts as every mean's denominator); the error is the accuracy of the
noisy model minus the noise-free model's on rows drawn from the synthetic
model, and ``edge_lost`` that loss over the noise-free model's edge over chance
(accuracy − 1/K): 1 is a near-chance model. The share transfers between
datasets better than the absolute loss, which scales with how far a dataset's
model is from chance (balanced synthetic classes are far from it; Adult's 75 %
majority is not). Tokens columns are left out of the simulation and the decision
threshold is the argmax (balanced classes: the balanced-accuracy cut). The
noise draws are common to every ε (standard Laplace draws scaled), so the
forecast is smooth in ε and the verdict's inversion is cheap.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import log_ndtr

from dpcli.forecast.core import (
    LEVEL,
    Forecast,
    MetricForecast,
    from_samples,
    laplace_error,
    make_forecast,
)

COMMAND = "train-nb"
HEADLINE = "edge_lost"
#: usable when the noise takes at most this share of the model's edge over chance (median);
#: a share near 1 is a near-chance model
TARGET = 0.25
SEED = 20271127          # the synthetic model's public seed (see the module docstring)
REPLICATES = 24          # noisy fits per ε
TEST_ROWS = 1000         # rows drawn from the synthetic model to score both fits
TILT = 0.5               # class effect: a categorical tilt e^(0.5·z), a mean shift 0.5·σ
SPREAD = 6.0             # σ = (U − L)/6: bounds at about ±3σ (nb_allocation's σ_typ)
PUBLIC_VARIANCE_ERROR = SPREAD ** 2 / 12 - 1   # (U−L)²/12 over σ² = (U−L)²/36, minus one
ENVELOPE_TOP = 10        # the monotone envelope looks up to ε = 2^10
ENVELOPE_FLOOR = 0.005   # … and stops once the share lost is this small (the lattice's
#                          points above it cannot lift the median beyond a rounding error)


def plan(spec: Any, section: Any, n: int, **context: Any) -> Any:
    """The plan the command shows at ``section.epsilon`` on ``n`` records (``columns`` in
    ``context``: the chosen columns)."""
    from dpcli.api.train_nb import plan_at

    return plan_at(spec, section, n, columns=context.get("columns"))


def forecast(spec: Any, section: Any, n: int, **context: Any) -> Forecast:
    """Each parameter's relative error and the accuracy lost to the noise at
    ``section.epsilon`` on n records. Costs nothing: public facts only."""

    from dpcli.algorithms import naive_bayes as nb
    from dpcli.algorithms.common import cap_tokens
    from dpcli.budget import Budget

    chosen = tuple(context.get("columns") or section.columns or spec.schema.names)
    schema = cap_tokens(spec.schema, chosen, section.r)
    config = nb.NBConfig(**section.config_values())
    n = max(int(n), 1)

    @functools.lru_cache(maxsize=256)
    def raw_at(e: float) -> tuple[_Scales, MetricForecast, MetricForecast]:
        # the plan's split (the allocation it is built from: the same shares, without the
        # plan's notes, which cost more than the simulation)
        alloc = nb.allocation(schema, chosen, Budget(e), config, n)
        # a numeric column released as a per-class histogram is simulated as a table of its
        # bins (their number is the rule's at this n and ε)
        histograms = tuple((c, alloc.bins[c]) for c in chosen
                           if alloc.methods.get(c) == "histogram")
        sim = _Simulation.build(schema, chosen, config.smoothing, config.distribution, n,
                                dict(histograms))
        scales = _Scales.of(alloc, e, schema, chosen, config)
        errors, truth = sim.accuracy_errors(scales)
        # the share of the noise-free model's edge over chance (1/K) that the noise takes
        edge = max(truth - 1.0 / schema.n_classes, 1e-9)
        return (scales, from_samples(errors, "accuracy error (vs the noise-free model)"),
                from_samples(-errors / edge, "share of the edge over chance lost"))

    def metrics_at(e: float) -> dict[str, MetricForecast]:
        scales, accuracy, lost = raw_at(e)
        # Near chance, a simulated loss can fall as ε falls (24 fits; a noise-dominated model
        # is a fixed random one under common draws): the simulated metrics at ε are the worst
        # at any ε' ≥ ε on a lattice of powers of 2 (cached), so they never grow with ε
        j = math.floor(math.log2(e)) + 1
        while j <= ENVELOPE_TOP and lost.expected > ENVELOPE_FLOOR:
            _, acc2, lost2 = raw_at(2.0 ** j)
            if lost2.expected > lost.expected:
                accuracy, lost = acc2, lost2
            j += 1
        out = _parameter_errors(scales, schema, chosen, n)
        out["accuracy"], out[HEADLINE] = accuracy, lost
        return out

    return make_forecast(COMMAND, section.epsilon, n, "simulation (synthetic model, "
                         f"{REPLICATES} fits) + closed form", metrics_at,
                         headline=HEADLINE, target=TARGET,
                         note=f"the noise takes more than {TARGET:.0%} of the model's edge over "
                              "chance (near-chance output at 100 %)",
                         extra={"columns": len(chosen)})


@dataclass(frozen=True)
class _Scales:
    """The noise scales of one plan, per released vector (the same Δ and grids as ``fit``)."""

    prior: float                       # a class count's Laplace scale
    tables: dict[str, float]           # a cell's scale, per table column
    means: dict[str, float]            # the class sum of x − mid's scale (∞: none)
    variances: dict[str, float | None]  # the class sum of squares' scale, None: public
    bins: dict[str, int]               # a histogram numeric column's cells (in ``tables``)

    @classmethod
    def of(cls, alloc: Any, epsilon: float, schema: Any, columns: Sequence[str], config: Any
           ) -> _Scales:
        """From the split (``nb.allocation``) at ``epsilon``: each step's ε is its share."""
        from dpcli.algorithms import naive_bayes as nb
        from dpcli.algorithms import nb_allocation
        from dpcli.algorithms.common import table_sensitivity
        from dpcli.data.schema import NumericColumn
        from dpcli.mechanisms import laplace_grid

        def eps(step: str) -> float:
            return float(epsilon) * float(alloc.weights[step])

        tables: dict[str, float] = {}
        means: dict[str, float] = {}
        variances: dict[str, float | None] = {}
        bins: dict[str, int] = {}
        smooth = nb_allocation.smooth_factor(config.trim, config.gamma)
        for c in columns:
            col = schema.column(c)
            if not isinstance(col, NumericColumn):
                tables[c] = table_sensitivity(schema, c) / eps(f"counts:{c}")
                continue
            if alloc.methods.get(c) == "histogram":
                tables[c] = nb_allocation.HISTOGRAM_SENSITIVITY / eps(f"{nb.BINS}{c}")
                bins[c] = alloc.bins[c]
                continue
            h = col.width / 2
            factor = smooth if alloc.methods.get(c) == "smooth" else 1.0
            grid, units = laplace_grid(2 * h, nb.CLASS_CHANGES)
            means[c] = factor * units * grid / eps(f"mean:{c}")
            if f"variance:{c}" in alloc.weights:
                grid, units = laplace_grid(h * h, nb.CLASS_CHANGES)
                variances[c] = factor * units * grid / eps(f"variance:{c}")
            else:
                variances[c] = None
        return cls(2.0 / eps(nb.PRIOR), tables, means, variances, bins)


def _parameter_errors(scales: _Scales, schema: Any, columns: Sequence[str], n: int
                      ) -> dict[str, MetricForecast]:
    """The closed forms of the module docstring: the worst column of each kind."""
    from dpcli.data.schema import NumericColumn, TokensColumn

    k = schema.n_classes
    n_c = n / k
    out = {"prior": laplace_error(scales.prior, "class count relative error",
                                  sensitivity_scale=1.0 / n_c)}
    worst: MetricForecast | None = None
    for c, scale in scales.tables.items():
        col = schema.column(c)
        if c in scales.bins:
            cell = n_c / scales.bins[c]
        elif isinstance(col, TokensColumn):
            r = col.max_per_row or len(col.vocabulary)
            cell = n_c * r / len(col.vocabulary)
        else:
            cell = n_c / len(col.levels)
        m = laplace_error(scale, f"cell count relative error ({c})",
                          sensitivity_scale=1.0 / max(cell, 1e-9))
        worst = m if worst is None or m.expected > worst.expected else worst
    if worst is not None:
        out["counts"] = worst
    mean: MetricForecast | None = None
    var: MetricForecast | None = None
    for c in columns:
        col = schema.column(c)
        if not isinstance(col, NumericColumn) or c not in scales.means:
            continue
        sigma = col.width / SPREAD
        m = laplace_error(scales.means[c], f"class mean error / σ ({c})",
                          sensitivity_scale=1.0 / (n_c * sigma))
        mean = m if mean is None or m.expected > mean.expected else mean
        vs = scales.variances[c]
        if vs is None:
            v = MetricForecast(f"class variance relative error ({c}: public (U−L)²/12)",
                               PUBLIC_VARIANCE_ERROR,
                               (PUBLIC_VARIANCE_ERROR, PUBLIC_VARIANCE_ERROR))
        else:
            # the fit divides the noisy sum of (x − mid)² − h²/2 by the noisy class count:
            # with the class mean at mid, the count's noise δ moves the variance by
            # (h²/2 − σ²)·δ/n_c, a second Laplace term (the same δ in every column)
            h = col.width / 2
            v = _two_laplace(vs / (n_c * sigma * sigma),
                             scales.prior * (h * h / 2 - sigma * sigma) / (n_c * sigma * sigma),
                             f"class variance relative error ({c})")
        var = v if var is None or v.expected > var.expected else var
    if mean is not None and var is not None:
        out["mean"], out["variance"] = mean, var
    return out


def _two_laplace(a: float, b: float, what: str) -> MetricForecast:
    """The error of a sum of independent Laplace(a) and Laplace(b) draws: its tail is
    P(S > t) = (a²e^(−t/a) − b²e^(−t/b)) / (2(a² − b²)) (½e^(−t/a)(1 + t/2a) when a = b);
    the median |S| and the 90 % bound by bisection."""
    a, b = max(a, b), min(a, b)
    if a <= 0:
        return MetricForecast(what, 0.0, (0.0, 0.0))

    def tail(t: float) -> float:
        if b <= 0:
            return 0.5 * math.exp(-t / a)
        if abs(a - b) <= 1e-9 * a:
            return 0.5 * math.exp(-t / a) * (1 + t / (2 * a))
        return (a * a * math.exp(-t / a) - b * b * math.exp(-t / b)) / (2 * (a * a - b * b))

    def solve(p: float) -> float:
        lo, hi = 0.0, 40.0 * (a + b)
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if tail(mid) > p else (lo, mid)
        return hi

    bound = solve((1 - LEVEL) / 2)
    return MetricForecast(what, solve(0.25), (-bound, bound))


@dataclass(frozen=True)
class _Simulation:
    """The synthetic model, its test rows and the standard noise draws (fixed public seed).

    Log-likelihoods are matrix products over the test rows: a categorical column's log
    probabilities gathered at the rows' codes, a numeric column's Gaussian term expanded as
    −x²/2v + x·μ/v − μ²/2v (and its truncation's mass, a function of the parameters)."""

    n_c: float
    k: int
    smoothing: float
    truncated: bool
    tables: dict[str, np.ndarray]         # true class distributions (K, L)
    numeric: dict[str, tuple[float, float, np.ndarray, float]]  # lower, upper, means, σ
    rows: dict[str, np.ndarray]           # test rows' codes or values
    labels: np.ndarray                    # test rows' classes
    unit: dict[str, np.ndarray]           # standard Laplace draws per released vector
    truth: float                          # the exact model's accuracy on the test rows

    @classmethod
    def build(cls, schema: Any, columns: Sequence[str], smoothing: float, distribution: str,
              n: int, histograms: dict[str, int] | None = None) -> _Simulation:
        from dpcli.data.schema import NumericColumn, TokensColumn

        # the public facts the synthetic model is drawn from, hashable for the cache (a
        # schema may hold unhashable taxonomies)
        facts: list[tuple[str, float, float]] = []
        for c in columns:
            col = schema.column(c)
            if histograms and c in histograms:   # released as a table of its bins
                facts.append((c, float(histograms[c]), math.nan))
            elif isinstance(col, NumericColumn):
                facts.append((c, col.lower, col.upper))
            elif not isinstance(col, TokensColumn):   # tokens: left out (module docstring)
                facts.append((c, float(len(col.levels)), math.nan))
        return _simulation(schema.n_classes, tuple(facts), smoothing, distribution, n)

    def accuracy_errors(self, scales: _Scales) -> tuple[np.ndarray, float]:
        """Accuracy of each noisy fit minus the exact model's, on the test rows, and the
        exact model's accuracy (the noise-free fit at n: its sampling error is left out)."""
        counts = np.maximum(self.n_c + scales.prior * self.unit["prior"], 0.0)     # (R, K)
        smoothed = counts + self.smoothing
        jll = np.log(smoothed / smoothed.sum(axis=1, keepdims=True))[:, :, None]  # (R, K, 1)
        for c, p in self.tables.items():
            noisy = np.maximum(self.n_c * p[None] + scales.tables[c] * self.unit[c], 0.0)
            noisy += self.smoothing
            logp = np.log(noisy / noisy.sum(axis=2, keepdims=True))                # (R, K, L)
            jll = jll + logp[:, :, self.rows[c]]
        if self.numeric:
            jll = jll + self._numeric(scales, np.maximum(counts, 1.0))
        agree = (jll.argmax(axis=1) == self.labels[None]).mean(axis=1)
        return np.asarray(agree - self.truth, dtype=np.float64), self.truth

    def _numeric(self, scales: _Scales, denom: np.ndarray) -> np.ndarray:
        """Σ over numeric columns of the noisy fits' log-likelihoods, (R, K, rows)."""
        names = list(self.numeric)
        r, k = denom.shape
        means = np.empty((r, k, len(names)))
        variances = np.empty_like(means)
        lows, highs = np.empty(len(names)), np.empty(len(names))
        for j, c in enumerate(names):
            lower, upper, mu, sigma = self.numeric[c]
            mid, h, width = (lower + upper) / 2, (upper - lower) / 2, upper - lower
            mean = mid + (self.n_c * (mu - mid) + scales.means[c] * self.unit[f"mean:{c}"]
                          ) / denom
            vs = scales.variances[c]
            if vs is None:
                var = np.full((r, k), width ** 2 / 12)
            else:
                squares = self.n_c * (sigma ** 2 + (mu - mid) ** 2) - self.n_c * h * h / 2
                second = (squares + vs * self.unit[f"variance:{c}"]) / denom + h * h / 2
                var = np.clip(second - (np.clip(mean, lower, upper) - mid) ** 2,
                              width ** 2 / 400, width ** 2 / 4)   # fit's post-processing
            means[:, :, j], variances[:, :, j] = np.clip(mean, lower, upper), var
            lows[j], highs[j] = lower, upper
        return _gaussian(means, variances, lows, highs, self._x, self.truncated)

    @functools.cached_property
    def _x(self) -> np.ndarray:
        return np.stack([self.rows[c] for c in self.numeric], axis=1)            # (N, C)


def _gaussian(means: np.ndarray, variances: np.ndarray, lows: np.ndarray, highs: np.ndarray,
              x: np.ndarray, truncated: bool) -> np.ndarray:
    """Σ_c log N(x_c; μ_c, v_c) (truncated to [low, high] if asked) for every (…, K) pair
    of parameters and every row of x (N, C): shape (…, K, N)."""
    inv = 1.0 / variances
    const = -0.5 * (means ** 2 * inv + np.log(variances))
    if truncated:
        sd = np.sqrt(variances)
        hi = log_ndtr((highs - means) / sd)
        lo = log_ndtr((lows - means) / sd)
        const = const - (hi + np.log1p(-np.exp(np.minimum(lo - hi, -1e-12))))
    out = -0.5 * np.einsum("...c,nc->...n", inv, x * x) + np.einsum("...c,nc->...n",
                                                                   means * inv, x)
    return np.asarray(out + const.sum(axis=-1)[..., None])


@functools.lru_cache(maxsize=16)
def _simulation(k: int, facts: tuple[tuple[str, float, float], ...], smoothing: float,
                distribution: str, n: int) -> _Simulation:
    """``facts``: per column (name, lower, upper) if numeric, else (name, cells, NaN)."""
    rng = np.random.default_rng(SEED)   # public seed: the forecast is not a release
    labels = np.arange(TEST_ROWS) % k
    tables: dict[str, np.ndarray] = {}
    numeric: dict[str, tuple[float, float, np.ndarray, float]] = {}
    rows: dict[str, np.ndarray] = {}
    unit = {"prior": rng.laplace(0.0, 1.0, (REPLICATES, k))}
    exact = np.full((k, TEST_ROWS), math.log(1.0 / k))
    for c, first, second in facts:
        if not math.isnan(second):
            lower, upper = first, second
            sigma = (upper - lower) / SPREAD
            mid = (lower + upper) / 2
            mu = np.clip(mid + TILT * sigma * rng.standard_normal(k), lower, upper)
            numeric[c] = (lower, upper, mu, sigma)
            rows[c] = np.clip(mu[labels] + sigma * rng.standard_normal(TEST_ROWS),
                              lower, upper)
            unit[f"mean:{c}"] = rng.laplace(0.0, 1.0, (REPLICATES, k))
            unit[f"variance:{c}"] = rng.laplace(0.0, 1.0, (REPLICATES, k))
            exact += _gaussian(mu[:, None], np.full((k, 1), sigma ** 2),
                               np.array([lower]), np.array([upper]),
                               rows[c][:, None], distribution == "truncated")
            continue
        cells = int(first)
        base = rng.dirichlet(np.ones(cells))
        p = base[None] * np.exp(TILT * rng.standard_normal((k, cells)))
        p /= p.sum(axis=1, keepdims=True)
        tables[c] = p
        u = rng.random(TEST_ROWS)
        rows[c] = np.minimum((u[:, None] > np.cumsum(p[labels], axis=1)).sum(axis=1),
                             cells - 1)
        unit[c] = rng.laplace(0.0, 1.0, (REPLICATES, k, cells))
        exact += np.log(p)[:, rows[c]]
    truth = float((exact.argmax(axis=0) == labels).mean())
    return _Simulation(n / k, k, smoothing, distribution == "truncated", tables, numeric, rows,
                       labels, unit, truth)
