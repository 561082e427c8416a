"""kvkb.fit.sitepage: the "Will it fit?" page is generated from fit() and builds under mkdocs --strict."""

import re
import subprocess
import sys

import pytest

from kvkb.fit.capacity import fit
from kvkb.fit.sitepage import CONTEXTS, GPUS, cell, render_markdown, shipped_models
from kvkb.fit.sizes import GiB


@pytest.fixture(scope="module")
def page():
    return render_markdown()


def test_every_shipped_model_in_every_fit_table(page):
    models = shipped_models()
    assert len(models) >= 10
    for name, _ in models:
        # bytes table + three context tables + the TP table
        assert page.count(f"| {name} |") == 2 + len(CONTEXTS)
    for label, _ in GPUS:
        assert label in page


def test_cells_agree_with_fit(page):
    models = dict(shipped_models())
    s = models["meta-llama/Llama-3.1-8B-Instruct"]
    text, r = cell(s, 79.18, 32768)
    again = fit(s, gpu_memory=int(79.18 * GiB), max_model_len=32768, suggest=False)
    assert r.fits is again.fits is True and text == f"✓ {again.max_concurrency:.1f}×"
    row = next(line for line in page.splitlines()
               if line.startswith("| meta-llama/Llama-3.1-8B-Instruct |") and "✓" in line and text in line)
    assert row
    # a context beyond the model's own maximum is marked, not computed
    assert cell(models["google/gemma-2-9b-it"], 79.18, 32768) == ("—", None)
    # 70B in bf16 does not fit one 80 GB GPU
    assert cell(models["meta-llama/Llama-3.1-70B-Instruct"], 79.18, 8192)[0] == "✗"


def test_explains_terms_and_draws_budget(page):
    for term in ("Bytes per token", "Block", "KV capacity", "Maximum concurrency", "Fits",
                 "gpu_memory_utilization", "Sliding window", "Tensor parallelism", "fp8 KV cache"):
        assert f"**{term}" in page
    svg = re.search(r"<svg .*?</svg>", page)
    assert svg and "\n" not in svg.group(0)  # one HTML block: Markdown must not split it
    assert "KV cache:" in svg.group(0) and "weights:" in svg.group(0)


def test_builds_with_mkdocs_strict(tmp_path, page):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# kvkb\n\n[Will it fit?](fit.md)\n")
    (docs / "fit.md").write_text(page, encoding="utf-8")
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: t\ntheme:\n  name: material\n  font: false\nmarkdown_extensions:\n  - admonition\n"
        "  - tables\n  - attr_list\n  - md_in_html\n  - toc:\n      permalink: true\n"
        "  - pymdownx.superfences\n  - pymdownx.highlight\nnav:\n  - index.md\n  - fit.md\n")
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(tmp_path / "mkdocs.yml"),
                        "-d", str(tmp_path / "site")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "site" / "fit" / "index.html").read_text(encoding="utf-8")
    assert "<table>" in html and "<svg" in html and 'class="admonition note"' in html
