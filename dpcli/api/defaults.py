"""Defaults that fit the declared schema, for commands run with no options.

They depend on public facts only (the declared columns and their kinds, the
vocabulary sizes), so choosing them costs nothing (docs/design.md rule 3:
choices from the spec are free). Each default is said on stderr so that a
user sees what ran.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from dpcli.data.schema import BinaryColumn, Schema, TokensColumn

#: at most this many features are selected by default (topk spends ε/k per round)
DEFAULT_K_CAP = 20


def select_features_defaults(schema: Schema, columns: Sequence[str],
                             values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``values`` (the spec's and the command line's FSConfig fields) completed so that a
    run with no options works on the declared columns; returns them and what was chosen.

    - score: tc (the paper's) when tokens or binary columns are declared (or named by
      --columns), else chi2, which scores any column.
    - method: without a method, τ or k, topk with k = half the candidates (at least 1,
      at most 20): a threshold needs a τ on the score's scale, which only the user knows.
    """
    values = dict(values)
    notes: list[str] = []
    named = [schema.column(c) for c in columns] if columns else list(schema.columns)
    binary = [c for c in named if isinstance(c, TokensColumn | BinaryColumn)]
    if "score" not in values and not binary:
        values["score"] = "chi2"
        notes.append("score chi2 (no tokens or binary column to score with tc)")
    if not {"method", "threshold", "k"} & values.keys():
        score = values.get("score", "tc")
        if score == "chi2":
            candidates = len(named)
        else:
            candidates = sum(len(c.vocabulary) if isinstance(c, TokensColumn) else 1
                             for c in binary)
        k = min(DEFAULT_K_CAP, max(1, math.ceil(candidates / 2)))
        values["method"], values["k"] = "topk", k
        notes.append(f"method topk with k = {k} (half of the {candidates} candidates, "
                     f"at most {DEFAULT_K_CAP}; --method threshold needs --threshold)")
    return values, notes
