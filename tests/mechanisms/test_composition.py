"""Plan and Step: exact splits, validation, lookup, notes, JSON."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dpcli.budget import Budget
from dpcli.mechanisms import Plan, PlanMisuse, Spending, Step


def test_split_one_into_1_2_1_is_exact() -> None:
    plan = Plan.split(Budget(1.0), {"a": ("laplace", 1), "b": ("exponential", 2),
                                    "c": ("smooth_cauchy", 1)})
    assert [s.budget for s in plan] == [Budget(Fraction(1, 4)), Budget(Fraction(1, 2)),
                                        Budget(Fraction(1, 4))]
    assert plan.total == Budget(1)


def test_split_point_three_three_ways_adds_back_exactly() -> None:
    plan = Plan.split(Budget(0.3), {"x": ("laplace", 1), "y": ("laplace", 1),
                                    "z": ("laplace", 1)})
    assert all(step.budget == Budget(Fraction(1, 10)) for step in plan)
    assert plan.total == Budget(0.3)
    assert plan.total.epsilon == Fraction(3, 10)


def test_split_with_delta_and_fraction_and_float_weights() -> None:
    total = Budget(0.7, 1e-6)
    plan = Plan.split(total, {"a": ("gauss", Fraction(1, 3)), "b": ("laplace", 0.1),
                              "c": ("laplace", 7)})
    assert plan.total == total  # exact in ε and δ
    weights = [Fraction(1, 3), Fraction(1, 10), Fraction(7)]
    for step, weight in zip(plan, weights, strict=True):
        assert step.budget == total.scaled(weight / sum(weights))


def test_split_keeps_order_and_mechanisms() -> None:
    plan = Plan.split(Budget(2), {"counts:b": ("discrete_laplace", 1),
                                  "counts:a": ("discrete_laplace", 1)})
    assert [s.name for s in plan] == ["counts:b", "counts:a"]
    assert plan.step("counts:a").mechanism == "discrete_laplace"
    assert len(plan) == 2


@pytest.mark.parametrize(("shares", "error"), [
    ({}, ValueError),
    ({"a": ("laplace", 0)}, ValueError),
    ({"a": ("laplace", -1)}, ValueError),
    ({"a": ("laplace", float("inf"))}, ValueError),
    ({"a": ("laplace", float("nan"))}, ValueError),
    ({"a": ("laplace", True)}, TypeError),
    ({"a": ("laplace", "1")}, TypeError),
    ({"a": "laplace"}, TypeError),
    ({"a": ("laplace", 1, 2)}, TypeError),
    ({"a": ("", 1)}, ValueError),
    ({"": ("laplace", 1)}, ValueError),
    ({"a": (3, 1)}, TypeError),
])
def test_split_rejects_bad_shares(shares: dict, error: type[Exception]) -> None:
    with pytest.raises(error):
        Plan.split(Budget(1), shares)


def test_split_rejects_bad_total() -> None:
    with pytest.raises(TypeError):
        Plan.split(1.0, {"a": ("laplace", 1)})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="epsilon"):
        Plan.split(Budget(0), {"a": ("laplace", 1)})


def test_duplicate_step_names_rejected() -> None:
    step = Step("counts", "discrete_laplace", Budget(0.5))
    with pytest.raises(ValueError, match="duplicate step name 'counts'"):
        Plan([step, Step("counts", "laplace", Budget(0.1))])


def test_plan_needs_steps_of_type_step() -> None:
    with pytest.raises(ValueError):
        Plan([])
    with pytest.raises(TypeError):
        Plan([("a", "laplace", Budget(1))])  # type: ignore[list-item]


@pytest.mark.parametrize(("args", "error"), [
    (("a", "laplace", 0.5), TypeError),
    (("a", "laplace", Budget(0)), ValueError),
    ((1, "laplace", Budget(1)), TypeError),
    (("a", "  ", Budget(1)), ValueError),
    (("a", "laplace", Budget(1), None), TypeError),
])
def test_step_validation(args: tuple, error: type[Exception]) -> None:
    with pytest.raises(error):
        Step(*args)


def test_step_lookup_names_the_missing_step() -> None:
    plan = Plan([Step("a", "laplace", Budget(1))])
    with pytest.raises(KeyError, match="'nope'"):
        plan.step("nope")


def test_with_notes_returns_a_new_plan() -> None:
    plan = Plan.split(Budget(1), {"a": ("laplace", 1), "b": ("exponential", 1)})
    noted = plan.with_notes({"a": "L1 sensitivity 2 (replace-one), scale 4"})
    assert noted.step("a").note == "L1 sensitivity 2 (replace-one), scale 4"
    assert noted.step("b").note == ""
    assert plan.step("a").note == ""  # the original is unchanged
    assert noted.total == plan.total
    with pytest.raises(KeyError, match="'c'"):
        plan.with_notes({"c": "x"})


def test_to_json() -> None:
    plan = Plan.split(Budget(1, 1e-6), {"a": ("laplace", 3), "b": ("exponential", 1)})
    plan = plan.with_notes({"b": "Δ = 1"}).with_sensitivities({"b": 1})
    assert plan.to_json() == [
        {"step": "a", "mechanism": "laplace", "epsilon": 0.75, "delta": 7.5e-7,
         "sensitivity": None, "note": ""},
        {"step": "b", "mechanism": "exponential", "epsilon": 0.25, "delta": 2.5e-7,
         "sensitivity": 1.0, "note": "Δ = 1"},
    ]


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), True, "2"])
def test_a_sensitivity_is_a_positive_finite_number(bad: object) -> None:
    with pytest.raises(ValueError, match="sensitivity"):
        Step("a", "laplace", Budget(1), sensitivity=bad)  # type: ignore[arg-type]


def test_with_sensitivities_keeps_budgets_and_notes_and_refuses_unknown_steps() -> None:
    plan = Plan.split(Budget(1), {"a": ("laplace", 1), "b": ("exponential", 1)})
    plan = plan.with_notes({"a": "Δ=2"}).with_sensitivities({"a": 2})
    assert plan.step("a").sensitivity == 2.0 and plan.step("a").note == "Δ=2"
    assert plan.step("b").sensitivity is None and plan.total == Budget(1)
    with pytest.raises(KeyError, match="'c'"):
        plan.with_sensitivities({"c": 1})


def test_noise_sensitivity_refuses_an_unplanned_or_fractional_one() -> None:
    step = Step("a", "discrete_laplace", Budget(1))
    with pytest.raises(PlanMisuse, match="without a sensitivity"):
        step.noise_sensitivity()
    assert Step("a", "laplace", Budget(1), sensitivity=2.5).noise_sensitivity() == 2.5
    assert Step("a", "discrete_laplace", Budget(1), sensitivity=2).integer_sensitivity() == 2
    with pytest.raises(PlanMisuse, match="whole-number"):
        Step("a", "discrete_laplace", Budget(1), sensitivity=2.5).integer_sensitivity()


def _spending() -> Spending:
    plan = Plan.split(Budget(1), {"a": ("laplace", 1), "b": ("exponential", 1)})
    return Spending(plan.with_fields({"b": {"parallel": True}}))


def test_a_plain_plan_draw_is_a_look() -> None:
    plan = Plan.split(Budget(1), {"a": ("laplace", 1)})
    assert plan.draw("a") is plan.draw("a") is plan.step("a")


def test_spending_hands_out_each_step_once() -> None:
    spend = _spending()
    assert spend.undrawn() == ["a", "b"]
    assert spend.step("a") == spend.step("a")        # looks are free
    assert spend.draw("a").budget == Budget(Fraction(1, 2))
    with pytest.raises(PlanMisuse, match="'a' twice"):
        spend.draw("a")
    with pytest.raises(PlanMisuse, match="not in its plan"):
        spend.draw("c")
    with pytest.raises(PlanMisuse, match="without drawing planned step b"):
        spend.check_spent()
    spend.draw("b")
    spend.draw("b")                                   # a parallel step: once per part
    assert spend.drawn("b") == 2 and spend.undrawn() == []
    spend.check_spent()
    assert spend.total == Budget(1) and spend.to_json() == _spending().to_json()


def test_steps_are_immutable() -> None:
    step = Step("a", "laplace", Budget(1))
    with pytest.raises(AttributeError):
        step.name = "b"  # type: ignore[misc]
