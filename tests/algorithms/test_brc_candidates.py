"""A selecting round's candidates, drawn in bulk and scored in blocks (brc_candidates):
exactly what the candidate-at-a-time code drew and summed, bit for bit.

Reference implementations here are the code the module replaced: K calls of
``brc.random_hyperplane``, and per candidate ``np.add.at`` of the weights into the cells
2·positive + wrong in file order. No randomised claim is tested statistically: every
assertion is an exact equality on fixed seeds.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from dpcli.algorithms import brc, brc_candidates, inputs
from dpcli.algorithms.inputs import Inputs
from dpcli.mechanisms import make_rng

ROOT = Path(__file__).resolve().parents[2]


def _layout(rng: np.random.Generator, n: int, numeric: int, levels: tuple[int, ...]
            ) -> Inputs:
    codes = {f"c{j}": rng.integers(0, k, n).astype(np.intp) for j, k in enumerate(levels)}
    return Inputs(tuple(f"x{j}" for j in range(numeric)), rng.uniform(-1, 1, (n, numeric)),
                  codes, {f"c{j}": k for j, k in enumerate(levels)})


LAYOUTS = {
    "mixed": (3, (4, 2, 7, 30)),
    "numeric": (5, ()),
    "coded": (0, (3, 40, 2)),
    "one-numeric": (1, ()),          # |b| > |w| half the time: many constant draws
    "wide-coded": (0, (600, 3)),     # a column over the joint-table limit: its own group
}


# --------------------------------------------------------------- drawing


def _same(a: brc.Hyperplane, b: brc.Hyperplane) -> bool:
    return (a.intercept == b.intercept and np.array_equal(a.numeric, b.numeric)
            and a.levels.keys() == b.levels.keys()
            and all(np.array_equal(a.levels[c], b.levels[c]) for c in a.levels))


@pytest.mark.parametrize("name", list(LAYOUTS))
@pytest.mark.parametrize("k", [1, 2, 17])
def test_draw_pool_is_k_calls_of_random_hyperplane(name: str, k: int) -> None:
    """The same hyperplanes, and the generator left where K calls leave it."""
    numeric, levels = LAYOUTS[name]
    x = _layout(make_rng(0), 5, numeric, levels)
    for seed in range(5):
        ref_rng, rng = make_rng(seed), make_rng(seed)
        reference = [brc.random_hyperplane(x, ref_rng) for _ in range(k)]
        pool = brc_candidates.draw_pool(x, rng, k, brc.MAX_DRAWS)
        assert len(pool) == k
        assert all(_same(a, b) for a, b in zip(reference, pool.hyperplanes, strict=True))
        assert all(not h.constant() for h in pool.hyperplanes)
        assert ref_rng.uniform() == rng.uniform()
        # the parameter matrix holds each hyperplane's draw
        assert np.array_equal(pool.params[:, 0], [h.intercept for h in pool.hyperplanes])


def test_draw_pool_keeps_the_redraw_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """No private column: every hyperplane is constant; after the limit the last draw is
    kept, as random_hyperplane does."""
    monkeypatch.setattr(brc, "MAX_DRAWS", 4)
    x = _layout(make_rng(0), 5, 0, ())
    ref_rng, rng = make_rng(3), make_rng(3)
    reference = [brc.random_hyperplane(x, ref_rng) for _ in range(3)]
    pool = brc_candidates.draw_pool(x, rng, 3, 4)
    assert all(_same(a, b) for a, b in zip(reference, pool.hyperplanes, strict=True))
    assert ref_rng.uniform() == rng.uniform()


# --------------------------------------------------------------- scoring


def _reference_sums(pool: list[brc.Hyperplane], x: Inputs, y: np.ndarray, w: np.ndarray,
                    sums: np.ndarray) -> None:
    positive = (y > 0).astype(np.intp)
    for k, h in enumerate(pool):
        miss = (h.predict(x) != y).astype(np.intp)
        np.add.at(sums[k], 2 * positive + miss, w)


def _batches(rng: np.random.Generator, name: str, sizes: list[int]
             ) -> list[tuple[Inputs, np.ndarray, np.ndarray]]:
    numeric, levels = LAYOUTS[name]
    out = []
    for n in sizes:
        x = _layout(rng, n, numeric, levels)
        y = np.where(rng.random(n) < 0.3, 1, -1).astype(np.int8)
        # clipped boosting weights: arbitrary floats in [1/√2, √2], whose sums round
        w = np.exp(rng.uniform(-0.5, 0.5, n) * np.log(2))
        out.append((x, y, w))
    return out


@pytest.mark.parametrize("name", list(LAYOUTS))
@pytest.mark.parametrize("k", [2, 3, 40])
def test_cell_sums_are_add_at_in_file_order(name: str, k: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Several batches (one empty, one of one record), small blocks: bit-identical sums."""
    monkeypatch.setattr(brc_candidates, "BLOCK_CELLS", 50)
    rng = make_rng(11)
    batches = _batches(rng, name, [300, 0, 1, 257])
    pool = brc_candidates.draw_pool(batches[0][0], rng, k, brc.MAX_DRAWS)
    got, want = np.zeros((k, 4)), np.zeros((k, 4))
    for x, y, w in batches:
        brc_candidates.add_cell_sums(pool, x, brc_candidates.prepare_batch(x, y), w, got)
        _reference_sums(pool.hyperplanes, x, y, w, want)
        assert np.array_equal(got, want)
    assert got.sum() > 0


