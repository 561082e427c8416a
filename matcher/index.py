"""The precompiled match index: signatures normalised once, stored with marshal, rebuilt when kb/ changes.

The hot path (kbmatch) reads kb/.index.marshal and never imports pydantic, json, hashlib or
pathlib: marshal is built in and loads a 5,000-entry index in a few ms (JSON took 4x longer,
plus its import). The freshness key is cheap (names, mtime_ns and sizes of kb/*.yaml, plus this
module's FORMAT and the Python version, since marshal's format may change between versions), so
a stale index is impossible in practice; a rebuild validates every entry with
kvkb.loader.load_valid_kb and fails with file:line:code problems (EntryError) when one is bad.
The explain data (`kbmatch --explain`) is JSON beside it, read only for --explain.
"""

from __future__ import annotations

import marshal
import os
import re
import sys

from .regex_cache import compile as _rx

# Bump when normalise(), the index layout or what is derived at build time changes.
FORMAT = 29
# whose texts only a vLLM run prints: vLLM's Python and C++ code (an invented text is no one's)
VLLM_ORIGINS = frozenset(("vllm", "vllm-csrc", "invented"))
INDEX_NAME = ".index.marshal"
EXPLAIN_NAME = ".index-explain.json"
# Candidate lines in big logs: *Error / *Error: lines, vLLM's ERROR and WARNING log lines. Each
# anchor is one bytes.find pass over the log (~0.3-0.6 s per GB here), so they are few, and chosen to
# scan fast: uppercase needles ("ERROR", "WARNING") let the search skip further than "RROR", "WARN".
BASE_ANCHORS = ("Error", "ERROR", "WARNING")
# function -> entries its callees can raise, read from vLLM's code by derive_callees.py (committed)
CALLEES_PATH = os.path.join(os.path.dirname(os.path.realpath(__file__)), "callees.json")
# (file, line) of vLLM's ERROR-level logging calls -> the stage around them, by derive_logsites.py (committed)
from .logsites import LOGSITES_PATH  # noqa: E402
_MAGIC = b"KVKB-INDEX\n"


def kb_dir() -> str:
    """Same rule as kvkb.loader.kb_dir (KVKB_KB_DIR, else the checkout's kb/); repeated here because
    importing kvkb.loader pulls in pydantic, which the match path must not load."""
    env = os.environ.get("KVKB_KB_DIR")
    return env if env else os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "kb")


def _yaml_files(directory: str) -> list[os.DirEntry]:
    # kvkb.loader reads *.yaml and *.yml, skipping hidden files
    try:
        with os.scandir(directory) as it:
            return sorted((e for e in it if e.name.endswith((".yaml", ".yml")) and not e.name.startswith(".")), key=lambda e: e.name)
    except OSError:
        return []


def freshness_key(directory) -> str:
    """Plain text, not a hash: comparing a few hundred bytes is cheaper than importing hashlib."""
    directory = os.fspath(directory)
    parts = [f"{FORMAT}|{sys.version_info[0]}.{sys.version_info[1]}|{os.path.realpath(directory)}"]
    try:  # the callee table goes into the index too
        st = os.stat(CALLEES_PATH)
        parts.append(f"callees:{st.st_mtime_ns}:{st.st_size}")
    except OSError:
        pass
    try:  # and the logging call sites' stages (logsites.py)
        st = os.stat(LOGSITES_PATH)
        parts.append(f"logsites:{st.st_mtime_ns}:{st.st_size}")
    except OSError:
        pass
    for e in _yaml_files(directory):
        st = e.stat()
        parts.append(f"{e.name}:{st.st_mtime_ns}:{st.st_size}")
    return "|".join(parts)


def index_paths(directory):
    """kb/.index.marshal when kb/ is writable, else ~/.cache/kvkb/ (one file pair per kb folder)."""
    from pathlib import Path

    directory = Path(directory)
    if os.access(directory, os.W_OK):
        return directory / INDEX_NAME, directory / EXPLAIN_NAME
    import hashlib

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kvkb"
    tag = hashlib.sha1(str(directory.resolve()).encode()).hexdigest()[:12]
    return cache / f"index-{tag}.marshal", cache / f"index-{tag}-explain.json"


