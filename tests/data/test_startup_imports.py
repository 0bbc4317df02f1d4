"""Start-up cost: what a command imports before it reads data (docs/scale.md, fixed cost).

Each check runs in a fresh interpreter (an import, once done, can not be undone in this one).
"""

from __future__ import annotations

import subprocess
import sys


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
