"""Lint an entry against the atlas (KB070-KB079): its wordings, exception classes and release ranges,
and every flag, LLM parameter and VLLM_ variable its fixes and code name, as each release has them.

Pure over (Entry, Atlas); kvkb.lint passes an `add(path, code, message)` that places each problem.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from kvkb.atlas.extract import WILD
from kvkb.atlas.match import explain
from kvkb.atlas.store import Atlas, StringItem, spans, versions_string
from kvkb import template
from kvkb.entry import Entry, Fix

Add = Callable[[tuple, str, str], None]

_FLAG = re.compile(r"(?<![\w-])(--[A-Za-z][\w-]*)")
_ENV = re.compile(r"\b(VLLM_[A-Z0-9_]*[A-Z0-9])\b")
_PLACEHOLDER = re.compile(r"\{[a-z_][a-z0-9_]*\}")
# a default stated in prose: "`--swap-space` defaults to 4", "VLLM_CPU_KVCACHE_SPACE (default 0)"
_NAME = r"`?(?P<name>--[a-z][\w-]*|VLLM_[A-Z0-9_]+|[a-z]+(?:_[a-z0-9]+)+)`?"
# a few words may sit between a name and its default ("`--swap-space` GiB per GPU (default 4)")
_GAP = r"[^.;:\n()`]{0,40}?"
# only a value that reads as one: "defaults to the model's context" states no default
_VALUE = r"`?(?P<value>-?\d+(?:\.\d+)?|True|False|None|'[^'`]*'|\"[^\"`]*\")`?(?![\w%]|\.\d)"
_DEFAULTS = [
    re.compile(_NAME + _GAP + r"\(\s*default(?::|\s+is|\s+of)?\s*" + _VALUE),
    re.compile(_NAME + _GAP + r"\s*(?:defaults?\s+(?:to|is|of)|'s default (?:is|of))\s+" + _VALUE),
    re.compile(_NAME + _GAP + r",\s*" + _VALUE + r"(?:\s*[A-Za-z]+)?\s+by default"),
]


def _releases_in(atlas: Atlas, versions: str) -> set[int]:
    spec = SpecifierSet(versions)
    return {i for i, v in enumerate(atlas.releases) if spec.contains(Version(v), prereleases=True)}


def _where(atlas: Atlas, items: Iterable[StringItem], release: int) -> str:
    """file:line of the literal that prints the text in `release` (the raised or logged one, the
    longest first; the line is known where a run of releases starts or ends)."""
    holding = sorted((it for it in items if release in it.indexes),
                     key=lambda it: (not it.role, -len(it.text.replace(WILD, ""))))
    if not holding:
        return "?"
    best = holding[0]
    line = best.line_at(release)
    return f"{best.file}:{line}" if line is not None else best.file


def printed_as(exception: str | None) -> Callable[[StringItem], bool] | None:
    """Which literals can print a line shown as `exception`: pydantic reports a ValueError or
    AssertionError raised while validating as a ValidationError, so a plain ValueError line and a
    ValidationError line of the same text come from different releases."""
    cls = (exception or "").rsplit(".", 1)[-1]
    if cls == "ValidationError":
        return lambda it: not (it.exception in {"ValueError", "AssertionError"} and not it.pydantic)
    if cls in {"ValueError", "AssertionError"}:
        return lambda it: not it.pydantic
    return None


def explained(sig, atlas: Atlas) -> tuple[set[int], list[StringItem]] | None:
    """Releases printing the signature's samples and the literals that do; None when a sample does
    not match its template (KB042 reports that; which releases print a wrong sample is moot)."""
    try:
        if any(template.extract(sig.template, s) is None for s in sig.samples):
            return None
    except template.TemplateError:
        return None  # KB040 reports the template
    found: set[int] = set()
    items: list[StringItem] = []
    for keep in (printed_as(sig.exception), None):
        for sample in sig.samples:
            ex = explain(atlas, sample, sig.template, keep=keep)
            found |= ex.releases
            items += [it for it in ex.items if it not in items]
        if found:
            break
        # a check in a helper function that a pydantic config calls is not marked as pydantic's:
        # without a marked literal, any literal of the text counts
    return found, items


def check_signatures(entry: Entry, atlas: Atlas, add: Add) -> None:
    shown = [explained(sig, atlas) for sig in entry.signatures]
    claims = [_releases_in(atlas, sig.versions) for sig in entry.signatures]
    for i, sig in enumerate(entry.signatures):
        if shown[i] is None:
            continue
        found, items = shown[i]
        if sig.origin != "vllm":
            # vLLM may print the same text in other releases (its own copy of a library's check):
            # the declaration is wrong only where the signature claims the text
            found = found & claims[i]
            if found:
                first, last = min(found), max(found)
                add(("signatures", i, "origin"), "KB073",
                    f"signature '{sig.id}' is declared origin: {sig.origin}, but vLLM's own code prints it: "
                    f"releases {spans(found, atlas.releases)} (first {atlas.releases[first]} "
                    f"{_where(atlas, items, first)}, last {atlas.releases[last]} {_where(atlas, items, last)})")
            continue
        if not found:
            add(("signatures", i, "samples"), "KB072",
                f"signature '{sig.id}': no vLLM release {atlas.releases[0]}–{atlas.releases[-1]} prints its sample")
            continue
        claimed = claims[i]
        # the same literal printed another way (a pydantic wrapper from 0.9.2, say) is a sibling
        # signature of the entry: releases it claims are not missing from this one
        siblings = set().union(*(claims[j] for j, other in enumerate(shown) if j != i and other
                                 and set(other[1]) & set(items)))
        if claimed != found and (claimed - found or found - claimed - siblings):
            found = found - (siblings - claimed) or found
            first, last = min(found), max(found)
            extra, missing = sorted(claimed - found), sorted(found - claimed)
            detail = []
            if missing:
                detail.append(f"printed by {spans(missing, atlas.releases)} outside it")
            if extra:
                detail.append(f"not printed by {spans(extra, atlas.releases)} inside it")
            if extra:
                detail[-1] += " (a template that stands for several wordings needs a sample of each)"
            add(("signatures", i, "versions"), "KB070",
                f"signature '{sig.id}' versions '{sig.versions}' disagree with vLLM's code ({'; '.join(detail)}): "
                f"first {atlas.releases[first]} {_where(atlas, items, first)}, last {atlas.releases[last]} "
                f"{_where(atlas, items, last)}; write versions: \"{versions_string(found, atlas.releases)}\"")
        inside = [it for it in items if it.indexes & found & claimed] or items
        raised = {it.exception for it in inside if it.exception}
        logged = {it.level for it in inside if it.level}
        # pydantic wraps what a validator raises: ValidationError over ValueError / AssertionError
        wrapped = sig.exception and sig.exception.endswith("ValidationError") and raised <= {"ValueError", "AssertionError"}
        if sig.exception and raised and not wrapped and sig.exception.rsplit(".", 1)[-1] not in raised:
            it = next(it for it in inside if it.exception)
            r = max(it.indexes & found)
            add(("signatures", i, "exception"), "KB071",
                f"signature '{sig.id}' says {sig.exception}, vLLM raises it as {' / '.join(sorted(raised))} "
                f"({atlas.releases[r]} {_where(atlas, [it], r)})")
        elif not sig.exception and sig.level and logged and sig.level not in logged:
            it = next(it for it in inside if it.level)
            r = max(it.indexes & found)
            add(("signatures", i, "level"), "KB071",
                f"signature '{sig.id}' says a {sig.level} line, vLLM logs it at {' / '.join(sorted(logged))} "
                f"({atlas.releases[r]} {_where(atlas, [it], r)})")


# --- names: flags, LLM parameters, VLLM_ variables ---------------------------------------------------
def _python_names(src: str) -> tuple[set[str], set[str]]:
    """(LLM keyword names, EngineArgs keyword names) called in a Python snippet."""
    src = _PLACEHOLDER.sub("0", src)
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return set(), set()
    llm, args = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            kws = {k.arg for k in node.keywords if k.arg}
            if name == "LLM":
                llm |= kws
            elif name in {"EngineArgs", "AsyncEngineArgs"}:
                args |= kws
    return llm, args


def _flags_in(text: str) -> set[str]:
    """Flags of vLLM named in a command or prose (flags of another program's command excluded)."""
    return _split_flags(text)[0]


# programs whose flags are not vLLM's; `docker run`'s own flags end at the image name
_OTHER_PROGRAMS = {"nvidia-smi", "rocm-smi", "docker", "podman", "kubectl", "pip", "pip3", "uv", "env", "ulimit",
                   "sysctl", "free", "numactl", "git", "curl", "sudo", "mount", "ray", "npu-smi", "xpu-smi",
                   "hl-smi", "python", "python3", "watch", "ps", "grep", "fuser", "kill"}
# shell words before the program a segment runs
_PREFIX_WORDS = {"sudo", "exec", "time", "nohup", "while", "until", "if", "then", "do", "else", "!"}
_SEGMENTS = re.compile(r"&&|\|\||[;|`\n]")


def _split_flags(text: str) -> tuple[set[str], dict[str, str]]:
    """(vLLM's flags, {another program's flag: that program}) named in shell commands or prose.

    A segment is a command between shell separators or code-span backticks; its flags are vLLM's
    when it runs vllm (or `python -m vllm...`, or follows a vllm image in `docker run`), another
    program's when it runs a known other program, and vLLM's in plain prose."""
    ours: set[str] = set()
    theirs: dict[str, str] = {}
    for segment in _SEGMENTS.split(text):
        words = segment.split()
        while words and (re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]) or words[0] in _PREFIX_WORDS):
            words = words[1:]
        if not words:
            continue
        program = words[0].rsplit("/", 1)[-1]
        # `env -u X vllm serve ...`, `numactl -N 0 vllm serve ...`: vLLM's flags start at "vllm"
        start = next((k for k, w in enumerate(words) if w == "vllm"), None)
        if start is not None and program not in {"docker", "podman", "pip", "pip3", "uv"}:
            for w in words[:start]:
                for f in _FLAG.findall(w):
                    theirs.setdefault(f.split("=", 1)[0], program)
            ours |= {f.split("=", 1)[0] for f in _FLAG.findall(" ".join(words[start:]))}
            continue
        runs_vllm = program == "vllm" or (program.startswith("python") and "-m" in words[:3]
                                          and any(w.startswith("vllm") for w in words[1:4]))
        if runs_vllm or program not in _OTHER_PROGRAMS:
            ours |= {f.split("=", 1)[0] for f in _FLAG.findall(segment)}
            continue
        image = next((k for k, w in enumerate(words) if program in {"docker", "podman"} and "vllm" in w
                      and not w.startswith("-")), None)
        for k, w in enumerate(words):
            for f in _FLAG.findall(w):
                flag = f.split("=", 1)[0]
                if image is not None and k > image:
                    ours.add(flag)
                else:
                    theirs.setdefault(flag, program)
    return ours, theirs