def _index_path(directory: str) -> str:
    if os.access(directory, os.W_OK):
        return os.path.join(directory, INDEX_NAME)
    return os.fspath(index_paths(directory)[0])


# --- building (imports kvkb.template, hence pydantic: only on rebuild) ---------------------------


def signature_record(entry: int, sig_id: str, exception: str | None, level: str | None, versions: str, engine: str,
                     backend: str, template_text: str, instance: str, samples: list[str] = (), tags: list[str] = ()) -> dict:
    """One signature as the matcher reads it. `instance` is the template filled with real values
    (its own sample's), so that normalising it masks what a log line's normalisation masks."""
    from kvkb import template

    from .literal import literal_form
    from .normalize import normalise
    from .score import devices, meaning

    return {
        "devices": sorted(devices(normalise(template_text))),
        # memory spaces (hbm, smem, vmem) the wording, its samples or its entry's tags name: a placeholder
        # that holds one ("memory space {space}mem") stands for those, not for any
        "spaces": sorted(set().union(*(meaning(normalise(t))[1] for t in (template_text, instance, *samples, " ".join(tags))))),
        "entry": entry,
        "id": sig_id,
        "exception": exception,
        "level": level,
        "versions": versions,
        "engine": engine,
        "backend": backend,
        "norm": normalise(instance),
        "norm_raw": normalise(instance, canon=False),  # tells apart wordings that canonicalise alike
    } | literal_form(template.split(template_text))  # exact match and values without compiling a regex


def finish(index: dict) -> dict:
    """Derived, KB-wide parts: the word bit masks and the signature groups of the prefilter."""
    from .score import groups, subject_words, token_masks

    index["vocab"] = token_masks(index["signatures"])
    subject_words(index["signatures"])
    index["groups"] = groups(index["signatures"])
    return index


# `UvaBuffer.__init__` in a signature's note: the class whose constructor raises that wording
_CTOR_SITE_RE = _rx(r"\b([A-Z][A-Za-z0-9]+)\.__init__\b")


def _fix_record(fix) -> dict:
    return {k: getattr(fix, k) for k in ("id", "title", "cli", "python", "env", "versions")} | {"status": fix.status.value}


