"""The published JSON Schemas: generated from the declarations, and they accept what dpcli
accepts (the shipped specs, a released file) and refuse what it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from dpcli.jsonschema import envelope_schema, spec_schema

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "docs" / "schemas"


def test_the_published_files_are_the_generated_schemas() -> None:
    assert json.loads((SCHEMAS / "spec.schema.json").read_text()) == spec_schema(), \
        "regenerate: python -m dpcli.jsonschema docs/schemas"
    assert json.loads((SCHEMAS / "envelope.schema.json").read_text()) == envelope_schema()


def test_every_section_key_of_the_registry_is_in_the_spec_schema() -> None:
    from dpcli.params import SECTIONS

    props = spec_schema()["properties"]
    for name, section in SECTIONS.items():
        assert set(props[name]["properties"]) == {p.key for p in section.params}
        assert props[name]["additionalProperties"] is False


@pytest.mark.parametrize("spec", sorted((ROOT / "configs").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_the_shipped_specs_and_schema_files_validate(spec: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = spec_schema()
    raw = yaml.safe_load(spec.read_text())
    if spec.name.endswith(".schema.yaml"):
        schema = {**schema["properties"]["schema"]["oneOf"][1], "$schema": schema["$schema"]}
    jsonschema.validate(raw, schema)


def test_a_bad_section_value_is_refused_by_both(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from dpcli.errors import SpecError
    from dpcli.spec import load_spec

    raw = yaml.safe_load((ROOT / "configs" / "adult.yaml").read_text())
    raw["roc"] = {"epsilon": 0.5, "counts": "fourier"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(raw, spec_schema())
    for name in ("adult.schema.yaml", "adult_taxonomy.json"):
        (tmp_path / name).write_bytes((ROOT / "configs" / name).read_bytes())
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(SpecError, match=r"roc\.counts"):
        load_spec(tmp_path / "spec.yaml")


def test_a_released_file_validates_against_the_envelope_schema(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    import dpcli
    from tests.cli.conftest import make_project

    project = make_project(tmp_path)
    dpcli.Session(project.spec).train_nb(project.data, epsilon=0.5, out=tmp_path / "m.json")
    jsonschema.validate(json.loads((tmp_path / "m.json").read_text()), envelope_schema())
