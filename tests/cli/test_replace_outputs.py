"""An output replaces only the command's own earlier output (dpcli.protect.check_replacements):
another command's release, a copy of the data or any other file is refused before the charge,
and a rerun (a Makefile's) still overwrites its own results. Through the real entry point."""

from __future__ import annotations

import json
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
    assert _tab(cli, project, "t.csv").exit_code == 0  # and a third: the record follows
    assert len(project.reserves()) == 3


def test_an_edited_output_is_not_replaced(project: Project, cli) -> None:
    """A path once written is not enough: its bytes must be what the ledger recorded there."""
    assert _tab(cli, project, "t.csv").exit_code == 0
    with (project.root / "t.csv").open("a") as fh:
        fh.write("edited\n")
    edited = (project.root / "t.csv").read_bytes()
    runs = len(run_entries(project.ledger))
    r = _tab(cli, project, "t.csv")
    assert r.exit_code == 64, r.stderr
    assert "no longer holds what the ledger recorded" in r.stderr
    assert "nothing was charged" in r.stderr
    assert (project.root / "t.csv").read_bytes() == edited
    assert len(run_entries(project.ledger)) == runs


def test_a_data_copy_over_an_earlier_output_is_not_replaced(project: Project, cli) -> None:
    """The tester's case: t2.csv was tabulate's output once; now it is a copy of data."""
    assert _tab(cli, project, "t2.csv").exit_code == 0
    shutil.copyfile(project.csv, project.root / "t2.csv")
    r = _tab(cli, project, "t2.csv", "--json")
    assert r.exit_code == 64, r.stderr
    assert "t2.csv" in r.stderr and "no longer holds what the ledger recorded" in r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["charged"] is False
    assert (project.root / "t2.csv").read_bytes() == project.csv.read_bytes()
    assert len(project.reserves()) == 1


def test_another_commands_release_copied_over_an_earlier_output_is_refused(
        project: Project, cli) -> None:
    """The tester's case: cp c_lr.json c_nb.json, then train-nb --out c_nb.json."""
    assert _nb(cli, project, "nb.json").exit_code == 0
    assert cli("validate", project.data, "--spec", project.spec, "--out",
               project.root / "lr.json", "--epsilon", 0.3).exit_code == 0
    shutil.copyfile(project.root / "lr.json", project.root / "nb.json")
    r = _nb(cli, project, "nb.json")
    assert r.exit_code == 64, r.stderr
    assert "nb.json" in r.stderr and "dpcli validate" in r.stderr
    assert (project.root / "nb.json").read_bytes() == (project.root / "lr.json").read_bytes()
    assert len(project.reserves()) == 2


def test_its_own_release_copied_to_another_path_is_not_replaced(project: Project, cli) -> None:
    assert _tab(cli, project, "a.csv").exit_code == 0
    shutil.copyfile(project.root / "a.csv", project.root / "b.csv")
    r = _tab(cli, project, "b.csv")
    assert r.exit_code == 64 and "recorded at" in r.stderr and "a.csv" in r.stderr
    assert len(project.reserves()) == 1


def test_the_record_is_the_bytes_this_run_wrote(project: Project, cli) -> None:
    """The ledger records each output's SHA-256 as the run wrote it (hashed before its rename),
    so the record matches the file left in place."""
    from dpcli.fingerprint import file_digest

    assert _tab(cli, project, "t.csv").exit_code == 0
    outputs = next(e for e in run_entries(project.ledger) if e["kind"] == "complete")["outputs"]
    assert {o["path"]: o["sha256"] for o in outputs} == {
        str(project.root / name): file_digest(project.root / name) for name in ("t.csv", "t.json")}


def test_a_release_moved_under_another_commands_name_is_refused(project: Project, cli) -> None:
    assert _nb(cli, project, "m.json").exit_code == 0
    shutil.copyfile(project.root / "m.json", project.root / "t.json")
    r = _tab(cli, project, "t.csv")
    assert r.exit_code == 64 and "dpcli train-nb" in r.stderr


