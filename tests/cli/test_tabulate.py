"""End-to-end: tabulate through the real entry point, its outputs and its ledger entries."""

from __future__ import annotations

import json
import os

import pandas as pd

from dpcli.ledger import read_entries as read_all
from tests.cli.conftest import Project
from tests.cli.conftest import run_entries as read_entries  # runs only, no genesis


def _run(cli, project: Project, *extra: object, data=None, out="counts.csv"):
    return cli("tabulate", data or project.data, "--spec", project.spec,
               "--out", project.root / out, *extra)


def test_release_writes_table_record_and_ledger(project: Project, cli) -> None:
    r = _run(cli, project, "--seed", 7, "--json")
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["spent"] == {"epsilon": 0.3, "delta": 0.0}

    table = pd.read_csv(project.root / "counts.csv")
    assert set(table["table"]) == {"label", "color", "member", "age"}
    assert (table["count"] >= 0).all()
    # categorical levels include the explicit 'other' bucket; numeric bins use the declared range
    assert set(table.loc[table["table"] == "color", "level"]) == {"red", "green", "blue", "other"}
    assert "[17, 35.25)" in set(table.loc[table["table"] == "age", "level"])
    # noisy class counts stay near the truth: scale 2/0.075 ≈ 27, |noise| < 400 w.p. > 1 - 1e-6
    truth = pd.read_parquet(project.data)["label"].value_counts()
    labels = table[table["table"] == "label"].set_index("class")["count"]
    assert abs(labels[1] - truth[1]) < 400

    record = json.loads((project.root / "counts.json").read_text())
    assert record["format"] == "dpcli" and record["kind"] == "tabulate"
    assert record["epsilon"] == 0.3 and record["seeded"] is True
    assert record["ledger_run_id"] == summary["run_id"]

    entries = read_entries(project.ledger)
    assert [e["kind"] for e in entries] == ["reserve", "complete"]
    reserve = entries[0]
    assert reserve["neighbouring"] == "replace-one"
    assert reserve["seeded"] is True
    assert sum(step["epsilon"] for step in reserve["breakdown"]) == 0.3
    assert {s["step"] for s in reserve["breakdown"]} == {
        "class_counts", "counts:color", "counts:member", "counts:age"}
    outputs = {o["path"] for o in entries[1]["outputs"]}
    assert any(p.endswith("counts.csv") for p in outputs)


def test_seed_reproduces_on_the_same_file_only(project: Project, cli) -> None:
    """The same seed on the same file reproduces the release; on another file (the same
    records as CSV: other bytes, other fingerprint) it draws independent noise."""
    assert _run(cli, project, "--seed", 3, out="a.csv").exit_code == 0
    assert _run(cli, project, "--seed", 3, out="a2.csv").exit_code == 0
    assert _run(cli, project, "--seed", 3, out="b.csv", data=project.csv).exit_code == 0
    a, a2, b = (pd.read_csv(project.root / f) for f in ("a.csv", "a2.csv", "b.csv"))
    pd.testing.assert_frame_equal(a, a2)
    # 32 noisy counts at scale ~27 on the same true counts: identical w.p. < 1e-30
    assert not a["count"].equals(b["count"])


def test_unseeded_runs_differ_and_are_marked(project: Project, cli) -> None:
    assert _run(cli, project, out="a.csv").exit_code == 0
    assert _run(cli, project, out="b.csv").exit_code == 0
    a = pd.read_csv(project.root / "a.csv")["count"]
    b = pd.read_csv(project.root / "b.csv")["count"]
    assert not a.equals(b)  # 2 * 32 noisy counts at scale ~27: identical w.p. < 1e-30
    reserves = [e for e in read_entries(project.ledger) if e["kind"] == "reserve"]
    assert [e["seeded"] for e in reserves] == [False, False]


def test_budget_exhaustion_exits_3_with_remaining(project: Project, cli) -> None:
    for i in range(3):
        assert _run(cli, project, out=f"r{i}.csv").exit_code == 0
    r = _run(cli, project, out="r3.csv")
    assert r.exit_code == 3
    assert "remains" in r.stderr and "0.1" in r.stderr
    assert not (project.root / "r3.csv").exists()
    assert len(read_entries(project.ledger)) == 6


