"""Load and validate kb/ entries: the one place the site, the matcher index and the runner read them."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from . import yamlpos
from .codes import EntryError, Problem
from .entry import Entry

REPO_ROOT = Path(__file__).resolve().parent.parent


def kb_dir() -> Path:
    """KVKB_KB_DIR if set, else the kb/ folder of this checkout."""
    env = os.environ.get("KVKB_KB_DIR")
    return Path(env) if env else REPO_ROOT / "kb"


def entry_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.yaml") if not p.name.startswith("."))


def _known_keys(model: type, path: tuple) -> list[str]:
    """Field names (and aliases) of the model that owns the key at path."""
    from pydantic import BaseModel

    current: type = model
    for part in path[:-1]:
        if isinstance(part, int):
            continue
        field_info = current.model_fields.get(part) if isinstance(current, type) and issubclass(current, BaseModel) else None
        if field_info is None:
            return []
        current = _inner_model(field_info.annotation)
        if current is None:
            return []
    return [f.alias or name for name, f in current.model_fields.items()]


def _inner_model(annotation):
    from typing import get_args

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _problems_from_validation(exc: ValidationError, located: yamlpos.Located, shown: str) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        # pydantic reports errors raised in model validators with no field; "[1]" style tuples ok
        line, col = located.where(loc)
        dotted = ".".join(str(p) for p in loc) or "(entry)"
        kind = err["type"]
        if kind == "missing":
            problems.append(Problem(shown, line, col, "KB010", f"missing key '{loc[-1]}' in {'.'.join(map(str, loc[:-1])) or 'entry'}"))
        elif kind == "extra_forbidden":
            key = str(loc[-1])
            close = difflib.get_close_matches(key, _known_keys(Entry, loc), n=1, cutoff=0.5)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            problems.append(Problem(shown, line, col, "KB012", f"unknown key '{key}'{hint}"))
        else:
            msg = err["msg"].removeprefix("Value error, ")
            code = "KB030" if "version range" in msg else "KB011"
            got = err.get("input")
            got_s = "" if isinstance(got, (dict, list)) or got is None else f" (got {got!r:.60})"
            problems.append(Problem(shown, line, col, code, f"{dotted}: {msg}{got_s}"))
    return problems


def load_entry(path: Path, shown: str | None = None) -> tuple[Entry | None, list[Problem], yamlpos.Located | None]:
    """Parse and validate one file. Never raises for bad content: problems come back instead."""
    shown = shown or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem(shown, 1, 1, "KB003", f"cannot read: {exc}")], None
    try:
        located = yamlpos.load(text)
    except yamlpos.YamlSyntaxError as exc:
        return None, [Problem(shown, exc.line, exc.column, "KB001", f"YAML syntax: {exc.message}")], None
    problems = [Problem(shown, line, col, "KB013", f"duplicate key '{p[-1]}'") for p, (line, col) in located.duplicate_keys]
    if not isinstance(located.data, dict):
        kind = type(located.data).__name__ if located.data is not None else "an empty document"
        return None, problems + [Problem(shown, 1, 1, "KB002", f"expected a mapping (an entry), found {kind}")], located
    try:
        entry = Entry.model_validate(located.data)
    except ValidationError as exc:
        return None, problems + _problems_from_validation(exc, located, shown), located
    if entry.id != path.stem:
        line, col = located.where(("id",))
        problems.append(Problem(shown, line, col, "KB020", f"id '{entry.id}' does not match file name '{path.name}'"))
    return entry, problems, located


@dataclass
class KB:
    entries: dict[str, Entry] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    located: dict[str, yamlpos.Located] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def load_kb(directory: Path | None = None) -> KB:
    """Every entry in the folder, plus every problem; callers decide whether problems are fatal."""
    directory = directory or kb_dir()
    kb = KB()
    for path in entry_files(directory):
        shown = _shown(path)
        entry, problems, located = load_entry(path, shown)
        kb.problems.extend(problems)
        if entry is None:
            continue
        if entry.id in kb.entries:
            line, col = located.where(("id",)) if located else (1, 1)
            kb.problems.append(Problem(shown, line, col, "KB021", f"duplicate id '{entry.id}' (also in {_shown(kb.files[entry.id])})"))
            continue
        kb.entries[entry.id] = entry
        kb.files[entry.id] = path
        if located:
            kb.located[entry.id] = located
    return kb


def load_valid_kb(directory: Path | None = None) -> dict[str, Entry]:
    """For builds: all entries, or EntryError naming every problem (nothing half-built)."""
    from .lint import lint_kb  # semantic checks live in lint; builds enforce them too

    kb = load_kb(directory)
    problems = kb.problems + lint_kb(kb, with_matcher=False)
    if problems:
        raise EntryError(problems)
    if not kb.entries:
        raise EntryError([Problem(str(directory or kb_dir()), 1, 1, "KB002", "no entries found (*.yaml)")])
    return kb.entries


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
