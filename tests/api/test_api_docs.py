"""docs/api.md's examples run as written (doctest), on the shipped sample, with a fresh ledger."""

from __future__ import annotations

import doctest
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_api_page_s_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("sklearn")
    from dpcli.ledger import init_ledger
    from dpcli.spec import load_spec

    for folder in ("configs", "sample_data"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    monkeypatch.chdir(tmp_path)
    spec = load_spec(Path("configs/adult.yaml"))
    init_ledger(spec.ledger_path, spec.dataset, spec.budget)
    result = doctest.testfile(str(ROOT / "docs" / "api.md"), module_relative=False,
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 20
    assert result.failed == 0
