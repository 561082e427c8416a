"""Entry text never reaches a page as HTML (KB060 stops lint and the build), and every entry page
asks "Did this fix it?" through the fix-report issue form, prefilled."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from kvkb.codes import EntryError
from kvkb.validate import load_valid_kb, raw_html
from kvkb.loader import REPO_ROOT, kb_dir
from kvkb.site_src import render

EID = "max-model-len-exceeds-kv-cache"


@pytest.fixture
def kb_with(tmp_path):
    """A copy of kb/ with one field of one entry replaced."""
    def make(field: str, value: str) -> Path:
        kb = tmp_path / "kb"
        shutil.copytree(kb_dir(), kb, ignore=shutil.ignore_patterns(".*"))
        path = kb / f"{EID}.yaml"
        text = path.read_text(encoding="utf-8")
        old = yaml.safe_load(text)[field]
        assert isinstance(old, str)
        lines = text.splitlines(keepends=True)
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{field}:"))
        end = at + 1
        while end < len(lines) and (lines[end].startswith(" ") or not lines[end].strip()):
            end += 1
        lines[at:end] = [f"{field}: {yaml.safe_dump(value, width=10_000).splitlines()[0]}\n"]
        path.write_text("".join(lines), encoding="utf-8")
        return kb
    return make


def _cli(*args, env=None):
    return subprocess.run([str(Path(sys.executable).parent / "kvkb"), *args], capture_output=True, text=True, env=env, timeout=300)


def test_a_script_in_an_entrys_summary_fails_lint_and_the_build(kb_with, tmp_path):
    kb = kb_with("summary", "The engine stops at startup. <script>alert(1)</script>")
    proc = _cli("lint", "--no-matcher", str(kb))
    assert proc.returncode == 1
    assert f"{EID}.yaml:" in proc.stdout and "KB060 summary: raw HTML '<script>'" in proc.stdout
    assert "remedy: write it as text" in proc.stdout
    with pytest.raises(EntryError, match="KB060"):
        load_valid_kb(kb)
    env = {**os.environ, "KVKB_KB_DIR": str(kb), "KVKB_RESULTS_DIR": str(tmp_path / "none"), "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO_ROOT / "mkdocs.yml"),
                            "-d", str(tmp_path / "site")], capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300)
    assert build.returncode != 0 and "KB060" in build.stdout + build.stderr
    assert not (tmp_path / "site" / "errors" / EID / "index.html").exists()


@pytest.mark.parametrize("field, value", [
    ("meaning", "Fine text, then <img src=x onerror=alert(1)> in the middle."),
    ("meaning", "A [link](javascript:alert(1)) that runs code."),
    ("title", "ValueError: <iframe src=//evil>"),
])
def test_other_fields_and_script_links_are_caught_too(kb_with, field, value):
    proc = _cli("lint", "--no-matcher", str(kb_with(field, value)))
    assert proc.returncode == 1 and f"KB060 {field}:" in proc.stdout


@pytest.mark.parametrize("text", [
    "Set `<max_model_len>` to what fits; a < b and b > c.",
    "```text\n<html> inside a fence is code\n```\n",
    "Values in backticks: `<n>`, ``<img src=x>``. Links: <https://docs.vllm.ai/>.",
])
def test_code_comparisons_and_autolinks_are_not_html(text):
    assert raw_html(text) is None


def test_a_bare_placeholder_in_angle_brackets_is_a_tag_to_markdown_too():
    assert raw_html("set it to <n> tokens") == "<n>"


def test_the_shipped_entries_are_clean():
    load_valid_kb(kb_dir())  # raises EntryError with KB060 if any entry holds raw HTML


# --- "Did this fix it?" --------------------------------------------------------------------------------

FORM = REPO_ROOT / ".github" / "ISSUE_TEMPLATE" / "fix-report.yml"


def test_each_fix_links_two_prefilled_reports_whose_keys_are_the_forms_field_ids():
    entries = load_valid_kb(kb_dir())
    entry = entries[EID]
    page = render.render_entry(entry, {e: x.title for e, x in entries.items()}, [], repo_url="https://github.com/kvkb/kvkb")
    form = yaml.safe_load(FORM.read_text())
    ids = {field["id"] for field in form["body"] if "id" in field}
    assert {"entry", "fix", "outcome", "vllm-version", "gpu"} <= ids
    for cause in entry.causes:
        for fix in cause.fixes:
            links = [line for line in page.splitlines() if "fix-report.yml" in line and f"fix={fix.id}&" in line]
            assert len(links) == 2, fix.id
            outcomes = set()
            for line in links:
                url = line.split('href="')[1].split('"')[0].replace("&amp;", "&")
                parts = urlsplit(url)
                assert parts.netloc == "github.com" and parts.path == "/kvkb/kvkb/issues/new"
                query = parse_qs(parts.query, keep_blank_values=True)
                assert query["template"] == ["fix-report.yml"]
                assert query["entry"] == [EID] and query["fix"] == [fix.id]
                assert set(query) - {"template", "title", "labels"} <= ids  # every other key fills a field
                assert "vllm-version" in query and "gpu" in query
                outcomes.add(query["outcome"][0])
            assert outcomes == {"worked", "did-not-work"}
