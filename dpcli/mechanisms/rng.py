"""Random generators for the mechanisms, and the parameter checks they share.

DESIGN.md rule 6: randomness comes from an OS-seeded generator by default; a
seed exists only for reproducible tests and benchmarks.

The checks below never put an input value into an error message (values
can be private); they name the parameter only.
"""

from __future__ import annotations

import math
import numbers
import secrets

import numpy as np


def make_rng(seed: int | None = None) -> np.random.Generator:
    """A numpy Generator (PCG64) for the mechanisms.

    ``seed=None`` (the default) seeds the generator with 128 bits from the
    operating system's entropy source (``secrets.randbits``), so two unseeded
    generators never repeat each other in practice.

    An integer ``seed >= 0`` gives a reproducible stream. Seeded runs are for
    tests and benchmarks only: noise from a known seed protects nothing, so
    the caller must mark a seeded run as seeded in the audit log.
    """
    if seed is None:
        return np.random.default_rng(np.random.SeedSequence(secrets.randbits(128)))
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError("seed must be an integer or None")
    if seed < 0:
        raise ValueError("seed must be non-negative")
    return np.random.default_rng(int(seed))


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
