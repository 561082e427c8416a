"""Derive matcher/callees.json: which KB entries each vLLM function can end in, read from vLLM's code.

Run by hand when entries or releases change, never at match time (it downloads wheels):

    .venv/bin/python -m kvkb.matcher.derive_callees            # the default releases
    .venv/bin/python -m kvkb.matcher.derive_callees 0.8.5 0.11.0 --out matcher/callees.json

For each release: every vllm/**/*.py is parsed (ast); each function's calls are read by name (a
method call `x.foo()` counts as a call of every function named foo; `collective_rpc("foo")` and its
kin as well, since vLLM calls its workers by name); each function's string literals (raise messages,
logger calls, messages kept in a variable) are turned into patterns and tried on the entries' own
signature samples. A function *emits* an entry when one of its literals can print that entry's
message; it *reaches* an entry when a function it calls, up to DEPTH calls deep, emits it. A paste
cut inside a function can then end only in what that function reaches.

Names defined in many places (`forward`, `__init__`, `get`) say nothing about which one runs: calls
to them are not followed (AMBIGUOUS). The table keeps, per release, the functions that reach at most
MAX_REACH entries (more says nothing), which of them call a function that allocates device memory
(ALLOCATING: PyTorch's own OOM can end them), and the weights: how many labelled corpus pastes show each entry.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

RELEASES = ("0.3.3", "0.4.3", "0.5.5", "0.6.6", "0.7.3", "0.8.5", "0.10.2", "0.11.0", "0.24.0", "0.33.0")
DEPTH = 4  # calls followed below the cut function
AMBIGUOUS = 4  # `x.f()`: a name defined in more places than this is not followed
AMBIGUOUS_RPC = 12  # `collective_rpc("f")`: every worker class defines f
MAX_REACH = 8  # functions that reach more entries than this in a release are left out there (no information)
KEY_CHARS = 40  # of a wording's longest literal run, that a source literal must hold word for word
MIN_FIXED = 24  # characters of fixed text a literal needs before it can stand for a message
MAX_ENTRIES_PER_LITERAL = 2  # a literal that fits more entries' samples is a shared phrase
# vLLM functions that allocate device memory (building and loading the weights, the profiling forward pass, the KV cache
# tensors, CUDA-graph capture, a model step): a function that calls one of them can die of PyTorch's
# own out-of-memory error, which no vLLM source line names
ALLOCATING = frozenset(("load_model", "initialize_model", "_initialize_model", "make_layers", "create_weights",
                        "profile_run", "_dummy_run", "_allocate_kv_cache", "allocate_kv_cache",
                        "_allocate_kv_cache_tensors", "initialize_kv_cache_tensors", "_init_cache_engine",
                        "capture_model", "execute_model"))
RPC_CALLS = {"collective_rpc", "_run_workers", "run_workers", "execute_method", "_call_utility",
             "call_utility", "_run_workers_async", "remote"}
# vLLM's own frames only: a function named like one of these is what a traceback shows
_GAP = "\x00"
_FMT_RE = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdifrxg%]|\{[^{}]*\}")


def _pieces(node) -> list[str] | None:
    """A string expression as literal pieces with _GAP for what is filled in at run time."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [_GAP.join(_FMT_RE.split(node.value))]
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                out.append(v.value)
            else:
                out.append(_GAP)
        return ["".join(out)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _pieces(node.left), _pieces(node.right)
        if left is None and right is None:
            return None
        return [(left or [_GAP])[0] + (right or [_GAP])[0]]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _pieces(node.left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _pieces(node.func.value)
    return None


def literal_pattern(text: str) -> re.Pattern | None:
    """A regex that finds what this literal prints, whatever fills its gaps; None if too little is fixed."""
    parts = [" ".join(p.split()) for p in text.split(_GAP)]
    fixed = sum(len(p) for p in parts)
    if fixed < MIN_FIXED or max(len(p) for p in parts) < 12:
        return None
    rx = r".{0,400}?".join(r"\s*".join(re.escape(w) for w in p.split(" ")) if p else "" for p in parts)
    return re.compile(rx, re.S)


class _Funcs(ast.NodeVisitor):
    """Per function (module, class, name): the calls it makes and its string literals (docstrings left out).

    A call is kept with how it was written, which says where to look for its target: `self.f()` in the
    function's own class first, `f()` in its own module first, `x.f()` by name anywhere."""

    def __init__(self) -> None:
        self.calls: dict[tuple, set[tuple[str, str]]] = {}
        self.literals: dict[tuple, list[str]] = {}
        self.by_name: dict[str, list[tuple]] = {}
        self.classes: dict[str, list[tuple]] = {}  # class name -> its (module, class) definitions
        self.module = ""
        self._cls: list[str] = []
        self._stack: list[tuple] = []

    def visit_ClassDef(self, node) -> None:
        self.classes.setdefault(node.name, []).append((self.module, node.name))
        self._cls.append(node.name)
        self.generic_visit(node)
        self._cls.pop()

    def visit_FunctionDef(self, node) -> None:
        key = (self.module, self._cls[-1] if self._cls else "", node.name)
        self.by_name.setdefault(node.name, []).append(key)
        self._stack.append(key)
        self.calls.setdefault(key, set())
        self.literals.setdefault(key, [])
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        cls = self._cls
        self._cls = []  # a nested function's calls are its own, with no class
        for stmt in body:
            self.visit(stmt)
        self._cls = cls
        self._stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node) -> None:
        if self._stack:
            calls = self.calls[self._stack[-1]]
            f = node.func
            if isinstance(f, ast.Name):
                calls.add(("name", f.id))
            elif isinstance(f, ast.Attribute):
                own = isinstance(f.value, ast.Name) and f.value.id in ("self", "cls")
                calls.add(("self" if own else "attr", f.attr))
                if f.attr in RPC_CALLS and node.args and isinstance(node.args[0], ast.Constant) \
                        and isinstance(node.args[0].value, str):
                    calls.add(("rpc", node.args[0].value))
        self.generic_visit(node)

    def _string(self, node) -> None:
        if self._stack:
            p = _pieces(node)
            if p:
                self.literals[self._stack[-1]].append(p[0])

    def visit_JoinedStr(self, node) -> None:
        self._string(node)

    def visit_Constant(self, node) -> None:
        if isinstance(node.value, str) and len(node.value) >= MIN_FIXED:
            self._string(node)

    def visit_BinOp(self, node) -> None:
        if isinstance(node.op, (ast.Add, ast.Mod)) and _pieces(node) is not None and self._stack:
            self._string(node)
            return
        self.generic_visit(node)

    def resolve(self, caller: tuple, how: str, name: str) -> list[tuple]:
        """The functions a call may run: the caller's class, then its module, then the name anywhere
        (only while few functions bear it: `forward` or `get` says nothing about which one runs)."""
        defs = self.by_name.get(name, ())
        if not defs and name in self.classes:
            # `UvaBuffer(size)`: constructing a class runs its __init__ (or a dataclass's __post_init__)
            defs = [d for m, c in self.classes[name] for d in self.by_name.get("__init__", []) + self.by_name.get("__post_init__", [])
                    if d[0] == m and d[1] == c]
            return defs if len(defs) <= AMBIGUOUS else []
        if not defs:
            return []
        module, cls, _ = caller
        if how == "self" and cls:
            own = [d for d in defs if d[0] == module and d[1] == cls]
            if own:
                return own
        if how in ("self", "name"):
            here = [d for d in defs if d[0] == module]
            if here:
                return here
        limit = AMBIGUOUS_RPC if how == "rpc" else AMBIGUOUS
        return list(defs) if len(defs) <= limit else []


def entry_samples(kb_dir: Path | None = None) -> list[tuple[str, str, list[str]]]:
    """(entry id, the wording's longest literal run, its samples) per signature, from the entry model."""
    from kvkb import template
    from kvkb.loader import load_kb

    kb = load_kb(kb_dir)
    out = []
    for eid, e in kb.entries.items():
        if e.category.value in ("engine-wrapper", "misinformation"):
            continue  # a wrapper quotes other errors; it is never what a function raises on its own
        for sig in e.signatures:
            lits = [" ".join(v.split()) for k, v in template.split(sig.template) if k == "lit"]
            key = max(lits, key=len)[:KEY_CHARS] if lits else ""
            if len(key) >= 12:
                out.append((eid, key, [" ".join(x.split()) for x in sig.samples]))
    return out


def emitted(literals: list[str], samples: list[tuple[str, str, list[str]]], cache: dict) -> set[str]:
    """Entries one of these literals can print: the wording's longest literal run is in the literal's
    fixed text, and the literal, its gaps filled by anything, finds one of the wording's samples."""
    out: set[str] = set()
    for lit in literals:
        if lit not in cache:
            fixed = [" ".join(p.split()) for p in lit.split(_GAP)]
            hit = set()
            rx = None
            for eid, key, lines in samples:
                if eid in hit or not any(key in p for p in fixed):
                    continue
                rx = rx or literal_pattern(lit)
                if rx is not None and any(rx.search(x) for x in lines):
                    hit.add(eid)
            cache[lit] = hit if len(hit) <= MAX_ENTRIES_PER_LITERAL else set()
        out |= cache[lit]
    return out


def release_table(sources, samples: dict[str, list[str]], allocating: set[str] | None = None) -> dict[str, set[str]]:
    """function name -> entries it reaches, for one release's (path, text) sources (a class's name too:
    what its constructor reaches). `allocating`, when given, gains the names of the functions that call
    an ALLOCATING function within DEPTH calls."""
    funcs = _Funcs()
    for path, text in sources:
        if not path.endswith(".py"):
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        funcs.module = path[:-3].replace("/", ".")
        funcs.visit(tree)
    cache: dict = {}
    emits = {key: emitted(lits, samples, cache) for key, lits in funcs.literals.items()}
    reach: dict[str, set[str]] = {}
    for key in funcs.calls:
        got = set(emits.get(key, ()))
        frontier = [key]
        seen = {key}
        allocates = key[2] in ALLOCATING
        for _ in range(DEPTH):
            nxt = []
            for f in frontier:
                for how, name in funcs.calls.get(f, ()):
                    # a call by an allocating name counts even where the name is too common to follow
                    allocates = allocates or name in ALLOCATING
                    for c in funcs.resolve(f, how, name):
                        if c not in seen:
                            seen.add(c)
                            nxt.append(c)
                            got |= emits.get(c, set())
                            allocates = allocates or c[2] in ALLOCATING
            frontier = nxt
        names = [key[2]] + ([key[1]] if key[2] in ("__init__", "__post_init__") and key[1] else [])
        if allocating is not None and allocates:
            allocating.update(names)
        if got:
            # a traceback names the function, not its class: every function of that name counts;
            # a source line names the class it constructs
            for n in names:
                reach.setdefault(n, set()).update(got)
    # more entries than MAX_REACH in one release says nothing about where a paste was cut
    return {n: ids for n, ids in reach.items() if len(ids) <= MAX_REACH}


def corpus_weights(root: Path) -> dict[str, int]:
    """entry id -> labelled corpus pastes (positives) that show it."""
    counts: dict[str, int] = {}
    for labels in sorted((root / "tests" / "corpus").glob("labels*.json")):
        for case in json.loads(labels.read_text()):
            if case.get("kind") == "positive":
                for eid in case.get("accept", [])[:1]:
                    counts[eid] = counts.get(eid, 0) + 1
    return counts


# a traceback frame of vLLM's own code (vllm/, vllm_ascend/, vllm_omni/ ...): the function it names
_VLLM_FRAME_RE = re.compile(r'File "[^"]*vllm[^"]*", line \d+, in (\w+)')
# labelled pastes through a function before their entries say more than the corpus's as a whole, and
# through it showing one entry (one paste is an anecdote)
MIN_THROUGH, MIN_THROUGH_ENTRY = 3, 2


def corpus_through(root: Path, functions) -> dict[str, dict[str, int]]:
    """function -> entry id -> labelled positives whose traceback runs through that vLLM function: what
    failed below it, in real pastes. Only functions of the table, entries seen MIN_THROUGH_ENTRY times,
    functions with MIN_THROUGH such pastes."""
    counts: dict[str, dict[str, int]] = {}
    corpus = root / "tests" / "corpus"
    for labels in sorted(corpus.glob("labels*.json")):
        for case in json.loads(labels.read_text()):
            if case.get("kind") != "positive" or not case.get("accept"):
                continue
            text = (corpus / "pastes" / case["file"]).read_text(encoding="utf-8", errors="replace")
            for name in set(_VLLM_FRAME_RE.findall(text)):
                if name in functions:
                    by = counts.setdefault(name, {})
                    by[case["accept"][0]] = by.get(case["accept"][0], 0) + 1
    kept = {f: {e: n for e, n in sorted(by.items()) if n >= MIN_THROUGH_ENTRY} for f, by in sorted(counts.items())}
    return {f: by for f, by in kept.items() if sum(by.values()) >= MIN_THROUGH}


def build(releases, workdir: Path, root: Path, kb: Path | None = None) -> dict:
    from kvkb.atlas.wheels import release_sources

    samples = entry_samples(kb or root / "kb")
    table: dict[str, dict[str, list[str]]] = {}
    allocating: set[str] = set()
    for version in releases:
        print(f"vLLM {version}: downloading and reading", file=sys.stderr, flush=True)
        reach = release_table(release_sources(version, workdir), samples, allocating)
        for name, ids in reach.items():
            for eid in ids:
                table.setdefault(name, {}).setdefault(eid, []).append(version)
        print(f"vLLM {version}: {len(reach)} functions reach an entry", file=sys.stderr, flush=True)
    return {
        "about": "function name -> entry id -> releases whose code can reach that entry's message from it "
                 "(matcher/derive_callees.py); weights: labelled corpus pastes per entry; through: function -> "
                 "entry -> labelled corpus pastes whose traceback runs through that function",
        "releases": list(releases),
        "functions": {f: dict(sorted(v.items())) for f, v in sorted(table.items())},
        # of the table's functions, those whose code calls one that allocates device memory (ALLOCATING)
        "allocates": sorted(f for f in table if f in allocating),
        "weights": dict(sorted(corpus_weights(root).items())),
        "through": corpus_through(root, table),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("releases", nargs="*", default=list(RELEASES))
    here = Path(__file__).resolve().parent
    ap.add_argument("--out", type=Path, default=here / "callees.json")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/kvkb-wheels"))
    ap.add_argument("--kb", type=Path, default=None, help="entries to read (default: the checkout's kb/)")
    ap.add_argument("--weights-only", action="store_true",
                    help="keep the table in --out, refresh only the corpus counts (weights, through; no download)")
    args = ap.parse_args(argv)
    if args.weights_only:
        data = json.loads(args.out.read_text())
        data["weights"] = dict(sorted(corpus_weights(here.parent).items()))
        data["through"] = corpus_through(here.parent, data["functions"])
    else:
        data = build(args.releases, args.workdir, here.parent, args.kb)
    args.out.write_text(json.dumps(data, indent=0, sort_keys=False, separators=(",", ":")) + "\n")
    print(f"wrote {args.out}: {len(data['functions'])} functions", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
