"""``--reuse``: an identical completed release with unchanged outputs is returned without
spending; anything else runs as usual. Through the real entry point, on tabulate (the
mechanism is shared by every spending command: dpcli.run.charged)."""

from __future__ import annotations

import json
import os

from tests.cli.conftest import Project


def _tab(cli, project: Project, *extra: object):
    return cli("tabulate", project.data, "--spec", project.spec, "--out",
               project.root / "t.csv", "--epsilon", 0.3, *extra)


def test_a_second_identical_run_spends_nothing(project: Project, cli) -> None:
    assert _tab(cli, project, "--reuse").exit_code == 0
    table = (project.root / "t.csv").read_bytes()
    r = _tab(cli, project, "--reuse", "--json")
    assert r.exit_code == 0, r.stderr
    assert "reused run" in r.stderr and "nothing spent" in r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["reused"] == out["run_id"] == project.reserves()[0]["run_id"]
    assert out["spent"] == {"epsilon": 0.0, "delta": 0.0}
    assert (project.root / "t.csv").read_bytes() == table and len(project.reserves()) == 1
    # the keys a spending run's line leads with: a cron log has one shape of line
    first = json.loads(_tab(cli, project, "--json", "--seed", 9).stdout.strip().splitlines()[-1])
    assert (out["command"], out["dataset"]) == (first["command"], first["dataset"]) == (
        "tabulate", "toy")
    assert len(project.reserves()) == 2


def test_a_spec_reached_through_a_symlink_is_the_same_request(project: Project, cli) -> None:
    """current.yaml -> v3.yaml: the same spec bytes by another name reuse, not re-spend."""
    assert _tab(cli, project, "--reuse").exit_code == 0
    link = project.root / "current.yaml"
    link.symlink_to(project.spec.name)
    r = cli("tabulate", project.data, "--spec", link, "--out", project.root / "t.csv",
            "--epsilon", 0.3, "--reuse")
    assert r.exit_code == 0 and "reused run" in r.stderr, r.stderr
    assert len(project.reserves()) == 1


def test_the_same_data_through_a_hard_link_is_the_same_request(project: Project,
                                                                cli) -> None:
    """Tester 15: the data reached through a hard link (another path, the same bytes) was
    released and charged again under --reuse; inputs are matched by their keyed digests."""
    assert _tab(cli, project, "--reuse").exit_code == 0
    link = project.root / "hard.parquet"
    os.link(project.data, link)
    r = cli("tabulate", link, "--spec", project.spec, "--out", project.root / "t.csv",
            "--epsilon", 0.3, "--reuse")
    assert r.exit_code == 0 and "reused run" in r.stderr, r.stderr
    assert len(project.reserves()) == 1


def test_without_reuse_or_with_other_parameters_it_spends_again(project: Project, cli) -> None:
    assert _tab(cli, project, "--reuse").exit_code == 0
    assert _tab(cli, project).exit_code == 0                              # no --reuse
    assert _tab(cli, project, "--reuse", "--bins", 3).exit_code == 0     # other parameters
    assert len(project.reserves()) == 3


def test_a_missing_output_is_released_again_an_edited_one_is_kept(project: Project,
                                                                    cli) -> None:
    assert _tab(cli, project, "--reuse").exit_code == 0
    (project.root / "t.json").unlink()
    r = _tab(cli, project, "--reuse")
    assert r.exit_code == 0 and "reused" not in r.stderr
    assert len(project.reserves()) == 2
    # an edited output is neither reused nor replaced (it is no longer what was recorded)
    with (project.root / "t.csv").open("a") as fh:
        fh.write("edited\n")
    r = _tab(cli, project, "--reuse")
    assert r.exit_code == 64 and "no longer holds what the ledger recorded" in r.stderr
    assert "edited" in (project.root / "t.csv").read_text()
    assert len(project.reserves()) == 2


def test_reuse_answers_even_when_the_budget_is_spent(project: Project, cli) -> None:
    """A Makefile rebuilt after the budget ran out: the release exists, so exit 0 (nothing
    spent); without --reuse the same command is refused with exit 3."""
    def mutate(spec: dict) -> None:
        spec["budget"]["epsilon"] = 0.3
    project.write_spec(mutate)
    assert _tab(cli, project, "--reuse").exit_code == 0
    assert _tab(cli, project).exit_code == 3
    r = _tab(cli, project, "--reuse")
    assert r.exit_code == 0 and "reused run" in r.stderr
    assert len(project.reserves()) == 1


def test_another_input_file_is_not_the_same_release(project: Project, cli) -> None:
    assert _tab(cli, project, "--reuse").exit_code == 0
    data = project.data.read_bytes()
    import pandas as pd

    frame = pd.read_parquet(project.data)
    frame.loc[0, "age"] = 50 if frame.loc[0, "age"] != 50 else 51
    frame.to_parquet(project.data, index=False)
    assert project.data.read_bytes() != data
    r = _tab(cli, project, "--reuse")
    assert r.exit_code == 0 and "reused" not in r.stderr
    assert len(project.reserves()) == 2


def test_a_reused_release_repeats_the_cautions_its_outputs_carry(project: Project, cli) -> None:
    """A cron job that only sees the reruns must still read that its model is not usable:
    the cautions come from the outputs' envelopes (what `dpcli show` lists), with the file."""
    model = project.root / "m.json"
    args = ("train-nb", project.data, "--spec", project.spec, "--out", model,
            "--epsilon", 0.01, "--reuse")
    first = cli(*args)
    assert first.exit_code == 0, first.stderr
    shown = json.loads(cli("show", model, "--json").stdout.strip().splitlines()[-1])
    assert shown["cautions"], "the tiny-ε model should carry a caution"
    again = cli(*args, "--json")
    assert again.exit_code == 0 and "reused run" in again.stderr, again.stderr
    line = json.loads(again.stdout.strip().splitlines()[-1])
    assert line["warnings"] == [f"{model}: {c}" for c in shown["cautions"]]
    assert all(w in again.stderr for w in line["warnings"])
    assert len(project.reserves()) == 1