def test_a_split_pool_gives_the_same_sums() -> None:
    """Each candidate's sums are its own: halves of the pool (as threads would add them)
    give the whole pool's floats."""
    rng = make_rng(16)
    (x, y, w), = _batches(rng, "mixed", [500])
    pool = brc_candidates.draw_pool(x, rng, 9, brc.MAX_DRAWS)
    ready = brc_candidates.prepare_batch(x, y)
    whole = np.zeros((9, 4))
    brc_candidates.add_cell_sums(pool, x, ready, w, whole)
    halves = [np.zeros((4, 4)), np.zeros((5, 4))]
    brc_candidates.add_cell_sums(pool.part(slice(0, 4)), x, ready, w, halves[0])
    brc_candidates.add_cell_sums(pool.part(slice(4, 9)), x, ready, w, halves[1])
    assert np.array_equal(np.concatenate(halves), whole)
    assert all(_same(pool.part(slice(4, 9))[j], pool[4 + j]) for j in range(5))


def test_signs_in_doubt_come_from_the_reference_margin(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """A tolerance so wide that every sign is in doubt: all from Hyperplane.margin, still
    the same sums (and the fast margins far from 0 agree with it)."""
    monkeypatch.setattr(brc_candidates, "margin_tolerance",
                        lambda terms, scale: np.full(np.shape(scale), 1e9))
    rng = make_rng(12)
    (x, y, w), = _batches(rng, "mixed", [60])
    pool = brc_candidates.draw_pool(x, rng, 5, brc.MAX_DRAWS)
    got, want = np.zeros((5, 4)), np.zeros((5, 4))
    brc_candidates.add_cell_sums(pool, x, brc_candidates.prepare_batch(x, y), w, got)
    _reference_sums(pool.hyperplanes, x, y, w, want)
    assert np.array_equal(got, want)


def test_margins_on_the_hyperplane_take_the_reference_sign() -> None:
    """Records exactly on a candidate's hyperplane (margin 0, predicted positive) and just
    off it: the fast sum may round either way, the vote must not."""
    rng = make_rng(13)
    x = _layout(rng, 40, 2, (3,))
    pool = brc_candidates.draw_pool(x, rng, 4, brc.MAX_DRAWS)
    h = pool[0]
    # put record i on h: solve for x1 given x0 and the level
    for i in range(0, 40, 2):
        rest = h.intercept + h.numeric[0] * x.numeric[i, 0] + h.levels["c0"][x.codes["c0"][i]]
        x.numeric[i, 1] = -rest / h.numeric[1] + (i % 4 - 1) * 1e-17
    y = np.where(rng.random(40) < 0.5, 1, -1).astype(np.int8)
    w = np.exp(rng.uniform(-0.3, 0.3, 40))
    got, want = np.zeros((4, 4)), np.zeros((4, 4))
    brc_candidates.add_cell_sums(pool, x, brc_candidates.prepare_batch(x, y), w, got)
    _reference_sums(pool.hyperplanes, x, y, w, want)
    assert np.array_equal(got, want)


def test_inputs_not_finite_use_the_reference_for_every_sign() -> None:
    rng = make_rng(14)
    (x, y, w), = _batches(rng, "mixed", [50])
    x.numeric[3, 1] = np.nan
    pool = brc_candidates.draw_pool(x, rng, 3, brc.MAX_DRAWS)
    got, want = np.zeros((3, 4)), np.zeros((3, 4))
    brc_candidates.add_cell_sums(pool, x, brc_candidates.prepare_batch(x, y), w, got)
    _reference_sums(pool.hyperplanes, x, y, w, want)
    assert np.array_equal(got, want)


def test_an_undeclared_code_is_refused_as_the_reference_refuses_it() -> None:
    rng = make_rng(17)
    (x, y, _), = _batches(rng, "mixed", [20])
    x.codes["c1"][5] = 2          # c1 declares 2 levels: codes 0, 1
    pool = brc_candidates.draw_pool(x, rng, 3, brc.MAX_DRAWS)
    with pytest.raises(IndexError):
        pool[0].margin(x)
    with pytest.raises(IndexError, match="c1"):
        brc_candidates.prepare_batch(x, y)


def test_narrow_code_types_give_the_same_sums() -> None:
    """int8 codes (a joint code of two 40- and 7-level columns needs more than 8 bits)."""
    rng = make_rng(18)
    x = _layout(rng, 300, 1, (40, 7))
    y = np.where(rng.random(300) < 0.4, 1, -1).astype(np.int8)
    w = np.exp(rng.uniform(-0.3, 0.3, 300))
    narrow = Inputs(x.numeric_names, x.numeric,
                    {c: v.astype(np.int8) for c, v in x.codes.items()}, x.n_levels)
    pool = brc_candidates.draw_pool(x, rng, 4, brc.MAX_DRAWS)
    got, want = np.zeros((4, 4)), np.zeros((4, 4))
    brc_candidates.add_cell_sums(pool, narrow, brc_candidates.prepare_batch(narrow, y), w, got)
    _reference_sums(pool.hyperplanes, x, y, w, want)
    assert np.array_equal(got, want)


def test_one_candidate_is_refused() -> None:
    rng = make_rng(15)
    (x, y, w), = _batches(rng, "mixed", [10])
    pool = brc_candidates.draw_pool(x, rng, 1, brc.MAX_DRAWS)
    with pytest.raises(ValueError, match="at least 2"):
        brc_candidates.add_cell_sums(pool, x, brc_candidates.prepare_batch(x, y), w,
                                     np.zeros((1, 4)))


@pytest.mark.parametrize("k", [2, 3, 16, 139, 256])
def test_numpy_folds_rows_one_after_another(k: int) -> None:
    """What exactness rests on: ``np.add.reduce(a, axis=0)`` of a C-ordered (rows, k ≥ 2)
    array adds row after row (no pairwise summation), on values whose sum depends on the
    order. A numpy that changes this fails here, not silently in a model."""
    rng = np.random.default_rng(k)
    a = rng.standard_normal((3000, k)) * 10.0 ** rng.integers(-8, 9, (3000, k))
    want = a[0].copy()
    for row in a[1:]:
        want = want + row
    assert np.array_equal(np.add.reduce(a, axis=0), want)


def test_add_continues_running_totals_as_add_at() -> None:
    """brc._add (bincount with the totals first) against np.add.at, batch after batch."""
    rng = np.random.default_rng(5)
    got, want = np.zeros((6, 2)), np.zeros((6, 2))
    for n in (0, 1, 500, 77):
        index = rng.integers(0, 12, n)
        values = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 7, n)
        brc._add(got.reshape(-1), index, values)
        np.add.at(want.reshape(-1), index, values)
        assert np.array_equal(got, want)


