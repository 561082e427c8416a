"""The results file (reproductions/results/<backend>.json) the site reads for its verification badges.

{"vllm_version": "0.32.0", "backend": "cpu", "device": "...", "jobs": 2, "date": "<UTC ISO>",
 "entries": {"<id>": {"status": "pass"|"fail"|"skip", "duration_s": 41.2, "machine": {...},
    "model_dirs": {...}, "broken": {...}, "fixed": {...}, "fixes": {"<fix-id>": {...}}}}}
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
from pathlib import Path

OUTPUT_LINES = 150
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def default_path(backend: str) -> Path:
    return RESULTS_DIR / f"{backend}.json"


def tail(text: str, lines: int = OUTPUT_LINES) -> str:
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def cpu_device() -> str:
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os

    return f"{name} ({os.cpu_count()} cores)"


def merge(previous: dict | None, fresh: dict) -> dict:
    """Keep entries of an earlier run that this (partial) run did not touch, for the same vLLM/backend."""
    if not previous or previous.get("vllm_version") != fresh["vllm_version"] or previous.get("backend") != fresh["backend"]:
        return fresh
    entries = dict(previous.get("entries", {}))
    entries.update(fresh["entries"])
    return {**fresh, "entries": dict(sorted(entries.items()))}


def read(path: Path) -> dict | None:
    """The results file, or None when it is missing or not a results file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write(path: Path, fresh: dict) -> dict:
    previous = read(path)  # a corrupt file is replaced, not merged
    data = merge(previous, fresh)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return data