def _llm_holders(atlas: Atlas, name: str) -> set[int]:
    """Releases whose LLM(...) accepts `name`: a parameter of its own, or an EngineArgs field
    passed through **kwargs."""
    return atlas.holders("llm", name) | (atlas.holders("llm", "**kwargs") & atlas.holders("arg", name))


def _flag_holders(atlas: Atlas, flag: str) -> set[int]:
    # vLLM's parser reads --max_model_len as --max-model-len
    return atlas.holders("flag", flag) | atlas.holders("flag", "--" + flag[2:].replace("_", "-"))


def _check_names(atlas: Atlas, add: Add, path: tuple, what: str, names: dict[str, set[str]],
                 claimed: set[int] | None, foreign: set[str]) -> None:
    """Each name must exist in every claimed release (or, with claimed None, in some release)."""
    for kind, code, holders in (("flag", "KB074", _flag_holders), ("llm", "KB075", _llm_holders),
                                ("arg", "KB075", lambda a, n: a.holders("arg", n)),
                                ("env", "KB076", lambda a, n: a.holders("env", n))):
        for name in sorted(names.get(kind, ())):
            if name in foreign:
                continue
            have = holders(atlas, name)
            label = {"flag": "flag", "llm": "LLM parameter", "arg": "EngineArgs field", "env": "variable"}[kind]
            if not have:
                add(path, "KB079", f"{what} names {label} {name}, which no vLLM release {atlas.releases[0]}–"
                    f"{atlas.releases[-1]} has; if it belongs to another program, list it under foreign_names")
                continue
            if claimed is None:
                continue
            lacking = claimed - have
            if lacking:
                add(path, code, f"{what} names {label} {name}, which {spans(lacking, atlas.releases)} lack "
                    f"(inside its versions); releases with it: {spans(have, atlas.releases)} — versions to write: "
                    f"\"{versions_string(have & claimed or have, atlas.releases)}\"")


