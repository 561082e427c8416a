"""`mkdocs build --strict` of the real kb/: generated pages, badges from a results file, and
bad entries that stop the build with file, line and remedy (nothing half built)."""

from __future__ import annotations

import json
import re
from html import unescape
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvkb.validate import load_valid_kb
from kvkb.loader import REPO_ROOT, kb_dir

KB = kb_dir()  # KVKB_KB_DIR or the checkout's kb/
DOCS = REPO_ROOT / "site_src" / "docs"


def build(dest: Path, kb: Path = KB, results: Path | None = None, tmp: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "KVKB_KB_DIR": str(kb), "NO_MKDOCS_2_WARNING": "1"}
    env["KVKB_RESULTS_DIR"] = str(results or (tmp or dest.parent) / "no-results")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO_ROOT / "mkdocs.yml"), "-d", str(dest)],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300,
    )


@pytest.fixture(scope="module")
def entries():
    return load_valid_kb(KB)


@pytest.fixture(scope="module")
def site(tmp_path_factory, entries):
    """The real kb/, with a results file that passes one entry and fails another."""
    tmp = tmp_path_factory.mktemp("site")
    ids = sorted(entries)
    with_code = [i for i in ids if entries[i].broken_code]
    passed, failed = with_code[0], with_code[1]
    results = tmp / "results"
    results.mkdir()
    (results / "cpu.json").write_text(json.dumps({
        "vllm_version": "0.32.0", "backend": "cpu", "device": "test VM", "date": "2026-11-22T10:00:00Z",
        "entries": {
            passed: {"status": "pass", "duration_s": 40.0,
                     "broken": {"exit_code": 1, "matched": passed, "passed": True, "duration_s": 20.0, "output": "BROKEN-OUTPUT-MARKER"},
                     "fixed": {"exit_code": 0, "passed": True, "kv_tokens": 4242, "max_concurrency": 1.5, "duration_s": 20.0, "output": "FIXED-OUTPUT-MARKER"},
                     "fixes": {}},
            failed: {"status": "fail", "duration_s": 10.0,
                     "broken": {"exit_code": 0, "matched": None, "passed": False, "duration_s": 10.0, "output": "no error"}},
        },
    }))
    proc = build(tmp / "out", results=results)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {"dir": tmp / "out", "passed": passed, "failed": failed, "log": proc.stdout + proc.stderr}


def html(site, rel: str) -> str:
    return (site["dir"] / rel).read_text(encoding="utf-8")


def test_every_entry_gets_a_page_at_errors_id_with_its_verbatim_lines(site, entries):
    for eid, entry in entries.items():
        # tags out first: a multi-line sample's lines are split by the code block's line anchors
        page = unescape(re.sub(r"<[^>]+>", "", html(site, f"errors/{eid}/index.html")))
        for sig in entry.signatures:
            for sample in sig.samples:
                assert sample.strip() in page, (eid, sample[:60])


def test_no_generated_page_is_committed():
    assert not (DOCS / "errors").exists()
    assert not (DOCS / "index.md").exists()
    assert not (DOCS / "fit.md").exists()


def test_index_is_grouped_and_links_every_entry(site, entries):
    page = html(site, "index.html")
    assert "At startup" in page
    for eid in entries:
        assert f'href="errors/{eid}/"' in page


def test_badges_come_from_the_results_file(site, entries):
    passed = html(site, f"errors/{site['passed']}/index.html")
    assert "Verified on vLLM 0.32.0 · CPU backend · 2026-11-22" in passed
    assert "BROKEN-OUTPUT-MARKER" in passed and "FIXED-OUTPUT-MARKER" in passed
    assert "4,242 KV-cache tokens" in passed
    assert "<details" in passed  # captured output is collapsed
    failed = html(site, f"errors/{site['failed']}/index.html")
    assert "Reproduction failed on vLLM 0.32.0 · CPU backend · 2026-11-22" in failed
    others = [i for i in entries if i not in (site["passed"], site["failed"])]
    for eid in others:
        page = html(site, f"errors/{eid}/index.html")
        expected = "GPU runner only" if entries[eid].broken_code else "Not yet reproduced"
        assert expected in page, eid


def test_tags_page_lists_ids_exceptions_and_flags(site):
    page = html(site, "tags/index.html")
    for tag in ("max-model-len-exceeds-kv-cache", "ValueError", "--max-model-len"):
        assert f">{tag}<" in page


