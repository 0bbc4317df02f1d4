"""Feature-selection scores: sensitivities over replace-one neighbours, and correctness.

Sensitivities are tested, not trusted (docs/design.md rule 4). Neighbours: two
datasets of the same size N (public) whose record i differs — the new record
is ANY record of the domain: any binary feature row with at most s ones
(s = the row cap of :func:`feature_selection.row_cap`) and either label.
For small m every such row is enumerated, so each test below checks every
neighbour of every dataset it draws.

Asserted, per dataset and neighbour, against
``feature_selection.sensitivity(score, m, s, N) = (per_feature, l1)``:

- max over features |Δscore| ≤ per_feature
- Σ over features |Δscore| ≤ l1
  (with a 1e-9 tolerance for the floating-point scores ig and chi2)

The bounds the module doc calls tight are shown to be attained (tc per
feature 1 and L1 2s, dc per feature 2 and L1 2s, chi2 4(1 − 1/N)), so the
tests cannot pass vacuously. Everything here is deterministic (fixed seeds,
no noise): a failure is a real bug, not chance.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np
import pytest

from dpcli.algorithms import feature_selection as fs

TOL = 1e-9
SCORES = fs.SCORES  # tc, dc, pi, ig, chi2


# ----------------------------------------------------------------------- helpers
def rows_with_at_most(m: int, s: int) -> np.ndarray:
    """Every binary row of length m with at most s ones, shape (R, m)."""
    rows = [np.zeros(m, dtype=np.int64)]
    for k in range(1, s + 1):
        for ones in itertools.combinations(range(m), k):
            row = np.zeros(m, dtype=np.int64)
            row[list(ones)] = 1
            rows.append(row)
    return np.array(rows)


def counts(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, int, int]:
    """(a, n1, n): a[:, 0] rows with F = 1 and label 0, a[:, 1] F = 1 and label 1."""
    a = np.stack([x[y == 0].sum(axis=0), x[y == 1].sum(axis=0)], axis=1).astype(np.int64)
    return a, int(y.sum()), len(y)


def random_dataset(rng: np.random.Generator, n: int, domain: np.ndarray,
                   p1: float) -> tuple[np.ndarray, np.ndarray]:
    x = domain[rng.integers(len(domain), size=n)]
    y = (rng.random(n) < p1).astype(np.int64)
    return x, y


def neighbour_changes(score: str, x: np.ndarray, y: np.ndarray,
                      domain: np.ndarray) -> np.ndarray:
    """|Δscore| per feature for EVERY replace-one neighbour of (x, y), shape (K, m).

    Neighbour k replaces record i by (domain row r, label l), over all i, r, l.
    Scores of all neighbours sharing the same n1 go through one vectorised
    call of :func:`feature_selection.binary_scores`.
    """
    a, n1, n = counts(x, y)
    m = x.shape[1]
    base = fs.binary_scores(score, a, n1, n)
    n_rows = len(domain)
    i, r, lab = (g.ravel() for g in np.meshgrid(np.arange(n), np.arange(n_rows), [0, 1],
                                                 indexing="ij"))
    new = np.repeat(a[None, :, :], len(i), axis=0)
    # remove record i: its active features leave column y_i
    new[np.arange(len(i)), :, y[i]] -= x[i]
    # add the replacement: its active features enter column lab
    new[np.arange(len(i)), :, lab] += domain[r]
    new_n1 = n1 - y[i] + lab
    out = np.empty((len(i), m))
    for value in np.unique(new_n1):
        mask = new_n1 == value
        scores = fs.binary_scores(score, new[mask].reshape(-1, 2), int(value), n)
        out[mask] = scores.reshape(-1, m)
    return np.abs(out - base[None, :])


def compositions(total: int, parts: int) -> Iterator[tuple[int, ...]]:
    """Every way to write ``total`` as an ordered sum of ``parts`` non-negative integers."""
    for cuts in itertools.combinations(range(total + parts - 1), parts - 1):
        bounds = (-1, *cuts, total + parts - 1)
        yield tuple(bounds[j + 1] - bounds[j] - 1 for j in range(parts))


def tol(score: str) -> float:
    return TOL if score in ("ig", "chi2") else 0.0


# ------------------------------------------------------ binary scores: bounds hold
@pytest.mark.parametrize(("m", "s"), [(4, 1), (5, 2), (4, 4), (6, 3)])
def test_cluster_points_l1_sensitivity_over_every_neighbour(m: int, s: int) -> None:
    """The cluster method releases the (a0, a1) vectors of all m candidates at L1 Δ = 2s."""
    rng = np.random.default_rng(7 * m + s)
    domain = rows_with_at_most(m, s)
    worst = 0
    for trial in range(40):
        n = 1 + trial % 10
        x, y = random_dataset(rng, n, domain, (0.0, 0.5, 1.0)[trial % 3])
        a, _, _ = counts(x, y)
        for i in range(n):
            for row in domain:
                for lab in (0, 1):
                    x2, y2 = x.copy(), y.copy()
                    x2[i], y2[i] = row, lab
                    worst = max(worst, int(np.abs(counts(x2, y2)[0] - a).sum()))
    assert worst <= 2 * s
    assert worst == min(2 * s, 2 * m)  # reached: a full row moved to the other label


@pytest.mark.parametrize(("m", "s"), [(4, 1), (5, 2), (4, 4), (6, 3)])
@pytest.mark.parametrize("score", SCORES)
def test_binary_score_sensitivity_over_every_neighbour(score: str, m: int, s: int) -> None:
    """All neighbours of 60 random datasets (N = 1..12, varied label balance) per (m, s)."""
    rng = np.random.default_rng(1000 * m + s)
    domain = rows_with_at_most(m, s)
    observed_per, observed_l1 = 0.0, 0.0
    for trial in range(60):
        n = 1 + trial % 12
        p1 = (0.0, 0.2, 0.5, 0.8, 1.0)[trial % 5]
        x, y = random_dataset(rng, n, domain, p1)
        per, l1 = fs.sensitivity(score, m, s, n)
        delta = neighbour_changes(score, x, y, domain)
        assert delta.max() <= per + tol(score), (score, n, trial)
        assert delta.sum(axis=1).max() <= l1 + tol(score), (score, n, trial)
        observed_per = max(observed_per, float(delta.max()))
        observed_l1 = max(observed_l1, float(delta.sum(axis=1).max()))
    # the bounds the module doc calls tight are reached by the brute force itself
    if score == "tc":
        assert observed_per == 1.0
        # |A Δ B| ≤ min(2s, m): 2s is reached whenever two disjoint rows of s ones exist
        assert observed_l1 == min(2.0 * s, m)
    if score == "dc":
        assert observed_per == 2.0
        assert observed_l1 == 2.0 * s
    if score == "pi":
        assert observed_per == 2.0
    assert observed_per > 0.0


def test_sensitivity_values() -> None:
    """The claimed values, as stated in the module doc."""
    m, s, n = 7, 3, 20
    assert fs.sensitivity("tc", m, s, n) == (1.0, 6.0)
    assert fs.sensitivity("dc", m, s, n) == (2.0, 6.0)
    assert fs.sensitivity("pi", m, s, n) == (2.0, 14.0)
    assert fs.sensitivity("chi2", m, s, n) == (4.0, 28.0)
    per, l1 = fs.sensitivity("ig", m, s, n)
    cn = n * math.log(n) - (n - 1) * math.log(n - 1)
    assert per == pytest.approx(3 * cn / n)
    assert l1 == pytest.approx(m * per)
    assert cn <= math.log(n) + 1


# ------------------------------------------------------- bounds are not vacuous
def one_feature(x: list[int], y: list[int]) -> tuple[np.ndarray, int, int]:
    return counts(np.array(x, dtype=np.int64)[:, None], np.array(y, dtype=np.int64))


def test_tc_per_feature_one_attained() -> None:
    before = fs.binary_scores("tc", *one_feature([0, 0, 1], [0, 1, 1]))
    after = fs.binary_scores("tc", *one_feature([1, 0, 1], [0, 1, 1]))
    assert abs(after - before)[0] == 1.0 == fs.sensitivity("tc", 1, 1, 3)[0]


def test_dc_per_feature_two_attained() -> None:
    # the feature is active in both the removed and the added row; the label flips
    before = fs.binary_scores("dc", *one_feature([1, 1, 1, 0], [0, 0, 0, 1]))
    after = fs.binary_scores("dc", *one_feature([1, 1, 1, 0], [1, 0, 0, 1]))
    assert before[0] == 3.0 and after[0] == 1.0
    assert abs(after - before)[0] == 2.0 == fs.sensitivity("dc", 1, 1, 4)[0]


@pytest.mark.parametrize("n", [2, 3, 5, 10, 100])
def test_chi2_change_reaches_four_times_one_minus_one_over_n(n: int) -> None:
    # N rows in one cell (F = 0, label 0); one moves to a new value AND label
    before = fs.binary_scores("chi2", *one_feature([0] * n, [0] * n))
    after = fs.binary_scores("chi2", *one_feature([1] + [0] * (n - 1), [1] + [0] * (n - 1)))
    assert before[0] == 0.0
    assert after[0] - before[0] == pytest.approx(4 * (1 - 1 / n), abs=1e-12)
    assert after[0] - before[0] <= fs.sensitivity("chi2", 1, 1, n)[0]
    # the same through the categorical path
    table = np.array([[n, 0], [0, 0]])
    moved = np.array([[n - 1, 0], [0, 1]])
    assert fs.chi2_score(moved, 1) - fs.chi2_score(table, 1) == pytest.approx(4 * (1 - 1 / n))


@pytest.mark.parametrize("s", [1, 2, 3])
def test_tc_l1_two_s_attained(s: int) -> None:
    m = 2 * s
    x = np.zeros((3, m), dtype=np.int64)
    x[0, :s] = 1                                   # removed row: the first s features
    y = np.array([0, 1, 0])
    x2 = x.copy()
    x2[0] = 0
    x2[0, s:] = 1                                  # added row: the other s features
    delta = np.abs(fs.binary_scores("tc", *counts(x2, y)) - fs.binary_scores("tc", *counts(x, y)))
    assert delta.sum() == 2 * s == fs.sensitivity("tc", m, s, 3)[1]


# ------------------------------------------------------ chi2 on categorical tables
def table_of(cells: tuple[int, ...], classes: int, levels: int) -> np.ndarray:
    return np.array(cells, dtype=np.int64).reshape(classes, levels)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_chi2_categorical_brute_force(n: int) -> None:
    """Every dataset of n rows over 3 levels × 2 classes, every replacement: |Δ| ≤ 4."""
    classes, levels = 2, 3
    cells = classes * levels
    largest = 0.0
    for comp in compositions(n, cells):
        base = fs.chi2_score(table_of(comp, classes, levels), 1)
        for src in range(cells):
            if comp[src] == 0:
                continue
            for dst in range(cells):
                moved = list(comp)
                moved[src] -= 1
                moved[dst] += 1
                change = abs(fs.chi2_score(table_of(tuple(moved), classes, levels), 1) - base)
                assert change <= fs.sensitivity("chi2", 1, 1, n)[0] + TOL, (comp, src, dst)
                largest = max(largest, change)
    assert largest >= 4 * (1 - 1 / n) - TOL  # the all-in-one-cell example is among them


@pytest.mark.parametrize(("classes", "levels"), [(2, 5), (3, 3), (3, 6), (4, 2)])
def test_chi2_categorical_random(classes: int, levels: int) -> None:
    """Random tables (N up to 60), every replacement, every choice of positive class."""
    rng = np.random.default_rng(classes * 10 + levels)
    cells = classes * levels
    for _ in range(150):
        n = int(rng.integers(1, 61))
        comp = np.bincount(rng.integers(cells, size=n) if rng.random() < 0.5 else
                           rng.choice(cells, size=n, p=rng.dirichlet(np.full(cells, 0.3))),
                           minlength=cells)
        for pos in range(classes):
            base = fs.chi2_score(comp.reshape(classes, levels), pos)
            for src in np.flatnonzero(comp):
                for dst in range(cells):
                    moved = comp.copy()
                    moved[src] -= 1
                    moved[dst] += 1
                    change = abs(fs.chi2_score(moved.reshape(classes, levels), pos) - base)
                    assert change <= 4.0 + TOL


def test_chi2_three_classes_binarises_positive_vs_rest() -> None:
    rng = np.random.default_rng(7)
    for _ in range(50):
        table = rng.integers(0, 20, size=(3, 4))
        for pos in range(3):
            rest = table.sum(axis=0) - table[pos]
            binary = np.stack([rest, table[pos]])
            assert fs.chi2_score(table, pos) == pytest.approx(fs.chi2_score(binary, 1))
            # ... and depends on the rest only through its sum
            shuffled = table.copy()
            others = [k for k in range(3) if k != pos]
            shuffled[others[0]], shuffled[others[1]] = rest, 0
            assert fs.chi2_score(shuffled, pos) == pytest.approx(fs.chi2_score(table, pos))


def test_chi2_score_empty_table_is_zero() -> None:
    assert fs.chi2_score(np.zeros((2, 3), dtype=np.int64), 0) == 0.0


# ------------------------------------------------- scores against a reference
def reference_scores(x: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """Straight from the definitions, one feature at a time, with Python loops."""
    n = len(y)
    out: dict[str, list[float]] = {s: [] for s in SCORES}
    for j in range(x.shape[1]):
        f = x[:, j]
        a1 = sum(1 for k in range(n) if f[k] == 1 and y[k] == 1)
        a0 = sum(1 for k in range(n) if f[k] == 1 and y[k] == 0)
        b1 = sum(1 for k in range(n) if f[k] == 0 and y[k] == 1)
        b0 = sum(1 for k in range(n) if f[k] == 0 and y[k] == 0)
        out["tc"].append(a0 + a1)
        out["dc"].append(abs(a1 - a0))
        out["pi"].append(max(abs(a1 - a0), abs(b1 - b0)))

        # IG = H(L) − H(L | F), natural logarithms
        def entropy(*cnt: int) -> float:
            total = sum(cnt)
            return -sum(c / total * math.log(c / total) for c in cnt if c > 0) if total else 0.0
        h_l = entropy(a1 + b1, a0 + b0)
        h_l_given_f = ((a0 + a1) / n * entropy(a1, a0) + (b0 + b1) / n * entropy(b1, b0))
        out["ig"].append(h_l - h_l_given_f)
        # Cor = Σ |o − e| over the explicit 2 × 2 table
        o = [[b0, a0], [b1, a1]]
        cor = 0.0
        for lab in range(2):
            for v in range(2):
                e = (o[lab][0] + o[lab][1]) * (o[0][v] + o[1][v]) / n
                cor += abs(o[lab][v] - e)
        out["chi2"].append(cor)
    return {k: np.array(v, dtype=float) for k, v in out.items()}


def test_vectorised_scores_match_reference() -> None:
    rng = np.random.default_rng(11)
    for trial in range(80):
        n = 1 + trial % 25
        m = 1 + trial % 6
        x = (rng.random((n, m)) < rng.random()).astype(np.int64)
        y = (rng.random(n) < rng.random()).astype(np.int64)
        a, n1, _ = counts(x, y)
        ref = reference_scores(x, y)
        for score in SCORES:
            got = fs.binary_scores(score, a, n1, n)
            np.testing.assert_allclose(got, ref[score], rtol=1e-12, atol=1e-12,
                                       err_msg=f"{score}, trial {trial}")
        # chi2 of the binary path equals chi2_score of the explicit (classes × levels) table
        for j in range(m):
            table = np.array([[n - n1 - a[j, 0], a[j, 0]], [n1 - a[j, 1], a[j, 1]]])
            assert fs.binary_scores("chi2", a[j:j + 1], n1, n)[0] == pytest.approx(
                fs.chi2_score(table, 1), abs=1e-12)


def test_ig_extremes() -> None:
    # F determines L, classes balanced: IG = H(L) = ln 2; F independent of L: IG = 0
    a, n1, n = one_feature([1, 1, 0, 0], [1, 1, 0, 0])
    assert fs.binary_scores("ig", a, n1, n)[0] == pytest.approx(math.log(2))
    a, n1, n = one_feature([1, 0, 1, 0], [1, 1, 0, 0])
    assert fs.binary_scores("ig", a, n1, n)[0] == pytest.approx(0.0, abs=1e-15)
    assert fs.binary_scores("ig", a, n1, n)[0] >= 0.0


# ----------------------------------------------------- ig_sensitivity brute force
@pytest.mark.parametrize("n", range(2, 10))
def test_ig_sensitivity_bounds_brute_force(n: int) -> None:
    """Every one-feature dataset of n rows (4 cells (F, L)) and every replacement."""
    def ig(c: tuple[int, ...]) -> float:
        # cells: (F0, L0), (F0, L1), (F1, L0), (F1, L1)
        return float(fs.binary_scores("ig", np.array([[c[2], c[3]]]), c[1] + c[3], n)[0])

    largest = 0.0
    for comp in compositions(n, 4):
        base = ig(comp)
        for src in range(4):
            if comp[src] == 0:
                continue
            for dst in range(4):
                moved = list(comp)
                moved[src] -= 1
                moved[dst] += 1
                largest = max(largest, abs(ig(tuple(moved)) - base))
    cn = n * math.log(n) - (n - 1) * math.log(n - 1)
    assert largest <= fs.ig_sensitivity(n)
    assert largest <= cn / n + TOL        # the module doc's observation: c_N / N
    assert largest >= cn / n - TOL        # ... which is reached: the bound is 3× loose, not vacuous
    assert fs.ig_sensitivity(n) == pytest.approx(3 * cn / n)
