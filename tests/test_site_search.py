"""Site search: the built search index (site/search/search_index.json), and material's own search
worker (lunr) run under node against it, fed the raw error lines of every entry.

The browser test (test_site_browser.py) drives the same search through the real page.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest
import yaml

from kvkb import template
from kvkb.validate import load_valid_kb
from kvkb.loader import REPO_ROOT, kb_dir

SHIM = REPO_ROOT / "site_src" / "docs" / "javascripts" / "search-flags.js"


@pytest.fixture(scope="module")
def entries():
    return load_valid_kb(kb_dir())


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("search-site")
    env = {**os.environ, "KVKB_KB_DIR": str(kb_dir()), "KVKB_RESULTS_DIR": str(tmp / "none"), "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO_ROOT / "mkdocs.yml"), "-d", str(tmp / "site")],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return tmp / "site"


@pytest.fixture(scope="module")
def index(site):
    return json.loads((site / "search" / "search_index.json").read_text(encoding="utf-8"))


def tokens(text: str, separator: str) -> set[str]:
    """Material's tokenizer: split on the separator, lower-case (the pipeline only drops stop words)."""
    return {t.lower() for t in re.split(separator, text) if t}


def lead_doc(index, eid: str) -> dict:
    return next(d for d in index["docs"] if d["location"] == f"errors/{eid}/")


def squash(text: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", text)).split())


# --- the index -----------------------------------------------------------------------------------


def test_index_uses_the_configured_separator_and_field_boosts(index):
    config = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text().replace("!!python", "#"))
    search = next(p["search"] for p in config["plugins"] if isinstance(p, dict) and "search" in p)
    assert index["config"]["separator"] == search["separator"]
    assert index["config"]["fields"]["tags"]["boost"] < index["config"]["fields"]["title"]["boost"]


def test_separator_survives_materials_highlighter(index):
    # material's highlighter splits the separator on '|' and drops lookarounds; every piece must compile
    for piece in index["config"]["separator"].split("|"):
        re.compile(re.sub(r"(\(\?[!=<][^)]+\))", "", piece) or "x")


def test_identifiers_stay_whole_and_flags_split_like_lunr_queries(index):
    sep = index["config"]["separator"]
    toks = tokens("Try increasing `gpu_memory_utilization` or set VLLM_CPU_KVCACHE_SPACE=8 (--max-model-len 4096), vLLM 0.32.0.", sep)
    assert {"gpu_memory_utilization", "vllm_cpu_kvcache_space", "max", "model", "len", "4096", "0.32.0"} <= toks
    assert not any(t.startswith(("`", "(", "-")) or t.endswith(("`", ")", ",", ".")) for t in toks)
    # lunr's query lexer splits queries on [\s-] whatever the index does: the index must hold the parts
    query_parts = {p for p in re.split(r"[\s\-]+", "--kv-cache-memory-bytes") if p}
    assert query_parts <= tokens("set `--kv-cache-memory-bytes` explicitly", sep)


def test_every_entry_page_leads_with_its_title_and_verbatim_lines(index, entries):
    for eid, entry in entries.items():
        doc = lead_doc(index, eid)
        # the search result reads as the short title, then the error line (pastes rank on it)
        assert squash(doc["title"]) == " ".join(f"{entry.short_title} — {entry.title}".split())
        text = squash(doc["text"])
        assert text.startswith(" ".join(entry.short_title.split())), eid  # the page's heading
        for sig in entry.signatures:
            for sample in sig.samples:
                assert " ".join(sample.split()) in text, (eid, sample[:60])
        assert eid in doc["tags"]


def test_entry_pages_carry_their_flag_tags(index, entries):
    entry = entries["max-model-len-exceeds-kv-cache"]
    assert "--max-model-len" in lead_doc(index, entry.id)["tags"]


# --- material's search worker, run under node ------------------------------------------------------

