"""Every entry in kb/ (picked up automatically): valid, self-consistent, and complete enough to publish."""

from functools import lru_cache

import pytest

from kvkb import template
from kvkb.entry import CATEGORY_RULES, Category, Entry, category_misfits, check_versions
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


# --- categories: each holds one kind of entry, by the schema's own description ---------------------


def test_entry_is_of_the_kind_its_category_describes(entry):
    """Its own category's rule holds and no other category's does (kvkb.entry.CATEGORY_RULES, the
    descriptions kb/schema.json shows): an entry filed where it does not belong fails here."""
    assert category_misfits(entry) == [], f"{entry.id} ({entry.category.value}): " + "; ".join(category_misfits(entry))


def test_every_category_is_described_and_the_schema_says_so():
    assert set(CATEGORY_RULES) == set(Category)
    described = Entry.model_json_schema()["properties"]["category"]["description"]
    for category, (says, _rule) in CATEGORY_RULES.items():
        assert f"{category.value}: {says}" in described


def test_any_entry_moved_to_another_category_is_a_misfit():
    """The rules tell the kinds apart: every entry refiled under every other category fails."""
    entries = _kb().entries
    assert entries
    for eid, e in entries.items():
        for other in Category:
            if other is not e.category:
                assert category_misfits(e.model_copy(update={"category": other})), (eid, other.value)


@pytest.mark.parametrize("eid, wrong, because", [
    # the issue's own examples of stretched categories, and kinds easily confused
    ("lmcache-cpu-buffer-full", "cpu-backend", "is not cpu-backend"),
    ("kv-offload-host-memory", "kv-capacity", "is not kv-capacity"),
    ("sleep-mode-wake-up-oom", "device-memory", "is not device-memory"),
    ("workspace-locked-growth", "kv-capacity", "reads as internal"),
    ("cuda-oom-during-serving", "engine-wrapper", "reads as device-memory"),
    ("prompt-exceeds-kv-capacity", "request", "reads as kv-capacity"),
    ("kv-cache-allocation-failed", "kv-capacity", "reads as misinformation"),
])
def test_misfiled_entries_are_named_with_the_reason(eid, wrong, because):
    entries = _kb().entries
    if eid not in entries:
        pytest.skip(f"{eid} is not in kb/")
    misfits = category_misfits(entries[eid].model_copy(update={"category": Category(wrong)}))
    assert any(m.startswith(because) for m in misfits), misfits