def build(entries) -> tuple[dict, dict]:
    """(match index, explain data) from validated Entry objects."""
    from kvkb import template
    from kvkb.entry import ORIGIN_NAMES

    index = {"format": FORMAT, "entries": [], "signatures": [], "anchors": list(BASE_ANCHORS)}
    explain = {}
    anchors = set(BASE_ANCHORS)
    extra: set[str] = set()
    constructors: dict[str, list[str]] = {}  # class -> entries whose message its __init__ raises
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
                "fix": _fix_record(top),
                # causes whose signs, found in a log, choose their fix over the top cause's (rank order)
                "signed": [{"cause": c.title, "signs": list(c.signs), "fix": _fix_record(c.fixes[0])}
                           for c in entry.causes if c.signs],
                # every fix, causes in rank order: the next one when the log shows a fix already applied
                "fixes": [_fix_record(f) for c in entry.causes for f in c.fixes],
            }
        )
        explain[entry.id] = entry.model_dump(mode="json", exclude_none=True, exclude_defaults=False)
        for sig in entry.signatures:
            for cls in _CTOR_SITE_RE.findall(sig.note or ""):
                owners = constructors.setdefault(cls, [])
                if entry.id not in owners:
                    owners.append(entry.id)
            parts = template.split(sig.template)
            index["signatures"].append(
                signature_record(ei, sig.id, sig.exception, sig.level, sig.versions, sig.engine.value, sig.backend.value,
                                 sig.template, _instance(template, sig), list(sig.samples), list(entry.tags))
                | ({"advisory": True} if sig.advisory else {})
                # a runtime's text (torch, NCCL, XLA, Ray, the kernel) that other programs print too
                | ({"shared": ORIGIN_NAMES.get(sig.origin, sig.origin)} if sig.origin not in VLLM_ORIGINS else {})
            )
            short = (sig.exception or "").rsplit(".", 1)[-1]
            if sig.exception and not any(a in short for a in anchors):
                # a type vLLM rarely raises bare ("Exception"): its traceback ends in an *Error
                # wrapper or ERROR lines, whose windows take it in; searched in the head only
                extra.add(short)
            elif not sig.exception and sig.level in ("INFO", "DEBUG"):
                anchors.add(_longest_literal(parts))
            # ERROR/CRITICAL log-line signatures need no anchor of their own: vLLM prints them next to
            # the exception (an *Error line) they report, and candidate windows take in 40 lines around
            # it. Each anchor is one more pass over a big log, so they are kept few.
    # a message can stand bare in a log (quoted by a wrapper, printed by a launcher, pasted into prose
    # by a person) and still needs finding; INFO lines have anchors of their own, and a wrapper alone
    # is never an answer (it says the engine died, not why)
    literal_texts = [" ".join(v for k, v in template.split(sig.template) if k == "lit")
                     for entry in entries if entry.category.value not in ("engine-wrapper", "misinformation")
                     for sig in entry.signatures if sig.exception or sig.level in ("WARNING", "ERROR")]
    index["anchors"] = minimal_anchors(anchors)
    common = cover_anchors(literal_texts, anchors, MAX_COVER)
    index["words"] = [a for a in minimal_anchors(common) if not any(b in a for b in index["anchors"])]
    rest = cover_anchors(literal_texts, anchors | common, None) | extra
    index["cover"] = [a for a in minimal_anchors(rest) if not any(b in a for b in index["anchors"] + index["words"])]
    index["callees"] = load_callees({e.id: e.category.value for e in entries})
    # a signature's note names where vLLM raises it; a constructor named there (`UvaBuffer.__init__`) is
    # called by its class name on a traceback's source line, so a paste cut right at that call names the entry
    index["raise_sites"] = {"constructors": constructors}
    from .logsites import load_table

    index["logsites"] = load_table()
    return finish(index), explain


def load_callees(known: dict[str, str], path: str = CALLEES_PATH) -> dict:
    """The callee table, keeping only entries that exist (`known`: id -> category; an entry renamed
    since the table was derived drops out), with each kept entry's category; empty without a table."""
    import json

    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except (OSError, ValueError):
        return {"functions": {}, "weights": {}, "through": {}, "allocates": [], "categories": {}}
    funcs = {}
    for name, ids in data.get("functions", {}).items():
        kept = {e: list(r) for e, r in ids.items() if e in known}
        if kept:
            funcs[name] = kept
    return {"functions": funcs, "weights": {e: n for e, n in data.get("weights", {}).items() if e in known},
            "through": {f: {e: n for e, n in by.items() if e in known} for f, by in data.get("through", {}).items()},
            "releases": list(data.get("releases", [])),
            "allocates": [f for f in data.get("allocates", []) if f in funcs],
            "categories": {e: known[e] for ids in funcs.values() for e in ids}}


# Lines a healthy server prints over and over (stats, access log, progress bars, request logs). An
# anchor found in them would open a window on every such line of a big log, so none may occur here.
PERIODIC = (
    "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, "
    "Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%, CPU KV cache usage: 0.0%",
    "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Swapped: 0 reqs, "
    "Pending: 0 reqs, GPU KV cache usage: 0.0%, CPU KV cache usage: 0.0%.",
    'INFO:     127.0.0.1:49960 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    'INFO:     127.0.0.1:49960 - "GET /metrics HTTP/1.1" 200 OK',
    "Added request chatcmpl-0123456789abcdef. Received request cmpl-0123: prompt: 'Hello', params: "
    "SamplingParams(n=1, temperature=0.7, top_p=1.0, max_tokens=512), prompt_token_ids: [1, 2], lora_request: None.",
    "Finished request cmpl-0123. Aborted request cmpl-0123. Processed prompts: 100%|####| 16/16 "
    "[00:01<00:00, 12.3it/s, est. speed input: 512.0 toks/s, output: 128.0 toks/s]",
    "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00, 1.9it/s] "
    "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|####| 67/67 [00:03<00:00, 19.5it/s]",
    "Engine 000: Avg prompt throughput: 0.0 tokens/s, Prefix cache hit rate: 0.0%, External prefix cache hit rate",
    "SpecDecoding metrics: Mean acceptance length: 2.1, Accepted throughput: 1.0 tokens/s, Drafted throughput",
)
# Each anchor is one more pass over a big log (~0.3 s/GB here): this many cover words are searched in
# the whole log (they find most memory messages); the others only near its start (read.cover_limit)
MAX_COVER = 1