def test_entry_pages_list_their_tags_at_the_end_linking_the_tags_page(site, entries):
    import re

    tags_page = html(site, "tags/index.html")
    anchors = set(re.findall(r'id="([^"]+)"', tags_page))
    for eid in entries:
        page = html(site, f"errors/{eid}/index.html")
        assert re.search(r'<nav class="md-tags"\s+hidden', page), eid  # material's chips above the title are hidden
        bottom = page[page.index("kvkb-tags"):]
        links = re.findall(r'href="\.\./\.\./tags/#([^"]+)"', bottom)
        assert f"tag:{eid}" in links, eid
        assert set(links) <= anchors, (eid, set(links) - anchors)


def test_memory_page_has_an_offline_diagram(site):
    page = html(site, "memory/index.html")
    assert "<svg" in page and "gpu_memory_utilization" in page
    assert "0.92 from 0.20.0" in page
    assert "cdn" not in page.lower() and "mermaid" not in page.lower()


def test_memory_page_links_every_entry(site, entries):
    page = html(site, "memory/index.html")
    missing = [eid for eid in entries if f'href="../errors/{eid}/"' not in page]
    assert not missing, missing


def test_nav_groups_entries_by_phase_and_category_and_names_them_by_short_title(site, entries):
    import re

    page = html(site, "index.html")
    # material renders nested nav sections as labelled lists; entries sit under phase and category
    # (the index's own table of contents comes earlier in the nav: start at the first phase section)
    primary = page[page.index('class="md-nav md-nav--primary"'):]
    nav = primary[re.search(r'<span class="md-ellipsis">\s*Errors at startup\s*</span>', primary).start():]
    startup, serving = (re.search(rf'<span class="md-ellipsis">\s*{label}\s*</span>', nav).start() for label in ("Errors at startup", "Errors while serving"))
    assert startup < serving
    assert re.search(r'<span class="md-ellipsis">\s*KV-cache capacity\s*</span>', nav)
    for eid, entry in entries.items():
        link = re.search(rf'href="errors/{re.escape(eid)}/"[^>]*>\s*<span[^>]*>\s*([^<]+?)\s*</span>', nav)
        assert link, eid
        assert unescape(link.group(1)) == entry.short_title  # a short title, not the error line; the id is the URL
        where = nav.index(f'href="errors/{eid}/"')
        assert (where > serving) == (entry.phase.value == "serving"), eid


def test_site_is_offline_safe(site):
    page = html(site, "index.html")
    assert "fonts.googleapis" not in page and "fonts.gstatic" not in page


def test_fit_page_only_when_the_module_exists(site):
    try:
        from kvkb.fit.sitepage import render_markdown  # noqa: F401
    except ImportError:
        assert not (site["dir"] / "fit" / "index.html").exists()
    else:
        assert (site["dir"] / "fit" / "index.html").exists()


# --- bad input ---------------------------------------------------------------------------------------

BREAKAGES = {
    "yaml-syntax": (lambda text: text.replace("severity: fatal", "severity: [fatal", 1), "KB001"),
    "wrong-type": (lambda text: text.replace("severity: fatal", "severity: 3", 1), "KB011"),
    "unknown-key": (lambda text: text.replace("severity: fatal", "severity: fatal\nseverty: fatal", 1), "KB012"),
    "not-a-mapping": (lambda text: "- just\n- a list\n", "KB002"),
}


@pytest.mark.parametrize("kind", sorted(BREAKAGES))
def test_a_broken_entry_fails_the_build_with_file_line_and_remedy(tmp_path, kind):
    kb = tmp_path / "kb"
    shutil.copytree(KB, kb)
    target = kb / "max-model-len-exceeds-kv-cache.yaml"
    breaker, code = BREAKAGES[kind]
    broken = breaker(target.read_text())
    assert broken != target.read_text()
    target.write_text(broken)
    dest = tmp_path / "out"
    proc = build(dest, kb=kb, tmp=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "max-model-len-exceeds-kv-cache.yaml:" in out and code in out and "remedy:" in out, out
    line = out.split("max-model-len-exceeds-kv-cache.yaml:", 1)[1].split(":", 1)[0]
    assert line.isdigit() and int(line) >= 1
    assert "Traceback" not in out
    assert not dest.exists(), "nothing may be written when an entry is bad"


def test_a_broken_results_file_fails_the_build(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    (results / "cpu.json").write_text("{oops")
    proc = build(tmp_path / "out", results=results)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "cpu.json" in out and "not valid JSON" in out
    assert "Traceback" not in out



def test_related_links_show_short_titles(site, entries):
    # a related error is named as in the navigation, not by its whole (often six-line) error line
    from html import escape

    entry = next(e for e in entries.values() if e.related)
    page = (site["dir"] / "errors" / entry.id / "index.html").read_text(encoding="utf-8")
    section = page.split('id="related-errors"', 1)[1].split("<h2", 1)[0]
    rel = entries[entry.related[0].id]
    assert escape(rel.short_title, quote=False) in section
    assert escape(rel.title, quote=False) not in section
