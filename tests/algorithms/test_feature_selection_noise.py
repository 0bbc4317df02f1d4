"""The noise check, the split rule and the released check of select-features.

All three are functions of public facts (n, ε, m, s, k, method) or of released
values; the resolution's distribution claims are checked by simulation with a
fixed seed and a stated false-failure rate.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from dpcli.algorithms import feature_selection as fs
from dpcli.data.schema import BinaryColumn, Label, Schema, TokensColumn
from dpcli.mechanisms import exponential_top_k
from dpcli.mechanisms.sparse_vector import sparse_vector_split

VOCAB = tuple(f"w{i}" for i in range(50))


def _schema() -> Schema:
    return Schema(columns=(TokensColumn("words", VOCAB, Path("v.txt"), max_per_row=4),
                           BinaryColumn("member", values=("no", "yes"))),
                  label=Label("y", ("0", "1"), positive="1"))


# ---------------------------------------------------------------- resolution
@pytest.mark.parametrize("a,b", [(1.0, 1.0), (3.0, 1.0), (0.2, 5.0)])
def test_laplace_tail_matches_the_closed_form(a: float, b: float) -> None:
    """P(L_a − L_b > g) = (a²e^(−g/a) − b²e^(−g/b)) / (2(a² − b²)), (1 + t/2)e^(−t)/2 if a = b."""
    g = fs._laplace_difference_tail((a, b), 0.1)
    if a == b:
        t = g / a
        p = 0.5 * math.exp(-t) * (1 + t / 2)
    else:
        p = (a * a * math.exp(-g / a) - b * b * math.exp(-g / b)) / (2 * (a * a - b * b))
    assert p == pytest.approx(0.1, rel=2e-3)


def test_resolution_is_the_90_percent_gap_of_each_method() -> None:
    """Simulated: two candidates g apart are ordered right with probability ≈ 0.9.

    200,000 draws per method: the standard error of a frequency near 0.9 is 0.00067;
    the tolerance 0.004 is 6 standard errors (false failure < 1e-8 per method).
    """
    rng = np.random.default_rng(7)
    draws = 200_000
    eps, m, s, n, k = 0.5, 20, 3, 1000, 4
    # perturb, tc: Laplace(2s/ε) on each score
    g = fs.resolution("tc", "perturb", m, s, n, k, eps)
    b = 2 * s / eps
    right = (g + rng.laplace(0, b, draws) - rng.laplace(0, b, draws)) > 0
    assert right.mean() == pytest.approx(0.9, abs=0.004)
    # topk: Gumbel(2kΔ/ε) on each score
    g = fs.resolution("tc", "topk", m, s, n, k, eps)
    beta = 2 * k * 1.0 / eps
    right = (g + rng.gumbel(0, beta, draws) - rng.gumbel(0, beta, draws)) > 0
    assert right.mean() == pytest.approx(0.9, abs=0.004)
    # threshold: a score g above τ against the query and threshold noises
    g = fs.resolution("dc", "threshold", m, s, n, k, eps)
    e1, e2 = sparse_vector_split(eps, k)
    right = (g + rng.laplace(0, 2 * k * 2.0 / e2, draws) - rng.laplace(0, 2.0 / e1, draws)) > 0
    assert right.mean() == pytest.approx(0.9, abs=0.004)
    # cluster: four Laplace(2s/ε) terms
    g = fs.resolution("tc", "cluster", m, s, n, k, eps)
    noise = rng.laplace(0, b, (draws, 4)) @ np.array([1, 1, -1, -1])
    assert ((g + noise) > 0).mean() == pytest.approx(0.9, abs=0.004)


def test_topk_resolution_against_the_real_mechanism() -> None:
    """exponential_top_k itself (k = 1) puts the higher of two scores g apart first ≈ 90 %.

    4,000 runs: standard error 0.0047; tolerance 0.025 (> 5 s.e.: false failure < 1e-6).
    """
    eps = 1.0
    g = fs.resolution("tc", "topk", 2, 1, 100, 1, eps)
    rng = np.random.default_rng(11)
    wins = sum(int(exponential_top_k(np.array([g, 0.0]), 1, sensitivity=1.0, epsilon=eps,
                                     rng=rng)[0] == 0) for _ in range(4000))
    assert wins / 4000 == pytest.approx(0.9, abs=0.025)


def test_resolution_scales_as_one_over_epsilon() -> None:
    for method in ("perturb", "topk", "threshold", "cluster"):
        r1 = fs.resolution("tc", method, 30, 4, 500, 3, 1.0)
        assert fs.resolution("tc", method, 30, 4, 500, 3, 0.25) == pytest.approx(4 * r1,
                                                                                 rel=1e-6)


# ---------------------------------------------------------------- noise check
def test_noise_check_verdict_and_what_would_suffice() -> None:
    schema = _schema()
    cols = ("words", "member")
    cfg = fs.FSConfig(score="tc", method="topk", k=5)
    small = fs.noise_check(schema, cols, cfg, 500, 0.2)
    # m = 51, topk: β = 2·5·1/0.2 = 50, gap 0.05·500 = 25
    assert small.resolution == pytest.approx(50 * math.log(9))
    assert small.gap == pytest.approx(25.0) and not small.passes
    assert small.needed_epsilon == pytest.approx(0.2 * small.resolution / 25)
    assert fs.noise_check(schema, cols, cfg, 500, small.needed_epsilon * 1.001).passes
    assert not fs.noise_check(schema, cols, cfg, 500, small.needed_epsilon * 0.999).passes
    # the n it names passes, a little less does not (tc: the gap grows with n)
    assert small.needed_n is not None
    assert fs.noise_check(schema, cols, cfg, small.needed_n, 0.2).passes
    assert not fs.noise_check(schema, cols, cfg, int(small.needed_n * 0.99), 0.2).passes
    assert "ε ≥" in small.message() and "--allow-noise" in small.message()
    # a coarser meaningful gap passes
    assert fs.noise_check(schema, cols, fs.FSConfig(score="tc", method="topk", k=5,
                                                    min_effect=0.5), 500, 0.2).passes


def test_ig_min_effect_is_in_nats_and_n_helps() -> None:
    schema = _schema()
    cfg = fs.FSConfig(score="ig", method="topk", k=2)
    check = fs.noise_check(schema, ("words", "member"), cfg, 2000, 1.0)
    assert check.gap == 0.01
    assert check.needed_n is not None and check.needed_n > 2000
    assert fs.noise_check(schema, ("words", "member"), cfg, check.needed_n, 1.0).passes


@pytest.mark.parametrize("bad", [0.0, -0.1, math.inf, math.nan])
def test_min_effect_must_be_positive(bad: float) -> None:
    with pytest.raises(Exception, match="min_effect"):
        fs.FSConfig(method="topk", k=1, min_effect=bad)


# ---------------------------------------------------------------- split rule
def test_split_rule_takes_what_selection_needs_within_bounds() -> None:
    s = fs.split_rule(1.0, 0.184)
    assert (s.selection, s.training, s.bound) == (0.184, 0.816, "needed")
    s = fs.split_rule(2.0, 0.01)
    assert (s.selection, s.training, s.bound) == (0.2, 1.8, "floor")
    s = fs.split_rule(1.0, 7.0)
    assert (s.selection, s.training, s.bound) == (0.5, 0.5, "cap")
    for total in (0.1, 0.37, 1.0, 3.0):
        for needed in (0.0, 0.02, 0.3, 10.0):
            s = fs.split_rule(total, needed)
            assert s.selection + s.training == pytest.approx(total, abs=1e-12)
            assert 0.1 * total - 1e-12 <= s.selection <= 0.5 * total + 1e-12


def test_split_rule_is_monotone_in_needed() -> None:
    shares = [fs.split_rule(1.0, x).selection for x in np.linspace(0, 1, 101)]
    assert all(a <= b for a, b in itertools.pairwise(shares))


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf])
def test_split_rule_refuses_a_bad_total(bad: float) -> None:
    with pytest.raises(Exception, match="total-epsilon"):
        fs.split_rule(bad, 0.1)


def test_split_rule_passes_the_check_when_not_capped() -> None:
    """With the rule's share, the selection resolves min_effect unless the cap bound."""
    schema = _schema()
    cols = ("words", "member")
    for n in (300, 3000, 30000):
        cfg = fs.FSConfig(score="tc", method="perturb", k=10)
        needed = fs.noise_check(schema, cols, cfg, n, 1.0).needed_epsilon
        split = fs.split_rule(1.0, needed)
        check = fs.noise_check(schema, cols, cfg, n, split.selection)
        assert check.passes == (split.bound != "cap"), (n, split)


# ---------------------------------------------------------------- released check
def test_released_check_tells_signal_from_noise() -> None:
    rng = np.random.default_rng(3)
    b = 10.0
    m, k = 300, 10
    # pure noise: equal exact scores; the top k of the noisy ones are noise
    flagged = 0
    for _ in range(200):
        noisy = rng.laplace(0, b, m)
        chosen = np.argsort(-noisy)[:k]
        flagged += fs.released_check(noisy, chosen, (b,)).indistinguishable
    # the null's 99th percentile: flagged ≈ 99 % of the time; 200 runs, α < 1e-4 at 190
    assert flagged >= 190
    # ten scores 20 noise scales above the rest: distinguishable
    exact = np.zeros(m)
    exact[:k] = 20 * b
    noisy = exact + rng.laplace(0, b, m)
    check = fs.released_check(noisy, np.argsort(-noisy)[:k], (b,))
    assert not check.indistinguishable and check.margin > check.null_margin
    assert fs.released_check(noisy, np.array([], dtype=int), (b,)).indistinguishable
    everything = fs.released_check(noisy, np.arange(m), (b,))
    assert not everything.indistinguishable and everything.to_json()["everything_selected"]