def test_dry_run_charges_nothing(project: Project, cli) -> None:
    r = _run(cli, project, "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["dry_run"] is True and plan["fits"] is True
    assert plan["planned"]["epsilon"] == 0.3
    assert project.no_runs()  # nothing charged
    assert not (project.root / "counts.csv").exists()
    r = _run(cli, project, "--dry-run", "--epsilon", "5")
    assert r.exit_code == 3
    assert "does NOT fit" in r.stderr


def test_tokens_column(project: Project, cli) -> None:
    r = _run(cli, project, "--columns", "words", "--seed", 1)
    assert r.exit_code == 0, r.stderr
    table = pd.read_csv(project.root / "counts.csv")
    assert set(table.loc[table["table"] == "words", "level"]) == {
        "alpha", "beta", "gamma", "delta", "omega"}
    breakdown = read_entries(project.ledger)[0]["breakdown"]
    note = next(s["note"] for s in breakdown if s["step"] == "counts:words")
    assert note.startswith("Δ=6,")  # 2 * max_per_row (3)


def test_quiet_prints_nothing_on_success(project: Project, cli) -> None:
    r = _run(cli, project, "--quiet")
    assert r.exit_code == 0
    assert r.stderr == "" and r.stdout == ""


def test_ledger_show_and_verify(project: Project, cli) -> None:
    assert _run(cli, project, "--seed", 1).exit_code == 0
    r = cli("ledger", "show", "--spec", project.spec, "--json")
    assert r.exit_code == 0, r.stderr
    shown = json.loads(r.stdout)
    assert shown["spent"]["epsilon"] == 0.3
    assert shown["remaining"]["epsilon"] == 0.7
    assert [run["status"] for run in shown["runs"]] == ["complete"]
    r = cli("ledger", "show", "--spec", project.spec)
    assert r.exit_code == 0 and "tabulate" in r.stdout and "remaining ε=0.7" in r.stdout
    assert "tabulate" not in r.stderr                   # the report itself goes to stdout

    r = cli("ledger", "verify", "--spec", project.spec)
    assert r.exit_code == 0 and "hash chain intact" in r.stderr

    text = project.ledger.read_text()
    project.ledger.write_text(text.replace('"epsilon":0.3', '"epsilon":0.1', 1))
    r = cli("ledger", "verify", "--spec", project.spec)
    assert r.exit_code == 76
    assert "verification failed" in r.stderr
    # and no further charge is accepted against a tampered log
    r = _run(cli, project, out="after.csv")
    assert r.exit_code == 76
    assert not (project.root / "after.csv").exists()


def test_lifetime_budget_cannot_be_raised_in_the_spec(project: Project, cli) -> None:
    assert _run(cli, project).exit_code == 0

    def bigger(spec: dict) -> None:
        spec["budget"]["epsilon"] = 100.0
    project.write_spec(bigger, sync=False)
    r = _run(cli, project, out="more.csv")
    assert r.exit_code == 76
    assert "toy" in r.stderr and "dpcli ledger raise" in r.stderr
    r = cli("ledger", "raise", "--spec", project.spec, "--epsilon", 100)
    assert r.exit_code == 0, r.stderr
    assert "raised from ε=1 to ε=100" in r.stderr  # the old total, not the new one twice
    assert _run(cli, project, out="more.csv").exit_code == 0
    assert [e["kind"] for e in read_all(project.ledger)] == [
        "genesis", "reserve", "complete", "raise", "reserve", "complete"]
    r = cli("ledger", "raise", "--spec", project.spec, "--epsilon", 50)
    assert r.exit_code == 76 and "would lower it" in r.stderr
    r = cli("ledger", "raise", "--spec", project.spec, "--epsilon", 100)   # the same total
    assert r.exit_code == 64 and "already has a total of ε=100: nothing to raise" in r.stderr


def test_show_after_raise_says_to_edit_the_spec_not_to_raise_again(project: Project,
                                                                     cli) -> None:
    # the tester's case: `ledger raise`, then `ledger show` with the spec unchanged
    r = cli("ledger", "raise", "--spec", project.spec, "--epsilon", 2)
    assert r.exit_code == 0, r.stderr
    assert "now edit budget: in" in r.stderr and "{epsilon: 2}" in r.stderr
    for args in (("ledger", "show", "--spec", project.spec), ("tabulate", project.data,
                 "--spec", project.spec, "--out", project.root / "o.csv")):
        r = cli(*args)
        assert r.exit_code == 76
        msg = " ".join(r.stderr.split())
        assert "the ledger records a total of ε=2" in msg and "still declares ε=1" in msg
        assert "edit the spec's budget: to {epsilon: 2}" in msg
        assert "run `dpcli ledger raise" not in msg  # it was just run: not the advice
    project.write_spec(lambda spec: spec["budget"].update(epsilon=2), sync=False)
    r = cli("ledger", "show", "--spec", project.spec)
    assert r.exit_code == 0, r.stderr


def test_a_delta_declared_after_init_names_delta_and_its_option(project: Project,
                                                                  cli) -> None:
    """The tester's case: `ledger init` with δ 0, then a δ set in the spec. The refusal named
    only "ε=1" and pointed at `ledger raise --epsilon`; it names δ and `--delta` now."""
    project.write_spec(lambda spec: spec["budget"].update(delta=1e-6), sync=False)
    r = _run(cli, project)
    assert r.exit_code == 76
    msg = " ".join(r.stderr.split())
    assert "records ε=1, δ=0" in msg and "δ: the spec 1e-06, the ledger 0" in msg
    assert "`dpcli ledger raise --spec SPEC --delta 1e-06`" in msg
    assert "--epsilon" not in msg and project.no_runs()
    assert cli("ledger", "raise", "--spec", project.spec).exit_code == 64  # neither option
    r = cli("ledger", "raise", "--spec", project.spec, "--delta", "1e-6")
    assert r.exit_code == 0, r.stderr
    assert "raised from ε=1 to ε=1, δ=1e-06" in r.stderr  # ε kept as recorded
    assert _run(cli, project).exit_code == 0


def test_a_total_lowered_in_one_part_and_raised_in_the_other(project: Project, cli) -> None:
    project.write_spec(lambda spec: spec["budget"].update(epsilon=0.5, delta=1e-6), sync=False)
    r = _run(cli, project)
    msg = " ".join(r.stderr.split())
    assert r.exit_code == 76
    assert "raise --spec SPEC --delta 1e-06` and declare the recorded ε=1" in msg


def test_the_data_report_is_shown_only_with_report(project: Project, cli) -> None:
    """The toy ages (10-99) exceed the declared bounds [17, 90]: the exact counts of clamped
    values are a private figure, on stderr only when the custodian asks for them."""
    quiet = _run(cli, project, out="a.csv")
    assert quiet.exit_code == 0, quiet.stderr
    assert "clamped" not in quiet.stderr and "data report" not in quiet.stderr
    told = _run(cli, project, "--report", out="b.csv")
    assert told.exit_code == 0, told.stderr
    assert "data report" in told.stderr and "clamped" in told.stderr


def test_a_hard_linked_ledger_is_refused_with_the_reason(project: Project, cli) -> None:
    """A second name for the ledger (a hard link in another spec folder) is refused before
    anything is read, saying why — not that the key beside the second name is missing."""
    other = project.root / "other.jsonl"
    os.link(project.ledger, other)
    project.write_spec(lambda s: s.update(ledger="other.jsonl"), sync=False)
    r = _run(cli, project, out="x.csv")
    assert r.exit_code == 76
    assert "hard links" in r.stderr and "symlink" in r.stderr, r.stderr
    other.unlink()
    assert project.no_runs() and not (project.root / "x.csv").exists()


def test_a_symlinked_spec_spends_from_its_own_ledger(project: Project, cli,
                                                      tmp_path_factory) -> None:
    """A spec reached through a symlink in another folder resolves its relative paths (the
    ledger, the vocabulary) where the spec really is: the same budget, never a fresh one."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "spec.yaml").symlink_to(project.spec)
    r = cli("tabulate", project.data, "--spec", elsewhere / "spec.yaml",
            "--out", elsewhere / "o.csv", "--epsilon", 0.1)
    assert r.exit_code == 0, r.stderr
    assert not (elsewhere / "ledger.jsonl").exists()
    assert len(project.reserves()) == 1


def test_init_of_a_second_dataset_in_a_shared_ledger_warns(project: Project, cli) -> None:
    """A renamed id plus `ledger init` is a fresh budget: allowed (ledgers are shared by
    datasets), but said, naming the datasets the ledger already holds."""
    project.write_spec(lambda s: s.update(dataset="renamed"), sync=False)
    r = cli("ledger", "init", "--spec", project.spec)
    assert r.exit_code == 0, r.stderr
    assert "already holds dataset(s) toy" in r.stderr and "fresh budget" in r.stderr
