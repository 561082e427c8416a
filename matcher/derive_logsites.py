"""Derive matcher/logsites.json: the stage of each vLLM logging call site that logs at ERROR level.

Run by hand when releases change, never at match time (it downloads wheels):

    nice -n 10 .venv/bin/python -m kvkb.matcher.derive_logsites              # every release in the atlas
    .venv/bin/python -m kvkb.matcher.derive_logsites 0.8.5 0.11.0 --out /tmp/logsites.json

vLLM logs a dying engine's traceback with `logger.exception(...)`/`logger.error(...)`, so every line of
it carries the logging call's `[core.py:1134]` prefix. The function around that call says the stage:
in v1/engine/core.py `run_engine_core` logs "EngineCore failed to start." (start-up) from one line and
"EngineCore encountered a fatal error." (the busy loop: serving) from another.

For each release every vllm/**/*.py is parsed (ast) and every logger call at ERROR level (error,
exception, critical, fatal, log(logging.ERROR, ...)) is recorded with its file, line, the names of the
functions around it and its message literal. Its stage is what segment.py's frame rules
(`frame_cues`, the same ones the matcher applies to traceback frames) say of those functions and
paths, plus its message (segment.cues_of). A function that runs a method named at run time (an RPC
loop: `getattr(worker, method)`, `run_method(...)`) serves start-up and serving alike: its name alone
gives no stage there.

The table keys a site by what the prefix shows, (file basename, line). Two files named core.py, or a
line that moved, can give one key different stages in different releases: the matcher then uses the
key only for a paste that states its release (and the row of that release). Per-release reads are cached in --cache, so an interrupted
run resumes and the table can be rebuilt from whatever releases are done (--merge-only).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .segment import cues_of, frame_cues, stage

FORMAT = 1
STAGE_CODES = {"startup": "s", "cudagraph": "c", "serving": "v"}  # one letter a site in the committed table
ERROR_METHODS = frozenset(("error", "exception", "critical", "fatal"))
ERROR_LEVELS = frozenset(("ERROR", "CRITICAL", "FATAL"))
_GAP = "*"
_FMT_RE = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdifrxg%]|\{[^{}]*\}")
MAX_MESSAGE = 80  # of a site's message literal kept in the per-release cache (the evidence needs no more)


def _message(node) -> str:
    """A logging call's first argument as text with `*` for what is filled in at run time."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _FMT_RE.sub(_GAP, node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(_FMT_RE.sub(_GAP, v.value) if isinstance(v, ast.Constant) and isinstance(v.value, str) else _GAP
                       for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        left = _message(node.left)
        return left + (_message(node.right) if isinstance(node.op, ast.Add) else "")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _message(node.func.value)
    return _GAP


def _is_logger(node) -> bool:
    # `logger.error`, `self.logger.error`, `_logger.exception`, `log.error`: vLLM names its loggers so
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return "log" in name.lower()


def _error_call(node: ast.Call) -> ast.AST | None:
    """The message argument of a logger call at ERROR level or above, else None."""
    f = node.func
    if not (isinstance(f, ast.Attribute) and _is_logger(f.value)):
        return None
    if f.attr in ERROR_METHODS:
        return node.args[0] if node.args else ast.Constant("")
    if f.attr == "log" and len(node.args) >= 2:
        lvl = node.args[0]
        name = lvl.attr if isinstance(lvl, ast.Attribute) else lvl.id if isinstance(lvl, ast.Name) else None
        if name in ERROR_LEVELS or (isinstance(lvl, ast.Constant) and lvl.value in (40, 50)):
            return node.args[1]
    return None


def _dispatches(func: ast.AST) -> bool:
    """Does this function run a method named at run time (an RPC loop)?"""
    for node in ast.walk(func):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name == "run_method":
            return True
        if name == "getattr" and len(node.args) >= 2 and not isinstance(node.args[1], ast.Constant):
            return True
    return False


class _Sites(ast.NodeVisitor):
    def __init__(self) -> None:
        self.funcs: list[tuple[str, bool]] = []  # (name, dispatches) of the functions around the node
        self.sites: list[list] = []

    def visit_FunctionDef(self, node) -> None:
        self.funcs.append((node.name, _dispatches(node)))
        self.generic_visit(node)
        self.funcs.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        msg = _error_call(node)
        if msg is not None:
            names = [n for n, _ in self.funcs]
            dispatch = bool(self.funcs) and self.funcs[-1][1]
            self.sites.append([node.lineno, names, _message(msg)[:MAX_MESSAGE], dispatch])
        self.generic_visit(node)


def release_sites(sources) -> list[list]:
    """[path, line, [enclosing function names, outermost first], message, dispatches] of every
    ERROR-level logging call in one release's sources ((path, text) pairs)."""
    out = []
    for path, text in sources:
        if "log" not in text:
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue  # a file written for a newer Python than this one: skipped
        v = _Sites()
        v.visit(tree)
        out.extend([path, *site] for site in v.sites)
    return out