NODE_HARNESS = r"""
const fs = require("fs"), path = require("path");
const [site, shimFile, queriesFile] = process.argv.slice(2);
const wdir = path.join(site, "assets/javascripts/workers");
const wfile = fs.readdirSync(wdir).find(f => /^search\..*\.js$/.test(f));
let handler, out = [];
globalThis.self = globalThis;
globalThis.addEventListener = (type, fn) => { handler = fn; };
globalThis.postMessage = m => out.push(m);
globalThis.importScripts = () => {};
eval(fs.readFileSync(path.join(wdir, wfile), "utf8"));
// as on the site (overrides/main.html): the worker imports lunr's token-set fix after material's script
eval(fs.readFileSync(path.join(site, "javascripts/lunr-tokenset-fix.js"), "utf8"));
// the page-side shim rewrites each query before it reaches the worker: apply it the same way
let rewritten = null;
globalThis.Worker = function () {};
Worker.prototype.postMessage = m => { rewritten = m; };
eval(fs.readFileSync(shimFile, "utf8"));
const index = JSON.parse(fs.readFileSync(path.join(site, "search/search_index.json"), "utf8"));
const queries = JSON.parse(fs.readFileSync(queriesFile, "utf8"));
(async () => {
  await handler({ data: { type: 0, data: { config: index.config, docs: index.docs, options: { suggest: false } } } });
  const ranked = [];
  for (const q of queries) {
    new Worker().postMessage({ type: 2, data: q });
    out = [];
    await handler({ data: rewritten });
    ranked.push(out[0].data.items.map(group => group[0].location.split("#")[0]));
  }
  process.stdout.write(JSON.stringify(ranked));
})();
"""