def _foreign_flags(add: Add, path: tuple, what: str, texts: Iterable[str | None], foreign: set[str],
                   used: set[str]) -> None:
    """Flags of other programs (nvidia-smi's --query-gpu) must be declared in foreign_names."""
    for text in texts:
        for flag, program in sorted(_split_flags(text or "")[1].items()):
            used.add(flag)
            if flag not in foreign:
                add(path, "KB079", f"{what} names {program}'s flag {flag}: list it under foreign_names "
                    "(flags of other programs are declared, so lint can check every other flag against vLLM)")


def _fix_names(fix: Fix) -> dict[str, set[str]]:
    text = " ".join(x for x in (fix.cli, fix.env, fix.python, fix.code) if x)
    llm, args = set(), set()
    for src in (fix.python, fix.code):
        if src:
            a, b = _python_names(src)
            llm |= a
            args |= b
    flags = _flags_in(fix.cli or "") | _flags_in(_strings_only(fix.code) if fix.code else "")
    return {"flag": flags, "llm": llm, "arg": args, "env": set(_ENV.findall(text))}


def _strings_only(src: str) -> str:
    """The string literals of a program (where flags of a subprocess call would sit)."""
    try:
        tree = ast.parse(_PLACEHOLDER.sub("0", src))
    except SyntaxError:
        return src
    return " ".join(n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str))


