"""Start-up cost: what a command imports before it reads data (docs/scale.md, fixed cost).

Each check runs in a fresh interpreter (an import, once done, can not be undone in this one).
"""

from __future__ import annotations

import json
import subprocess
import sys

import yaml


def fresh(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)


def test_defer_pandas_keeps_pyarrow_from_importing_it_and_pandas_still_works() -> None:
    r = fresh(
        "import sys\n"
        "from dpcli.data.pandas_shim import defer_pandas\n"
        "defer_pandas()\n"
        "import pyarrow as pa\n"
        "pa.array(['a', 'b']); pa.scalar(1.5)\n"
        "assert 'pandas' not in sys.modules, 'pyarrow imported pandas'\n"
        "import pandas as pd\n"
        "t = pa.Table.from_pandas(pd.DataFrame({'x': [1.0, None]}), preserve_index=False)\n"
        "assert t.column('x').null_count == 1\n"
        "assert t.to_pandas()['x'].isna().sum() == 1\n"
        "print('ok')\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_a_spending_command_imports_no_pandas_nor_scipy_erm() -> None:
    # the modules train-nb and select-features load before their first data read
    r = fresh(
        "import sys\n"
        "from dpcli.data.pandas_shim import defer_pandas\n"
        "defer_pandas()\n"
        "import dpcli.cli.app, dpcli.run, dpcli.api.spend, dpcli.api.train_nb\n"
        "import dpcli.api.select_features, dpcli.algorithms.naive_bayes\n"
        "import dpcli.algorithms.feature_selection, dpcli.data.reader, dpcli.stats.local\n"
        "import pyarrow as pa; pa.array([1])\n"
        "bad = sorted(m for m in ('pandas', 'scipy.sparse', 'scipy.linalg', 'scipy.special')\n"
        "             if m in sys.modules)\n"
        "print(','.join(bad))\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == ""


def test_erm_names_still_import_from_mechanisms() -> None:
    r = fresh("from dpcli.mechanisms import PrivateFit, objective_perturbation\n"
              "import dpcli.mechanisms as m\n"
              "assert m.output_perturbation.__module__ == 'dpcli.mechanisms.erm'\n"
              "try:\n"
              "    m.no_such_name\n"
              "except AttributeError:\n"
              "    print('ok')\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_train_nb_without_features_does_not_import_feature_selection(tmp_path) -> None:
    from tests.cli.conftest import make_project

    project = make_project(tmp_path)
    r = fresh(
        "import sys\n"
        "from dpcli.cli.app import app\n"
        f"args = ['train-nb', {str(project.data)!r}, '--spec', {str(project.spec)!r},\n"
        "        '--epsilon', '0.5', '--dry-run', '-q']\n"
        "try:\n"
        "    app(args)\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print('dpcli.algorithms.feature_selection' in sys.modules)\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False"


#: run the console entry point (``dpcli.cli.app.main``, as the installed ``dpcli`` does) and
#: print, at its exit, which of these heavy modules the process imported
ENTRY = (
    "import atexit, sys\n"
    "HEAVY = ('numpy', 'pyarrow', 'pydantic', 'pandas', 'scipy', 'scipy.special',\n"
    "         'scipy.sparse', 'scipy.stats', 'scipy.optimize', 'matplotlib', 'rich',\n"
    "         'pyarrow.compute')\n"
    "atexit.register(lambda: print('imported:', ','.join(m for m in HEAVY\n"
    "                                                   if m in sys.modules)))\n"
    "sys.argv = ['dpcli', *{args!r}]\n"
    "from dpcli.cli.app import main\n"
    "main()\n")


def imported_by(*args: object) -> tuple[int, set[str]]:
    r = fresh(ENTRY.format(args=[str(a) for a in args]))
    lines = [line for line in r.stdout.splitlines() if line.startswith("imported:")]
    assert lines, (r.returncode, r.stdout, r.stderr)
    return r.returncode, set(filter(None, lines[-1].split(":", 1)[1].strip().split(",")))


def test_help_imports_no_data_library_nor_pydantic() -> None:
    # typer builds every command's options: building them must not load a command's
    # libraries, and typer's pydantic converters are not needed for --help
    for args in (["--help"], ["train-nb", "--help"], ["select-features", "--help"],
                 ["ledger", "show", "--help"]):
        code, mods = imported_by(*args)
        assert code == 0, args
        assert not mods & {"numpy", "pyarrow", "pydantic", "pandas", "scipy", "matplotlib"}, \
            (args, mods)


def test_every_commands_help_imports_no_data_library() -> None:
    # all commands' --help in one process: building and showing the help of each must not
    # import what running it needs
    r = fresh(
        "import io, sys, contextlib\n"
        "import typer\n"
        "from dpcli.cli.app import app\n"
        "root = typer.main.get_command(app)\n"
        "paths = []\n"
        "for name, cmd in root.commands.items():\n"
        "    subs = getattr(cmd, 'commands', None)\n"
        "    paths += [[name, s] for s in subs] if subs else [[name]]\n"
        "for path in paths:\n"
        "    with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "        try:\n"
        "            app([*path, '--help'])\n"
        "        except SystemExit as exc:\n"
        "            assert not exc.code, (path, exc.code)\n"
        "    assert 'Usage' in out.getvalue(), path\n"
        "heavy = ('numpy', 'pyarrow', 'pydantic', 'pandas', 'scipy', 'matplotlib')\n"
        "print(len(paths), ','.join(m for m in heavy if m in sys.modules))\n")
    assert r.returncode == 0, r.stderr
    count, _, mods = r.stdout.strip().splitlines()[-1].partition(" ")
    assert int(count) >= 20
    assert mods == ""


def test_a_quiet_train_nb_run_imports_only_what_it_needs(tmp_path) -> None:
    from tests.cli.conftest import make_project

    project = make_project(tmp_path)
    code, mods = imported_by("train-nb", project.data, "--spec", project.spec, "--out",
                             tmp_path / "nb.json", "--epsilon", "0.5", "-q")
    assert code == 0
    assert (tmp_path / "nb.json").exists()
    assert {"numpy", "pyarrow"} <= mods  # the check sees the modules of a real run
    # text and path options need no pydantic; pyarrow's pandas check is answered without
    # pandas; no picture, no sparse algebra; a quiet run with nothing to say needs no rich;
    # the readers call Arrow's kernels without pyarrow.compute's 300 wrappers (25 ms)
    assert not mods & {"pydantic", "pandas", "matplotlib", "scipy.sparse", "scipy.stats",
                       "scipy.optimize", "rich", "pyarrow.compute"}, mods


def test_a_gaussian_train_nb_run_imports_no_scipy(tmp_path) -> None:
    # the truncated Gaussian's log Φ (model likelihood, threshold pass, forecast) comes from
    # dpcli.algorithms.normal: scipy.special was 0.2 s of start-up for a handful of values
    from tests.cli.conftest import make_project

    project = make_project(tmp_path)

    def gaussian(spec: dict) -> None:
        spec["train-nb"] = {"epsilon": 0.5, "numeric": "gaussian", "distribution": "truncated"}

    project.write_spec(gaussian)
    code, mods = imported_by("train-nb", project.data, "--spec", project.spec, "--out",
                             tmp_path / "nb.json", "-q")
    assert code == 0
    model = json.loads((tmp_path / "nb.json").read_text())["payload"]
    assert model["config"]["distribution"] == "truncated" and model["threshold"] is not None
    assert model["numeric"]["age"].get("bins") is None   # Gaussian, not a histogram
    assert "numpy" in mods and not mods & {"scipy", "scipy.special"}, mods


def test_a_quiet_tabulate_of_a_csv_file_imports_no_pyarrow_compute(tmp_path) -> None:
    # the CSV reader's kernels (null markers, trimming, casts) and the encoders' come from
    # dpcli.data.arrow_compute
    from tests.cli.conftest import make_project

    project = make_project(tmp_path)
    code, mods = imported_by("tabulate", project.csv, "--spec", project.spec, "--out",
                             tmp_path / "t.csv", "--epsilon", "0.5", "-q")
    assert code == 0 and (tmp_path / "t.csv").exists()
    assert "pyarrow" in mods and "pyarrow.compute" not in mods, mods


def test_ledger_show_reads_the_ledger_without_numpy(tmp_path) -> None:
    from tests.cli.conftest import make_project

    project = make_project(tmp_path)
    code, mods = imported_by("ledger", "show", "--spec", project.spec)
    assert code == 0
    assert not mods & {"numpy", "pyarrow", "pydantic", "pandas", "scipy"}, mods


def test_show_of_a_json_release_imports_no_data_library(tmp_path) -> None:
    """show reads a release's JSON; only a Parquet file (synthesize, predict) needs pyarrow."""
    import json

    env = {"format": "dpcli", "schema_version": 1, "kind": "tabulate", "dataset": "d",
           "epsilon": 0.1, "delta": 0.0, "payload": {"columns": ["a"]}}
    from dpcli.io import ENVELOPE_SCHEMA_VERSION

    env["schema_version"] = ENVELOPE_SCHEMA_VERSION
    (tmp_path / "t.json").write_text(json.dumps(env))
    code, mods = imported_by("show", tmp_path / "t.json")
    assert code == 0
    assert not mods & {"numpy", "pyarrow", "pandas", "scipy"}, mods


def test_a_number_option_still_gets_typers_conversion_and_range(tmp_path) -> None:
    # options other than text and paths keep typer's own converter (built on a value)
    from tests.cli.conftest import make_project

    project = make_project(tmp_path)
    code, _ = imported_by("train-nb", project.data, "--spec", project.spec, "--out",
                          tmp_path / "nb.json", "--seed", "-1", "-q")
    assert code == 64  # --seed has min=0: the option parser's usage error
    code, _ = imported_by("train-nb", project.data, "--spec", project.spec, "--out",
                          tmp_path / "nb.json", "--epsilon", "0.5x", "-q")
    assert code == 64
    assert not (tmp_path / "nb.json").exists()


def test_a_spec_parses_its_schema_file_once_and_a_new_read_sees_an_edit(tmp_path,
                                                                       monkeypatch) -> None:
    from dpcli import checks
    from dpcli.spec import load_spec
    from tests.cli.conftest import make_project

    project = make_project(tmp_path)
    schema = tmp_path / "schema.yaml"
    spec = yaml.safe_load(project.spec.read_text())
    schema.write_text(yaml.safe_dump(spec["schema"]))
    spec["schema"] = str(schema)
    project.spec.write_text(yaml.safe_dump(spec))
    parsed: list[str] = []
    parse = checks._parse_yaml
    monkeypatch.setattr(checks, "_parse_yaml", lambda p: (parsed.append(p.name), parse(p))[1])
    first = load_spec(project.spec)
    assert sorted(parsed) == ["schema.yaml", "spec.yaml"]  # the schema once, not twice
    # the memory lasts one load: an edit of the same size is read by the next load
    text = schema.read_text()
    assert "[17, 90]" in text or "- 17" in text
    schema.write_text(text.replace("17", "18"))
    second = load_spec(project.spec)
    assert len(parsed) == 4
    assert first.schema.column("age").lower == 17 and second.schema.column("age").lower == 18


def test_defer_pandas_before_pyarrow_is_imported_answers_after_its_import() -> None:
    # the CLI arms the check before anything imports pyarrow (so that --help need not): a
    # look-up of pyarrow's spec does not use it up, the real import answers it
    r = fresh(
        "import importlib.util, sys\n"
        "from dpcli.data.pandas_shim import defer_pandas\n"
        "defer_pandas()\n"
        "assert 'pyarrow' not in sys.modules\n"
        "assert importlib.util.find_spec('pyarrow') is not None\n"
        "import pyarrow as pa\n"
        "pa.array([1.5, None]); pa.scalar('x')\n"
        "assert 'pandas' not in sys.modules, 'pyarrow imported pandas'\n"
        "assert not any(type(f).__name__ == '_AfterPyarrow' or f.__name__ == '_AfterPyarrow'\n"
        "               for f in sys.meta_path if hasattr(f, '__name__')), sys.meta_path\n"
        "print('ok')\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_the_entry_point_builds_only_the_command_it_runs(monkeypatch) -> None:
    # typer builds every registered command's options before parsing: the console entry
    # point hands it a copy of the app holding the named command alone; the root's options,
    # no command, a misspelt one and shell completion get the whole app
    from dpcli.cli.app import app, app_for, root

    one = app_for(["train-nb", "data.parquet", "--spec", "s.yaml"])
    assert one is not app
    assert [c.name for c in one.registered_commands] == ["train-nb"]
    assert one.registered_groups == []
    assert one.registered_callback.callback is app.registered_callback.callback is root
    ledger = app_for(["ledger", "show"])
    assert [g.name for g in ledger.registered_groups] == ["ledger"]
    assert ledger.registered_commands == []
    for args in ([], ["--help"], ["--version"], ["trian-nb"], ["-h"]):
        assert app_for(args) is app, args
    monkeypatch.setenv("_DPCLI_COMPLETE", "complete_bash")
    assert app_for(["train-nb"]) is app


def test_the_entry_point_imports_only_the_command_module_it_runs() -> None:
    # each command's module is imported when its command is registered: the entry point
    # registers one
    r = fresh("import sys\n"
              "from dpcli.cli.app import app_for\n"
              "app_for(['train-nb', 'data.parquet'])\n"
              "print(sorted(m for m in sys.modules if m.startswith('dpcli.cli.')\n"
              "             and m.endswith('_cmd')))\n"
              "import dpcli.cli.app as a\n"
              "whole = a.app\n"
              "print(len([m for m in sys.modules if m.startswith('dpcli.cli.')\n"
              "           and m.endswith('_cmd')]), len(whole.registered_commands))\n")
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.strip().splitlines()
    assert first == "['dpcli.cli.train_nb_cmd']"
    assert second == "16 14"   # the whole app: 14 commands and 2 groups (ledger, schema)


def test_a_usage_error_through_the_entry_point_is_still_exit_64_with_its_json(
        tmp_path) -> None:
    from tests.cli.conftest import make_project

    project = make_project(tmp_path)
    r = fresh(ENTRY.format(args=["train-nb", str(project.data), "--spec", str(project.spec),
                                 "--out", str(tmp_path / "nb.json"), "--epsilon", "0.5x",
                                 "--json"]))
    assert r.returncode == 64, r.stderr
    error = json.loads(r.stdout.splitlines()[0])
    assert error["exit_code"] == 64 and "0.5x" in json.dumps(error)
    assert not (tmp_path / "nb.json").exists()


def test_a_roc_run_draws_its_png_without_matplotlib(tmp_path) -> None:
    # curve.png is drawn with Pillow (dpcli/plot.py): matplotlib's import and layout were
    # about half of a small roc run
    from tests.cli.conftest import make_project

    project = make_project(tmp_path)
    model = tmp_path / "nb.json"
    code, _ = imported_by("train-nb", project.data, "--spec", project.spec, "--out", model,
                          "--epsilon", "0.5", "-q")
    assert code == 0
    code, mods = imported_by("roc", project.data, "--spec", project.spec, "--model", model,
                             "--out", tmp_path / "roc", "--epsilon", "0.5", "-q")
    assert code == 0
    assert (tmp_path / "roc" / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "matplotlib" not in mods and "numpy" in mods, mods
