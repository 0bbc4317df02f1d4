"""--progress (lines for logs without a terminal) and --engine (who computes statistics)."""

from __future__ import annotations

import re

import pytest

from tests.cli.conftest import Project

COMMANDS = {
    "tabulate": ("counts.csv",),
    "train-nb": ("m.json",),
    "select-features": ("f.json",),
    "publish-grid": ("grid",),
}


def _run(cli, project: Project, command: str, *extra: object, data: object = None):
    return cli(command, data or project.data, "--spec", project.spec,
               "--out", project.root / COMMANDS[command][0], "--seed", 1, *extra)


@pytest.fixture
def spec_with_sections(project: Project) -> Project:
    def mutate(spec: dict) -> None:
        spec["budget"]["epsilon"] = 20.0
        spec["train-nb"] = {"epsilon": 1.0, "columns": ["age", "color", "member"]}
        spec["select-features"] = {"epsilon": 0.5, "columns": ["color", "member"],
                                   "method": "topk", "k": 1, "score": "chi2",
                                   "allow_noise": True}   # n = 400: noisy by design
        spec["publish-grid"] = {"epsilon": 1.0, "columns": ["age", "color"]}
        spec["schema"]["columns"]["age"]["taxonomy"] = {"bins": [2, 4]}
    project.write_spec(mutate)
    return project


def test_no_terminal_no_progress_unless_asked(project: Project, cli) -> None:
    quiet = _run(cli, project, "tabulate")
    assert quiet.exit_code == 0, quiet.stderr
    assert "rows/s" not in quiet.stderr  # cron: no bar, no progress lines

    asked = _run(cli, project, "tabulate", "--progress", "--quiet")
    assert asked.exit_code == 0, asked.stderr
    # the closing line: all 400 rows, a rate, no ETA once done; --progress wins over --quiet
    line = next(s for s in asked.stderr.splitlines() if "rows/s" in s)
    assert re.fullmatch(r"counting: 400 rows(?: of 400 \(100%\))?, [\d,]+ rows/s", line), line
    assert "spent" not in asked.stderr  # --quiet still silences the talk


def test_progress_lines_are_periodic_and_count_every_row() -> None:
    from dpcli.cli.ui import UI

    ui = UI(force_progress=True)
    lines: list[str] = []
    ui.err.print = lambda text, **_: lines.append(str(text))  # type: ignore[method-assign]
    with ui._progress_lines("reading", 1000, every=0.0) as advance:
        for _ in range(4):
            advance(250)
    assert len(lines) == 5  # one per batch (every=0) and the closing line
    assert lines[0].startswith("reading: 250 rows of 1,000 (25%)")
    assert "s left" in lines[0] and "s left" not in lines[-1]
    assert lines[-1].startswith("reading: 1,000 rows of 1,000 (100%)")


def test_engine_is_recorded_in_the_ledger(spec_with_sections: Project, cli) -> None:
    p = spec_with_sections
    for command in COMMANDS:
        r = _run(cli, p, command, "--engine", "local")
        assert r.exit_code == 0, (command, r.stderr)
    reserves = p.reserves()
    assert [e["command"] for e in reserves] == list(COMMANDS)
    assert all(e["arguments"]["engine"] == "local" for e in reserves)


def test_unknown_engine_and_uri_without_spark_are_refused_charging_nothing(project: Project,
                                                                       cli) -> None:
    r = _run(cli, project, "tabulate", "--engine", "dask")
    assert r.exit_code == 64
    assert "engine 'dask'" in r.stderr and "local" in r.stderr
    r = _run(cli, project, "tabulate", data="s3a://bucket/dir/")
    assert r.exit_code == 64
    assert "s3a://bucket/dir/" in r.stderr and "--engine spark" in r.stderr
    assert project.reserves() == []
    assert not (project.root / "counts.csv").exists()


def test_a_csv_pass_knows_its_total_from_the_pre_charge_count(project: Project, cli) -> None:
    r = _run(cli, project, "tabulate", "--progress", data=project.csv)
    assert r.exit_code == 0, r.stderr
    assert re.search(r"^counting: 400 rows of 400 \(100%\)", r.stderr, re.M), r.stderr


def test_predict_and_validate_report_progress_on_request(spec_with_sections: Project,
                                                         cli) -> None:
    p = spec_with_sections
    assert _run(cli, p, "train-nb").exit_code == 0
    r = cli("predict", p.root / "m.json", p.data, "--out", p.root / "preds.parquet",
            "--progress")
    assert r.exit_code == 0, r.stderr
    assert re.search(r"^predicting: 400 rows, [\d,]+ rows/s$", r.stderr, re.M), r.stderr
    r = cli("validate", p.data, "--spec", p.spec, "--out", p.root / "lr.json", "--seed", 1,
            "--epsilon", 1.0, "--columns", "age,color", "--grid", "0.1,1", "--lambda", "search",
            "--progress", "-q")
    assert r.exit_code == 0, r.stderr
    assert re.search(r"^reading: 400 rows of 400 \(100%\)", r.stderr, re.M), r.stderr
    assert re.search(r"^tuning: 3 fits of 3 \(100%\), [\d,]+ fits/s$", r.stderr, re.M)


def test_spark_refusals_before_any_value_is_read(spec_with_sections: Project, cli) -> None:
    """URIs with credentials, secret-looking Spark properties and the smooth method on Spark
    exit 64 before the charge (and before Spark or Java is even looked for)."""
    p = spec_with_sections
    r = _run(cli, p, "tabulate", "--engine", "spark",
             data="s3a://user:hunter2@bucket/dir/?X-Amz-Signature=abc")
    assert r.exit_code == 64
    assert "credentials or a query string" in r.stderr
    assert "hunter2" not in r.stderr and "abc" not in r.stderr

    r = _run(cli, p, "train-nb", "--engine", "spark", "--method", "smooth")
    assert r.exit_code == 64 and "--method smooth runs on the local engine only" in r.stderr

    def secret(spec: dict) -> None:
        spec["spark"] = {"conf": {"spark.authenticate.secret": "s3cr3t"}}
    p.write_spec(secret)
    r = _run(cli, p, "tabulate")
    assert r.exit_code == 78
    assert "spark.conf.spark.authenticate.secret" in r.stderr and "secret" in r.stderr
    assert "s3cr3t" not in r.stderr
    assert p.reserves() == []


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_inspect_reports_progress_on_request(project: Project, cli, fmt: str) -> None:
    """inspect's two passes (validation, then the declared columns) report rows like a run."""
    data = project.data if fmt == "parquet" else project.csv
    r = cli("inspect", data, "--spec", project.spec)
    assert r.exit_code == 0, r.stderr
    assert "rows/s" not in r.stderr   # no terminal: no progress unless asked
    r = cli("inspect", data, "--spec", project.spec, "--progress", "--quiet")
    assert r.exit_code == 0, r.stderr
    for what in ("validation pass", "reading the declared columns"):
        assert re.search(rf"^{what}: 400 rows(?: of 400 \(100%\))?, [\d,]+ rows/s$",
                         r.stderr, re.M), r.stderr
