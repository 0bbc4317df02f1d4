"""A run's planned spend: its budget split among named mechanism steps.

Under basic (sequential) composition the ε's (and δ's) of the steps add up.
Splitting is exact (fractions), so the steps always add back to the total the
caller reserved in the ledger; the ledger entry reports the plan's steps.

Each step carries its sensitivity (computed once, where the plan is made) so
that the ``--dry-run`` table and the noise call read the same number.

Reading a step: :meth:`Plan.step` is a *look* (a scale, a threshold, a note:
free, any number of times); :meth:`Plan.draw` is the read that spends the step,
made once, where its noise is drawn. On a plain :class:`Plan` a draw is a look;
the charged run hands its algorithm a :class:`Spending` plan, which counts the
draws: a step not in the plan or drawn twice is an error, and the run refuses
to release unless every step was drawn (docs/design.md, "the life of a
spending run").
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from dpcli.budget import ZERO, Budget, exact


@dataclass(frozen=True)
class Step:
    """One mechanism invocation in a plan and the budget it may spend."""

    name: str  # e.g. "class_counts", "counts:workclass"
    mechanism: str  # e.g. "discrete_laplace", "exponential", "smooth_cauchy"
    budget: Budget
    note: str = ""  # e.g. "L1 sensitivity 2 (replace-one), scale 4"
    #: the sensitivity the step's noise is calibrated to, under replace-one: an L1 (or,
    #: for the exponential mechanism, the utility's) bound. None: not yet known (a plan
    #: under construction); a data-dependent calibration (smooth sensitivity, a utility
    #: scaled by released counts) records its public bound, and the note says how.
    sensitivity: float | None = None
    #: the step's ε is spent once per part of a partition of the rows (parallel
    #: composition: e.g. one noisy statistic per class on disjoint rows), so it may be
    #: drawn once per part; False: exactly one draw
    parallel: bool = False

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
        if self.sensitivity is not None and (
                isinstance(self.sensitivity, bool)
                or not isinstance(self.sensitivity, int | float | Fraction)
                or not math.isfinite(self.sensitivity) or self.sensitivity <= 0):
            raise ValueError(f"step {self.name!r}: sensitivity must be a positive finite "
                             "number")

    def noise_sensitivity(self) -> float:
        """The sensitivity to hand the step's noise call (a plan made without one is a
        defect: the noise would be calibrated to a number nobody planned)."""
        if self.sensitivity is None:
            raise PlanMisuse(f"step {self.name!r} was planned without a sensitivity")
        return float(self.sensitivity)

    def integer_sensitivity(self) -> int:
        """:meth:`noise_sensitivity` for a discrete mechanism (counts): a whole number."""
        value = self.noise_sensitivity()
        if value != int(value):
            raise PlanMisuse(f"step {self.name!r}: a discrete mechanism needs a whole-number "
                             f"sensitivity, the plan has {value:g}")
        return int(value)


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
        """A look at the named step (free, any number of times; never the noise's read)."""
        for step in self._steps:
            if step.name == name:
                return step
        raise KeyError(f"no step named {name!r} in the plan "
                       f"(steps: {', '.join(s.name for s in self._steps)})")

    def draw(self, name: str) -> Step:
        """The read that spends the named step: call it where the step's noise is drawn.

        On a plain plan (an algorithm called from Python or a test) it is a look;
        a charged run's :class:`Spending` plan counts it.
        """
        return self.step(name)

    def __iter__(self) -> Iterator[Step]:
        return iter(self._steps)

    def __len__(self) -> int:
        return len(self._steps)

    def __repr__(self) -> str:
        return f"Plan({list(self._steps)!r})"

    def with_notes(self, notes: Mapping[str, str]) -> Plan:
        """A copy of the plan with the notes of the named steps replaced."""
        return self.with_fields({name: {"note": note} for name, note in notes.items()})

    def with_sensitivities(self, sensitivities: Mapping[str, float]) -> Plan:
        """A copy of the plan with the sensitivities of the named steps set."""
        return self.with_fields({name: {"sensitivity": float(value)}
                                 for name, value in sensitivities.items()})

    def with_fields(self, fields: Mapping[str, Mapping[str, Any]]) -> Plan:
        """A copy of the plan with fields (note, sensitivity, parallel) of named steps set."""
        for name in fields:
            self.step(name)  # KeyError for an unknown step
        return Plan([replace(step, **fields[step.name]) if step.name in fields else step
                     for step in self._steps])

    def to_json(self) -> list[dict[str, str | float | None]]:
        """The steps for the ledger and the run report (``sensitivity`` null when unknown)."""
        return [{"step": step.name, "mechanism": step.mechanism,
                 "epsilon": step.budget.eps, "delta": step.budget.dlt,
                 "sensitivity": step.sensitivity, "note": step.note}
                for step in self._steps]


class PlanMisuse(RuntimeError):
    """A charged run read its plan wrongly: a step not in the plan, a step drawn twice, or
    a release with steps never drawn. A defect in dpcli, never the user's: an internal
    error (exit 1), raised after the charge, so the run is recorded as failed."""


class Spending(Plan):
    """A charged run's plan: the same steps, and a count of the draws.

    :meth:`draw` hands out each step once (a ``parallel`` step once per part,
    any number of times); :meth:`undrawn` lists the steps the run has not drawn,
    which the run's door refuses to release with.
    """

    def __init__(self, plan: Plan) -> None:
        super().__init__(list(plan))
        self._drawn: dict[str, int] = {}

    def draw(self, name: str) -> Step:
        try:
            step = self.step(name)
        except KeyError as exc:
            raise PlanMisuse(f"the run drew step {name!r}, which is not in its plan "
                             f"(steps: {', '.join(s.name for s in self)})") from exc
        if self._drawn.get(name) and not step.parallel:
            raise PlanMisuse(f"the run drew step {name!r} twice; its budget is handed out "
                             "once (declare the step parallel if each draw reads a disjoint "
                             "part of the rows)")
        self._drawn[name] = self._drawn.get(name, 0) + 1
        return step

    def drawn(self, name: str) -> int:
        """How many times the named step was drawn."""
        self.step(name)
        return self._drawn.get(name, 0)

    def undrawn(self) -> list[str]:
        """The planned steps not drawn yet, in plan order."""
        return [step.name for step in self if not self._drawn.get(step.name)]

    def check_spent(self) -> None:
        """Raise :class:`PlanMisuse` unless every planned step was drawn."""
        missing = self.undrawn()
        if missing:
            raise PlanMisuse(f"the run would release without drawing planned step"
                             f"{'s' if len(missing) > 1 else ''} {', '.join(missing)}: the "
                             "ledger would record a spend the release does not make; nothing "
                             "was written")


def _weight(name: str, weight: object) -> Fraction:
    if isinstance(weight, bool) or not isinstance(weight, int | float | Fraction):
        raise TypeError(f"weight of step {name!r} must be a number")
    if isinstance(weight, float) and not math.isfinite(weight):
        raise ValueError(f"weight of step {name!r} must be finite")
    result = exact(weight)
    if result <= 0:
        raise ValueError(f"weight of step {name!r} must be positive")
    return result
