"""Read facts out of vLLM source text: pure functions over the AST, no imports of vLLM.

A fact is a tuple whose first field is its kind:
  ("s", file, text, role, qualname, line)  a string literal; text has WILD where a value is formatted in;
                                           role is "raise:ValueError", "log:WARNING" or "" (plain)
  ("arg", name, default)                   an EngineArgs field and its default (source text)
  ("flag", name)                           a command-line flag ("--max-model-len")
  ("llm", name, default)                   a parameter of LLM.__init__ ("**kwargs" when it takes any)
  ("env", name, default)                   a VLLM_* variable of envs.py and its default (source text)
`release_facts` runs over a whole release, since defaults and derived flags need more than one file.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterable, Iterator

PYDANTIC = "@pydantic"  # role suffix: raised inside a pydantic dataclass or model, so printed as ValidationError
WILD = "\x1f"  # where a value is formatted into the text (f-string field, %s, {}); never in source text
_PCT_FIELD = re.compile(r"%%|%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?[diouxXeEfFgGcrsa]")
_FMT_FIELD = re.compile(r"\{\{|\}\}|\{[^{}]*\}")
_LOG_LEVELS = {
    "debug": "DEBUG", "info": "INFO", "warning": "WARNING", "warn": "WARNING", "error": "ERROR",
    "exception": "ERROR", "critical": "CRITICAL", "fatal": "CRITICAL",
    "info_once": "INFO", "warning_once": "WARNING", "debug_once": "DEBUG", "error_once": "ERROR",
}
_LOGGER_NAMES = {"logger", "logging", "log", "_logger", "LOGGER", "init_logger"}
_ENV_RE = re.compile(r"^VLLM_[A-Z0-9_]+$")
_DERIVED_FLAG = re.compile(r"add_argument\(\s*f[\"']--\{")


def _pct(text: str) -> str:
    return _PCT_FIELD.sub(lambda m: "%" if m.group(0) == "%%" else WILD, text)


def _fmt(text: str) -> str:
    return _FMT_FIELD.sub(lambda m: {"{{": "{", "}}": "}"}.get(m.group(0), WILD), text)


def _squash(text: str) -> str:
    # adjacent wildcards say no more than one
    while WILD + WILD in text:
        text = text.replace(WILD + WILD, WILD)
    return text


def _joined(node: ast.JoinedStr) -> str:
    parts = []
    for v in node.values:
        if isinstance(v, ast.Constant) and isinstance(v.value, str):
            parts.append(v.value)
        else:
            parts.append(WILD)
    return "".join(parts)


def _text_of(node: ast.AST) -> str | None:
    """The text an expression formats to, or None when it holds no string literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return _joined(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text_of(node.left), _text_of(node.right)
        if left is None and right is None:
            return None
        return (WILD if left is None else left) + (WILD if right is None else right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = _text_of(node.left)
        return None if left is None else _pct(left)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"):
        base = _text_of(node.func.value)
        return None if base is None else _fmt(base)
    return None


def _is_string_root(node: ast.AST, parent: ast.AST | None) -> bool:
    """A node that starts a text (not a part of a larger concatenation or format)."""
    if _text_of(node) is None:
        return False
    if isinstance(parent, ast.BinOp) and isinstance(parent.op, (ast.Add, ast.Mod)) and _text_of(parent) is not None:
        return False
    if isinstance(parent, ast.Attribute) and parent.attr == "format":
        return False
    if isinstance(parent, ast.JoinedStr) or isinstance(parent, ast.FormattedValue) and node is parent.format_spec:
        return False
    return True


def _exc_name(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _log_level(call: ast.Call) -> str | None:
    f = call.func
    if not isinstance(f, ast.Attribute) or f.attr not in _LOG_LEVELS:
        return None
    base = f.value
    name = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else None
    if name is None or not (name in _LOGGER_NAMES or name.lower().endswith("logger")):
        return None
    return _LOG_LEVELS[f.attr]


def _walk_own(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of one function or module body, not descending into nested defs and classes."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


class _Strings(ast.NodeVisitor):
    """Walks one module keeping the enclosing qualname, the raise/log role and the statement line."""

    def __init__(self, path: str):
        self.path = path
        self.out: list[tuple] = []
        self.scope: list[str] = []
        self.docstrings: set[int] = set()
        self.assigned: dict[str, list[ast.AST]] = {}  # per function: name -> text expressions bound to it
        self.tagged: dict[int, tuple[str, int]] = {}  # id(string node) -> (role, line) via a bound name
        self.pydantic: list[bool] = []  # per enclosing class: is it a pydantic dataclass or model
        self.pydantic_dataclass = False  # the module's `dataclass` is pydantic's

    # --- scopes -----------------------------------------------------------------------------------
    def _scoped(self, node, name: str):
        body = getattr(node, "body", None)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            self.docstrings.add(id(body[0].value))
        self.scope.append(name)
        saved = self.assigned
        if not isinstance(node, ast.ClassDef):
            self.assigned = {}
            self._prescan(node)
        self.generic_visit(node)
        self.assigned = saved
        self.scope.pop()

    def visit_Module(self, node):
        self._scoped(node, "")
        self.scope = []

    def visit_ClassDef(self, node):
        self.pydantic.append(_is_pydantic_class(node, self.pydantic_dataclass))
        self._scoped(node, node.name)
        self.pydantic.pop()

    def _raise_role(self, name: str) -> str:
        # pydantic wraps what its dataclasses' and models' methods raise while validating
        # (ValueError / AssertionError become a ValidationError's "Value error, ..." line)
        if self.pydantic and self.pydantic[-1] and name in {"ValueError", "AssertionError"}:
            return f"raise:{name}{PYDANTIC}"
        return f"raise:{name}"

    def visit_FunctionDef(self, node):
        self._scoped(node, node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def _prescan(self, fn):
        """`msg = "..."; raise ValueError(msg)`: the literal bound to msg takes the raise's role."""
        sites: list[tuple[tuple[str, int], list[ast.AST]]] = []
        for node in _walk_own(fn):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if node.value is not None and _text_of(node.value) is not None:
                    for t in targets:
                        if isinstance(t, ast.Name):
                            self.assigned.setdefault(t.id, []).append(node.value)
            elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                name = _exc_name(node.exc)
                if name:
                    sites.append(((self._raise_role(name), node.lineno), list(node.exc.args)))
            elif isinstance(node, ast.Call):
                level = _log_level(node)
                if level:
                    sites.append(((f"log:{level}", node.lineno), node.args[:1]))
        if not self.assigned:
            return
        for role_line, args in sites:
            todo = list(args)
            seen: set[str] = set()
            while todo:  # names inside a tagged text ({msg} of f"{msg} (original error: {e})") too
                for sub in ast.walk(todo.pop()):
                    if isinstance(sub, ast.Name) and sub.id in self.assigned and sub.id not in seen:
                        seen.add(sub.id)
                        for value in self.assigned[sub.id]:
                            self.tagged.setdefault(id(value), role_line)
                            todo.append(value)

    # --- strings ----------------------------------------------------------------------------------
    def visit_Raise(self, node):
        if isinstance(node.exc, ast.Call):
            name = _exc_name(node.exc)
            if name:
                for a in list(node.exc.args) + [k.value for k in node.exc.keywords]:
                    self._emit_tree(a, self._raise_role(name), node.lineno)
                return
        self.generic_visit(node)

    def visit_Assert(self, node):
        self.visit(node.test)
        if node.msg is not None:
            self._emit_tree(node.msg, self._raise_role("AssertionError"), node.lineno)

    def visit_Call(self, node):
        level = _log_level(node)
        if level and node.args:
            first = node.args[0]
            text = _text_of(first)
            if text is not None:
                # logging formats the first argument with % only when arguments follow it
                shown = _pct(text) if len(node.args) > 1 else text
                self._add(shown, f"log:{level}", node.lineno)
                self._visit_inside(first)
            else:
                self.visit(first)
            for a in node.args[1:] + [k.value for k in node.keywords]:
                self.visit(a)
            return
        self.generic_visit(node)

    def _emit_tree(self, node, role: str, line: int):
        """Every string root under node gets role (a raise's message may be built in a sub-call)."""
        text = _text_of(node)
        if text is not None:
            self._add(text, role, line)
            self._visit_inside(node)
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self._emit_tree(child, role, line)

    def _visit_inside(self, node):
        # calls inside a text's fields ({f(x)}) may hold texts of their own
        for sub in ast.walk(node):
            if isinstance(sub, ast.FormattedValue):
                self.visit(sub.value)
            elif isinstance(sub, ast.BinOp) and _text_of(sub.left) is None and _text_of(sub.right) is None:
                self.visit(sub)

    def generic_visit(self, node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr) and _is_string_root(child, node):
                if id(child) in self.docstrings:
                    continue
                role, line = self.tagged.get(id(child), ("", child.lineno))
                self._add(_text_of(child), role, line)
                self._visit_inside(child)
            else:
                self.visit(child)

    def _add(self, text: str | None, role: str, line: int):
        if text is None:
            return
        if not role.startswith("log:") and _PCT_FIELD.search(text.replace("%%", "")):
            # a %-format string bound to a name or passed to a wrapper (log_fn = logger.info) is
            # formatted later: its fields are values all the same
            text = _pct(text)
        text = _squash(text)
        bare = text.replace(WILD, "")
        if not bare.strip() or not any(c.isalpha() for c in bare):
            return
        # identifiers, keys and paths are not messages: keep only texts with a space, unless raised/logged
        # ("Preemptions: %d" is a message piece: its value stands for a word)
        if not role and " " not in text.replace(WILD, "0").strip() and not _ENV_RE.match(bare):
            return
        self.out.append(("s", self.path, text, role, ".".join(n for n in self.scope if n), line))


def _is_pydantic_class(node: ast.ClassDef, pydantic_dataclass: bool) -> bool:
    names = [ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list]
    bases = [ast.unparse(b) for b in node.bases]
    if any(b.endswith("BaseModel") for b in bases):
        return True
    if any(n.endswith("pydantic.dataclasses.dataclass") for n in names):
        return True
    if "dataclass" in names and pydantic_dataclass:
        return True
    # vLLM's @config alone makes a pydantic dataclass (with a stdlib @dataclass it only registers)
    return "config" in names and not any(n in {"dataclass", "dataclasses.dataclass"} for n in names)


def module_strings(path: str, tree: ast.Module) -> list[tuple]:
    v = _Strings(path)
    v.pydantic_dataclass = any(
        isinstance(n, ast.ImportFrom) and n.module == "pydantic.dataclasses" and any(a.name == "dataclass" for a in n.names)
        for n in tree.body)
    v.visit(tree)
    return v.out


# --- structured facts ---------------------------------------------------------------------------
def _class_fields(tree: ast.Module) -> dict[str, dict[str, tuple[str, str]]]:
    """class name -> field -> (annotation source, default source) for annotated class attributes."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        fields: dict[str, tuple[str, str]] = {}
        for st in node.body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                ann = ast.unparse(st.annotation)
                if ann.startswith("ClassVar"):
                    continue
                fields[st.target.id] = (ann, _default_src(st.value))
        out[node.name] = fields
    return out


def _default_src(value: ast.AST | None) -> str:
    if value is None:
        return "<required>"
    # field(default=X) / field(default_factory=f) / Field(default=X)
    if isinstance(value, ast.Call) and _exc_name(value) in {"field", "Field"}:
        for k in value.keywords:
            if k.arg == "default":
                return ast.unparse(k.value)
            if k.arg == "default_factory":
                return f"{ast.unparse(k.value)}()"
        if value.args:
            return ast.unparse(value.args[0])
        return "<required>"
    return ast.unparse(value)


def _llm_params(tree: ast.Module) -> list[tuple[str, str]]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "LLM":
            for fn in node.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "__init__":
                    a = fn.args
                    pos = a.posonlyargs + a.args
                    defaults = [None] * (len(pos) - len(a.defaults)) + list(a.defaults)
                    out = [(p.arg, _default_src(d)) for p, d in zip(pos, defaults) if p.arg != "self"]
                    out += [(p.arg, _default_src(d)) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
                    if a.kwarg is not None:
                        out.append(("**kwargs", ""))
                    return out
    return []


def _getenv_default(lam: ast.AST, name: str) -> str | None:
    for sub in ast.walk(lam):
        if isinstance(sub, ast.Call) and _exc_name(sub) in {"getenv", "get"} and sub.args:
            first = sub.args[0]
            if isinstance(first, ast.Constant) and first.value == name:
                return ast.unparse(sub.args[1]) if len(sub.args) > 1 else "None"
    return None


def _env_vars(tree: ast.Module) -> dict[str, str]:
    """VLLM_* keys of envs.py's environment_variables dict, with the default its getenv gives."""
    typed: dict[str, str] = {}
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and _ENV_RE.match(node.target.id):
            typed[node.target.id] = _default_src(node.value)
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and _ENV_RE.match(k.value):
                    default = _getenv_default(v, k.value)
                    found[k.value] = default if default is not None else typed.get(k.value, "?")
    for name, default in typed.items():
        found.setdefault(name, default)
    return found


def _flags(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--"):
                    out.add(a.value)
                    boolean = any(k.arg == "action" and "BooleanOptionalAction" in ast.unparse(k.value)
                                  for k in node.keywords)
                    if boolean:
                        out.add("--no-" + a.value[2:])
    return out


def _env_reads(tree: ast.Module) -> set[str]:
    """VLLM_* names read straight from os.environ outside envs.py."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _exc_name(node) in {"getenv", "get"} and node.args:
            a = node.args[0]
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and _ENV_RE.match(a.value):
                out.add(a.value)
        elif isinstance(node, ast.Subscript) and "environ" in ast.unparse(node.value):
            s = node.slice
            if isinstance(s, ast.Constant) and isinstance(s.value, str) and _ENV_RE.match(s.value):
                out.add(s.value)
    return out


_CONFIG_FILE = re.compile(r"^vllm/config(?:\.py|/[a-z_]+\.py)$")
_ARGS_FILES = {"vllm/engine/arg_utils.py"}
_FRONTEND_FILES = {"vllm/entrypoints/openai/cli_args.py"}


def file_facts(path: str, text: str) -> dict | None:
    """What one source file contributes; None when it does not parse (a few releases ship a
    template or a Python-2 relic under vllm/)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    out: dict = {"strings": module_strings(path, tree)}
    if "add_argument" in text:
        out["flags"] = _flags(tree)
        out["derived"] = bool(_DERIVED_FLAG.search(text))
    if path in _ARGS_FILES:
        out["engine"] = _class_fields(tree).get("EngineArgs", {})
        out["boolean_optional"] = "BooleanOptionalAction" in text
    if path in _FRONTEND_FILES:
        out["frontend"] = {k: v for name, fields in _class_fields(tree).items() if name.endswith("Args")
                           for k, v in fields.items()}
    if _CONFIG_FILE.match(path):
        out["config"] = _class_fields(tree)
    if path == "vllm/envs.py":
        out["env"] = _env_vars(tree)
    elif "VLLM_" in text:
        out["env_reads"] = _env_reads(tree)
    if path == "vllm/entrypoints/llm.py":
        out["llm"] = _llm_params(tree)
    return out


def release_facts(sources: Iterable[tuple[str, str]], cache: dict | None = None) -> Iterator[tuple]:
    """Every fact of one release, from its (path, source) pairs.

    cache maps (path, text hash) to file_facts results; most files are unchanged from one release to
    the next, so a build over consecutive releases passes the same dict (replaced per release).
    """
    config_classes: dict[str, dict[str, tuple[str, str]]] = {}
    engine_fields: dict[str, tuple[str, str]] = {}
    frontend_fields: dict[str, tuple[str, str]] = {}
    flags: set[str] = set()
    derived_in: set[str] = set()
    boolean_optional = False
    env_defaults: dict[str, str] = {}
    env_reads: set[str] = set()
    llm: list[tuple[str, str]] = []
    for path, text in sources:
        key = (path, hashlib.blake2b(text.encode(), digest_size=16).digest())
        ff = cache.get(key) if cache is not None else None
        if ff is None:
            ff = file_facts(path, text)
            if cache is not None:
                cache[key] = ff
        if ff is None:
            continue
        yield from ff["strings"]
        flags |= ff.get("flags", set())
        if ff.get("derived"):
            derived_in.add(path)
        if "engine" in ff:
            engine_fields, boolean_optional = ff["engine"], ff["boolean_optional"]
        frontend_fields = ff.get("frontend", frontend_fields)
        config_classes.update(ff.get("config", {}))
        env_defaults = ff.get("env", env_defaults)
        env_reads |= ff.get("env_reads", set())
        llm = ff.get("llm", llm)
    for name, (ann, default) in engine_fields.items():
        yield ("arg", name, _resolve(default, config_classes))
    # where a release derives flags from dataclass fields (an f"--{name}" add_argument), add them
    for path in derived_in:
        fields = engine_fields if path in _ARGS_FILES else frontend_fields if path in _FRONTEND_FILES else {}
        flags |= {"--" + n.replace("_", "-") for n in fields}
    if boolean_optional:
        bools = {n for n, (ann, _) in {**engine_fields, **frontend_fields}.items() if "bool" in ann}
        flags |= {"--no-" + f[2:] for f in flags if f[2:].replace("-", "_") in bools}
    for f in sorted(flags):
        yield ("flag", f)
    for name, default in llm:
        yield ("llm", name, default)
    for name, default in sorted(env_defaults.items()):
        yield ("env", name, default)
    for name in sorted(env_reads - set(env_defaults)):
        yield ("env", name, "?")


def _resolve(default: str, classes: dict[str, dict[str, tuple[str, str]]], depth: int = 0) -> str:
    """`CacheConfig.gpu_memory_utilization` -> that field's default, as later releases write it."""
    m = re.fullmatch(r"([A-Z][A-Za-z]+)\.([a-z_][a-z0-9_]*)", default)
    if m and depth < 4 and m.group(1) in classes and m.group(2) in classes[m.group(1)]:
        return _resolve(classes[m.group(1)][m.group(2)][1], classes, depth + 1)
    m = re.fullmatch(r"get_field\((\w+),\s*['\"](\w+)['\"]\)", default)
    if m and depth < 4 and m.group(1) in classes and m.group(2) in classes[m.group(1)]:
        return _resolve(classes[m.group(1)][m.group(2)][1], classes, depth + 1)
    return default
