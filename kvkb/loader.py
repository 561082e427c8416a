"""Load and validate kb/ entries: the one place the site, the matcher index and the runner read them."""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

from pydantic import BaseModel, ValidationError

from . import yamlpos
from .codes import Problem
from .entry import Entry

REPO_ROOT = Path(__file__).resolve().parent.parent


def kb_dir() -> Path:
    """KVKB_KB_DIR if set, else the kb/ folder of this checkout."""
    env = os.environ.get("KVKB_KB_DIR")
    return Path(env) if env else REPO_ROOT / "kb"


def entry_files(directory: Path) -> list[Path]:
    """kb/*.yaml, plus *.yml so that a misnamed entry is reported instead of silently skipped."""
    return sorted(p for p in [*directory.glob("*.yaml"), *directory.glob("*.yml")] if not p.name.startswith("."))


def dotted(path: tuple) -> str:
    """('causes', 0, 'fixes', 1, 'cli') -> 'causes[0].fixes[1].cli', the form problems print."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _known_keys(model: type, path: tuple) -> list[str]:
    """Field names (and aliases) of the model that owns the key at path."""
    current: type | None = model
    for part in path[:-1]:
        if isinstance(part, int):
            continue
        field_info = current.model_fields.get(part)
        if field_info is None:
            return []
        current = _inner_model(field_info.annotation)
        if current is None:
            return []
    return [f.alias or name for name, f in current.model_fields.items()]


def _inner_model(annotation):
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _message(err: dict, where: str) -> tuple[str, str]:
    """(code, message) for one pydantic error that is not a missing or unknown key."""
    kind, loc, got = err["type"], err["loc"], err.get("input")
    got_s = f" (got {got!r:.60})" if isinstance(got, (str, int, float, bool)) else ""
    if loc and loc[-1] == "versions" and kind in ("string_pattern_mismatch", "value_error"):
        if kind == "value_error":
            return "KB030", f"{where}: {err['msg'].removeprefix('Value error, ')}"
        return "KB030", f"{where}: invalid version range{got_s}: write PEP 440 clauses such as '>=0.9.1,<=0.21.0'"
    if kind == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") == r"\S":
        return "KB011", f"{where}: is blank; write the text"
    return "KB011", f"{where}: {err['msg'].removeprefix('Value error, ')}{got_s}"


def _problems_from_validation(exc: ValidationError, located: yamlpos.Located, shown: str) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        # the deepest position known: a missing key points at its parent, a bad value at its key
        line, col = located.where(loc)
        if err["type"] == "missing":
            problems.append(Problem(shown, line, col, "KB010", f"missing key '{loc[-1]}' in {dotted(loc[:-1]) or 'entry'}"))
        elif err["type"] == "extra_forbidden":
            key = str(loc[-1])
            close = difflib.get_close_matches(key, _known_keys(Entry, loc), n=1, cutoff=0.5)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            problems.append(Problem(shown, line, col, "KB012", f"unknown key '{dotted(loc)}'{hint}"))
        else:
            code, msg = _message(err, dotted(loc) or "entry")
            problems.append(Problem(shown, line, col, code, msg))
    return problems


TODO_RE = re.compile(r"\bTODO\b")


def _todo_problems(located: yamlpos.Located, shown: str) -> list[Problem]:
    """KB014 for every string still holding a TODO from `kvkb new`'s skeleton."""
    problems: list[Problem] = []
    seen: set[int] = set()

    def walk(value, path: tuple) -> None:
        if isinstance(value, str):
            if TODO_RE.search(value):
                line, col = located.where(path)
                problems.append(Problem(shown, line, col, "KB014", f"{dotted(path) or 'entry'}: TODO left to fill in"))
        elif isinstance(value, (dict, list)) and id(value) not in seen:  # aliases may share or loop
            seen.add(id(value))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, child in items:
                walk(child, path + (key if isinstance(key, int) and isinstance(value, list) else str(key),))

    walk(located.data, ())
    return problems


def _read(path: Path, shown: str) -> tuple[str | None, Problem | None]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return None, Problem(shown, 1, 1, "KB003", f"cannot read: {exc.strerror or exc}")
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        return None, Problem(shown, line, col, "KB003", f"not UTF-8 text: byte 0x{raw[exc.start]:02x} cannot be decoded")


def load_entry(path: Path, shown: str | None = None) -> tuple[Entry | None, list[Problem], yamlpos.Located | None]:
    """Parse and validate one file. Never raises for bad content: problems come back instead."""
    shown = shown or str(path)
    text, unreadable = _read(path, shown)
    if unreadable:
        return None, [unreadable], None
    if "\x00" in text:
        return None, [Problem(shown, 1, 1, "KB003", "binary file (NUL bytes), not YAML text")], None
    try:
        located = yamlpos.load(text)
    except yamlpos.YamlSyntaxError as exc:
        return None, [Problem(shown, exc.line, exc.column, "KB001", f"YAML syntax: {exc.message}")], None
    problems = [Problem(shown, line, col, "KB013", f"duplicate key '{dotted(p)}'") for p, (line, col) in located.duplicate_keys]
    if path.suffix != ".yaml":
        problems.append(Problem(shown, 1, 1, "KB020", f"entry files end in .yaml: rename to {path.stem}.yaml"))
    if not isinstance(located.data, dict):
        kind = type(located.data).__name__ if located.data is not None else "an empty document"
        line, col = located.where(())
        return None, problems + [Problem(shown, line, col, "KB002", f"expected a mapping (an entry), found {kind}")], located
    problems += _todo_problems(located, shown)
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


def load_kb(directory: Path | None = None, exclude: Path | None = None) -> KB:
    """Every entry in the folder (but exclude), plus every problem; callers decide whether problems are fatal."""
    directory = directory or kb_dir()
    kb = KB()
    for path in entry_files(directory):
        if exclude is not None and path.resolve() == exclude.resolve():
            continue
        shown = _shown(path)
        entry, problems, located = load_entry(path, shown)
        kb.problems.extend(problems)
        if entry is None or path.suffix != ".yaml":
            continue  # a misnamed file is reported (KB020), not served
        if entry.id in kb.entries:
            line, col = located.where(("id",)) if located else (1, 1)
            kb.problems.append(Problem(shown, line, col, "KB021", f"duplicate id '{entry.id}' (also in {_shown(kb.files[entry.id])})"))
            continue
        kb.entries[entry.id] = entry
        kb.files[entry.id] = path
        if located:
            kb.located[entry.id] = located
    return kb


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
