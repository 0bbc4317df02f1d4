"""``dpcli plan`` as a function: the spec's whole workload against the budget, before any spend.

Read-only and free: it reads the spec, the ledger's totals and (for n) a
file's metadata or row count — never a value. For every spending command
whose section the spec holds it gives the ε, the plan's sub-steps, the
forecast at that ε (dpcli.forecast) and its verdict; for each target
``COMMAND.METRIC=VALUE`` the smallest ε whose forecast median error meets
it, and whether the workload then fits in what the ledger has left
(docs/forecast.md, "dpcli plan"). A workload that does not fit is
reported, never scaled down.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpcli.budget import Budget
from dpcli.errors import DpcliError, UsageError
from dpcli.spec import Spec


@dataclass(frozen=True)
class Target:
    """``COMMAND.METRIC=VALUE``: the median error of a release's metric must be ≤ VALUE."""

    command: str
    metric: str
    value: float

    @classmethod
    def parse(cls, text: str) -> Target:
        name, sep, value = text.partition("=")
        command, dot, metric = name.strip().rpartition(".")
        if not sep or not dot or not command or not metric:
            raise UsageError(f"--target {text!r}: write COMMAND.METRIC=VALUE, "
                             "e.g. roc.auc=0.005")
        try:
            number = float(value)
        except ValueError:
            raise UsageError(f"--target {text!r}: {value.strip()!r} is not a number") from None
        if not (math.isfinite(number) and number > 0):
            raise UsageError(f"--target {text!r}: the error target must be a positive number")
        return cls(command.strip(), metric.strip(), number)

    def __str__(self) -> str:
        return f"{self.command}.{self.metric}={self.value:g}"


@dataclass(frozen=True)
class Solved:
    """A target's answer: the ε it needs (rounded up to two significant digits), or None."""

    target: Target
    epsilon: float | None


@dataclass
class Item:
    """One command of the workload."""

    command: str
    epsilon: float                   # the spec's ε for it
    plan: Any | None                 # the plan's sub-steps at that ε (dpcli.mechanisms.Plan)
    forecast: Any | None             # dpcli.forecast.Forecast, or None (no forecast module)
    solved: list[Solved] = field(default_factory=list)
    n: int = 0                       # the records its forecast is for
    #: why the command cannot run as the spec stands (its own error, exit code): the other
    #: commands are still planned, and the plan exits with this code
    problem: tuple[str, int] | None = None

    @property
    def planned(self) -> float:
        """The ε the workload gives this command: the largest a target asks for, else the
        spec's (a target only ever raises or lowers this command's own ε)."""
        needs = [s.epsilon for s in self.solved if s.epsilon is not None]
        return max(needs) if needs else self.epsilon

    def to_json(self) -> dict[str, Any]:
        fc = self.forecast.to_json() if self.forecast is not None else None
        out: dict[str, Any] = {
            "command": self.command, "epsilon": self.epsilon, "n": self.n,
            "forecast": None if fc is None else fc["forecast"],
            "verdict": None if fc is None else fc["verdict"],
            "method": None if fc is None else fc["method"],
            "steps": [] if self.plan is None else self.plan.to_json()}
        if self.problem is not None:
            out["problem"] = self.problem[0]
        if self.solved:
            out["targets"] = [{"metric": s.target.metric, "value": s.target.value,
                               "epsilon": s.epsilon} for s in self.solved]
            out["planned_epsilon"] = self.planned
        return out


@dataclass
class Workload:
    """The spec's commands, their forecasts, and the total against the ledger."""

    dataset: str
    n: int
    n_source: str
    items: list[Item]
    remaining: Budget
    total_budget: Budget
    ledger: bool = True              # False: no ledger yet, the spec's budget is all there is
    ledger_path: str | None = None   # the ledger read for `remaining` (None: none yet)

    @property
    def spec_total(self) -> Fraction:
        return sum((Fraction(Decimal(repr(i.epsilon))) for i in self.items), Fraction(0))

    @property
    def planned_total(self) -> Fraction:
        return sum((Fraction(Decimal(repr(i.planned))) for i in self.items), Fraction(0))

    @property
    def unsolved(self) -> list[Solved]:
        return [s for i in self.items for s in i.solved if s.epsilon is None]

    @property
    def problem(self) -> tuple[str, int] | None:
        """The first command's reason it cannot run (and its exit code), if any."""
        return next((i.problem for i in self.items if i.problem is not None), None)

    @property
    def fits(self) -> bool:
        return not self.unsolved and self.planned_total <= self.remaining.epsilon

    def summary(self) -> dict[str, Any]:
        """The workload's total against the ledger, the same in every item of ``--json``: a
        script reads the total and whether it fits from any one object, without recomputing
        (the targets' ε in place of the spec's; ``fits`` is false when a target cannot be met
        at this n, ``unmet`` lists those)."""
        return {"planned_epsilon": float(self.planned_total),
                "spec_epsilon": float(self.spec_total),
                "remaining": float(self.remaining.epsilon),
                "fits": self.fits,
                "unmet": [str(s.target) for s in self.unsolved],
                "cannot_run": [i.command for i in self.items if i.problem is not None],
                "ledger": self.ledger_path if self.ledger else None}

    def to_json(self) -> list[dict[str, Any]]:
        """One object per command (the issue's shape), each with the same ``workload``."""
        total = self.summary()
        return [{**i.to_json(), "workload": dict(total)} for i in self.items]


def spending_commands(spec: Spec) -> list[str]:
    """The spec's sections that are spending commands, in the order of dpcli.forecast."""
    from dpcli.forecast import COMMANDS

    return [c for c in COMMANDS if c in spec.sections]


