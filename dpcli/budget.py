"""Privacy budgets as immutable values with exact arithmetic.

Floats from YAML or the command line are turned into exact fractions via
their shortest decimal representation, so that 0.1 + 0.2 == 0.3 and three
spends of 0.3 fit a total of 0.9 exactly. Composition is basic (sequential):
ε and δ add.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction


def exact(value: float | int | str | Fraction) -> Fraction:
    """The exact fraction a user meant by ``value`` (0.1 means 1/10, not the binary float)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool):
        raise TypeError("a budget amount must be a number, not a boolean")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(Decimal(repr(value)))
    if isinstance(value, str):
        return Fraction(Decimal(value))
    raise TypeError(f"a budget amount must be a number, not {type(value).__name__}")


@dataclass(frozen=True, order=False)
class Budget:
    """An (ε, δ) privacy budget. ``Budget(1)`` is pure ε-DP with ε = 1."""

    epsilon: Fraction
    delta: Fraction = Fraction(0)

    def __init__(self, epsilon: float | int | str | Fraction,
                 delta: float | int | str | Fraction = 0) -> None:
        eps, dlt = exact(epsilon), exact(delta)
        if eps < 0:
            raise ValueError("epsilon must be non-negative")
        if not 0 <= dlt < 1:
            raise ValueError("delta must be in [0, 1)")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", dlt)

    def __add__(self, other: Budget) -> Budget:
        return Budget(self.epsilon + other.epsilon, self.delta + other.delta)

    def __sub__(self, other: Budget) -> Budget:
        return Budget(max(self.epsilon - other.epsilon, Fraction(0)),
                      max(self.delta - other.delta, Fraction(0)))

    def fits_in(self, other: Budget) -> bool:
        """True when spending ``self`` does not exceed ``other`` in ε nor in δ."""
        return self.epsilon <= other.epsilon and self.delta <= other.delta

    def scaled(self, factor: Fraction | int) -> Budget:
        return Budget(self.epsilon * factor, self.delta * factor)

    @property
    def eps(self) -> float:
        """ε as a float, for noise scales."""
        return float(self.epsilon)

    @property
    def dlt(self) -> float:
        """δ as a float."""
        return float(self.delta)

    def to_json(self) -> dict[str, float]:
        return {"epsilon": float(self.epsilon), "delta": float(self.delta)}

    def __str__(self) -> str:
        text = f"ε={format_amount(self.epsilon)}"
        if self.delta:
            text += f", δ={format_amount(self.delta)}"
        return text


ZERO = Budget(0, 0)


def format_amount(value: Fraction | float) -> str:
    """Short human form of a budget amount (at most 6 significant digits)."""
    return f"{float(value):.6g}"