def check_names(entry: Entry, atlas: Atlas, add: Add) -> None:
    foreign = set(entry.foreign_names)
    used: set[str] = set()  # declared names the entry does use with another program
    for c, cause in enumerate(entry.causes):
        for f, fix in enumerate(cause.fixes):
            what = f"fix '{fix.id}' (versions '{fix.versions}')"
            _check_names(atlas, add, ("causes", c, "fixes", f), what, _fix_names(fix),
                         _releases_in(atlas, fix.versions), foreign)
            _foreign_flags(add, ("causes", c, "fixes", f), what, [fix.cli, fix.code and _strings_only(fix.code)],
                           foreign, used)
    for f, fix in enumerate(entry.ineffective):
        _foreign_flags(add, ("ineffective", f), f"ineffective fix '{fix.id}'",
                       [fix.cli, fix.code and _strings_only(fix.code)], foreign, used)
    for key in ("workaround", "prevention", "detection", "meaning"):
        _foreign_flags(add, (key,), key, [getattr(entry, key)], foreign, used)
    for c, cause in enumerate(entry.causes):
        _foreign_flags(add, ("causes", c, "diagnosis"), f"cause '{cause.id}'", [cause.diagnosis], foreign, used)
    # advice listed as ineffective is not range-checked: an invented flag, or one vLLM removed, is
    # often the very reason it fails (its `reason` says so, and its `code` proves it)
    for key in ("broken_code", "fixed_code"):
        src = getattr(entry, key)
        if src:
            llm, args = _python_names(src)
            _check_names(atlas, add, (key,), key, {"llm": llm, "arg": args, "env": set(_ENV.findall(src)),
                                                   "flag": _flags_in(_strings_only(src))}, None, foreign)
    if entry.workaround:
        _check_names(atlas, add, ("workaround",), "workaround",
                     {"flag": _flags_in(entry.workaround), "env": set(_ENV.findall(entry.workaround))}, None, foreign)
    for name in sorted(foreign - used):
        kind = "flag" if name.startswith("-") else "env" if name.startswith("VLLM_") else None
        if kind and _exists(atlas, kind, name):
            have = _flag_holders(atlas, name) if kind == "flag" else atlas.holders("env", name)
            add(("foreign_names",), "KB078", f"{name} is listed under foreign_names, but vLLM accepts it "
                f"({spans(have, atlas.releases)}): remove it from foreign_names so lint checks it")