@pytest.fixture(scope="module")
def lunr(site, tmp_path_factory):
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        pytest.skip("node is not installed (apt-get install nodejs): material's search worker cannot run")
    tmp = tmp_path_factory.mktemp("lunr")
    harness = tmp / "harness.js"
    harness.write_text(NODE_HARNESS)

    def search(queries: list[str]) -> list[list[str]]:
        qfile = tmp / "queries.json"
        qfile.write_text(json.dumps(queries))
        proc = subprocess.run([node, str(harness), str(site), str(SHIM), str(qfile)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert "Invalid query" not in proc.stdout + proc.stderr, proc.stderr
        return json.loads(proc.stdout)

    return search


# lunr's token set merges two different subtrees when their keys (edge labels and child ids run
# together) read the same; these 18 words, built from a fresh id counter, merge two: the set then
# holds "73905" and "7393" instead of "7390" and "73934" (found by a random search, then shrunk)
COLLIDING_WORDS = ["000", "00756", "02650", "02832", "0320", "033", "03963", "04852", "051", "06118", "066",
                   "0764", "0780", "339", "4605", "463", "7390", "73934"]

TOKENSET_HARNESS = r"""
const fs = require("fs"), path = require("path");
const [wdir, fix, words] = [process.argv[2], process.argv[3], JSON.parse(process.argv[4])];
globalThis.self = globalThis;
globalThis.addEventListener = () => {};
globalThis.postMessage = () => {};
globalThis.importScripts = () => {};
eval(fs.readFileSync(path.join(wdir, fs.readdirSync(wdir).find(f => /^search\..*\.js$/.test(f))), "utf8"));
const roundTrip = () => { lunr.TokenSet._nextId = 1; return lunr.TokenSet.fromArray(words).toArray().sort(); };
const before = roundTrip();
eval(fs.readFileSync(fix, "utf8"));
process.stdout.write(JSON.stringify({ before, after: roundTrip(), fixed: !!lunr.TokenSet.kvkbKeyFixed }));
"""


def test_the_search_workers_token_set_keeps_every_word(site, tmp_path):
    """Material's lunr alone turns the colliding words into others (a prefix query through them
    then throws and the search shows nothing); with javascripts/lunr-tokenset-fix.js, as the
    site's search worker loads it, the set holds exactly the words it was built from."""
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        pytest.skip("node is not installed (apt-get install nodejs): material's search worker cannot run")
    harness = tmp_path / "tokenset.js"
    harness.write_text(TOKENSET_HARNESS)
    proc = subprocess.run([node, str(harness), str(site / "assets" / "javascripts" / "workers"),
                           str(site / "javascripts" / "lunr-tokenset-fix.js"), json.dumps(sorted(COLLIDING_WORDS))],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["before"] != sorted(COLLIDING_WORDS), "material's lunr no longer merges these: is the fix still needed?"
    assert got["fixed"] and got["after"] == sorted(COLLIDING_WORDS)


def test_a_query_ending_in_a_number_is_searched(entries, lunr):
    """The last word of a query stays a prefix ("2*"): it expands through the token set, where a
    merged subtree made lunr throw ("Invalid query", no results; the fixture fails on it)."""
    eid = "nccl-cuda-out-of-memory"
    if eid not in entries:
        pytest.skip(f"{eid} is not in kb/")
    ranked = lunr(["Cuda failure 2", "out of memory 2", "max_model_len 3"])
    assert f"errors/{eid}/" in ranked[0][:3], ranked[0][:3]
    assert all(ranked), ranked


def _also_matched_by(entries, eid: str, line: str) -> list[str]:
    """Other entries whose own templates match this line: the text alone cannot tell them apart."""
    return [o for o, e in entries.items() if o != eid and any(template.extract(s.template, line) is not None for s in e.signatures)]


def test_pasting_an_entrys_error_line_finds_it_first(entries, lunr):
    canonical = {eid: e.signatures[0].samples[0] for eid, e in entries.items()}
    ranked = dict(zip(canonical, lunr(list(canonical.values()))))
    wrong = []
    for eid, locations in ranked.items():
        want = f"errors/{eid}/"
        shared = _also_matched_by(entries, eid, canonical[eid])
        rank = locations.index(want) if want in locations else None
        if rank is None or rank >= (3 if shared else 1):
            wrong.append((eid, rank, locations[:3], shared))
    assert not wrong, wrong


def test_every_verbatim_line_finds_its_entry_near_the_top(entries, lunr):
    """Top 3; a line that other entries' templates match too (a CUDA OOM is the same text at
    startup and while serving) may also be outranked by each of those entries."""
    pairs = [(eid, sample) for eid, e in entries.items() for s in e.signatures for sample in s.samples]
    ranked = lunr([sample for _, sample in pairs])
    missed = []
    for (eid, sample), locs in zip(pairs, ranked):
        allowed = 3 + len(_also_matched_by(entries, eid, sample))
        if f"errors/{eid}/" not in locs[:allowed]:
            missed.append((eid, sample[:70], locs[:allowed]))
    assert not missed, missed


@pytest.mark.parametrize(
    "query, expected",
    [
        ("--max-model-len", "max-model-len-exceeds-kv-cache"),
        ("`--max-model-len`", "max-model-len-exceeds-kv-cache"),
        ("gpu_memory_utilization", "no-memory-for-cache-blocks"),
        ("VLLM_CPU_KVCACHE_SPACE", "cpu-kv-cache-space"),
    ],
)
def test_flag_names_find_the_entries_that_use_them(entries, lunr, query, expected):
    if expected not in entries:
        pytest.skip(f"{expected} is not in kb/")
    locations = lunr([query])[0]
    assert f"errors/{expected}/" in locations[:3], locations[:3]
    wanted = re.sub(r"^[`-]+|`$", "", query)
    if "-" not in wanted:
        # a whole-token identifier: every page listed mentions it, no unrelated hits
        for loc in locations:
            if loc.startswith("errors/"):
                assert wanted.lower() in entries[loc.split("/")[1]].model_dump_json().lower(), loc


SHIM_HARNESS = r"""
const fs = require("fs");
let sent = [];
globalThis.Worker = function () {};
Worker.prototype.postMessage = m => { sent.push(m); };
eval(fs.readFileSync(process.argv[2], "utf8"));
for (const q of JSON.parse(fs.readFileSync(process.argv[3], "utf8"))) new Worker().postMessage({ type: 2, data: q });
new Worker().postMessage({ type: 0, data: "setup messages pass through untouched" });
process.stdout.write(JSON.stringify(sent.map(m => m.data)));
"""


@pytest.fixture(scope="module")
def rewrite(tmp_path_factory):
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        pytest.skip("node is not installed (apt-get install nodejs)")
    tmp = tmp_path_factory.mktemp("shim")
    (tmp / "shim.js").write_text(SHIM_HARNESS)

    def run(queries: list[str]) -> list[str]:
        (tmp / "q.json").write_text(json.dumps(queries))
        proc = subprocess.run([node, str(tmp / "shim.js"), str(SHIM), str(tmp / "q.json")], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        sent = json.loads(proc.stdout)
        assert sent[-1] == "setup messages pass through untouched"
        return sent[:-1]

    return run


def test_the_shim_searches_complete_words_exactly_and_the_last_word_as_a_prefix(rewrite):
    typed, pasted, flag, quoted, path = rewrite(["GPU 0 has a tot", "of memory.\n", "`--max-model-len`",
                                                 'File "/usr/lib/x.py", line 8', "hub/models--TheBloke--Llama x"])
    # material appends '*' to every word without a '^N' boost: '0' would match every 0.x version
    assert typed.split() == ["GPU^1", "0^1", "has^1", "a^1", "tot"]
    assert pasted.split() == ["of^1", "memory.^1"]  # a trailing newline ends the last word too
    assert flag.split() == ["max^1", "model^1", "len`"]  # no lunr NOT/MUST operator left; the index splits on '-' too
    # a '-' in the middle of a pasted word starts a lexeme after the first '-': it must not become NOT
    assert "-" not in path and "TheBloke^1" in path.split()
    assert '"' not in quoted  # material makes quoted text MUST terms: a traceback would find nothing


def test_short_titles_and_ids_find_their_entries(entries, lunr):
    """The navigation names a page by its short title and kbmatch by its id: searching either lists
    the page in the top 3 (lunr splits an id on '-', so its words are shared with its neighbours:
    cuda-oom-during-startup and cuda-oom-during-serving)."""
    ids = sorted(entries)
    ranked = lunr([entries[eid].short_title for eid in ids] + ids)
    missed = []
    for eid, locs in zip(ids, ranked[:len(ids)]):
        if f"errors/{eid}/" not in locs[:3]:
            missed.append(("short title", eid, entries[eid].short_title, locs[:3]))
    for eid, locs in zip(ids, ranked[len(ids):]):
        if f"errors/{eid}/" not in locs[:3]:
            missed.append(("id", eid, locs[:3]))
    assert not missed, missed


def test_a_pasted_traceback_with_quoted_paths_finds_the_entry(entries, lunr):
    eid = "max-model-len-exceeds-kv-cache"
    if eid not in entries:
        pytest.skip(f"{eid} is not in kb/")
    paste = (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/openai/api_server.py", line 8, in <module>\n'
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/llm_engine.py", line 400, in _initialize_kv_caches\n'
        + entries[eid].signatures[0].samples[0] + "\n"
    )
    locations = lunr([paste])[0]
    assert locations and locations[0] == f"errors/{eid}/", locations[:3]


@pytest.mark.parametrize(
    "typed, expected",
    [("gpu_memory_utiliz", "no-memory-for-cache-blocks"), ("VLLM_CPU_KVCACHE", "cpu-kv-cache-space")],
)
def test_a_half_typed_identifier_still_finds_its_entry(entries, lunr, typed, expected):
    if expected not in entries:
        pytest.skip(f"{expected} is not in kb/")
    locations = lunr([typed])[0]  # the word being typed stays a prefix
    assert f"errors/{expected}/" in locations[:3], locations[:3]
    # whatever ranks first is a page about the whole identifier (an entry whose error names it
    # may outrank the one that only advises it): the prefix found words that start with it
    first = locations[0].split("/")
    assert first[0] == "errors" and re.search(rf"\b{typed}\w+", entries[first[1]].model_dump_json(), re.I), locations[:3]


def test_lunr_operators_in_a_paste_do_not_break_the_search(entries, lunr):
    line = "OutOfMemoryError('Error (input dumped to /tmp/x_20241219-093344.pkl): CUDA out of memory ~ ^ +1 `--gpu-memory-utilization`')"
    assert lunr([line])[0], "a paste with lunr operator characters must still return results"


def test_captured_run_output_is_not_search_text(tmp_path):
    """Reproduction logs are evidence in collapsed blocks, not page text: indexed, their EngineCore
    and traceback lines outranked the entries those errors belong to."""
    results = Path(__file__).resolve().parents[1] / "reproductions" / "results"
    outputs = json.loads((results / "cpu.json").read_text())["entries"]
    env = {**os.environ, "KVKB_KB_DIR": str(kb_dir()), "KVKB_RESULTS_DIR": str(results), "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "--site-dir", str(tmp_path / "s")],
                          cwd=Path(__file__).resolve().parents[1], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    text = " ".join(d["text"] for d in json.loads((tmp_path / "s" / "search" / "search_index.json").read_text())["docs"])
    marker = "Initializing a V1 LLM engine"  # in every captured vLLM run, in no entry's own text
    assert any(marker in (run or {}).get("output", "") for e in outputs.values() for run in (e.get("broken"), e.get("fixed")))
    assert marker not in text
    page = (tmp_path / "s" / "errors" / "max-model-len-exceeds-kv-cache" / "index.html").read_text()
    assert marker in page  # still on the page, in the collapsed block


def test_a_number_typed_alone_searches_instead_of_crashing(lunr):
    # "1" becomes "1*" in material's worker; an indexed word with a '*' in it (`1024**3`, from the
    # Python forms of the fixes) once made lunr's trie expand it into a term it never indexed
    ranked = lunr(["1", "GPU 0", "{'EngineCore_DP0': 1}"])
    assert all(isinstance(r, list) for r in ranked) and ranked[0]
