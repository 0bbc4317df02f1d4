"""Keep pyarrow from importing pandas on its first conversion (a CLI start-up cost).

Why: pyarrow imports pandas the first time any Python or numpy value becomes an
Arrow array (``pa.array``, ``pa.scalar``), only to ask whether the value is a
pandas object. That import is about 0.3–0.5 s — the largest single part of a
command's fixed cost on a small file (docs/scale.md) — and no command that
reads a file needs pandas. :func:`defer_pandas` lets pyarrow's lazy check find
no pandas, once, at start-up; pyarrow's own pandas conversions (``to_pandas``,
``Table.from_pandas``) import it again when they run, so a command that does
use pandas (``tabulate``'s table output) still works. Called by the CLI entry
point only: a program that imports dpcli as a library keeps pyarrow's default.
"""

from __future__ import annotations

import sys


def defer_pandas() -> None:
    """Make pyarrow's lazy pandas check answer "no pandas" without importing it (no-op if
    pandas is already imported)."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    sys.meta_path.insert(0, _NoPandas)  # `import pandas` raises ImportError for now
    try:
        pa.array([0])  # pyarrow's shim tries its one import here, and remembers the answer
    finally:
        sys.meta_path.remove(_NoPandas)


class _NoPandas:
    """An import finder that refuses pandas (and nothing else)."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
