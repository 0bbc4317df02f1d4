"""The spend door hands out each planned step's budget once and releases only when every
step was drawn (dpcli.api.spend.Charged.plan, dpcli.mechanisms.Spending): a run whose
algorithm skips a step, or draws one twice, is refused after the charge with nothing written,
the ledger recording the run as failed (the charge stays). Through the real CLI."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.conftest import Project, run_entries


def _refused(project: Project, r: Any, out: Any) -> None:
    assert r.exit_code == 70, r.stderr           # an internal error, not the user's
    assert not out.exists()                      # nothing written
    entries = run_entries(project.ledger)
    assert [e["kind"] for e in entries] == ["reserve", "failed"]   # charged, recorded failed
    assert "PlanMisuse" in json.dumps(entries[-1])
    assert "PlanMisuse" in r.stderr              # named on stderr (its text with -v)


def test_a_release_that_skips_a_planned_step_is_refused(project: Project, cli,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.algorithms import tabulate

    real = tabulate.release

    def skipping(stats, p, schema, columns, bins, rng):
        return real(stats, p, schema, list(columns)[:-1], bins, rng)   # the last table: none

    monkeypatch.setattr(tabulate, "release", skipping)
    out = project.root / "t.csv"
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", out)
    _refused(project, r, out)


def test_a_second_draw_of_a_step_is_refused(project: Project, cli,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.algorithms import tabulate

    real = tabulate.release

    def twice(stats, p, schema, columns, bins, rng):
        p.draw(tabulate.CLASS_STEP)   # a look made as a draw: the release's own draw is 2nd
        return real(stats, p, schema, columns, bins, rng)

    monkeypatch.setattr(tabulate, "release", twice)
    out = project.root / "t.csv"
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", out)
    _refused(project, r, out)


def test_an_unplanned_step_is_refused(project: Project, cli,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.algorithms import tabulate

    real = tabulate.release

    def unplanned(stats, p, schema, columns, bins, rng):
        p.draw("counts:nowhere")
        return real(stats, p, schema, columns, bins, rng)

    monkeypatch.setattr(tabulate, "release", unplanned)
    out = project.root / "t.csv"
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", out)
    _refused(project, r, out)


def test_a_trainer_that_skips_its_threshold_step_writes_no_model(
        project: Project, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.algorithms import naive_bayes

    monkeypatch.setattr(naive_bayes, "fit_threshold", lambda *a, **k: 0.0)
    out = project.root / "m.json"
    r = cli("train-nb", project.data, "--spec", project.spec, "--out", out, "--epsilon", 1.0)
    plan = project.reserves()[-1]["breakdown"]
    assert {"threshold", "threshold_check"} <= {s["step"] for s in plan}
    _refused(project, r, out)


def test_the_verbose_message_names_the_undrawn_step(project: Project, cli,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from dpcli.mechanisms import PlanMisuse, Spending

    seen: list[str] = []
    real = Spending.check_spent

    def spy(self: Spending) -> None:
        try:
            real(self)
        except PlanMisuse as exc:
            seen.append(str(exc))
            raise

    monkeypatch.setattr(Spending, "check_spent", spy)
    from dpcli.algorithms import tabulate

    real_release = tabulate.release
    monkeypatch.setattr(tabulate, "release", lambda s, p, sc, c, b, rng: real_release(
        s, p, sc, list(c)[:-1], b, rng))
    out = project.root / "t.csv"
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", out)
    assert r.exit_code == 70 and not out.exists()
    assert len(seen) == 1 and "without drawing planned step counts:" in seen[0]


def test_every_step_is_drawn_in_a_clean_run(project: Project, cli,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The check does not get in the way: a clean run completes, each step drawn once."""
    from dpcli.mechanisms import Spending

    counts: list[dict[str, int]] = []
    real = Spending.check_spent

    def spy(self: Spending) -> None:
        counts.append({s.name: self.drawn(s.name) for s in self})
        real(self)

    monkeypatch.setattr(Spending, "check_spent", spy)
    out = project.root / "t.csv"
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", out)
    assert r.exit_code == 0, r.stderr
    assert out.exists()
    assert counts and all(v == 1 for v in counts[0].values())
    assert set(counts[0]) == {s["step"] for s in project.reserves()[-1]["breakdown"]}


def test_dry_run_shows_and_records_each_steps_sensitivity(project: Project, cli,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan's sensitivity field, not the note's text: the -v table's Δ column and the
    --json breakdown's ``sensitivity`` (tabulate: Δ = 2 a table, 2·max_per_row for tokens)."""
    monkeypatch.setenv("COLUMNS", "200")
    cols = ("--columns", "color,words")
    r = cli("tabulate", project.data, "--spec", project.spec, *cols, "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    steps = {s["step"]: s["sensitivity"] for s in json.loads(r.stdout)["breakdown"]}
    assert steps["class_counts"] == 2 and steps["counts:color"] == 2
    assert steps["counts:words"] == 6          # 2 · max_per_row 3
    r = cli("tabulate", project.data, "--spec", project.spec, *cols, "--dry-run", "-v")
    assert r.exit_code == 0, r.stderr
    header = next(line for line in r.stderr.splitlines() if "mechanism" in line)
    assert " Δ " in header
    row = next(line for line in r.stderr.splitlines() if "counts:words" in line)
    cells = [c.strip() for c in row.replace("┃", "│").split("│")]
    assert "6" in cells
    assert project.no_runs()


def test_brc_and_validate_draw_every_step_where_their_epsilon_is_handed_over() -> None:
    """brc.fit and validate's search take an ε and split it by their own rule: the door
    draws each planned step there and refuses a plan whose steps are not that split."""
    from types import SimpleNamespace

    from dpcli.algorithms import brc
    from dpcli.api.train_brc import _draw as brc_draw
    from dpcli.api.validate import _draw as validate_draw
    from dpcli.budget import Budget
    from dpcli.mechanisms import Plan, PlanMisuse, Spending, Step

    config = brc.BRCConfig(rounds=12, counted=True)
    plan = Spending(brc.plan(Budget(0.16), config, 1000))
    brc_draw(plan, config, 0.16)
    assert plan.undrawn() == []
    with pytest.raises(PlanMisuse, match="twice"):
        brc_draw(plan, config, 0.16)
    with pytest.raises(PlanMisuse, match="brc would spend"):
        brc_draw(Spending(brc.plan(Budget(0.16), config, 1000)), config, 0.2)

    steps = Plan([Step("train", "objective_perturbation", Budget(0.75), sensitivity=2),
                  Step("threshold_prior", "discrete_laplace", Budget(0.25 / 8), sensitivity=1),
                  Step("threshold", "exponential", Budget(0.25 * 6 / 8), sensitivity=1),
                  Step("threshold_check", "discrete_laplace", Budget(0.25 / 8), sensitivity=1)])
    decision = SimpleNamespace(epsilon_model=0.75, epsilon_threshold=0.25)
    spending = Spending(steps)
    validate_draw(spending, decision)
    assert spending.undrawn() == []
    with pytest.raises(PlanMisuse, match="on the model"):
        validate_draw(Spending(steps), SimpleNamespace(epsilon_model=0.7,
                                                       epsilon_threshold=0.25))
