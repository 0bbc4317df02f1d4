"""``dpcli init``: a starting spec and schema from a file's structure, through the entry point.

The point of init is that it reads no value; the files below are built so that reading any
value would raise, and each test checks that it does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml


def _frame(n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({
        "age": rng.integers(18, 90, n), "ward": rng.choice(["a", "b"], n),
        "smoker": rng.random(n) < 0.3, "when": pd.date_range("2020-01-01", periods=n),
        "notes": [["x", "y"]] * n, "readmitted": rng.integers(0, 2, n)})


def _unreadable_parquet(path: Path) -> Path:
    """A Parquet file whose footer is intact and whose data pages are garbage."""
    pq.write_table(pa.Table.from_pandas(_frame(), preserve_index=False), path,
                   compression="none")
    raw = bytearray(path.read_bytes())
    footer = int.from_bytes(raw[-8:-4], "little") + 8
    raw[4:len(raw) - footer] = b"\xff" * (len(raw) - footer - 4)
    path.write_bytes(bytes(raw))
    with pytest.raises(OSError):                      # values cannot be read ...
        pq.read_table(path)
    assert pq.read_schema(path).names[0] == "age"     # ... the structure can
    return path


def test_init_writes_a_spec_and_schema_from_the_structure_only(tmp_path: Path, cli) -> None:
    data = _unreadable_parquet(tmp_path / "patients.parquet")
    out = tmp_path / "configs" / "patients.yaml"
    r = cli("init", data, "--label", "readmitted", "--out", out)
    assert r.exit_code == 0, r.stderr
    assert "no value was read" in r.stderr
    spec = yaml.safe_load(out.read_text())
    assert spec["dataset"] == "patients" and spec["label"]["column"] == "readmitted"
    assert spec["budget"]["epsilon"] == "TODO" and spec["label"]["classes"] == "TODO"
    assert spec["schema"] == "patients.schema.yaml"
    columns = yaml.safe_load((out.parent / "patients.schema.yaml").read_text())["columns"]
    assert columns == {"age": {"type": "numeric", "bounds": "TODO"},
                       "ward": {"type": "categorical", "categories": "TODO"},
                       "smoker": {"type": "binary", "values": ["false", "true"]},
                       "notes": {"type": "tokens", "vocabulary": "TODO"}}
    assert "when: left out" in (out.parent / "patients.schema.yaml").read_text()


def test_a_csv_header_is_all_init_reads(tmp_path: Path, cli) -> None:
    data = tmp_path / "p.csv"
    data.write_bytes(b"age,ward,readmitted\n\xff\xfe,\x00\n\"unterminated\n")
    out = tmp_path / "p.yaml"
    r = cli("init", data, "--label", "readmitted", "--out", out, "--dataset", "ward-7")
    assert r.exit_code == 0, r.stderr
    assert yaml.safe_load(out.read_text())["dataset"] == "ward-7"
    columns = yaml.safe_load((tmp_path / "p.schema.yaml").read_text())["columns"]
    assert columns == {"age": {"type": "TODO"}, "ward": {"type": "TODO"}}


def test_every_command_names_the_todos_left_and_charges_nothing(tmp_path: Path, cli) -> None:
    data = tmp_path / "patients.parquet"
    pq.write_table(pa.Table.from_pandas(_frame().drop(columns=["when", "notes"]),
                                        preserve_index=False), data)
    out = tmp_path / "configs" / "patients.yaml"      # the ledger goes to ../ledgers: in tmp_path
    assert cli("init", data, "--label", "readmitted", "--out", out).exit_code == 0
    r = cli("inspect", data, "--spec", out)
    assert r.exit_code == 78
    for key in ("budget.epsilon", "label.classes", "label.positive", "columns.age.bounds",
                "columns.ward.categories"):
        assert key in r.stderr
    assert "5 value(s) still TODO" in r.stderr
    r = cli("tabulate", data, "--spec", out, "--epsilon", 0.1, "--out", tmp_path / "t.csv")
    assert r.exit_code == 78 and "still TODO" in r.stderr
    assert not (tmp_path / "ledgers").exists() and not (tmp_path / "t.csv").exists()

    # filled in, the spec runs end to end
    spec = out.read_text().replace("epsilon: TODO", "epsilon: 5").replace(
        "classes: TODO", "classes: [0, 1]").replace("positive: TODO", "positive: 1")
    out.write_text(spec)
    schema = out.parent / "patients.schema.yaml"
    schema.write_text(schema.read_text().replace("bounds: TODO", "bounds: [18, 90]").replace(
        "categories: TODO", "categories: [a, b]"))
    assert cli("ledger", "init", "--spec", out).exit_code == 0
    assert (tmp_path / "ledgers" / "patients.jsonl").exists()
    r = cli("train-nb", data, "--spec", out, "--out", tmp_path / "m.json", "--epsilon", 1)
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "m.json").exists()


def test_init_never_replaces_a_file(tmp_path: Path, cli) -> None:
    data = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pandas(_frame(), preserve_index=False), data)
    schema = tmp_path / "d.schema.yaml"
    schema.write_text("kept\n")
    r = cli("init", data, "--label", "readmitted", "--out", tmp_path / "d.yaml")
    assert r.exit_code == 64 and "already exists" in r.stderr
    assert schema.read_text() == "kept\n" and not (tmp_path / "d.yaml").exists()
    before = data.read_bytes()
    r = cli("init", data, "--label", "readmitted", "--out", data)    # the output is the input
    assert r.exit_code == 64 and data.read_bytes() == before


def test_an_unknown_label_is_named(tmp_path: Path, cli) -> None:
    data = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pandas(_frame(), preserve_index=False), data)
    r = cli("init", data, "--label", "outcome", "--out", tmp_path / "d.yaml")
    assert r.exit_code == 64 and "'outcome'" in r.stderr and "d.parquet" in r.stderr
    assert not (tmp_path / "d.yaml").exists()


def test_a_csv_type_left_todo_is_refused_with_what_to_write(tmp_path: Path, cli) -> None:
    """A CSV's types are TODO (a header has none): ledger init and schema suggest say
    exactly what to write, and with the kind declared and the domain TODO, suggest runs."""
    data = tmp_path / "p.csv"
    rows = [f"{20 + i % 50},{'ab'[i % 2]},{i % 2}" for i in range(400)]
    data.write_text("age,ward,readmitted\n" + "\n".join(rows) + "\n")
    out = tmp_path / "p.yaml"
    assert cli("init", data, "--label", "readmitted", "--out", out).exit_code == 0
    schema = tmp_path / "p.schema.yaml"
    assert "{type: numeric, bounds: TODO}" in schema.read_text()  # the comment says it
    r = cli("inspect", data, "--spec", out)   # the README's first step names every TODO
    assert r.exit_code == 78 and "type of 2 column(s) is still TODO" in r.stderr
    assert "Still TODO besides: p.yaml: budget.epsilon; p.yaml: label.classes" in r.stderr
    out.write_text(out.read_text().replace("epsilon: TODO", "epsilon: 5").replace(
        "delta: 0.0", "delta: 1e-5").replace("classes: TODO", "classes: [0, 1]").replace(
        "positive: TODO", "positive: 1").replace("../ledgers/", "ledgers/"))
    for args in (("ledger", "init", "--spec", out),
                 ("schema", "suggest", data, "--spec", out, "--epsilon", 1, "--out",
                  tmp_path / "s.yaml")):
        r = cli(*args)
        assert r.exit_code == 78, r.stderr
        assert "type of 2 column(s) is still TODO (age, ward)" in r.stderr
        assert "`age: {type: numeric, bounds: TODO}`" in r.stderr
    assert not (tmp_path / "ledgers").exists()
    schema.write_text(schema.read_text().replace(
        "age: {type: TODO}", "age: {type: numeric, bounds: TODO}").replace(
        "ward: {type: TODO}", "ward: {type: categorical, categories: TODO}"))
    assert cli("ledger", "init", "--spec", out).exit_code == 0
    r = cli("schema", "suggest", data, "--spec", out, "--epsilon", 4, "--out",
            tmp_path / "s.yaml", "--seed", 1)
    assert r.exit_code == 0, r.stderr
    suggested = yaml.safe_load((tmp_path / "s.yaml").read_text())["columns"]
    assert set(suggested) == {"age", "ward"}
