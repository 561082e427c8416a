"""Checks on loaded entries beyond the schema (kvkb.loader): the one place builds validate through.

Imports go one way: kvkb.lint (which adds the matcher's sample checks) -> validate -> loader -> entry;
the matcher's index builder and the site use load_valid_kb from here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from . import template
from .codes import EntryError, Problem
from .entry import SHORT_TITLE_MAX, Entry, FixStatus
from .loader import KB, _shown, dotted, kb_dir, load_kb
from .params import DERIVED

# calls that start a vLLM engine (and so spawn worker processes that re-import the script)
ENGINE_CALLS = {"LLM", "LLMEngine", "AsyncLLMEngine", "AsyncLLM", "from_engine_args"}


def _pos(kb: KB, entry_id: str, path: tuple, inner: tuple[int, int] | None = None) -> tuple[int, int]:
    """Where path is in the entry's file; inner (line, column) points inside a literal block."""
    located = kb.located.get(entry_id)
    if not located:
        return (1, 1)
    return located.where_inside(path, *inner) if inner else located.where(path)


def check_kb(kb: KB, only: set[str] | None = None) -> list[Problem]:
    """Problems across the loaded entries (or the ids in only): ids, templates, samples, placeholders,
    code, related ids, raw HTML. Everything but the matcher's sample checks (kvkb.lint adds those)."""
    problems: list[Problem] = []
    for eid, entry in kb.entries.items():
        if only is not None and eid not in only:
            continue
        shown = _shown(kb.files[eid])

        def add(path: tuple, code: str, msg: str, inner: tuple[int, int] | None = None) -> None:
            line, col = _pos(kb, eid, path, inner)
            problems.append(Problem(shown, line, col, code, msg))

        lint_entry(entry, add, known_ids=set(kb.entries))
        for other in _same_short_title(kb, eid):
            add(("short_title",), "KB026", f"short_title {entry.short_title!r} is also the short_title of {other}")
    return problems


def _short_title_key(text: str) -> str:
    # names a reader would take for the same one in the navigation: case and spacing aside
    return " ".join(text.split()).casefold()


def _same_short_title(kb: KB, eid: str) -> list[str]:
    """The other entries (as shown paths) whose short_title reads the same as eid's."""
    key = _short_title_key(kb.entries[eid].short_title)
    return [_shown(kb.files[o]) for o, e in sorted(kb.entries.items()) if o != eid and _short_title_key(e.short_title) == key]


def load_valid_kb(directory: Path | None = None) -> dict[str, Entry]:
    """For builds (site, matcher index, runner): all entries, or EntryError naming every problem
    (nothing half-built)."""
    kb = load_kb(directory)
    problems = kb.problems + check_kb(kb)
    if problems:
        raise EntryError(problems)
    if not kb.entries:
        raise EntryError([Problem(str(directory or kb_dir()), 1, 1, "KB002", "no entries found (*.yaml)")])
    return kb.entries


# --- raw HTML (KB060) ------------------------------------------------------------------------------
# Entry text becomes the site's pages through Markdown, which passes raw HTML through: a tag in an
# entry would run in every reader's browser. Fields shown only inside code blocks or code spans
# (programs, fix forms, verbatim samples, templates, source paths) are safe as they are.
_CODE_FIELDS = {"broken_code", "fixed_code", "code", "cli", "python", "env", "template", "samples", "match",
                "no_match", "log_lines", "source", "versions", "id", "$schema", "schema_"}
_FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.M | re.S)
_CODE_SPAN_RE = re.compile(r"(`+)(?!`).+?(?<!`)\1", re.S)
# an HTML tag, comment, processing instruction or CDATA as CommonMark recognises raw HTML
_HTML_RE = re.compile(r"<(?:/?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>|!--|\?|!\[CDATA\[|![A-Za-z])")
_BAD_LINK_RE = re.compile(r"\]\(\s*<?\s*(?:javascript|data|vbscript):", re.I)


def raw_html(text: str) -> str | None:
    """The first raw HTML (or script link) in Markdown text outside code, or None."""
    prose = _CODE_SPAN_RE.sub("", _FENCE_RE.sub("", text))
    found = _HTML_RE.search(prose) or _BAD_LINK_RE.search(prose)
    return found.group(0) if found else None


def _url_scheme_ok(url: str) -> bool:
    return not re.match(r"\s*(?:javascript|data|vbscript):", url, re.I)


def _html_checks(data, add, path: tuple = ()) -> None:
    if isinstance(data, dict):
        for key, value in data.items():
            if key not in _CODE_FIELDS:
                _html_checks(value, add, path + (key,))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            _html_checks(value, add, path + (i,))
    elif isinstance(data, str):
        if path and path[-1] == "url":
            if not _url_scheme_ok(data):
                add(path, "KB060", f"{dotted(path)}: a {data.split(':', 1)[0].strip()}: link would run code on the site")
        elif found := raw_html(data):
            add(path, "KB060", f"{dotted(path)}: raw HTML {found[:40]!r} would land in the page as HTML")