def _exists(atlas: Atlas, kind: str, name: str) -> bool:
    if kind == "flag":
        return bool(_flag_holders(atlas, name))
    if kind == "llm":
        return bool(_llm_holders(atlas, name))
    return bool(atlas.holders(kind, name))


# --- defaults stated in prose -------------------------------------------------------------------------
def _norm(value: str) -> str:
    v = value.strip().strip("'\"`").lower()
    v = {"true": "1", "false": "0"}.get(v, v)
    try:
        return repr(float(v))
    except ValueError:
        return v


def _defaults(atlas: Atlas, name: str) -> dict[str, set[int]]:
    """default (normalised) -> releases, for a flag, EngineArgs field or variable."""
    if name.startswith("VLLM_"):
        items = atlas.named("env", name)
    else:
        items = atlas.named("arg", name.lstrip("-").replace("-", "_"))
    out: dict[str, set[int]] = {}
    for it in items:
        out.setdefault(_norm(it.default), set()).update(it.indexes)
    return out


def _prose(entry: Entry) -> Iterable[tuple[tuple, str, str | None]]:
    """(path, text, versions) of the prose that may state a default."""
    for key in ("meaning", "workaround", "prevention", "detection"):
        text = getattr(entry, key)
        if text:
            yield (key,), text, None
    for c, cause in enumerate(entry.causes):
        yield ("causes", c, "diagnosis"), cause.diagnosis, None
        for f, fix in enumerate(cause.fixes):
            for key in ("why", "risk_note"):
                text = getattr(fix, key)
                if text:
                    yield ("causes", c, "fixes", f, key), text, fix.versions
    for f, fix in enumerate(entry.ineffective):
        for key in ("why", "reason"):
            text = getattr(fix, key)
            if text:
                yield ("ineffective", f, key), text, fix.versions


def check_defaults(entry: Entry, atlas: Atlas, add: Add) -> None:
    for path, text, versions in _prose(entry):
        claimed = _releases_in(atlas, versions) if versions else set(range(len(atlas.releases)))
        for m in (m for rx in _DEFAULTS for m in rx.finditer(text)):
            name, value = m.group("name"), m.group("value").rstrip(".")
            known = _defaults(atlas, name)
            if not known or "?" in known:
                continue
            shown = {d: r & claimed for d, r in known.items() if r & claimed}
            if shown and _norm(value) not in shown:
                told = "; ".join(f"{d} in {spans(r, atlas.releases)}" for d, r in sorted(shown.items()))
                add(path, "KB077", f"the text says {name} defaults to {value}; vLLM's code has {told}")


def check_entry(entry: Entry, atlas: Atlas, add: Add) -> None:
    check_signatures(entry, atlas, add)
    check_names(entry, atlas, add)
    check_defaults(entry, atlas, add)
