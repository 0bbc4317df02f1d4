"""make_rng and the shared parameter checks."""

from __future__ import annotations

import numpy as np
import pytest

from dpcli.mechanisms import make_rng


def test_seeded_generators_are_reproducible() -> None:
    first = make_rng(12345).integers(0, 2**63, size=8)
    second = make_rng(12345).integers(0, 2**63, size=8)
    np.testing.assert_array_equal(first, second)


def test_different_seeds_differ() -> None:
    # Two 8-draw streams of 63-bit integers coincide with probability 2^-504.
    assert not np.array_equal(make_rng(1).integers(0, 2**63, size=8),
                              make_rng(2).integers(0, 2**63, size=8))


def test_unseeded_generators_differ() -> None:
    # OS-seeded with 128 bits each: a false failure has probability about 2^-128.
    first = make_rng().integers(0, 2**63, size=8)
    second = make_rng(None).integers(0, 2**63, size=8)
    assert not np.array_equal(first, second)


def test_returns_a_numpy_generator() -> None:
    assert isinstance(make_rng(), np.random.Generator)
    assert isinstance(make_rng(np.int64(7)), np.random.Generator)


@pytest.mark.parametrize("seed", ["1", 1.0, True, [1]])
def test_seed_must_be_an_integer(seed: object) -> None:
    with pytest.raises(TypeError, match="seed"):
        make_rng(seed)  # type: ignore[arg-type]


def test_seed_must_be_non_negative() -> None:
    with pytest.raises(ValueError, match="seed"):
        make_rng(-1)