def cover_anchors(literal_texts: list[str], have, limit: int | None) -> set[str]:
    """Anchors that let a big log's scan find every wording even pasted bare (no exception type,
    no log level: "The model's max seq len (29000) is larger than ..."). Greedy set cover over the
    wordings' own words of 6+ characters, most wordings first, none that a healthy server prints
    periodically; each anchor costs one more bytes.find pass, so they are few."""
    import re

    words_of = [{w for w in re.findall(r"[A-Za-z_][\w'-]{5,}", t)} for t in literal_texts]
    periodic = " ".join(PERIODIC)
    uncovered = [i for i, t in enumerate(literal_texts) if t and not any(a in t for a in have)]
    out: set[str] = set()
    while uncovered and (limit is None or len(out) < limit):
        count: dict[str, int] = {}
        for i in uncovered:
            for w in words_of[i]:
                if w not in periodic:
                    count[w] = count.get(w, 0) + 1
        if not count:
            break  # a wording made only of periodic words: the scan cannot single it out
        best = max(count, key=lambda w: (count[w], len(w), w))
        out.add(best)
        uncovered = [i for i in uncovered if best not in literal_texts[i]]
    return out


def minimal_anchors(anchors) -> list[str]:
    """Drop every anchor that contains another: wherever it occurs, the shorter one does too."""
    kept = sorted({a for a in anchors if a}, key=len)
    out: list[str] = []
    for a in kept:
        if not any(b in a for b in out):
            out.append(a)
    return sorted(out)


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


def read_index(path) -> dict | None:
    """The index stored at path, or None when missing, unreadable or written by another Python."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if not data.startswith(_MAGIC):
        return None
    import gc

    # a big index is ~100k objects: without this the collector would run dozens of times meanwhile
    enabled = gc.isenabled()
    gc.disable()
    try:
        index = marshal.loads(memoryview(data)[len(_MAGIC):])
    except (ValueError, EOFError, TypeError):
        return None
    finally:
        if enabled:
            gc.enable()
    return index if isinstance(index, dict) else None


def load(directory=None, rebuild: bool = False) -> dict:
    """The index for kb/, rebuilt first when any entry file changed (or when asked)."""
    directory = os.fspath(directory) if directory is not None else kb_dir()
    key = freshness_key(directory)
    if not rebuild:
        index = read_index(_index_path(directory))
        if index is not None and index.get("key") == key:
            return index
    return _rebuild(directory, key)


def load_explain(directory=None) -> dict:
    import json

    directory = os.fspath(directory) if directory is not None else kb_dir()
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


def _rebuild(directory: str, key: str) -> dict:
    from pathlib import Path

    from kvkb.validate import load_valid_kb  # raises EntryError naming file:line:code

    entries = load_valid_kb(Path(directory))
    index, explain = build(list(entries.values()))
    index["key"] = key
    path, explain_path = index_paths(directory)
    write_index(path, index)
    import json

    _write(explain_path, json.dumps({"key": key, "entries": explain}, ensure_ascii=False, separators=(",", ":")).encode())
    return index


def write_index(path, index: dict) -> None:
    _write(path, _MAGIC + marshal.dumps(index))


def _write(path, data: bytes) -> None:
    """Atomic replace; an unwritable location only costs the next call a rebuild."""
    import tempfile

    path = os.fspath(path)
    tmp = None
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # the temporary name starts like the final one, so it matches the same .gitignore pattern
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=os.path.basename(path) + "-tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError:
        if tmp:
            try:
                os.unlink(tmp)
            except OSError:
                pass
