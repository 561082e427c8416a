"""The stage a vLLM log line's own call site shows: `ERROR 04-19 12:21:04 [core.py:1134] ...`.

vLLM logs a dying engine's traceback with logger.exception(), so each of its lines carries the logging
call's file and line. matcher/logsites.json (derive_logsites.py, read from vLLM's code of every release)
says which stage the function around each such ERROR-level call is: `run_engine_core`'s
"EngineCore failed to start." is start-up, its "EngineCore encountered a fatal error." is serving.

The table travels inside the match index (index.build: load_table), as one string per file name,
parsed only for a file a paste names: most pastes never pay for it.
"""

from __future__ import annotations

import os
import re

from .regex_cache import Lazy

LOGSITES_PATH = os.path.join(os.path.dirname(os.path.realpath(__file__)), "logsites.json")
STAGE_WORDS = {"startup": "start-up", "cudagraph": "CUDA-graph capture", "serving": "serving"}

# vLLM's own format: "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s" (datefmt
# "%m-%d %H:%M:%S"; before ~0.6.4 without the opening bracket; newer releases show the path under vllm/).
# Only ERROR and CRITICAL: the table holds only calls at those levels.
_SITE_RE = Lazy(r"(?:^|[\s|)\]\"'])(?:ERROR|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d(?:\.\d+)?\s+\[?"
                r"(?:[\w.-]+/)*(?P<file>[\w.-]+\.py):(?P<line>\d+)\]")
# a release the paste states: the server's banner, the engine's config line, collect_env, a pip pin
_RELEASE_RE = Lazy(r"(?:vLLM API server version|LLM engine \(v|vLLM Version:|vllm==|vllm version:?)\s*v?"
                   r"(?P<v>\d+\.\d+\.\d+(?:\.post\d+|\.\d+)?)\b", re.I)


def load_table(path: str = LOGSITES_PATH) -> dict:
    """The committed table in the index's form: {"releases", "functions", "files": {name: rows}} with
    each file's rows one string ("line code func ranges;..."); empty without a table."""
    import json

    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
        codes = data["stages"]
        files = {name: ";".join(f"{ln} {code} {fn} {rel}" for ln, code, fn, rel in rows)
                 for name, rows in data["files"].items()}
        if any(code not in codes and code != "-" for rows in data["files"].values() for _, code, _, _ in rows):
            raise ValueError("unknown stage code")
        return {"releases": list(data["releases"]), "functions": list(data["functions"]), "stages": dict(codes),
                "files": files}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def site_of(raw: str) -> tuple[str, int] | None:
    """(file name, line) of the ERROR-level vLLM log prefix on a raw log line, else None."""
    if ".py:" not in raw:
        return None
    m = _SITE_RE.search(raw)
    return (m.group("file"), int(m.group("line"))) if m else None


def stated_release(lines) -> str | None:
    """The vLLM release a paste states (the server's banner, the engine's config line, a pin)."""
    for ln in lines:
        if "ersion" in ln or "(v" in ln or "vllm==" in ln:
            m = _RELEASE_RE.search(ln)
            if m:
                return m.group("v")
    return None


def _ranges(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out.append((int(a), int(b or a)))
    return out


class Sites:
    """Lookups in the index's table; each file's rows are parsed on first use."""

    def __init__(self, table: dict | None) -> None:
        table = table or {}
        self.releases: list[str] = table.get("releases", [])
        self.functions: list[str] = table.get("functions", [])
        self.stages: dict[str, str] = table.get("stages", {})
        self._files: dict[str, str] = table.get("files", {})
        self._parsed: dict[str, dict[int, list]] = {}

    def _rows(self, name: str) -> dict[int, list]:
        """line -> [(stage or None, function, release runs)], one per stage seen at that line."""
        rows = self._parsed.get(name)
        if rows is None:
            rows = {}
            text = self._files.get(name)
            for row in text.split(";") if text else ():
                ln, code, fn, rel = row.split(" ")
                rows.setdefault(int(ln), []).append((self.stages.get(code), self.functions[int(fn)], _ranges(rel)))
            self._parsed[name] = rows
        return rows

    def lookup(self, name: str, line: int, release: str | None = None) -> tuple[str, str, str] | None:
        """(stage, function, releases in words) of an ERROR-level call site, else None. With a stated
        release the table covers, the row of that release (lines move between releases); without
        one, only a site whose every release gives the same stage."""
        found = self._rows(name).get(line) if name in self._files else None
        if not found:
            return None
        if release in self.releases:
            at = self.releases.index(release)
            for st, fn, runs in found:
                if any(a <= at <= b for a, b in runs):
                    return (st, fn, release) if st else None
            return None
        if len(found) != 1 or found[0][0] is None:
            return None  # two files of that name, or a line that moved, tell different stages
        st, fn, runs = found[0]
        return st, fn, self.words(runs)

    def words(self, runs: list[tuple[int, int]]) -> str:
        named = [self.releases[a] if a == b else f"{self.releases[a]}–{self.releases[b]}" for a, b in runs[:3]]
        return ", ".join(named) + (", …" if len(runs) > 3 else "")

    def describe(self, name: str, line: int, found: tuple[str, str, str]) -> str:
        st, fn, rel = found
        return (f"stage {STAGE_WORDS[st]}: logged by vLLM's {STAGE_WORDS[st]} code at {name}:{line} "
                f"({fn}, releases {rel})")
