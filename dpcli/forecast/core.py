"""The shapes every forecast shares: a metric's error, a verdict, the ε that makes it usable.

A forecast says, before anything is spent, how far a release may land from
the value it estimates. It is a function of public facts only — ε and its
split, the sensitivities, the declared domains and n (public under
replace-one) — so computing it costs nothing and reveals nothing
(docs/forecast.md). Errors are "released minus true" in the metric's own
unit; ``expected`` is the median absolute error and ``interval`` the central
``level`` interval of the signed error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

LEVEL = 0.9   # the level of every interval unless a forecast says otherwise

MetricsAt = Callable[[float], Mapping[str, "MetricForecast"]]
#: a metric, or a function that computes it when first read (:class:`LazyMetrics`)
MetricOrThunk = Union["MetricForecast", Callable[[], "MetricForecast"]]


@dataclass(frozen=True)
class MetricForecast:
    """The error of one released metric: median |error| and an interval of the signed error."""

    what: str                        # a short human name: "AUC error", "cell count error"
    expected: float                  # median of |released − true|
    interval: tuple[float, float]    # central `level` interval of released − true
    level: float = LEVEL
    bound_only: bool = False         # `expected` and the interval's top are one upper bound
                                     # (no distribution behind it): printed as "at most"
    chance: bool = False             # `expected` is a probability forecast, not an error:
                                     # printed as "about"

    def __post_init__(self) -> None:
        lo, hi = self.interval
        if not (math.isfinite(self.expected) and self.expected >= 0):
            raise ValueError(f"{self.what}: expected error must be finite and >= 0")
        if not lo <= hi:
            raise ValueError(f"{self.what}: interval [{lo}, {hi}] is reversed")
        if not 0 < self.level < 1:
            raise ValueError(f"{self.what}: level must be in (0, 1)")

    @property
    def bound(self) -> float:
        """The larger side of the interval: |error| stays below it with about ``level``."""
        return max(abs(self.interval[0]), abs(self.interval[1]))

    def to_json(self) -> dict[str, Any]:
        out = {"expected": self.expected, "interval": [self.interval[0], self.interval[1]],
               "level": self.level, "what": self.what}
        if self.bound_only:
            out["bound_only"] = True
        if self.chance:
            out["chance"] = True
        return out

    def line(self) -> str:
        """``what``: its typical size (the median) and where ``level`` of runs land, in words a
        reader cannot take for something else ("90% ≤ x" read as a 90 % chance of x)."""
        lo, hi = self.interval
        if self.chance:
            return f"{self.what}: about {_fmt(self.expected)} (a forecast chance, not an error)"
        if self.bound_only:
            return f"{self.what}: at most {_fmt(hi)} (an upper bound, not a median)"
        if lo == hi == self.expected:   # a quantity the noise does not reach
            return f"{self.what}: {_fmt(lo)} (no noise on it)"
        if lo < 0 < hi and max(-lo, hi) <= 1.5 * min(-lo, hi):
            span = f"within ±{_fmt(self.bound)}"
        elif lo == 0 or hi == 0:   # one-sided (a loss: never better than the best): its size
            span = f"at most {_fmt(self.bound)} (one-sided)"
        else:   # lopsided (a clipped rate): both ends of the signed error
            span = f"between {_fmt(lo)} and {_fmt(hi)}"
        return (f"{self.what}: typically {_fmt(self.expected)} (median size); "
                f"{self.level:.0%} of runs {span}")


class LazyMetrics(Mapping[str, MetricForecast]):
    """Metrics computed when first read, then kept: a forecast runs before every spend, and
    the one line it prints (and the verdict's inversion, and ``dpcli plan --target``) reads
    the headline only; the other metrics are computed when the table, the JSON or the
    envelope reads them. Keys keep their order.

    ``first`` (optional): a function giving more metrics, placed before ``items``, whose
    very keys cost something to know (train-nb's closed forms: which exist depends on the
    plan at that ε); called once, when a key not in ``items`` is read or the keys are
    listed. The verdict's inversion reads only the headline, in ``items``."""

    def __init__(self, items: Mapping[str, MetricOrThunk],
                 first: Callable[[], Mapping[str, MetricOrThunk]] | None = None) -> None:
        self._items: dict[str, MetricOrThunk] = dict(items)
        self._first = first
        self._done: dict[str, MetricForecast] = {}

    def _all(self) -> dict[str, MetricOrThunk]:
        if self._first is not None:
            self._items = {**self._first(), **self._items}
            self._first = None
        return self._items

    def __getitem__(self, key: str) -> MetricForecast:
        done = self._done.get(key)
        if done is None:
            item = self._items[key] if key in self._items else self._all()[key]
            done = item if isinstance(item, MetricForecast) else item()
            self._done[key] = done
        return done

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __contains__(self, key: object) -> bool:
        return key in self._items or key in self._all()

    def __repr__(self) -> str:
        return f"LazyMetrics({list(self._all())})"


def shared(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn``'s result computed at most once and shared (one simulation, several metrics)."""
    box: list[Any] = []

    def once() -> Any:
        if not box:
            box.append(fn())
        return box[0]
    return once


@dataclass(frozen=True)
class Verdict:
    """Whether the headline metric's forecast error is small enough to use the release."""

    usable: bool
    metric: str                      # the headline metric the verdict is about
    target: float                    # the median error under which it is called usable
    epsilon_usable: float | None     # not usable: the smallest ε that meets the target (None:
                                     # none ≤ 1e3); usable: None (Forecast.epsilon_for solves)
    note: str = ""                   # why, in a few words, when not usable
    scope: str = ""                  # what the verdict does not cover (said either way)

    def line(self) -> str:
        if self.usable:
            return "verdict: usable" + (f" ({self.scope})" if self.scope else "")
        where = ("no ε up to 1000 makes it usable at this n" if self.epsilon_usable is None
                 else f"usable from ε ≥ {_fmt(self.epsilon_usable)}")
        note = self.note or "expect near-chance output"
        scope = f" ({self.scope})" if self.scope else ""
        return f"verdict: noise dominates: {note}; {where}{scope}"

    def to_json(self) -> dict[str, Any]:
        return {"usable": self.usable, "metric": self.metric, "target": self.target,
                "epsilon_usable": self.epsilon_usable, "text": self.line()}


@dataclass(frozen=True)
class Forecast:
    """A command's forecast at one ε and n: its metrics, how they were made, the verdict."""

    command: str
    epsilon: float
    n: int
    method: str                      # "closed form" or "simulation (…)" — say which
    metrics: Mapping[str, MetricForecast]
    verdict: Verdict
    extra: Mapping[str, Any] = field(default_factory=dict)
    # the metrics at any other total ε (same n, split rule, domains): what `dpcli plan
    # --target` solves with; not part of the record
    at: MetricsAt | None = field(default=None, compare=False, repr=False)

    # a lower bound of the headline's median at any ε, cheaper than ``at`` (see
    # :func:`solve_epsilon`'s ``floor_at``); None: none
    floor_at: Callable[[float], float] | None = field(default=None, compare=False, repr=False)

    def epsilon_for(self, metric: str, target: float) -> float | None:
        """The smallest total ε whose median error of ``metric`` is at most ``target``."""
        if self.at is None or metric not in self.metrics:
            raise KeyError(f"{self.command}: no forecast of {metric!r} to solve for")
        at = self.at
        return solve_epsilon(lambda e: at(e)[metric].expected, target,
                             floor_at=self.floor_at if metric == self.verdict.metric else None)

    def to_json(self) -> dict[str, Any]:
        """The ``forecast`` object of ``--dry-run --json``, ``dpcli plan --json`` and the
        envelope: metric → {expected, interval, level}, with the verdict beside it."""
        return {"command": self.command, "epsilon": self.epsilon, "n": self.n,
                "method": self.method,
                "forecast": {k: m.to_json() for k, m in self.metrics.items()},
                "verdict": self.verdict.to_json(), **dict(self.extra)}

    def lines(self, verbose: bool = False) -> list[str]:
        """One line (the headline and the verdict), or every metric with ``verbose``."""
        head = self.metrics[self.verdict.metric]
        out = [f"forecast (n = {self.n:,}, {self.method}): {head.line()}"]
        if verbose:
            out += [f"  {name}: {m.line()}" for name, m in self.metrics.items()
                    if name != self.verdict.metric]
        out.append(self.verdict.line())
        return out


def make_forecast(command: str, epsilon: float, n: int, method: str, metrics_at: MetricsAt, *,
                  headline: str, target: float, note: str = "", scope: str = "",
                  extra: Mapping[str, Any] | None = None,
                  floor_at: Callable[[float], float] | None = None) -> Forecast:
    """Evaluate ``metrics_at(epsilon)`` and judge ``headline`` against ``target``.

    ``metrics_at`` must give the metrics at any total ε with everything else
    fixed (the same split rule, n and domains); the verdict inverts it for the
    smallest ε whose median error meets ``target``. ``floor_at`` (optional): a
    lower bound of the headline's median at any ε that is cheaper to compute
    (:func:`solve_epsilon`); it changes no answer, only the time. ``scope``: what the
    verdict does not judge, shown with it whatever it says.
    """
    at = memoised(metrics_at)
    metrics = at(epsilon)
    if headline not in metrics:
        raise KeyError(f"{command}: the headline metric {headline!r} is not forecast")
    usable = metrics[headline].expected <= target
    # inverted only when the answer is shown: a forecast runs before every spend, and a
    # simulated one evaluated ~30 times would add seconds to a run that is fine as it is
    needed = None if usable else solve_epsilon(lambda e: at(e)[headline].expected, target,
                                               floor_at=floor_at)
    return Forecast(command, epsilon, n, method, metrics,
                    Verdict(usable, headline, target, needed, "" if usable else note, scope),
                    dict(extra or {}), at, floor_at)


def memoised(metrics_at: MetricsAt) -> MetricsAt:
    """``metrics_at`` with its answers kept per ε, each a :class:`LazyMetrics` (a metric is
    computed when first read): the verdict, ``epsilon_for`` and ``dpcli plan`` ask the same
    forecast at the same ε more than once (in-process only; a forecast is a fixed function of
    public inputs, so keeping it changes nothing but the time)."""
    kept: dict[float, Mapping[str, MetricForecast]] = {}

    def at(eps: float) -> Mapping[str, MetricForecast]:
        got = kept.get(eps)
        if got is None:
            raw = metrics_at(eps)
            got = raw if isinstance(raw, LazyMetrics) else LazyMetrics(raw)
            kept[eps] = got
        return got
    return at


def solve_epsilon(error_at: Callable[[float], float], target: float, *, lo: float = 1e-3,
                  hi: float = 1e3, rel: float = 0.01,
                  floor_at: Callable[[float], float] | None = None) -> float | None:
    """The smallest ε in [lo, hi] with ``error_at(ε) <= target`` (to ``rel``), or None.

    Assumes the error does not grow with ε (more budget, less noise); a
    geometric bisection, so a slow forecast is evaluated ~30 times.
    ``floor_at``, if given, must never exceed ``error_at``: where it is above
    the target at ``lo``, so is the error, and ``error_at(lo)`` is not computed
    (train-nb's simulated loss at ε = 10⁻³ walks its envelope up the whole ε
    lattice, two thirds of a forecast's time). The answer is the same.
    """
    if error_at(hi) > target:
        return None
    if (floor_at is None or floor_at(lo) <= target) and error_at(lo) <= target:
        return lo
    while hi / lo > 1 + rel:
        mid = math.sqrt(lo * hi)
        if error_at(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def laplace_error(scale: float, what: str, *, sensitivity_scale: float = 1.0,
                  level: float = LEVEL) -> MetricForecast:
    """The error of one Laplace(``scale``) draw, multiplied by ``sensitivity_scale``
    (e.g. 1/n for a count turned into a rate): median b·ln 2, interval ±b·ln(1/(1−level))."""
    b = scale * sensitivity_scale
    half = b * math.log(1.0 / (1.0 - level))
    return MetricForecast(what, b * math.log(2.0), (-half, half), level)


def from_samples(errors: np.ndarray, what: str, *, level: float = LEVEL) -> MetricForecast:
    """A forecast from simulated signed errors (synthetic data from the declared domains)."""
    e = np.asarray(errors, dtype=np.float64)
    if e.size == 0 or not np.all(np.isfinite(e)):
        raise ValueError(f"{what}: simulated errors must be finite and non-empty")
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(e, [tail, 1.0 - tail])
    return MetricForecast(what, float(np.median(np.abs(e))), (float(lo), float(hi)), level)


def _fmt(x: float) -> str:
    return f"{x:.2g}" if abs(x) < 0.01 else f"{x:.3g}"
