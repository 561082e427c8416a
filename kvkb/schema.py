"""The JSON Schema editors validate kb/*.yaml against, generated from kvkb.entry."""

from __future__ import annotations

import json
from pathlib import Path

from .entry import Entry
from .loader import REPO_ROOT

SCHEMA_PATH = REPO_ROOT / "kb" / "schema.json"


def generate() -> dict:
    schema = Entry.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return schema


def render() -> str:
    """The file's exact text: sorted keys and a final newline so regeneration is byte-stable."""
    return json.dumps(generate(), indent=2, sort_keys=True) + "\n"


def write(path: Path = SCHEMA_PATH) -> None:
    path.write_text(render(), encoding="utf-8")


if __name__ == "__main__":  # python -m kvkb.schema regenerates kb/schema.json
    write()
