"""Semantic checks on loaded entries (schema checks happen in kvkb.loader)."""

from __future__ import annotations

import ast
from pathlib import Path

from . import template
from .codes import Problem
from .loader import KB, load_entry, load_kb
from .params import DERIVED


def _pos(kb: KB, entry_id: str, path: tuple) -> tuple[int, int]:
    located = kb.located.get(entry_id)
    return located.where(path) if located else (1, 1)


def lint_kb(kb: KB, with_matcher: bool = True) -> list[Problem]:
    problems: list[Problem] = []
    for eid, entry in kb.entries.items():
        shown = _shown(kb.files[eid])

        def add(path: tuple, code: str, msg: str) -> None:
            line, col = _pos(kb, eid, path)
            problems.append(Problem(shown, line, col, code, msg))

        _unique(add, "signatures", [s.id for s in entry.signatures])
        _unique(add, "causes", [c.id for c in entry.causes])
        _unique(add, "fixes", [f.id for f in entry.all_fixes])
        known_params = set(DERIVED)
        for i, sig in enumerate(entry.signatures):
            known_params.update(sig.placeholders)
            tpl_problems = template.check(sig.template)
            for code, msg in tpl_problems:
                add(("signatures", i, "template"), code, f"signature '{sig.id}': {msg}")
            if any(code == "KB040" and "stray" in msg for code, msg in tpl_problems):
                continue
            for j, sample in enumerate(sig.samples):
                if template.extract(sig.template, sample) is None:
                    add(("signatures", i, "samples", j), "KB042", f"sample {j + 1} of signature '{sig.id}' does not match its template")
        for ci, cause in enumerate(entry.causes):
            for fi, fix in enumerate(cause.fixes):
                _fix_params(add, ("causes", ci, "fixes", fi), fix, known_params)
        for fi, fix in enumerate(entry.ineffective):
            _fix_params(add, ("ineffective", fi), fix, known_params)
            if not fix.code:
                add(("ineffective", fi), "KB051", f"ineffective fix '{fix.id}' has no 'code' to prove it")
        for field in ("broken_code", "fixed_code"):
            src = getattr(entry, field)
            if src is None:
                continue
            msg = _code_problem(src)
            if msg:
                add((field,), "KB052", f"{field}: {msg}")
        for fi, fix in enumerate(entry.ineffective):
            if fix.code and (msg := _code_problem(fix.code)):
                add(("ineffective", fi, "code"), "KB052", f"ineffective fix '{fix.id}' code: {msg}")
        for ri, rel in enumerate(entry.related):
            if rel.id not in kb.entries:
                add(("related", ri, "id"), "KB022", f"related id '{rel.id}' is not an entry in kb/")
            elif rel.id == eid:
                add(("related", ri, "id"), "KB022", "an entry cannot be related to itself")
    if with_matcher and kb.entries:
        problems.extend(_sample_checks(kb))
    return problems


def _unique(add, what: str, ids: list[str]) -> None:
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            add((what,), "KB021", f"duplicate {what[:-1]} id '{i}'")
        seen.add(i)


def _fix_params(add, path: tuple, fix, known: set[str]) -> None:
    for form in ("cli", "python", "env"):
        text = getattr(fix, form)
        for name in template.placeholders(text or ""):
            if name not in known:
                add(path + (form,), "KB050", f"fix '{fix.id}' {form}: unknown placeholder {{{name}}}")


def _code_problem(src: str) -> str | None:
    try:
        tree = ast.parse(src)
    except SyntaxError as exc:
        return f"not valid Python: {exc.msg} (line {exc.lineno})"
    calls_llm = "LLM(" in src or "AsyncLLMEngine" in src or "LLMEngine" in src
    guarded = any(
        isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body
    )
    if calls_llm and not guarded:
        return "starts the engine without an `if __name__ == \"__main__\":` guard (vLLM spawns processes)"
    return None


def _sample_checks(kb: KB) -> list[Problem]:
    """semgrep-style: each entry's must-match pastes name it; must-not-match pastes do not."""
    try:
        from kvkb.matcher.engine import Matcher
    except ImportError:  # the matcher is optional for schema-only lint
        return []
    matcher = Matcher.from_entries(list(kb.entries.values()))
    problems = []
    for eid, entry in kb.entries.items():
        shown = _shown(kb.files[eid])
        for i, paste in enumerate(entry.samples.match):
            report = matcher.match(paste)
            if report.root_cause != eid:
                line, col = _pos(kb, eid, ("samples", "match", i))
                problems.append(Problem(shown, line, col, "KB043", f"must-match sample {i + 1}: kbmatch says {report.root_cause or 'no confident match'}"))
        for i, paste in enumerate(entry.samples.no_match):
            report = matcher.match(paste)
            if report.root_cause == eid:
                line, col = _pos(kb, eid, ("samples", "no_match", i))
                problems.append(Problem(shown, line, col, "KB044", f"must-not-match sample {i + 1} is matched confidently"))
    return problems


def lint_paths(paths: list[Path]) -> tuple[list[Problem], int]:
    """Lint files and folders; a lone file is checked against the kb/ it sits in for related ids."""
    problems: list[Problem] = []
    count = 0
    for path in paths:
        if path.is_dir():
            kb = load_kb(path)
            count += len(kb.entries) + len({p.path for p in kb.problems if p.code in ("KB001", "KB002", "KB003", "KB010", "KB011", "KB012")})
            problems += kb.problems + lint_kb(kb)
        else:
            count += 1
            entry, file_problems, located = load_entry(path, _shown(path))
            problems += file_problems
            if entry is not None:
                siblings = load_kb(path.parent)
                kb = KB(entries={entry.id: entry, **{k: v for k, v in siblings.entries.items() if k != entry.id}})
                kb.files = {**siblings.files, entry.id: path}
                kb.located = {**siblings.located, entry.id: located}
                own = [p for p in lint_kb(kb) if p.path == _shown(path)]
                problems += own
    return sorted(set(problems)), count


def _shown(path: Path) -> str:
    from .loader import _shown as shown

    return shown(path)
