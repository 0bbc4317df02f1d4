"""A run's planned spend: its budget split among named mechanism steps.

Under basic (sequential) composition the ε's (and δ's) of the steps add up.
Splitting is exact (fractions), so the steps always add back to the total the
caller reserved in the ledger; the ledger entry reports the plan's steps.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from dpcli.budget import ZERO, Budget, exact


@dataclass(frozen=True)
class Step:
    """One mechanism invocation in a plan and the budget it may spend."""

    name: str  # e.g. "class_counts", "counts:workclass"
    mechanism: str  # e.g. "discrete_laplace", "exponential", "smooth_cauchy"
    budget: Budget
    note: str = ""  # e.g. "L1 sensitivity 2 (replace-one), scale 4"

    def __post_init__(self) -> None:
        for field in ("name", "mechanism"):
            value = getattr(self, field)
            if not isinstance(value, str):
                raise TypeError(f"step {field} must be a string")
            if not value.strip():
                raise ValueError(f"step {field} must be non-empty")
        if not isinstance(self.budget, Budget):
            raise TypeError(f"step {self.name!r}: budget must be a dpcli.budget.Budget")
        if self.budget.epsilon <= 0:
            raise ValueError(f"step {self.name!r}: epsilon must be positive")
        if not isinstance(self.note, str):
            raise TypeError(f"step {self.name!r}: note must be a string")


class Plan:
    """The planned spend of one run: named steps under basic (sequential) composition."""

    def __init__(self, steps: Sequence[Step]) -> None:
        steps = tuple(steps)
        if not steps:
            raise ValueError("a plan needs at least one step")
        seen: set[str] = set()
        for step in steps:
            if not isinstance(step, Step):
                raise TypeError("plan steps must be Step objects")
            if step.name in seen:
                raise ValueError(f"duplicate step name {step.name!r} in the plan")
            seen.add(step.name)
        self._steps = steps

    @classmethod
    def split(cls, total: Budget, shares: Mapping[str, tuple[str, Fraction | int]]) -> Plan:
        """Split ``total`` among steps: name -> (mechanism, weight > 0).

        Step budgets are total · weight / Σ weights, in exact fractions, so
        they add back to ``total`` exactly (ε and δ alike). Float weights are
        read as the decimal they print as (0.1 is 1/10).
        """
        if not isinstance(total, Budget):
            raise TypeError("total must be a dpcli.budget.Budget")
        if total.epsilon <= 0:
            raise ValueError("total epsilon must be positive")
        if not isinstance(shares, Mapping):
            raise TypeError("shares must be a mapping of step name to (mechanism, weight)")
        if not shares:
            raise ValueError("a plan needs at least one step")
        parsed: list[tuple[str, str, Fraction]] = []
        for name, share in shares.items():
            if not isinstance(share, tuple) or len(share) != 2:
                raise TypeError(f"share of step {name!r} must be a (mechanism, weight) pair")
            mechanism, weight = share
            parsed.append((name, mechanism, _weight(name, weight)))
        whole = sum((weight for _, _, weight in parsed), Fraction(0))
        return cls([Step(name, mechanism, total.scaled(weight / whole))
                    for name, mechanism, weight in parsed])

    @property
    def total(self) -> Budget:
        """The exact sum of the step budgets."""
        result = ZERO
        for step in self._steps:
            result = result + step.budget
        return result

    def step(self, name: str) -> Step:
        for step in self._steps:
            if step.name == name:
                return step
        raise KeyError(f"no step named {name!r} in the plan "
                       f"(steps: {', '.join(s.name for s in self._steps)})")

    def __iter__(self) -> Iterator[Step]:
        return iter(self._steps)

    def __len__(self) -> int:
        return len(self._steps)

    def __repr__(self) -> str:
        return f"Plan({list(self._steps)!r})"

    def with_notes(self, notes: Mapping[str, str]) -> Plan:
        """A copy of the plan with the notes of the named steps replaced."""
        for name in notes:
            self.step(name)  # KeyError for an unknown step
        return Plan([replace(step, note=notes[step.name]) if step.name in notes else step
                     for step in self._steps])

    def to_json(self) -> list[dict[str, str | float]]:
        """The steps for the ledger and the run report."""
        return [{"step": step.name, "mechanism": step.mechanism,
                 "epsilon": step.budget.eps, "delta": step.budget.dlt, "note": step.note}
                for step in self._steps]


def _weight(name: str, weight: object) -> Fraction:
    if isinstance(weight, bool) or not isinstance(weight, int | float | Fraction):
        raise TypeError(f"weight of step {name!r} must be a number")
    if isinstance(weight, float) and not math.isfinite(weight):
        raise ValueError(f"weight of step {name!r} must be finite")
    result = exact(weight)
    if result <= 0:
        raise ValueError(f"weight of step {name!r} must be positive")
    return result