def test_a_file_written_at_the_output_path_during_the_run_is_kept(project: Project, cli,
                                                                  monkeypatch) -> None:
    """The replacement check runs before the charge; a file another process writes there
    afterwards (a tester's `cp data.csv out.json` during a long validate) is not replaced:
    the commit compares the path with what the check saw, keeps the file, writes nothing,
    and the run is recorded failed with its charge kept (noise was drawn). It exits 73
    (EX_CANTCREAT), not 64: 64 promises that nothing was charged (docs/exit-codes.md)."""
    from dpcli.api.spend import Spend

    out = project.root / "raced.csv"
    saw, claimed = Spend._saw_outputs, Spend._outputs_claimed

    def check_then_race(self: Spend) -> None:
        saw(self)
        out.write_text("someone else's file\n")   # right after the checks

    def claim_then_race(self: Spend) -> None:
        claimed(self)
        out.write_text("someone else's file\n")   # right after the claim, before the charge

    for extra in ((), ("--reuse",)):
        with monkeypatch.context() as m:
            # under --reuse the checks are made under the claim; without it, before it
            if extra:
                m.setattr(Spend, "_saw_outputs", check_then_race)
            else:
                m.setattr(Spend, "_outputs_claimed", claim_then_race)
            out.unlink(missing_ok=True)
            r = _tab(cli, project, "raced.csv", "--json", *extra)
        assert r.exit_code == 73 and "changed while this run ran" in r.stderr, r.stderr
        assert "this run's charge stays" in r.stderr
        obj = json.loads(r.stdout.strip().splitlines()[-1])
        assert obj["error"] == "cant_create" and obj["exit_code"] == 73 and obj["charged"]
    assert out.read_text() == "someone else's file\n"
    assert not (project.root / "raced.json").exists()   # the set is written whole or not
    statuses = [e["kind"] for e in run_entries(project.ledger)]
    assert statuses[-1] == "failed"


def test_a_file_written_between_the_checks_and_the_claim_is_refused_before_the_charge(
        project: Project, cli, monkeypatch) -> None:
    """A file written at the output path after the pre-charge checks but before the run
    claims its outputs (another run that just finished, a `cp`) is checked again under the
    claim: not this command's own output, so refused with 64 and nothing charged."""
    from dpcli.api.spend import Spend

    out = project.root / "raced.csv"
    saw = Spend._saw_outputs

    def check_then_race(self: Spend) -> None:
        saw(self)
        out.write_text("someone else's file\n")

    monkeypatch.setattr(Spend, "_saw_outputs", check_then_race)
    r = _tab(cli, project, "raced.csv", "--json")
    assert r.exit_code == 64 and "not an output this dataset's ledger recorded" in r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["charged"] is False
    assert out.read_text() == "someone else's file\n" and project.no_runs()


def test_an_output_that_is_a_symlink_is_refused_naming_its_target(project: Project,
                                                                    cli) -> None:
    """results/t.csv -> ../t.csv: the rename would replace the link and leave its target with
    the older release (a reader of the target sees stale results). Refused before the
    charge, naming the link and the target; the target, the link and the ledger untouched.
    Writing to the target's own path still replaces it as before."""
    assert _tab(cli, project, "t.csv").exit_code == 0
    target = project.root / "t.csv"
    released = target.read_bytes()
    (project.root / "results").mkdir()
    link = project.root / "results" / "t.csv"
    link.symlink_to("../t.csv")
    before = project.ledger.read_bytes()
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", link, "--epsilon", 0.3,
            "--json")
    assert r.exit_code == 64, r.stderr
    assert "symbolic link" in r.stderr and str(link) in r.stderr and str(target) in r.stderr
    assert "nothing was charged" in r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["charged"] is False
    assert link.is_symlink() and target.read_bytes() == released
    assert project.ledger.read_bytes() == before
    # a dangling link too: the rename would put the release at the link, not where it points
    dangling = project.root / "results" / "d.csv"
    dangling.symlink_to("../nowhere.csv")
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", dangling,
            "--epsilon", 0.3)
    assert r.exit_code == 64 and "does not exist" in r.stderr, r.stderr
    assert dangling.is_symlink() and not (project.root / "nowhere.csv").exists()
    assert project.ledger.read_bytes() == before
    # the target by its own path: a Makefile's rerun replaces its own output
    assert _tab(cli, project, "t.csv").exit_code == 0


def test_a_sidecar_that_is_a_symlink_is_refused(project: Project, cli) -> None:
    """tabulate's JSON record (t.json) is an output too: a link there is refused as well."""
    (project.root / "elsewhere.json").write_text("{}\n")
    (project.root / "t.json").symlink_to("elsewhere.json")
    r = _tab(cli, project, "t.csv")
    assert r.exit_code == 64 and "t.json" in r.stderr and "elsewhere.json" in r.stderr
    assert (project.root / "elsewhere.json").read_text() == "{}\n" and project.no_runs()


def test_a_link_put_at_an_output_after_the_checks_is_not_replaced(project: Project, cli,
                                                                   monkeypatch) -> None:
    """The commit compares the path itself (lstat), so a link planted after the claim to the
    very file the checks saw is a change: kept, exit 73, nothing written. Planted between the
    checks and the claim, it is refused before the charge as any symlinked output is."""
    from dpcli.api.spend import Spend

    assert _tab(cli, project, "t.csv").exit_code == 0
    out, real = project.root / "t.csv", project.root / "real.csv"
    saw, claimed = Spend._saw_outputs, Spend._outputs_claimed

    def link() -> None:
        out.rename(real)
        out.symlink_to(real.name)   # the same file the check saw, now behind a link

    with monkeypatch.context() as m:
        m.setattr(Spend, "_outputs_claimed", lambda self: (claimed(self), link()))
        r = _tab(cli, project, "t.csv")
    assert r.exit_code == 73 and "changed while this run ran" in r.stderr, r.stderr
    assert out.is_symlink()
    out.unlink()
    real.rename(out)
    runs = len(project.run_kinds())
    with monkeypatch.context() as m:
        m.setattr(Spend, "_saw_outputs", lambda self: (saw(self), link()))
        r = _tab(cli, project, "t.csv")
    assert r.exit_code == 64 and "is a symbolic link" in r.stderr, r.stderr
    assert out.is_symlink() and len(project.run_kinds()) == runs   # nothing charged


