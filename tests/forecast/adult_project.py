"""configs/adult.yaml on a synthetic file of Adult's declared domains, for plan-vs-dry-run tests.

The shipped spec, schema and taxonomy are copied to a temporary folder (the spec's ledger
path, ../ledgers/, lands beside it) and a file of ``rows`` records drawn uniformly from the
declared domains is written: no real data is read (tests must not depend on ../shared).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tests.cli.conftest import cli_runner, sync_ledger

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def adult_project(tmp_path: Path, rows: int = 2000, seed: int = 0) -> tuple[Path, Path, Any]:
    """(spec path, data path, loaded Spec) of the adult project in ``tmp_path``."""
    from dpcli.data.schema import CategoricalColumn, NumericColumn
    from dpcli.spec import load_spec

    folder = tmp_path / "configs"
    folder.mkdir()
    (tmp_path / "ledgers").mkdir()
    for name in ("adult.yaml", "adult.schema.yaml", "adult_taxonomy.json"):
        shutil.copy(CONFIGS / name, folder / name)
    spec_path = folder / "adult.yaml"
    sync_ledger(spec_path)
    spec = load_spec(spec_path)
    rng = np.random.default_rng(seed)
    frame: dict[str, Any] = {}
    for col in spec.schema.columns:
        if isinstance(col, NumericColumn):
            frame[col.name] = rng.integers(int(col.lower), int(col.upper) + 1, rows)
        else:
            assert isinstance(col, CategoricalColumn)
            frame[col.name] = rng.choice(list(col.categories), rows)
    frame["label"] = rng.integers(0, 2, rows)
    data = tmp_path / "adult.parquet"
    pd.DataFrame(frame).to_parquet(data, index=False)
    return spec_path, data, spec


def dry_run_breakdown(command: str, spec_path: Path, data: Path, *extra: object) -> list[dict]:
    """The plan ``dpcli COMMAND DATA --spec SPEC --dry-run --json`` shows (the real CLI)."""
    r = cli_runner()(command, data, "--spec", spec_path, "--dry-run", "--json", *extra)
    assert r.exit_code == 0, r.stderr
    return list(json.loads(r.stdout)["breakdown"])