# --------------------------------------------------------------- the whole fit


#: digests of the released rounds and noisy calibration counts of seeded fits on the
#: sample data, as main released them before the candidates were scored in blocks
#: (commit e92e49c, candidate at a time with np.add.at)
GOLDEN = {("private", 1.0, 7): "d42588db312bcf3c", ("partial", 1.0, 7): "5beeb5e5e637d722"}


def _sample(mode: str) -> brc.TrainingSet:
    from dpcli.data import DataSource
    from dpcli.spec import load_spec

    spec = load_spec(ROOT / "configs" / "adult.yaml")
    cols = tuple(c for c in spec.schema.names if inputs.usable(spec.schema.column(c)))
    public = tuple(spec.sections["train-brc"].public) if mode == "partial" else ()
    source = DataSource(ROOT / "sample_data" / "adult_train.parquet", spec.schema)
    return brc.training_set(source.batches(cols, rng=make_rng(0)), spec.schema, cols, public, 1)


@pytest.mark.parametrize("mode", ["private", "partial"])
def test_seeded_fit_releases_what_main_released(mode: str) -> None:
    data = _sample(mode)
    config = brc.auto_config(1.0, data.n, counted=mode == "private")
    assert config.candidates > 1
    rounds, calibration, _ = brc.fit(data, config, 1.0, make_rng(7))
    from tests.algorithms.test_brc import _released

    blob = json.dumps([_released(rounds), calibration.counts], default=float).encode()
    assert hashlib.sha256(blob).hexdigest()[:16] == GOLDEN[(mode, 1.0, 7)]
