"""An output replaces only the command's own earlier output (dpcli.protect.check_replacements):
another command's release, a copy of the data or any other file is refused before the charge,
and a rerun (a Makefile's) still overwrites its own results. Through the real entry point."""

from __future__ import annotations

import shutil

from tests.cli.conftest import Project, run_entries


def _nb(cli, project: Project, out: str, *extra: object):
    return cli("train-nb", project.data, "--spec", project.spec, "--out", project.root / out,
               "--epsilon", 0.3, *extra)


def _tab(cli, project: Project, out: str, *extra: object):
    return cli("tabulate", project.data, "--spec", project.spec, "--out", project.root / out,
               "--epsilon", 0.3, *extra)


def test_a_sidecar_never_replaces_another_commands_release(project: Project, cli) -> None:
    # tabulate keep.csv writes its record to keep.json: here the name of a model that cost ε
    assert _nb(cli, project, "keep.json").exit_code == 0
    model = (project.root / "keep.json").read_bytes()
    runs = len(run_entries(project.ledger))
    r = _tab(cli, project, "keep.csv")
    assert r.exit_code == 64, r.stderr
    assert "keep.json" in r.stderr and "dpcli train-nb" in r.stderr
    assert "nothing was charged" in r.stderr
    assert (project.root / "keep.json").read_bytes() == model
    assert not (project.root / "keep.csv").exists()
    assert len(run_entries(project.ledger)) == runs


def test_a_file_no_run_wrote_is_never_replaced(project: Project, cli) -> None:
    copy = project.root / "test_copy.csv"
    shutil.copyfile(project.csv, copy)
    before = copy.read_bytes()
    r = _tab(cli, project, "test_copy.csv")
    assert r.exit_code == 64 and "not an output this dataset's ledger recorded" in r.stderr
    assert copy.read_bytes() == before and project.no_runs()
    # a dry run refuses it the same way
    assert _tab(cli, project, "test_copy.csv", "--dry-run").exit_code == 64


def test_a_rerun_overwrites_its_own_outputs(project: Project, cli) -> None:
    assert _tab(cli, project, "t.csv").exit_code == 0
    assert _tab(cli, project, "t.csv").exit_code == 0  # a Makefile's second run
    # an edited output of the same command at the same path is rewritten, as before
    with (project.root / "t.csv").open("a") as fh:
        fh.write("edited\n")
    assert _tab(cli, project, "t.csv").exit_code == 0
    assert "edited" not in (project.root / "t.csv").read_text()


def test_a_release_moved_under_another_commands_name_is_refused(project: Project, cli) -> None:
    assert _nb(cli, project, "m.json").exit_code == 0
    shutil.copyfile(project.root / "m.json", project.root / "t.json")
    r = _tab(cli, project, "t.csv")
    assert r.exit_code == 64 and "dpcli train-nb" in r.stderr
