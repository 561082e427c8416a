"""Every entry in kb/ (picked up automatically): valid, self-consistent, and complete enough to publish."""

from functools import lru_cache

import pytest

from kvkb import template
from kvkb.entry import check_versions
from kvkb.lint import lint_kb
from kvkb.validate import code_problem
from kvkb.loader import entry_files, kb_dir, load_entry, load_kb
from kvkb.params import DERIVED

PATHS = entry_files(kb_dir())


@lru_cache(maxsize=1)
def _kb():
    return load_kb(kb_dir())


@lru_cache(maxsize=1)
def _lint():
    return lint_kb(_kb())


def _entry(path):
    entry, problems, _ = load_entry(path)
    assert problems == [], "\n".join(p.format() for p in problems)
    return entry


def test_the_kb_is_not_empty():
    assert len(PATHS) >= 1


@pytest.fixture(params=PATHS, ids=[p.stem for p in PATHS])
def entry(request):
    return _entry(request.param)


def test_validates_and_id_is_file_name(entry):
    assert entry.id == _kb().files[entry.id].stem


def test_samples_extract_every_placeholder(entry):
    for sig in entry.signatures:
        assert template.check(sig.template) == [], sig.id
        for sample in sig.samples:
            values = template.extract(sig.template, sample)
            assert values is not None, f"{sig.id}: sample does not match: {sample[:100]}"
            assert set(values) == set(sig.placeholders)
            assert all(v.strip() for v in values.values()), f"{sig.id}: empty value in {values}"


def test_fix_placeholders_are_known(entry):
    known = set(DERIVED).union(*(sig.placeholders for sig in entry.signatures))
    for fix in entry.all_fixes:
        for form in (fix.cli, fix.python, fix.env):
            assert set(template.placeholders(form or "")) <= known, f"{fix.id}: {form}"


def test_related_ids_exist(entry):
    for rel in entry.related:
        assert rel.id != entry.id
        assert rel.id in _kb().entries, f"related id '{rel.id}' is not an entry in kb/"


def test_related_links_go_both_ways(entry):
    """A reader who lands on either page finds the other (issue 11: related links both ways)."""
    entries = _kb().entries
    for rel in entry.related:
        back = {r.id for r in entries[rel.id].related}
        assert entry.id in back, f"{rel.id} has no related link back to {entry.id}"


def test_versions_are_valid_ranges(entry):
    ranges = [s.versions for s in entry.signatures] + [f.versions for f in entry.all_fixes]
    ranges += [r.versions for r in entry.references if r.versions]
    for spec in ranges:
        assert check_versions(spec) == spec


def test_code_compiles_with_a_main_guard(entry):
    programs = {"broken_code": entry.broken_code, "fixed_code": entry.fixed_code}
    programs.update({f"ineffective {f.id}": f.code for f in entry.ineffective})
    for name, src in programs.items():
        if src is not None:
            assert code_problem(src) is None, f"{name}: {code_problem(src)}"
    assert all(f.code for f in entry.ineffective), "ineffective advice needs code that proves it"


def test_page_critical_fields_are_filled(entry):
    for text in (entry.title, entry.summary, entry.meaning, entry.verify.text):
        assert text.strip()
    assert entry.samples.match and all(s.strip() for s in entry.samples.match)
    assert entry.references and all((r.url or r.source) and r.title.strip() for r in entry.references)
    for cause in entry.causes:
        assert cause.title.strip() and cause.diagnosis.strip() and cause.fixes
        for fix in cause.fixes:
            assert fix.title.strip() and any((form or "").strip() for form in (fix.cli, fix.python, fix.env))
    for fix in entry.ineffective:
        assert fix.claim.strip() and fix.reason.strip()


def test_kvkb_lint_finds_nothing(entry):
    # the full lint, kbmatch included: must-match samples name this entry, must-not-match ones do not
    mine = [p for p in _lint() if p.path.endswith(f"{entry.id}.yaml")]
    assert mine == [], "\n".join(p.format() for p in mine)
