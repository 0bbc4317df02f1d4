"""A black-box neighbour auditor: a statistical lower bound on a mechanism's privacy loss.

A mechanism M is ε-DP when, for every pair of neighbours D, D' and every event E,
P[M(D) ∈ E] ≤ e^ε · P[M(D') ∈ E]. The auditor runs M many times on one pair,
each run with its own generator, reduces each output to one number (the
*statistic*: any fixed function of the released output, so post-processing),
and bounds

    ε ≥ ln( P[M(D) ∈ E] / P[M(D') ∈ E] )   (or with D and D' swapped)

from below for one event E of the form {s ≥ t}, {s ≤ t} or {s = t}.

Procedure. (1) Pilot: ``pilot`` runs on each side; every candidate event (each
threshold at a distinct pilot value or quantile, both directions) gets the
pilot's own bound, and the best one is kept. (2) Audit: ``runs`` fresh runs on
each side (new seeds, so the choice in (1) does not bias (2)); the counts
k, k' of the chosen event give Clopper–Pearson bounds p_lo (on P[M(D) ∈ E],
one-sided level α/2) and p'_hi (on P[M(D') ∈ E], α/2), and the reported bound
is ln(p_lo / p'_hi), or 0.

Conditional audits. A statistic may be NaN on some runs: those runs are dropped on
both sides and the bound is on the ratio of *conditional* probabilities given the
condition (e.g. "the grid chosen by the first step is g"). Given the number of runs
kept, the kept statistics are i.i.d. from the conditional law, so the Clopper–Pearson
bounds hold conditionally, hence unconditionally. Such a bound is compared with the ε
of the step that releases the statistic once the condition (an earlier, released
output) is fixed.

False-failure rate. If M is ε-DP the true ratio is at most e^ε, so the bound
exceeds ε only if p_lo > P[M(D) ∈ E] or p'_hi < P[M(D') ∈ E]: probability at
most α/2 + α/2 = α (one event is tested on the audit sample). With ALPHA =
1e-4 per audit a correct mechanism is flagged with probability ≤ 1e-4 per audit.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta

from dpcli.mechanisms import make_rng

ALPHA = 1e-4          # false-failure rate of one audit (module docstring)
MAX_THRESHOLDS = 80   # candidate thresholds per side when the statistic takes many values
SEED_STREAM = 10**9   # seed offset between the four streams (pilot/audit × D/D')

Release = Callable[[np.random.Generator], float]
"""One run of a mechanism on a fixed dataset, reduced to its statistic."""


def cp_lower(k: int, n: int, a: float) -> float:
    """One-sided Clopper–Pearson lower bound (level a) of a binomial p from k of n."""
    return 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))


def cp_upper(k: int, n: int, a: float) -> float:
    """One-sided Clopper–Pearson upper bound (level a) of a binomial p from k of n."""
    return 1.0 if k >= n else float(beta.ppf(1 - a, k + 1, n - k))


def eps_lower_bound(k: int, k_other: int, n: int, alpha: float = ALPHA,
                    n_other: int | None = None) -> float:
    """Lower bound (confidence 1 − α) on ln(p/p') from k of n (p) and k_other of n_other
    (p'; default n)."""
    n_other = n if n_other is None else n_other
    if n == 0 or n_other == 0:
        return 0.0
    lo, hi = cp_lower(k, n, alpha / 2), cp_upper(k_other, n_other, alpha / 2)
    return max(0.0, math.log(lo / hi)) if lo > 0 else 0.0


@dataclass(frozen=True)
class Event:
    """{s ≥ t}, {s ≤ t} or {s = t} of the statistic s."""

    op: str
    t: float

    def count(self, s: np.ndarray) -> int:
        hit = {">=": s >= self.t, "<=": s <= self.t, "==": s == self.t}[self.op]
        return int(np.count_nonzero(hit))

    def __str__(self) -> str:
        return f"s {self.op} {self.t:.4g}"


def candidate_events(values: np.ndarray) -> list[Event]:
    """Thresholds at each distinct pilot value (or at quantiles when there are many), and
    {s = t} for each value t (when there are many: for the atoms, values taken by at least
    1% of the pilot runs)."""
    distinct, counts = np.unique(values, return_counts=True)
    if distinct.size <= MAX_THRESHOLDS:
        return [Event(op, float(t)) for t in distinct for op in (">=", "<=", "==")]
    atoms = distinct[counts >= max(2, values.size // 100)]
    cuts = np.unique(np.quantile(values, np.linspace(0, 1, MAX_THRESHOLDS)))
    return ([Event(op, float(t)) for t in cuts for op in (">=", "<=")]
            + [Event("==", float(t)) for t in atoms])


@dataclass(frozen=True)
class Finding:
    """The audit of one pair: the event chosen on the pilot and its bound on fresh runs."""

    event: str
    direction: str        # "D/D'" (ratio P_D / P_D') or "D'/D"
    count_d: int
    count_dp: int
    runs: int             # runs per side
    eps_lower: float
    kept_d: int = -1      # runs that met the condition (conditional audits), else runs
    kept_dp: int = -1


def choose_event(pilot_d: np.ndarray, pilot_dp: np.ndarray,
                 alpha: float = ALPHA) -> tuple[Event, bool] | None:
    """The event and direction (True: D over D') with the largest bound on the pilot."""
    n, n_other = pilot_d.size, pilot_dp.size
    if n == 0 or n_other == 0:
        return None
    best, best_bound = None, 0.0
    for event in candidate_events(np.concatenate([pilot_d, pilot_dp])):
        k, k_other = event.count(pilot_d), event.count(pilot_dp)
        for forward, (a, b, na, nb) in ((True, (k, k_other, n, n_other)),
                                        (False, (k_other, k, n_other, n))):
            bound = eps_lower_bound(a, b, na, alpha, nb)
            if bound > best_bound:
                best, best_bound = (event, forward), bound
    return best


def sample(release: Release, runs: int, seed: int | None) -> np.ndarray:
    """The statistics of ``runs`` runs, run i with ``make_rng(seed + i)`` (or OS entropy if
    seed is None), without the runs whose statistic is NaN (conditional audits)."""
    out = np.empty(runs)
    for i in range(runs):
        out[i] = release(make_rng(None if seed is None else seed + i))
    return out[~np.isnan(out)]


def audit(run_d: Release, run_dp: Release, *, runs: int, pilot: int,
          seed: int | None = 0, alpha: float = ALPHA) -> Finding:
    """Pilot, choose one event, count it on fresh runs, bound ε from below (module doc)."""
    seeds = [None if seed is None else seed + j * SEED_STREAM for j in range(4)]
    pilot_d, pilot_dp = sample(run_d, pilot, seeds[0]), sample(run_dp, pilot, seeds[1])
    chosen = choose_event(pilot_d, pilot_dp, alpha)
    if chosen is None:
        return Finding("none (no pilot event separates D and D')", "-", 0, 0, runs, 0.0)
    event, forward = chosen
    s_d, s_dp = sample(run_d, runs, seeds[2]), sample(run_dp, runs, seeds[3])
    k_d, k_dp = event.count(s_d), event.count(s_dp)
    bound = eps_lower_bound(k_d, k_dp, s_d.size, alpha, s_dp.size) if forward else \
        eps_lower_bound(k_dp, k_d, s_dp.size, alpha, s_d.size)
    return Finding(str(event), "D/D'" if forward else "D'/D", k_d, k_dp, runs, bound,
                   s_d.size, s_dp.size)


def scale() -> float:
    """Multiplier of every audit's runs: ``DPCLI_AUDIT_SCALE`` (default 1; ``make audit`` 8)."""
    return float(os.environ.get("DPCLI_AUDIT_SCALE", "1"))


def audit_seed() -> int | None:
    """``DPCLI_AUDIT_SEED``: an integer (default 0, reproducible CI) or ``os`` for OS entropy."""
    value = os.environ.get("DPCLI_AUDIT_SEED", "0")
    return None if value == "os" else int(value)
