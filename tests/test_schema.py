"""kb/schema.json equals the model, is a valid JSON Schema, and accepts every kb entry (jsonschema too)."""

import json

import jsonschema
import pytest
import yaml

from kvkb import schema
from kvkb.loader import entry_files, kb_dir

ENTRIES = entry_files(kb_dir())


def test_schema_file_is_regenerated_from_the_model():
    on_disk = schema.SCHEMA_PATH.read_text(encoding="utf-8")
    assert on_disk == schema.render(), "kb/schema.json is stale: run `python -m kvkb.schema`"


def test_schema_is_valid_draft_2020_12():
    jsonschema.Draft202012Validator.check_schema(schema.generate())


def test_schema_rejects_what_the_model_rejects():
    validator = jsonschema.Draft202012Validator(schema.generate())
    good = yaml.safe_load(ENTRIES[0].read_text(encoding="utf-8"))
    assert list(validator.iter_errors(good)) == []
    for mutate in (
        lambda d: d.update(severity="deadly"),
        lambda d: d.update(fixes_cli="x"),
        lambda d: d.pop("signatures"),
        lambda d: d["signatures"][0].update(versions="0.9.1"),
        lambda d: d.update(meaning="   "),
        lambda d: d.update(id="Not_Kebab"),
    ):
        bad = yaml.safe_load(ENTRIES[0].read_text(encoding="utf-8"))
        mutate(bad)
        assert list(validator.iter_errors(bad)), mutate


@pytest.mark.parametrize("path", ENTRIES, ids=[p.stem for p in ENTRIES])
def test_every_entry_validates_against_the_schema_file(path):
    validator = jsonschema.Draft202012Validator(json.loads(schema.SCHEMA_PATH.read_text(encoding="utf-8")))
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(yaml.safe_load(path.read_text(encoding="utf-8")))]
    assert errors == []


def test_write_regenerates(tmp_path):
    target = tmp_path / "schema.json"
    schema.write(target)
    assert json.loads(target.read_text()) == schema.generate()
