"""JSON Schemas of the spec and of a released file's envelope, generated from the declarations.

The command sections come from :data:`dpcli.params.SECTIONS` (one declaration
per parameter); the rest mirrors what :func:`dpcli.spec.load_spec` and
:func:`dpcli.io.envelope` accept and write. The published files are
``docs/schemas/spec.schema.json`` and ``docs/schemas/envelope.schema.json``;
a test keeps them equal to what this module generates
(``python -m dpcli.jsonschema docs/schemas`` rewrites them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from dpcli import checks, params
from dpcli.data.schema import MISSING_POLICIES

DRAFT = "https://json-schema.org/draft/2020-12/schema"
_NUM: dict[str, Any] = {"type": "number"}
_VALUE: dict[str, Any] = {"type": ["string", "integer", "boolean"]}


def _section(section: params.Section) -> dict[str, Any]:
    return {"type": "object", "description": section.help, "additionalProperties": False,
            "required": ["epsilon"],
            "properties": {p.key: {**p.json, "description": p.help} for p in section.params}}


def _column() -> dict[str, Any]:
    missing = {"enum": list(MISSING_POLICIES)}
    taxonomy = {"description": "a taxonomy (inline or a file) for publish-grid"}
    return {"type": "object", "required": ["type"], "oneOf": [
        {"properties": {"type": {"const": "numeric"},
                        "bounds": {"type": "array", "items": _NUM, "minItems": 2,
                                   "maxItems": 2},
                        "missing": missing, "fill": _NUM, "taxonomy": taxonomy},
         "required": ["type", "bounds"], "additionalProperties": False},
        {"properties": {"type": {"const": "categorical"},
                        "categories": {"type": "array", "items": _VALUE, "minItems": 1},
                        "missing": missing, "taxonomy": taxonomy},
         "required": ["type", "categories"], "additionalProperties": False},
        {"properties": {"type": {"const": "binary"},
                        "values": {"type": "array", "items": _VALUE, "minItems": 2,
                                   "maxItems": 2},
                        "missing": missing, "fill": _VALUE},
         "required": ["type", "values"], "additionalProperties": False},
        {"properties": {"type": {"const": "tokens"}, "vocabulary": {"type": "string"},
                        "max_per_row": {"type": "integer", "minimum": 1}, "missing": missing},
         "required": ["type", "vocabulary"], "additionalProperties": False},
    ]}


def spec_schema() -> dict[str, Any]:
    """The JSON Schema of a dpcli spec (YAML read as JSON)."""
    schema_object = {"type": "object", "required": ["columns"], "additionalProperties": False,
                     "properties": {"columns": {"type": "object",
                                                "additionalProperties": _column()},
                                    "missing": {"enum": list(MISSING_POLICIES)}}}
    return {
        "$schema": DRAFT,
        "$id": "https://dpcli.invalid/schemas/spec.schema.json",
        "title": "dpcli spec",
        "description": "One private dataset: its public schema, the budget that protects it, "
                       "the ledger, and one section per command (docs/spec.md).",
        "type": "object",
        "required": ["dataset", "budget", "ledger", "label", "schema"],
        "additionalProperties": False,
        "properties": {
            "dataset": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$",
                        "description": "the ledger's key: one lifetime budget per dataset id"},
            "description": {"type": "string"},
            "budget": {"type": "object", "required": ["epsilon"],
                       "additionalProperties": False,
                       "properties": {"epsilon": {"type": "number", "exclusiveMinimum": 0},
                                      "delta": {"type": "number", "minimum": 0,
                                                "exclusiveMaximum": 1}}},
            "ledger": {"type": "string", "description": "the ledger file, relative to the spec"},
            "label": {"type": "object", "required": ["column", "classes"],
                      "additionalProperties": False,
                      "properties": {"column": {"type": "string"},
                                     "classes": {"type": "array", "items": _VALUE,
                                                 "minItems": 2},
                                     "positive": _VALUE,
                                     "public": {"type": "boolean",
                                                "description": "true: the label is public "
                                                "knowledge (train-brc Algorithm 2)"}}},
            "schema": {"oneOf": [{"type": "string", "description": "a schema file"},
                                 schema_object]},
            "public_data": {"type": "boolean",
                            "description": "the data is public (benchmarks): allows "
                                           "non-private research output"},
            "spark": {"type": "object", "additionalProperties": False,
                      "properties": {"master": {"type": "string"},
                                     "conf": {"type": "object",
                                              "additionalProperties": _VALUE}}},
            "forecast": {"type": "object", "additionalProperties": False,
                         "properties": {"positive_share": {
                             "type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1,
                             "description": "public knowledge: the positive class's share "
                                            "the forecasts assume (binary labels; no release "
                                            "reads it)"}}},
            **{name: _section(section) for name, section in params.SECTIONS.items()},
        },
    }


def envelope_schema() -> dict[str, Any]:
    """The JSON Schema of the envelope around every released JSON file."""
    from dpcli.io import ENVELOPE_FORMAT, ENVELOPE_SCHEMA_VERSION

    return {
        "$schema": DRAFT,
        "$id": "https://dpcli.invalid/schemas/envelope.schema.json",
        "title": "dpcli release envelope",
        "description": "What wraps every released JSON file: enough to trust and trace it. "
                       "'payload' depends on 'kind' (see docs/algorithms/).",
        "type": "object",
        "required": ["format", "schema_version", "kind", "dpcli_version", "created", "dataset",
                     "spec_digest", "neighbouring", "epsilon", "delta", "ledger_run_id",
                     "seeded", "payload"],
        "properties": {
            "format": {"const": ENVELOPE_FORMAT},
            "schema_version": {"const": ENVELOPE_SCHEMA_VERSION},
            "kind": {"enum": ["naive_bayes", "logistic_regression", "brc", "grid_synopsis",
                              "roc_curve", "evaluation", "feature_selection", "tabulate"]},
            "dpcli_version": {"type": "string"},
            "created": {"type": "string", "description": "UTC, ISO 8601"},
            "dataset": {"type": "string"},
            "spec_digest": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "neighbouring": {"type": "string"},
            "epsilon": {"type": "number", "minimum": checks.MIN_RUN_EPSILON},
            "delta": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
            "ledger_run_id": {"type": "string"},
            "seeded": {"type": "boolean",
                       "description": "true: the noise was seeded (tests and benchmarks)"},
            "payload": {"type": "object",
                        "description": "the release; its error bars are the one uncertainty "
                                       "of each number, from the noise alone (90 %): roc's "
                                       "auc_interval and tpr_lower … fpr_upper per point, "
                                       "evaluate's intervals, tabulate's lower and upper"},
            "forecast": {"type": "object",
                         "description": "the error expected before the spend, from public "
                                        "facts only (docs/forecast.md): command, epsilon, n, "
                                        "method, forecast (metric → expected, interval, "
                                        "level), verdict",
                         "required": ["command", "epsilon", "n", "method", "forecast",
                                      "verdict"]},
        },
    }


def write(folder: Path) -> list[Path]:
    """Write both schemas into ``folder``; returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, schema in (("spec", spec_schema()), ("envelope", envelope_schema())):
        path = folder / f"{name}.schema.json"
        path.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n",
                        encoding="utf-8")
        out.append(path)
    return out


if __name__ == "__main__":   # python -m dpcli.jsonschema docs/schemas
    for written in write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas")):
        print(written)
