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
    # OS-keyed with 256 bits each: a false failure has probability about 2^-256.
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


def test_the_bit_generator_is_chacha20() -> None:
    """Noise comes from a CSPRNG (ChaCha20), seeded or not."""
    from randomgen import ChaCha

    for rng in (make_rng(), make_rng(3), make_rng(2**255 + 1)):
        assert isinstance(rng.bit_generator, ChaCha)
        assert rng.bit_generator.state["state"]["rounds"] == 20


def test_seeded_stream_is_chacha_keyed_by_the_seed_sequence() -> None:
    from randomgen import ChaCha

    expected = np.random.Generator(ChaCha(np.random.SeedSequence(99), rounds=20)).random(4)
    np.testing.assert_array_equal(make_rng(99).random(4), expected)