def lint_entry(entry: Entry, add, known_ids: set[str]) -> None:
    """Every check on one validated entry; add(path, code, message) records a problem."""
    _html_checks(entry.model_dump(mode="json", by_alias=True, exclude_none=True), add)
    if len(entry.short_title) > SHORT_TITLE_MAX:
        add(("short_title",), "KB025", f"short_title is {len(entry.short_title)} characters; the limit is {SHORT_TITLE_MAX}")
    _unique(add, [(("signatures", i, "id"), s.id) for i, s in enumerate(entry.signatures)], "signature")
    _unique(add, [(("causes", i, "id"), c.id) for i, c in enumerate(entry.causes)], "cause")
    fix_ids = [(("causes", ci, "fixes", fi, "id"), f.id) for ci, c in enumerate(entry.causes) for fi, f in enumerate(c.fixes)]
    fix_ids += [(("ineffective", i, "id"), f.id) for i, f in enumerate(entry.ineffective)]
    _unique(add, fix_ids, "fix")

    known_params = set(DERIVED)
    for i, sig in enumerate(entry.signatures):
        known_params.update(sig.placeholders)
        tpl_problems = template.check(sig.template)
        for code, msg in tpl_problems:
            add(("signatures", i, "template"), code, f"signature '{sig.id}': {msg}")
        if any(code == "KB040" and "stray" in msg for code, msg in tpl_problems):
            continue  # it does not compile: every sample would "mismatch" too
        for j, sample in enumerate(sig.samples):
            if template.extract(sig.template, sample) is None:
                add(("signatures", i, "samples", j), "KB042", f"sample {j + 1} of signature '{sig.id}' does not match its template")
    for i, line in enumerate(entry.verify.log_lines):
        try:
            template.split(line)
        except template.TemplateError as exc:
            add(("verify", "log_lines", i), "KB040", f"verify.log_lines[{i}]: {exc}")

    for ci, cause in enumerate(entry.causes):
        for fi, fix in enumerate(cause.fixes):
            path = ("causes", ci, "fixes", fi)
            _fix_params(add, path, fix, known_params)
            if fix.status is FixStatus.ineffective:
                add(path + ("status",), "KB011", f"{dotted(path)}.status: a fix that does not work belongs in 'ineffective'")
    for fi, fix in enumerate(entry.ineffective):
        _fix_params(add, ("ineffective", fi), fix, known_params)
        if not fix.code:
            add(("ineffective", fi), "KB051", f"ineffective fix '{fix.id}' has no 'code' to prove it")
        elif found := code_check(fix.code):
            add(("ineffective", fi, "code"), "KB052", f"ineffective fix '{fix.id}' code: {found[0]}", found[1])
    for field in ("broken_code", "fixed_code"):
        src = getattr(entry, field)
        if src is not None and (found := code_check(src)):
            add((field,), "KB052", f"{field}: {found[0]}", found[1])

    for ri, rel in enumerate(entry.related):
        if rel.id == entry.id:
            add(("related", ri, "id"), "KB022", "an entry cannot be related to itself")
        elif rel.id not in known_ids:
            add(("related", ri, "id"), "KB022", f"related id '{rel.id}' is not an entry in kb/")


def _unique(add, located_ids: list[tuple[tuple, str]], what: str) -> None:
    seen: set[str] = set()
    for path, i in located_ids:
        if i in seen:
            add(path, "KB021", f"duplicate {what} id '{i}' in this entry")
        seen.add(i)


def _fix_params(add, path: tuple, fix, known: set[str]) -> None:
    for form in ("cli", "python", "env"):
        for name in template.placeholders(getattr(fix, form) or ""):
            if name not in known:
                add(path + (form,), "KB050", f"fix '{fix.id}' {form}: unknown placeholder {{{name}}}")


def code_problem(src: str) -> str | None:
    """Why a program cannot be run by the reproduction runner, or None."""
    found = code_check(src)
    return found[0] if found else None


def code_check(src: str) -> tuple[str, tuple[int, int] | None] | None:
    """(why the program cannot run, its (line, column) in the program if one is to blame), or None."""
    try:
        tree = ast.parse(src)
    except SyntaxError as exc:
        where = (exc.lineno, exc.offset or 1) if exc.lineno else None
        return f"not valid Python: {exc.msg} (line {exc.lineno})", where
    guards = [node for node in tree.body if isinstance(node, ast.If) and _is_main_test(node.test)]
    if not guards:
        calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and _call_name(c) in ENGINE_CALLS]
        first = min(calls, key=lambda c: (c.lineno, c.col_offset), default=None)
        return ("no `if __name__ == \"__main__\":` guard (vLLM spawns processes that re-import the script)",
                (first.lineno, first.col_offset + 1) if first else None)
    for node in tree.body:
        if node in guards or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and _call_name(call) in ENGINE_CALLS:
                return (f"starts the engine ({_call_name(call)}, line {call.lineno}) outside the "
                        "`if __name__ == \"__main__\":` guard", (call.lineno, call.col_offset + 1))
    return None


def _is_main_test(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return bool(names and consts)


def _call_name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
