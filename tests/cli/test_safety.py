"""Guards a careless or hurried user relies on: no silent budget reset, no leaked seed,
no lost release, machine-readable output that stays machine-readable."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import yaml

from dpcli.ledger import companion_paths
from tests.cli.conftest import Project
from tests.cli.conftest import run_entries as read_entries  # runs only, no genesis


def _tab(cli, project: Project, *extra: object, data=None, out="o.csv"):
    return cli("tabulate", data or project.data, "--spec", project.spec,
               "--out", project.root / out, *extra)


def test_a_copied_spec_points_at_the_old_ledger_before_offering_init(project: Project,
                                                                   cli) -> None:
    # the tester's case: the spec copied to another folder, its relative ledger: not there
    assert _tab(cli, project).exit_code == 0  # charged through the original ledger
    elsewhere = project.root / "elsewhere"
    elsewhere.mkdir()
    copy = elsewhere / "spec.yaml"
    shutil.copyfile(project.spec, copy)
    for f in project.root.glob("*.txt"):  # the public files the spec names
        shutil.copyfile(f, elsewhere / f.name)
    r = cli("tabulate", project.data, "--spec", copy, "--out", elsewhere / "o.csv")
    assert r.exit_code == 76
    msg = " ".join(r.stderr.split())
    assert str(elsewhere / "ledger.jsonl") in msg                 # the resolved path
    assert f"the spec {copy} says `ledger: ledger.jsonl`" in msg   # and the spec's setting
    assert "relative to the spec's folder" in msg
    # first: point at the ledger that was charged; init only if none exists anywhere
    assert msg.index("point the spec's `ledger:` at that ledger file") < msg.index("ledger init")
    assert "new, separate budget for dataset 'toy'" in msg
    assert not (elsewhere / "ledger.jsonl").exists()


def test_missing_ledger_refuses_until_init(project: Project, cli) -> None:
    for sidecar in companion_paths(project.ledger):
        sidecar.unlink(missing_ok=True)
    r = _tab(cli, project)
    assert r.exit_code == 76 and "dpcli ledger init" in r.stderr
    for sub in ("show", "verify"):
        assert cli("ledger", sub, "--spec", project.spec).exit_code == 76
    assert not project.ledger.exists()

    r = cli("ledger", "init", "--spec", project.spec)
    assert r.exit_code == 0 and "created ledger" in r.stderr
    key = project.ledger.with_name(project.ledger.name + ".key")
    assert key.stat().st_mode & 0o777 == 0o600
    before = project.ledger.read_bytes()
    r = cli("ledger", "init", "--spec", project.spec)
    assert r.exit_code == 76 and "already has its genesis" in r.stderr
    assert project.ledger.read_bytes() == before
    assert _tab(cli, project).exit_code == 0


def test_duplicate_key_in_spec_is_an_error(project: Project, cli) -> None:
    text = yaml.safe_dump({"dataset": "toy"}) + "budget: {epsilon: 1}\nbudget: {epsilon: 50}\n"
    spec = project.root / "dup.yaml"
    spec.write_text(text)
    r = cli("tabulate", project.data, "--spec", spec, "--out", project.root / "o.csv")
    assert r.exit_code == 78
    assert f"{spec}: not valid YAML at line 3" in r.stderr and "duplicate key 'budget'" in r.stderr
    assert project.no_runs()


def test_exponent_notation_is_a_number(project: Project, cli) -> None:
    project.spec.write_text(project.spec.read_text().replace("epsilon: 0.3", "epsilon: 3e-1"))
    r = _tab(cli, project, "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["spent"]["epsilon"] == 0.3


def test_yes_and_no_in_a_spec_are_text_not_booleans(project: Project, cli) -> None:
    """YAML 1.1 reads an unquoted ``[no, yes]`` as booleans: every row of the column would
    have matched no declared value, silently (seen with R data's No/Yes columns)."""
    text = project.spec.read_text()
    assert "'no'" in text and "'yes'" in text
    project.spec.write_text(text.replace("'no'", "No").replace("'yes'", "Yes"))
    from dpcli.spec import load_spec

    member = load_spec(project.spec).schema.column("member")
    assert list(member.levels) == ["No", "Yes"]
    project.spec.write_text(text.replace("'no'", "no").replace("'yes'", "yes"))
    assert list(load_spec(project.spec).schema.column("member").levels) == ["no", "yes"]
    r = _tab(cli, project, "--columns", "member")
    assert r.exit_code == 0, r.stderr
    table = (project.root / "o.csv").read_text()
    assert "yes" in table and "true" not in table


def test_digit_separators_are_not_numbers(project: Project, cli) -> None:
    """Python and YAML 1.1 read 0_1 as 1: ten times the ε a typo for 0.1 meant."""
    r = _tab(cli, project, "--epsilon", "0_1")
    assert r.exit_code == 64 and "'0_1' is not a number" in r.stderr, r.stderr
    project.spec.write_text(project.spec.read_text().replace("epsilon: 0.3", "epsilon: 0_3"))
    r = _tab(cli, project)
    assert r.exit_code == 78 and "must be a number, got str '0_3'" in r.stderr, r.stderr
    assert project.no_runs()


def test_over_budget_exits_3_before_reading_values(project: Project, cli) -> None:
    broken = project.root / "broken.csv"
    broken.write_text("age,color,member,words,label\n30,red,no,alpha,9\n")
    r = _tab(cli, project, "--epsilon", "5", data=broken)
    assert r.exit_code == 3  # not 2: the label value was never read
    assert "budget exhausted" in r.stderr


def test_brackets_in_paths_are_printed_verbatim(project: Project, cli) -> None:
    r = _tab(cli, project, out="[draft]/o.csv")
    assert r.exit_code == 0, r.stderr
    assert "[draft]/o.csv" in r.stderr
    assert (project.root / "[draft]" / "o.csv").exists()


def test_out_named_json_is_refused_before_charge(project: Project, cli) -> None:
    r = _tab(cli, project, out="o.json")
    assert r.exit_code == 64 and ".csv" in r.stderr
    assert project.no_runs()


def test_seed_warns_even_when_quiet_and_is_not_logged(project: Project, cli) -> None:
    r = _tab(cli, project, "--seed", 987654321, "--quiet")
    assert r.exit_code == 0
    assert "warning: --seed makes this run's noise reproducible" in r.stderr
    assert "987654321" not in project.ledger.read_text()
    assert "987654321" not in (project.root / "o.json").read_text()


def test_input_digest_is_keyed_not_a_plain_hash(project: Project, cli) -> None:
    assert _tab(cli, project).exit_code == 0
    reserve = read_entries(project.ledger)[0]
    plain = hashlib.sha256(project.data.read_bytes()).hexdigest()
    assert reserve["input_digest"].startswith("hmac-sha256:")
    assert plain not in project.ledger.read_text()
    assert reserve["input_file"] == str(project.data.resolve())


def test_json_summary_is_one_line(project: Project, cli) -> None:
    r = _tab(cli, project, "--json")
    assert r.exit_code == 0
    lines = r.stdout.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["command"] == "tabulate"


def test_tokens_without_cap_are_refused_naming_the_key(project: Project, cli) -> None:
    def uncapped(spec: dict) -> None:
        del spec["schema"]["columns"]["words"]["max_per_row"]
    project.write_spec(uncapped)
    r = _tab(cli, project, "--columns", "words")
    assert r.exit_code == 78
    assert "columns.words.max_per_row: is required" in r.stderr
    assert project.no_runs()


def test_outputs_follow_the_umask(project: Project, cli) -> None:
    old = os.umask(0o022)
    try:
        assert _tab(cli, project).exit_code == 0
    finally:
        os.umask(old)
    assert (project.root / "o.csv").stat().st_mode & 0o777 == 0o644


def test_corrupt_feature_page_fails_cleanly_after_the_charge(project: Project, cli) -> None:
    """The pre-charge pass reads only the label of a Parquet file: a corrupt page in a
    feature column is found during the pass, after the charge, which is then kept."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.cli.conftest import toy_frame

    good = project.root / "good.parquet"
    pq.write_table(pa.Table.from_pandas(toy_frame(2000)), good, use_dictionary=False,
                   compression="NONE")
    raw = bytearray(good.read_bytes())
    age = pq.ParquetFile(good).metadata.row_group(0).column(0)
    assert age.path_in_schema == "age"
    for pos in np.random.default_rng(0).integers(age.data_page_offset,
                                                 age.data_page_offset + 40, 4):
        raw[pos] ^= 0xFF
    bad = project.root / "bad.parquet"
    bad.write_bytes(bytes(raw))
    r = _tab(cli, project, "--columns", "age,color", data=bad)
    assert r.exit_code == 65
    assert "could not be decoded" in r.stderr
    assert not (project.root / "o.csv").exists()
    entries = read_entries(project.ledger)
    assert [e["kind"] for e in entries] == ["reserve", "failed"]
    assert entries[1]["reason"] == "DataError"  # no column or row position in the shared log


def test_seeded_noise_is_keyed_by_the_ledger(project: Project, cli) -> None:
    """Same seed + same ledger key reproduces; a new key (or a guessed seed alone) does not."""
    import pandas as pd

    assert _tab(cli, project, "--seed", 1, out="a.csv").exit_code == 0
    assert _tab(cli, project, "--seed", 1, out="b.csv").exit_code == 0
    a, b = (pd.read_csv(project.root / n)["count"] for n in ("a.csv", "b.csv"))
    assert a.equals(b)
    key = project.ledger.with_name(project.ledger.name + ".key")
    key.write_text("0" * 64)  # a replaced key is refused: the checkpoint's MAC no longer holds
    r = _tab(cli, project, "--seed", 1, out="c.csv")
    assert r.exit_code == 76 and "fails its MAC" in r.stderr
    for sidecar in companion_paths(project.ledger):  # a new ledger, with a new key
        sidecar.unlink(missing_ok=True)
    assert cli("ledger", "init", "--spec", project.spec).exit_code == 0
    assert _tab(cli, project, "--seed", 1, out="c.csv").exit_code == 0
    c = pd.read_csv(project.root / "c.csv")["count"]
    assert not a.equals(c)  # 32 noisy counts at scale ~27 coincide w.p. < 1e-30


def test_a_copied_ledger_refuses_to_spend_until_repair_moved(project: Project, cli) -> None:
    """``cp -r`` of a project folder (or a restored backup) is a second account of the same
    budget: its checkpoint was written for another file. Every spend on it, and its dry run,
    is refused (76) with nothing charged; verify and show say so; `ledger repair --moved`
    records that it is the ledger now (tester 13: the old warning came once, then the copy
    spent ε 7 again against a total of 10)."""
    r = _tab(cli, project)
    assert r.exit_code == 0 and "checkpoint was written for" not in r.stderr, r.stderr
    copy = project.root / "copy"
    copy.mkdir()
    for path in companion_paths(project.ledger):
        if path.exists() and path.is_file():
            shutil.copy2(path, copy / path.name)
    spec = yaml.safe_load(project.spec.read_text())
    spec["ledger"] = str(copy / project.ledger.name)
    spec["schema"] = yaml.safe_load(yaml.safe_dump(spec["schema"]))
    copied = project.root / "copied.yaml"
    copied.write_text(yaml.safe_dump(spec, sort_keys=False))
    moved = copy / project.ledger.name
    before = moved.read_bytes()
    for extra in ((), ("--json",), ("--dry-run",)):
        r = cli("tabulate", project.data, "--spec", copied, "--out", project.root / "c.csv",
                *extra)
        assert r.exit_code == 76 and "checkpoint was written for" in r.stderr, r.stderr
        assert "ledger repair --spec SPEC --moved" in r.stderr
        assert "verdict" not in r.stderr   # refused before the plan and forecast are said
    assert not (project.root / "c.csv").exists() and moved.read_bytes() == before
    verified = cli("ledger", "verify", "--spec", copied, "--json")
    assert verified.exit_code == 0 and json.loads(verified.stdout)["relocated"] is True
    assert "checkpoint was written for" in verified.stderr
    assert "checkpoint was written for" in cli("ledger", "show", "--spec", copied).stderr
    refused = cli("ledger", "repair", "--spec", copied, "--moved")   # no terminal, no --yes
    assert refused.exit_code == 64 and "pass --yes" in refused.stderr
    there = cli("ledger", "repair", "--spec", copied, "--moved", "--yes")
    assert there.exit_code == 76 and f"still at {project.ledger.resolve()}" in there.stderr
    away = project.ledger.with_name("away.jsonl")
    project.ledger.rename(away)   # the original moved out of its place: the copy may be adopted
    adopted = cli("ledger", "repair", "--spec", copied, "--moved", "--yes")
    assert adopted.exit_code == 0 and "now the dataset's ledger" in adopted.stderr
    again = cli("tabulate", project.data, "--spec", copied, "--out", project.root / "d.csv")
    assert again.exit_code == 0 and "checkpoint was written for" not in again.stderr, again.stderr
    assert "nothing to record" in cli("ledger", "repair", "--spec", copied, "--moved").stderr
    shown = cli("ledger", "show", "--spec", copied)   # the adoption is listed, as itself
    assert "`ledger repair --moved` adopted this file" in shown.stderr
    assert "torn" not in shown.stderr
    away.rename(project.ledger)
    original = _tab(cli, project, out="e.csv")
    assert original.exit_code == 0 and "checkpoint was written for" not in original.stderr


def test_a_complete_entry_that_cannot_be_written_is_said_once(project: Project, cli,
                                                              monkeypatch) -> None:
    """The outputs are written and the charge kept, but the ledger refuses the 'complete'
    entry (its disk filled up in between): the message says so, and only so (tester 13 read
    both 'lists run … as interrupted' and 'recorded as failed')."""
    from dpcli.errors import IOFailure
    from dpcli.ledger import Ledger

    def full(*_: object, **__: object) -> None:
        raise IOFailure("the ledger's disk is full")

    monkeypatch.setattr(Ledger, "complete", full)
    r = _tab(cli, project, "--json")
    assert r.exit_code == 74, r.stderr
    assert "the outputs were written" in r.stderr and "as interrupted" in r.stderr
    assert "recorded as failed" not in r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["charged"] is True
    assert (project.root / "o.csv").exists()


def test_a_ledger_that_cannot_grow_is_refused_before_the_charge(project: Project, cli,
                                                                  monkeypatch,
                                                                  tmp_path_factory) -> None:
    """Testers 16, 17: the ledger's own disk nearly full (or `ulimit -f` near its size)
    released the outputs, then failed to record the run's end. The ledger's room is checked
    before the charge too."""
    from dpcli import io

    ledger_folder = project.ledger.resolve().parent
    monkeypatch.setattr(io, "writable_bytes",
                        lambda folder: 4096 if Path(folder).resolve() == ledger_folder
                        else 10 ** 9)
    out = tmp_path_factory.mktemp("elsewhere") / "t.csv"
    r = cli("tabulate", project.data, "--spec", project.spec, "--out", out,
            "--epsilon", 0.3)
    assert r.exit_code == 74 and "the ledger cannot grow" in r.stderr, r.stderr
    assert project.no_runs() and not out.exists()


def test_a_disk_with_no_room_is_refused_before_the_charge(project: Project, cli,
                                                          monkeypatch) -> None:
    """Tester 13: under `ulimit -f 8` (or a full tmpfs) each retry wrote nothing and paid
    again. Room below MIN_ROOM at an output's folder is refused (74) before the charge."""
    import resource
    import subprocess
    import sys

    from dpcli import io

    monkeypatch.setattr(io, "writable_bytes", lambda folder: 4096)
    r = _tab(cli, project)
    assert r.exit_code == 74 and "4,096 bytes can be written" in r.stderr, r.stderr
    assert "nothing was charged" in r.stderr and project.no_runs()
    monkeypatch.undo()

    def small_files() -> None:   # the real limit, in a real process
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, resource.RLIM_INFINITY))

    done = subprocess.run(
        [sys.executable, "-m", "dpcli", "tabulate", str(project.data), "--spec",
         str(project.spec), "--out", str(project.root / "u.csv"), "--epsilon", "0.3"],
        capture_output=True, text=True, preexec_fn=small_files, timeout=120)
    assert done.returncode == 74 and "ulimit -f" in done.stderr, done.stderr
    assert project.no_runs() and not (project.root / "u.csv").exists()
