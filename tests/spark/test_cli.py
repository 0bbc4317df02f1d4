"""``dpcli train-nb … --engine spark`` end to end: the same release as the local engine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from dpcli.cli.app import app
from dpcli.ledger import init_ledger, read_entries
from dpcli.spec import load_spec

pytest.importorskip("pyspark")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pyspark's distutils

ROOT = Path(__file__).resolve().parents[2]


def project(tmp_path: Path, threshold: bool = True) -> Path:
    for name in ("adult.schema.yaml", "adult_taxonomy.json"):
        shutil.copy(ROOT / "configs" / name, tmp_path / name)
    spec = yaml.safe_load((ROOT / "configs" / "adult.yaml").read_text())
    spec["ledger"] = "ledger.jsonl"
    if not threshold:
        spec["train-nb"]["threshold"] = False
    spec["spark"] = {"master": "local[2]", "conf": {"spark.ui.enabled": False}}
    path = tmp_path / "adult.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    spec_ = load_spec(path)
    init_ledger(spec_.ledger_path, spec_.dataset, spec_.budget)
    return path


def close(a: Any, b: Any, where: str = "") -> None:
    """Equal JSON, floats to 1e-9 relative (the engines add sums in another order)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            close(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            close(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert np.isclose(a, b, rtol=1e-9, atol=0), where
    else:
        assert a == b, where


def test_train_nb_on_spark_releases_what_the_local_engine_releases(spark: Any,
                                                                   tmp_path: Path) -> None:
    # the spark engine plans no decision threshold (its pass is local only): compare the two
    # engines without it, so that both plans and both releases are the same
    spec = project(tmp_path, threshold=False)
    data = ROOT / "sample_data" / "adult_train.csv"
    runner = CliRunner()
    outputs = {}
    for engine in ("spark", "local"):
        out = tmp_path / f"nb-{engine}.json"
        result = runner.invoke(app, ["train-nb", str(data), "--spec", str(spec), "--engine",
                                     engine, "--out", str(out), "--seed", "5", "--json"])
        assert result.exit_code == 0, result.output
        outputs[engine] = json.loads(out.read_text())
        assert json.loads(result.stdout)["model"] == str(out)
    # one seed, one ledger key: the same noise on the same statistics
    close(outputs["spark"]["payload"], outputs["local"]["payload"])
    assert outputs["spark"]["payload"] != {} and outputs["spark"]["epsilon"] == 1.0
    reserves = [e for e in read_entries(tmp_path / "ledger.jsonl") if e["kind"] == "reserve"]
    assert len(reserves) == 2
    # a local file is digested by its bytes whichever engine reads it
    assert reserves[0]["input_digest"] == reserves[1]["input_digest"]
    assert reserves[0]["input_digest"].startswith("hmac-sha256:")
    assert reserves[0]["input_file"] == str(data)


def test_spark_run_with_bad_data_charges_nothing(spark: Any, tmp_path: Path) -> None:
    spec = project(tmp_path)
    rows = (ROOT / "sample_data" / "adult_train.csv").read_text().splitlines()
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([*rows[:50], rows[50].rsplit(",", 1)[0] + ",7", *rows[51:100]])
                   + "\n")
    result = CliRunner().invoke(app, ["train-nb", str(bad), "--spec", str(spec), "--engine",
                                      "spark", "--out", str(tmp_path / "m.json"), "--report"])
    assert result.exit_code == 65
    assert (f"{bad}: column 'label': label value outside the declared classes in data row 50 "
            in result.output)
    assert [e["kind"] for e in read_entries(tmp_path / "ledger.jsonl")] == ["genesis"]
    assert not (tmp_path / "m.json").exists()


def test_train_nb_on_parquet_aggregated_by_spark(spark: Any, tmp_path: Path) -> None:
    """Parquet takes Spark's own aggregations: the same release as the local engine."""
    from dpcli.stats import spark_aggregate

    spec = project(tmp_path, threshold=False)
    data = ROOT / "sample_data" / "adult_train.parquet"
    calls: list[int] = []
    real = spark_aggregate.aggregate

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    outputs = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(spark_aggregate, "aggregate", spy)
        for engine in ("spark", "local"):
            out = tmp_path / f"nb-{engine}.json"
            result = CliRunner().invoke(app, ["train-nb", str(data), "--spec", str(spec),
                                              "--engine", engine, "--out", str(out),
                                              "--seed", "5"])
            assert result.exit_code == 0, result.output
            outputs[engine] = json.loads(out.read_text())
    assert calls == [1]
    close(outputs["spark"]["payload"], outputs["local"]["payload"])


def test_spark_submit_runs_dpcli_as_its_application(spark: Any, tmp_path: Path) -> None:
    """docs/spark.md's cluster recipe on a local master: ``spark-submit --master …
    dpcli/__main__.py train-nb … --engine spark`` releases what the local engine releases
    (the spec names no master, so spark-submit's rules)."""
    import os
    import subprocess
    import sys

    import pyspark

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    spec_path = project(tmp_path, threshold=False)
    raw = yaml.safe_load(spec_path.read_text())
    del raw["spark"]
    spec_path.write_text(yaml.safe_dump(raw, sort_keys=False))
    data = ROOT / "sample_data" / "adult_train.parquet"
    main = Path(__file__).resolve().parents[2] / "dpcli" / "__main__.py"
    env = {k: v for k, v in os.environ.items() if k != "DPCLI_SPARK_MASTER"}
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    out = tmp_path / "nb-submit.json"
    done = subprocess.run([str(submit), "--master", "local[1]", "--conf",
                           "spark.ui.enabled=false", str(main), "train-nb", str(data),
                           "--spec", str(spec_path), "--engine", "spark", "--out", str(out),
                           "--seed", "5", "-q"], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    local = tmp_path / "nb-local.json"
    result = CliRunner().invoke(app, ["train-nb", str(data), "--spec", str(spec_path),
                                      "--out", str(local), "--seed", "5"])
    assert result.exit_code == 0, result.output
    close(json.loads(out.read_text())["payload"], json.loads(local.read_text())["payload"])
