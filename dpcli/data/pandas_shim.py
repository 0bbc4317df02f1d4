"""Keep pyarrow from importing pandas on its first conversion (a CLI start-up cost).

Why: pyarrow imports pandas the first time any Python or numpy value becomes an
Arrow array (``pa.array``, ``pa.scalar``), only to ask whether the value is a
pandas object. That import is about 0.3–0.5 s — the largest single part of a
command's fixed cost on a small file (docs/scale.md) — and no command that
reads a file needs pandas. :func:`defer_pandas` lets pyarrow's lazy check find
no pandas, once, right after pyarrow is imported; pyarrow's own pandas
conversions (``to_pandas``, ``Table.from_pandas``) import it again when they
run, so a command that does use pandas still works. Called by the CLI entry
point only: a program that imports dpcli as a library keeps pyarrow's default.

The check runs when pyarrow is first imported, not at start-up: a command that
never reads a file (``--help``, ``ledger show``, ``plan``) does not import
pyarrow (nor numpy) at all.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import Any


def defer_pandas() -> None:
    """Make pyarrow's lazy pandas check answer "no pandas" without importing it: now if
    pyarrow is imported already, else right after its import (no-op if pandas is already
    imported)."""
    if "pandas" in sys.modules:
        return
    if "pyarrow" in sys.modules:
        _answer_no_pandas(sys.modules["pyarrow"])
    elif _AfterPyarrow not in sys.meta_path:
        sys.meta_path.insert(0, _AfterPyarrow)


def _answer_no_pandas(pa: Any) -> None:
    """pyarrow's shim tries its one pandas import on the first array, and remembers the
    answer: make that first array now, with pandas refused."""
    if "pandas" in sys.modules:
        return
    sys.meta_path.insert(0, _NoPandas)  # `import pandas` raises ImportError for now
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(_NoPandas)


class _AfterPyarrow:
    """An import finder that finds nothing itself: for pyarrow it asks the ordinary finders
    and has the loader run :func:`_answer_no_pandas` once pyarrow's module has run; it
    leaves the finders then (a mere look-up, ``importlib.util.find_spec``, keeps it)."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> Any:
        if name != "pyarrow":
            return None
        sys.meta_path.remove(_AfterPyarrow)
        try:
            spec = importlib.util.find_spec(name)  # the ordinary finders, without this one
        finally:
            sys.meta_path.insert(0, _AfterPyarrow)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            if _AfterPyarrow in sys.meta_path:
                sys.meta_path.remove(_AfterPyarrow)
            _answer_no_pandas(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


class _NoPandas:
    """An import finder that refuses pandas (and nothing else)."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
