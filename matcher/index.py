"""The precompiled match index: signatures normalised once, stored as JSON, rebuilt when kb/ changes.

The hot path (kbmatch) reads kb/.index.json and never imports pydantic. The freshness key is
cheap (file names, mtime_ns and sizes of kb/*.yaml, plus this module's FORMAT), so a stale index
is impossible in practice; a rebuild validates every entry with kvkb.loader.load_valid_kb and
fails with file:line:code problems (EntryError) when one is bad.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

# Bump when normalise(), the index layout or what is derived at build time changes.
FORMAT = 6
INDEX_NAME = ".index.json"
EXPLAIN_NAME = ".index-explain.json"
BASE_ANCHORS = ("rror", "WARN")  # candidate lines in big logs: *Error, error, WARNING


def kb_dir() -> Path:
    """Same rule as kvkb.loader.kb_dir (KVKB_KB_DIR, else the checkout's kb/); repeated here because
    importing kvkb.loader pulls in pydantic, which the match path must not load."""
    env = os.environ.get("KVKB_KB_DIR")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "kb"


def _yaml_files(directory: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as it:
            return sorted((e for e in it if e.name.endswith(".yaml") and not e.name.startswith(".")), key=lambda e: e.name)
    except OSError:
        return []


def freshness_key(directory: Path) -> str:
    h = hashlib.sha1(f"{FORMAT}|{directory.resolve()}".encode())
    for e in _yaml_files(directory):
        st = e.stat()
        h.update(f"|{e.name}:{st.st_mtime_ns}:{st.st_size}".encode())
    return h.hexdigest()


def index_paths(directory: Path) -> tuple[Path, Path]:
    """kb/.index.json when kb/ is writable, else ~/.cache/kvkb/ (one file pair per kb folder)."""
    if os.access(directory, os.W_OK):
        return directory / INDEX_NAME, directory / EXPLAIN_NAME
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kvkb"
    tag = hashlib.sha1(str(directory.resolve()).encode()).hexdigest()[:12]
    return cache / f"index-{tag}.json", cache / f"index-{tag}-explain.json"


# --- building (imports kvkb.template, hence pydantic: only on rebuild) ---------------------------


def build(entries) -> tuple[dict, dict]:
    """(match index, explain data) from validated Entry objects."""
    from kvkb import template

    from .normalize import normalise
    from .score import literal_form

    index = {"format": FORMAT, "entries": [], "signatures": [], "anchors": list(BASE_ANCHORS)}
    explain = {}
    anchors = set(BASE_ANCHORS)
    for ei, entry in enumerate(entries):
        top = entry.top_fix
        index["entries"].append(
            {
                "id": entry.id,
                "title": entry.title,
                "summary": entry.summary,
                "severity": entry.severity.value,
                "category": entry.category.value,
                "phase": entry.phase.value,
                "tags": list(entry.tags),
                "cause": entry.causes[0].title,
                "fix": {k: getattr(top, k) for k in ("id", "title", "cli", "python", "env", "versions")}
                | {"status": top.status.value},
            }
        )
        explain[entry.id] = entry.model_dump(mode="json", exclude_none=True, exclude_defaults=False)
        for sig in entry.signatures:
            instance = _instance(template, sig)
            prefixes = []
            parts = template.split(sig.template)
            for k, (kind, _) in enumerate(parts):
                if kind == "ph" and k < len(parts) - 1:
                    prefixes.append(template.to_regex(_unsplit(parts[: k + 1])).pattern)
            index["signatures"].append(
                {
                    "entry": ei,
                    "id": sig.id,
                    "exception": sig.exception,
                    "level": sig.level,
                    "versions": sig.versions,
                    "engine": sig.engine.value,
                    "backend": sig.backend.value,
                    "norm": normalise(instance),
                    "norm_raw": normalise(instance, canon=False),  # tells apart wordings that canonicalise alike
                    "regex": template.to_regex(sig.template).pattern,
                    "prefixes": prefixes[::-1],  # longest first: partial extraction of a cut line
                }
                | literal_form(parts)  # exact match without compiling the regex; literal numbers
            )
            short = (sig.exception or "").rsplit(".", 1)[-1]
            if sig.exception and not any(a in short for a in anchors):
                anchors.add(short)
            elif not sig.exception and sig.level in ("INFO", "DEBUG"):
                anchors.add(_longest_literal(parts))
            # ERROR/CRITICAL log-line signatures need no anchor of their own: vLLM prints them next to
            # the exception (an *Error line) they report, and candidate windows take in 40 lines around
            # it. Each anchor is one more pass over a big log, so they are kept few.
    index["anchors"] = sorted(a for a in anchors if a)
    return index, explain


def _unsplit(parts: list[tuple[str, str]]) -> str:
    return "".join("{" + v + "}" if k == "ph" else v.replace("{", "{{").replace("}", "}}") for k, v in parts)


def _instance(template, sig) -> str:
    """The template with its placeholders filled from its own first matching sample."""
    parts = template.split(sig.template)
    for sample in sig.samples:
        values = template.extract(sig.template, sample)
        if values:
            return "".join(values[v] if k == "ph" else v for k, v in parts)
    return "".join("0" if k == "ph" else v for k, v in parts)


def _longest_literal(parts) -> str:
    lits = [v.strip() for k, v in parts if k == "lit"]
    return max(lits, key=len)[:32] if lits else ""


# --- loading -------------------------------------------------------------------------------------


def load(directory: Path | None = None, rebuild: bool = False) -> dict:
    """The index for kb/, rebuilt first when any entry file changed (or when asked)."""
    directory = directory or kb_dir()
    key = freshness_key(directory)
    path, explain_path = index_paths(directory)
    if not rebuild:
        try:
            with open(path, "rb") as f:
                index = json.loads(f.read())
            if index.get("key") == key:
                return index
        except (OSError, ValueError):
            pass
    return _rebuild(directory, key, path, explain_path)


def load_explain(directory: Path | None = None) -> dict:
    directory = directory or kb_dir()
    key = freshness_key(directory)
    _, explain_path = index_paths(directory)
    try:
        with open(explain_path, "rb") as f:
            data = json.loads(f.read())
        if data.get("key") == key:
            return data["entries"]
    except (OSError, ValueError, KeyError):
        pass
    load(directory, rebuild=True)
    with open(explain_path, "rb") as f:
        return json.loads(f.read())["entries"]


def _rebuild(directory: Path, key: str, path: Path, explain_path: Path) -> dict:
    from kvkb.loader import load_valid_kb  # raises EntryError naming file:line:code

    entries = load_valid_kb(directory)
    index, explain = build(list(entries.values()))
    index["key"] = key
    _write(path, index)
    _write(explain_path, {"key": key, "entries": explain})
    return index


def _write(path: Path, data: dict) -> None:
    """Atomic replace; an unwritable location only costs the next call a rebuild."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # the temporary name still matches the .gitignore pattern kb/.index*.json
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem + "-tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)  # type: ignore[possibly-undefined]
        except (OSError, NameError):
            pass
