"""Random generators for the mechanisms, and the parameter checks they share.

docs/design.md rule 6: randomness comes from a cryptographically secure generator
seeded from the OS by default; a seed exists only for reproducible tests and
benchmarks.

The checks below never put an input value into an error message (values
can be private); they name the parameter only.
"""

from __future__ import annotations

import math
import numbers
import secrets

import numpy as np
from randomgen import ChaCha

CHACHA_ROUNDS = 20  # the standard ChaCha20; fewer rounds trade security margin for speed


def make_rng(seed: int | None = None) -> np.random.Generator:
    """A numpy Generator over the ChaCha20 stream cipher (a CSPRNG) for the mechanisms.

    Why ChaCha20 (randomgen's ``ChaCha``, behind numpy's ``Generator``): noise
    must not be predictable from earlier outputs, which PCG64 does not
    promise. ChaCha20 is a vetted stream cipher (RFC 8439; the Linux kernel's
    generator), constant-time in software on every CPU, with no dependence
    on AES hardware; randomgen is maintained by numpy's random maintainer.
    Its cost per draw is measured in benchmarks/rng_speed.py.

    ``seed=None`` (the default) keys the cipher with 256 bits from the
    operating system's entropy source (``secrets.randbits``), directly (not
    through a SeedSequence, whose pool holds 128 bits).

    An integer ``seed >= 0`` gives a reproducible stream: the same cipher
    keyed by ``SeedSequence(seed)``. Seeded runs are for tests and benchmarks
    only: noise from a known seed protects nothing, so the caller must mark a
    seeded run as seeded in the audit log.
    """
    if seed is None:
        return np.random.Generator(ChaCha(key=secrets.randbits(256), counter=0,
                                          rounds=CHACHA_ROUNDS))
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError("seed must be an integer or None")
    if seed < 0:
        raise ValueError("seed must be non-negative")
    return np.random.Generator(ChaCha(np.random.SeedSequence(int(seed)), rounds=CHACHA_ROUNDS))


def check_rng(rng: object) -> np.random.Generator:
    """``rng`` itself if it is a numpy Generator, else TypeError."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng must be a numpy.random.Generator (see dpcli.mechanisms.make_rng)")
    return rng


def check_real(name: str, value: object) -> float:
    """``value`` as a finite float; TypeError if not a real number, ValueError if not finite."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number")
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"{name} must be finite")
    return result


def check_positive(name: str, value: object) -> float:
    """``value`` as a finite float > 0."""
    result = check_real(name, value)
    if result <= 0:
        raise ValueError(f"{name} must be positive")
    return result


def check_int(name: str, value: object, minimum: int | None = None) -> int:
    """``value`` as an int (booleans and floats are rejected), at least ``minimum``."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer")
    result = int(value)
    if minimum is not None and result < minimum:
        raise ValueError(f"{name} must be at least {minimum}")
    return result


def check_real_array(name: str, value: object) -> np.ndarray:
    """``value`` as a float64 array; TypeError unless numeric (booleans rejected).

    Finiteness is left to the caller (some mechanisms accept -inf).
    """
    if isinstance(value, str | bytes):
        raise TypeError(f"{name} must be numeric")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged nested sequences
        raise TypeError(f"{name} must be numeric") from exc
    if array.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be numeric")
    return array.astype(np.float64, copy=False)