def site_stage(path: str, funcs: list[str], message: str, dispatch: bool) -> str | None:
    """The stage a logging call site shows: segment's frame rules on the functions around it (each
    one a frame of any traceback through it) and its message's own words."""
    said = cues_of(message)
    if dispatch and not said:
        return None  # an RPC loop runs start-up and serving methods alike
    cues = set(said)
    for name in funcs or [""]:
        cues |= frame_cues(path, name)
    return stage(cues)


def _ranges(idx: list[int]) -> str:
    """Sorted release indexes as '0-5,7,9-12'."""
    out = []
    start = prev = idx[0]
    for i in idx[1:] + [None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ",".join(out)


def merge(per_release: dict[str, list[list]], releases: list[str]) -> dict:
    """The committed table from per-release site lists. Per (basename, line), a row per stage found
    there ("-": a call whose function shows none) with the releases that have it; keys where no
    release shows a stage are left out. The matcher trusts a key without a stated release only when
    its rows agree (one stage), and with one only the row of that release."""
    order = [v for v in releases if v in per_release]
    seen: dict[tuple[str, int], dict[str | None, dict]] = {}
    for ri, version in enumerate(order):
        for path, line, funcs, message, dispatch in per_release[version]:
            key = (os.path.basename(path), line)
            st = site_stage(path, funcs, message, dispatch)
            row = seen.setdefault(key, {}).setdefault(st, {"rel": set(), "func": funcs[-1] if funcs else "<module>"})
            row["rel"].add(ri)
    funcs: list[str] = []
    fidx: dict[str, int] = {}
    files: dict[str, list] = {}
    ambiguous = 0
    for (base, line), by_stage in sorted(seen.items()):
        if all(st is None for st in by_stage):
            continue
        ambiguous += len(by_stage) > 1
        for st, row in sorted(by_stage.items(), key=lambda kv: min(kv[1]["rel"])):
            fn = row["func"]
            if fn not in fidx:
                fidx[fn] = len(funcs)
                funcs.append(fn)
            files.setdefault(base, []).append([line, STAGE_CODES[st] if st else "-", fidx[fn], _ranges(sorted(row["rel"]))])
    return {"format": FORMAT, "releases": order, "stages": {c: s for s, c in STAGE_CODES.items()},
            "functions": funcs, "files": files, "ambiguous": ambiguous}


def _read_release(version: str, workdir: Path, cache: Path) -> str:
    from kvkb.atlas.wheels import release_sources

    dest = cache / f"{version}.json"
    if dest.exists():
        return f"{version}: cached"
    sites = release_sites(release_sources(version, workdir))
    tmp = dest.with_suffix(".tmp")
    tmp.write_text(json.dumps(sites, separators=(",", ":")))
    tmp.replace(dest)
    return f"{version}: {len(sites)} ERROR-level logging calls"


def _spread(releases: list[str]) -> list[str]:
    """Every 4th release first, then the ones between: a run cut short still spans the whole range."""
    return [v for k in range(4) for v in releases[k::4]]


def load_cache(cache: Path, releases: list[str]) -> dict[str, list[list]]:
    return {v: json.loads((cache / f"{v}.json").read_text()) for v in releases if (cache / f"{v}.json").exists()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("releases", nargs="*", help="default: every release in the committed atlas")
    here = Path(__file__).resolve().parent
    ap.add_argument("--out", type=Path, default=here / "logsites.json")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/kvkb-wheels"))
    ap.add_argument("--cache", type=Path, default=Path("/tmp/kvkb-logsites"), help="per-release reads, kept between runs")
    ap.add_argument("--jobs", type=int, default=2, help="releases downloaded at once")
    ap.add_argument("--merge-only", action="store_true", help="build the table from the releases already cached")
    args = ap.parse_args(argv)
    releases = args.releases
    if not releases:
        from kvkb.atlas.store import load_default

        releases = list(load_default().releases)
    args.cache.mkdir(parents=True, exist_ok=True)
    if not args.merge_only:
        from kvkb.atlas.wheels import FetchError

        def one(v: str) -> str:
            try:
                return _read_release(v, args.workdir, args.cache)
            except FetchError as e:
                return f"{v}: skipped ({e})"

        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            for msg in pool.map(one, _spread(releases)):
                print(msg, flush=True)
    table = merge(load_cache(args.cache, releases), releases)
    if not table["releases"]:
        print("no release read: nothing written", file=sys.stderr)
        return 1
    args.out.write_text(json.dumps(table, separators=(",", ":"), sort_keys=True) + "\n")
    n = sum(len(v) for v in table["files"].values())
    print(f"{args.out}: {n} rows over {len(table['releases'])} releases, {table['ambiguous']} keys ambiguous without a release, "
          f"{args.out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
