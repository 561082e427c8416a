"""`kvkb lint`'s checks: everything kvkb.validate checks, plus (semgrep-style) that kbmatch names
each entry on its own must-match samples and not on its must-not-match ones, plus each entry against
the atlas of vLLM's releases (kvkb.atlas.check)."""

from __future__ import annotations

import sys
from pathlib import Path

from . import template
from .codes import Problem
from .entry import Category, Entry
from .loader import KB, _shown, entry_files, load_entry, load_kb
from .validate import _pos, check_kb


def lint_kb(kb: KB, with_matcher: bool = True, only: set[str] | None = None) -> list[Problem]:
    """kvkb.validate's problems, and with_matcher whether kbmatch names each entry on its own samples."""
    problems = check_kb(kb, only)
    if with_matcher and kb.entries:
        problems.extend(_sample_checks(kb, only))
    problems.extend(_atlas_checks(kb, only))
    return problems


def _atlas_checks(kb: KB, only: set[str] | None = None) -> list[Problem]:
    """KB070-KB079: each entry against what every vLLM release prints and accepts (kvkb/atlas)."""
    from kvkb.atlas.check import check_entry
    from kvkb.atlas.store import AtlasError, load_default

    try:
        atlas = load_default()
    except AtlasError as exc:
        # the atlas ships with kvkb; without it (a broken install, a wrong KVKB_ATLAS) say so, not pass quietly
        print(f"kvkb lint: KB070-KB079 not checked: {exc}", file=sys.stderr)
        return []
    problems = []
    for eid, entry in kb.entries.items():
        if only is not None and eid not in only:
            continue
        shown = _shown(kb.files[eid])

        def add(path: tuple, code: str, msg: str) -> None:
            line, col = _pos(kb, eid, path)
            problems.append(Problem(shown, line, col, code, msg))

        check_entry(entry, atlas, add)
    return problems


def _sample_checks(kb: KB, only: set[str] | None = None) -> list[Problem]:
    """semgrep-style: each entry's must-match pastes name it; must-not-match pastes do not."""
    try:
        from kvkb.matcher.engine import Matcher
    except ImportError:  # the matcher is optional for schema-only lint
        return []
    # entries whose templates do not compile already have KB040; the matcher cannot index them
    matcher = Matcher.from_entries([e for e in kb.entries.values() if _templates_compile(e)])
    problems = []
    for eid, entry in kb.entries.items():
        if only is not None and eid not in only:
            continue
        shown = _shown(kb.files[eid])
        for i, paste in enumerate(entry.samples.match):
            report = matcher.match(paste)
            if not names(report, entry):
                line, col = _pos(kb, eid, ("samples", "match", i))
                problems.append(Problem(shown, line, col, "KB043", f"must-match sample {i + 1}: kbmatch says {report.root_cause or 'no confident match'}"))
        for i, paste in enumerate(entry.samples.no_match):
            report = matcher.match(paste)
            if report.root_cause == eid:
                line, col = _pos(kb, eid, ("samples", "no_match", i))
                problems.append(Problem(shown, line, col, "KB044", f"must-not-match sample {i + 1} is matched confidently"))
    return problems


def names(report, entry: Entry) -> bool:
    """kbmatch names the entry for this paste: as its root cause, or, for a wrapper (EngineDeadError),
    confidently above whatever root cause the paste holds: a wrapper is never named instead of it."""
    if report.root_cause == entry.id:
        return True
    return entry.category is Category.engine_wrapper and any(
        m.id == entry.id and m.confidence == "confident" for m in report.matches)


def _templates_compile(entry: Entry) -> bool:
    try:
        for sig in entry.signatures:
            template.to_regex(sig.template)
    except template.TemplateError:
        return False
    return True


def lint_paths(paths: list[Path], with_matcher: bool = True) -> tuple[list[Problem], int]:
    """(problems, files checked) for files and folders; a lone file is checked against the folder it
    sits in, so its related ids resolve and an id another file already uses is caught."""
    problems: list[Problem] = []
    checked: set[Path] = set()
    for path in paths:
        if path.is_dir():
            kb = load_kb(path)
            checked.update(p.resolve() for p in entry_files(path))
            problems += kb.problems + lint_kb(kb, with_matcher)
            continue
        checked.add(path.resolve())
        shown = _shown(path)
        entry, file_problems, located = load_entry(path, shown)
        problems += file_problems
        if entry is None:
            continue
        siblings = load_kb(path.parent, exclude=path)
        if entry.id in siblings.files:
            line, col = located.where(("id",))
            problems.append(Problem(shown, line, col, "KB021", f"duplicate id '{entry.id}' (also in {_shown(siblings.files[entry.id])})"))
        kb = KB(entries={**siblings.entries, entry.id: entry}, files={**siblings.files, entry.id: path},
                located={**siblings.located, entry.id: located})
        problems += lint_kb(kb, with_matcher, only={entry.id})
    return sorted(set(problems)), len(checked)