def test_two_outputs_that_are_one_file_are_refused_before_any_write(tmp_path) -> None:
    """Two names of one output (a folder reached by a link): the second rename would replace
    the first release, so the set is refused at the check (the pre-charge one), not at the
    staging after the charge."""
    import pytest

    from dpcli.errors import UsageError
    from dpcli.io import Outputs

    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to("real")
    with pytest.raises(UsageError, match="one file by two names"):
        Outputs().check_writable(tmp_path / "real" / "a.csv", tmp_path / "alias" / "a.csv")
    assert list((tmp_path / "real").iterdir()) == []


def _tab_here(cli, project: Project, out: str, *extra: object):
    """tabulate with ``--out`` as typed, relative to the working folder."""
    return cli("tabulate", project.data, "--spec", project.spec, "--out", out,
               "--epsilon", 0.3, *extra)


def test_a_rerun_from_another_folder_replaces_its_own_output(project: Project, cli,
                                                              monkeypatch) -> None:
    """The ledger records each output's resolved path beside the path as given, and the
    check compares resolved paths: `make -C ..`-style reruns with another relative spelling
    of the same file replace it instead of being refused as a copy."""
    monkeypatch.chdir(project.root)
    assert _tab_here(cli, project, "t.csv").exit_code == 0
    outputs = next(e for e in run_entries(project.ledger) if e["kind"] == "complete")["outputs"]
    assert {(o["path"], o["resolved"]) for o in outputs} == {
        ("t.csv", str(project.root / "t.csv")), ("t.json", str(project.root / "t.json"))}
    (project.root / "sub").mkdir()
    monkeypatch.chdir(project.root / "sub")
    r = _tab_here(cli, project, "../t.csv")
    assert r.exit_code == 0, r.stderr
    assert len(project.reserves()) == 2


def test_a_copy_at_the_same_relative_path_in_another_folder_is_not_replaced(
        project: Project, cli, monkeypatch) -> None:
    """A release copied to other/t.csv (and t.json) is not this command's output at that
    path, though `--out t.csv` was what the first run was given: refused before the charge,
    naming where the release was written."""
    monkeypatch.chdir(project.root)
    assert _tab_here(cli, project, "t.csv").exit_code == 0
    other = project.root / "other"
    other.mkdir()
    for name in ("t.csv", "t.json"):
        shutil.copyfile(project.root / name, other / name)
    copy = (other / "t.csv").read_bytes()
    before = project.ledger.read_bytes()
    monkeypatch.chdir(other)
    r = _tab_here(cli, project, "t.csv")
    assert r.exit_code == 64, r.stderr
    assert "recorded at" in r.stderr and str(project.root / "t.") in r.stderr
    assert (other / "t.csv").read_bytes() == copy
    assert project.ledger.read_bytes() == before


def test_reuse_finds_its_release_by_another_spelling_of_the_same_path(project: Project, cli,
                                                                      monkeypatch) -> None:
    monkeypatch.chdir(project.root)
    assert _tab_here(cli, project, "t.csv", "--reuse").exit_code == 0
    (project.root / "sub").mkdir()
    monkeypatch.chdir(project.root / "sub")
    r = _tab_here(cli, project, "../t.csv", "--reuse")
    assert r.exit_code == 0 and "reused run" in r.stderr, r.stderr
    assert len(project.reserves()) == 1


def test_an_entry_without_a_resolved_path_falls_back_to_the_working_folder(
        tmp_path, monkeypatch) -> None:
    """Entries written before dpcli recorded ``resolved`` are read as before: their path is
    taken against today's working folder (docs/ledger.md says what they cannot prove)."""
    import pytest

    from dpcli.errors import UsageError
    from dpcli.fingerprint import file_digest
    from dpcli.ledger import RunView
    from dpcli.protect import check_replacements

    (tmp_path / "a").mkdir()
    out = tmp_path / "a" / "t.csv"
    out.write_text("release\n")
    old = RunView("r1", "2026-01-01T00:00:00Z", "tabulate", 1, 0, "complete", False,
                  outputs=[{"path": "t.csv", "sha256": file_digest(out)}])
    monkeypatch.chdir(tmp_path / "a")
    check_replacements([out], "tabulate", lambda: [old])       # the same folder: its own
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="recorded at"):        # elsewhere: a copy, as before
        check_replacements([out], "tabulate", lambda: [old])