def record_count(data: Path) -> int:
    """n of a data file without reading a value: a Parquet footer's row count, or a CSV's
    record count (public under replace-one; the parser counts quoted line breaks right)."""
    from dpcli.data.layout import describe_columns
    from dpcli.errors import DataError

    layout, rows = describe_columns(Path(data))
    if rows is not None:
        return rows
    import pyarrow.csv as pcsv

    first = layout[0][0]
    options = pcsv.ConvertOptions(include_columns=[first],
                                  column_types={first: "string"})
    try:
        reader = pcsv.open_csv(data, convert_options=options)
        return sum(batch.num_rows for batch in reader)
    except Exception as exc:  # pyarrow raises several types for a malformed CSV
        raise DataError(f"{data}: cannot count its records ({exc})") from None


#: the commands that score a released model on a held-out test set: their n is the test set's
TEST_COMMANDS = ("roc", "evaluate")


def workload(spec: Spec, n: int, *, targets: Sequence[Target] = (),
             n_source: str = "--rows", test_n: int | None = None) -> Workload:
    """Every spending command of ``spec`` at its ε on ``n`` records, with forecasts and the
    ε each target needs; reads the ledger's totals (charges nothing). ``test_n``: the test
    set's record count for roc and evaluate (default ``n``)."""
    from dpcli.forecast import forecast, has_forecast
    from dpcli.run import open_ledger

    if n < 1 or (test_n is not None and test_n < 1):
        raise UsageError(f"--rows {n}: a workload needs at least one record")
    commands = spending_commands(spec)
    if not commands:
        raise UsageError(f"{spec.path}: the spec has no section of a spending command "
                         "(tabulate, train-nb, roc, …) to plan")
    for t in targets:
        if t.command not in commands:
            raise UsageError(f"--target {t}: {spec.path} has no {t.command!r} section "
                             f"(it has {', '.join(commands)})")
    items: list[Item] = []
    for command in commands:
        section = spec.sections[command]
        fc = plan = None
        rows = test_n if command in TEST_COMMANDS and test_n is not None else n
        problem = None
        if has_forecast(command):
            try:
                fc = forecast(command, spec, section, rows)
                plan = _plan(command, spec, section, rows)
            except DpcliError as exc:   # this command cannot run: said, the others planned
                problem, fc, plan = (f"{command}: {exc}", exc.exit_code), None, None
        item = Item(command, float(section.epsilon), plan, fc, n=rows, problem=problem)
        for t in (t for t in targets if t.command == command):
            if problem is not None:
                raise UsageError(f"--target {t}: it cannot run as the spec stands: "
                                 f"{problem[0]}")
            if fc is None:
                raise UsageError(f"--target {t}: {command} has no forecast to solve with")
            if t.metric not in fc.metrics:
                raise UsageError(f"--target {t}: {command} forecasts "
                                 f"{', '.join(fc.metrics)}, not {t.metric!r}")
            needed = fc.epsilon_for(t.metric, t.value)
            item.solved.append(Solved(t, None if needed is None else round_up(needed)))
        items.append(item)
    if not spec.ledger_path.exists():
        # nothing released yet: the whole lifetime budget remains (a plan is how one starts)
        return Workload(spec.dataset, n, n_source, items, spec.budget, spec.budget,
                        ledger=False)
    summary = open_ledger(spec).summary(runs=False)
    return Workload(spec.dataset, n, n_source, items, summary.remaining, summary.total,
                    ledger_path=str(spec.ledger_path))


def _plan(command: str, spec: Spec, section: Any, n: int) -> Any | None:
    from dpcli.forecast import module_for

    builder = getattr(module_for(command), "plan", None)
    return None if builder is None else builder(spec, section, n)


def round_up(epsilon: float) -> float:
    """``epsilon`` rounded up to two significant digits (a solved ε still meets its target)."""
    d = Decimal(repr(epsilon))
    exponent = d.adjusted() - 1
    step = Decimal(1).scaleb(exponent)
    return float((d / step).to_integral_value(rounding=ROUND_CEILING) * step)


def with_epsilons(spec_text: str, epsilons: dict[str, float]) -> str:
    """The spec's YAML text with each named section's ``epsilon:`` value replaced (comments
    and layout kept); a section without an ``epsilon:`` line gets one as its first key."""
    lines = spec_text.splitlines(keepends=True)
    for command, eps in epsilons.items():
        lines = _set_epsilon(lines, command, eps)
    return "".join(lines)


def _set_epsilon(lines: list[str], command: str, eps: float) -> list[str]:
    import re

    head = re.compile(rf"^{re.escape(command)}\s*:\s*(#.*)?$")
    start = next((i for i, line in enumerate(lines) if head.match(line.rstrip("\n"))), None)
    if start is None:
        raise UsageError(f"the spec has no top-level {command!r} section line to edit")
    value = f"{eps:g}"
    indent = "  "
    for i in range(start + 1, len(lines)):
        text = lines[i]
        if text.strip() == "" or text.lstrip().startswith("#"):
            continue
        if not text[0].isspace():   # the next top-level key: no epsilon line in the section
            break
        indent = text[:len(text) - len(text.lstrip())]
        m = re.match(r"^(\s+epsilon\s*:\s*)([^#\n]*?)(\s*(#.*)?)(\n?)$", text)
        if m and len(m.group(1)) - len(m.group(1).lstrip()) == len(indent):
            tail = m.group(3)
            if m.group(4):   # keep the comment's column where the spaces allow
                spaces = len(tail) - len(tail.lstrip())
                width = max(spaces + len(m.group(2)) - len(value), 1)
                tail = " " * width + tail.lstrip()
            lines[i] = f"{m.group(1)}{value}{tail}{m.group(5)}"
            return lines
    lines.insert(start + 1, f"{indent}epsilon: {value}\n")
    return lines
