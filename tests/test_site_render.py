"""site_src.render and site_src.results: entry -> Markdown, results file -> badges. No mkdocs here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kvkb.entry import Backend, Entry
from kvkb.loader import REPO_ROOT
from kvkb.site_src import render
from kvkb.site_src.results import ResultsError, load_results, parse_results, tail, verification
from kvkb.yamlpos import load as load_yaml

EXEMPLAR = REPO_ROOT / "kb" / "max-model-len-exceeds-kv-cache.yaml"


@pytest.fixture(scope="module")
def entry() -> Entry:
    return Entry.model_validate(load_yaml(EXEMPLAR.read_text()).data)


def _results(entries: dict, backend: str = "cpu", version: str = "0.32.0") -> dict:
    return {"vllm_version": version, "backend": backend, "device": "2-core x86 VM", "date": "2026-11-22T09:30:00Z", "entries": entries}


PASS = {
    "status": "pass",
    "duration_s": 41.2,
    "broken": {"exit_code": 1, "matched": "max-model-len-exceeds-kv-cache", "passed": True, "duration_s": 20.1,
               "output": "INFO ...\n\x1b[31mValueError: To serve at least one request with the model's max seq len (32768)\x1b[0m"},
    "fixed": {"exit_code": 0, "passed": True, "kv_tokens": 12345, "max_concurrency": 3.01, "duration_s": 21.0,
              "output": "CPU KV cache size: 12,345 tokens"},
    "fixes": {
        "lower-max-model-len": {"status": "verified", "passed": True, "output": "ok"},
        "fp8-kv-cache": {"status": "ineffective", "passed": True, "output": "still fails"},
    },
}


# --- small helpers -------------------------------------------------------------------------------


def test_readable_turns_placeholders_into_angle_brackets():
    assert render.readable("vllm serve MODEL --max-model-len {max_model_len_fit}") == "vllm serve MODEL --max-model-len <max_model_len_fit>"
    assert render.readable(None) == ""


@pytest.mark.parametrize(
    "spec, shown",
    [(">=0.9.1,<=0.21.0", "0.9.1 – 0.21.0"), (">=0.22.0", "0.22.0 and later"), ("<=0.10.2", "up to 0.10.2"),
     (">=0.5.1,<0.11", ">=0.5.1,<0.11"), (">=0.8.3,<=0.8.3", "0.8.3")],
)
def test_versions_text(spec, shown):
    assert render.versions_text(spec) == shown


def test_upper_version_is_the_inclusive_bound_only():
    assert render.upper_version(">=0.14.0,<=0.32.0") == "0.32.0"
    assert render.upper_version(">=0.14.0") is None


def test_fence_outgrows_backticks_in_the_text():
    text = "Try increasing `gpu_memory_utilization`\n```\nnested\n```"
    out = render.fence(text, "text")
    assert out.startswith("```` text\n") and out.endswith("\n````")


def test_cell_escapes_table_pipes_and_backticks():
    assert render.cell("a | b") == "`a \\| b`"
    assert render.cell("uses `x` here") == "``uses `x` here``"


def test_plain_neutralises_markdown_and_html():
    assert render.plain("LLM(max_seq_len=*) <b>") == "LLM(max\\_seq\\_len=\\*) &lt;b&gt;"


def test_changed_lines_marks_what_the_fix_changed():
    before = "a\nb\nc\n"
    after = "a\nB\nc\nd\n"
    assert render.changed_lines(before, after) == "2 4"


def test_tags_are_stable_and_never_name_invented_flags(entry):
    tags = render.entry_tags(entry)
    assert tags[0] == entry.id
    assert "ValueError" in tags and "--max-model-len" in tags and "--kv-cache-dtype" in tags
    assert len(tags) == len(set(tags))
    assert tags == render.entry_tags(entry)
    invented = [t for f in entry.ineffective for t in render._FLAG_RE.findall(f.cli or "")]
    assert not set(invented) & set(tags)


def test_only_vllm_commands_give_flag_tags():
    assert render.vllm_flags("VLLM_CPU_KVCACHE_SPACE=8 vllm serve MODEL --max-model-len 4096") == ["VLLM_CPU_KVCACHE_SPACE", "--max-model-len"]
    assert render.vllm_flags("nvidia-smi --query-compute-apps=pid --format=csv && vllm serve M --enforce-eager") == ["--enforce-eager"]
    assert render.vllm_flags("python -m vllm.entrypoints.openai.api_server --model M --swap-space 0") == ["--model", "--swap-space"]
    assert render.vllm_flags("kill -9 PID; ls --all") == []


# --- results file ----------------------------------------------------------------------------------


def test_results_parse_and_badge_verified(entry):
    res = parse_results(json.dumps(_results({entry.id: PASS})), "cpu.json", "cpu")
    ver = verification(entry, [res])
    assert [b.text for b in ver.badges] == ["Verified on vLLM 0.32.0 · CPU backend · 2026-11-22"]
    assert ver.fix_status["lower-max-model-len"][0] == "verified"
    assert ver.fix_status["fp8-kv-cache"][0] == "ineffective"


def test_badge_failed_when_the_run_failed(entry):
    res = parse_results(json.dumps(_results({entry.id: {**PASS, "status": "fail"}})), "cpu.json", "cpu")
    assert verification(entry, [res]).badges[0].text == "Reproduction failed on vLLM 0.32.0 · CPU backend · 2026-11-22"


def test_badge_gpu_runner_only_when_cpu_has_no_run_but_entry_has_code(entry):
    res = parse_results(json.dumps(_results({"other-entry": PASS})), "cpu.json", "cpu")
    badge = verification(entry, [res]).badges[0]
    assert badge.state == "gpu-only" and badge.text.startswith("GPU runner only")
    skipped = parse_results(json.dumps(_results({entry.id: {**PASS, "status": "skip"}})), "cpu.json", "cpu")
    assert verification(entry, [skipped]).badges[0].state == "gpu-only"


def test_badge_not_reproduced_without_results_or_without_code(entry):
    assert verification(entry, []).badges[0].text == "Not yet reproduced"
    no_code = entry.model_copy(update={"broken_code": None})
    res = parse_results(json.dumps(_results({})), "cpu.json", "cpu")
    assert verification(no_code, [res]).badges[0].text == "Not yet reproduced"


def test_cuda_results_add_their_own_badge(entry, tmp_path):
    (tmp_path / "cpu.json").write_text(json.dumps(_results({entry.id: PASS})))
    (tmp_path / "cuda.json").write_text(json.dumps(_results({entry.id: PASS}, backend="cuda", version="0.31.0")))
    ver = verification(entry, load_results(tmp_path))
    assert [b.text for b in ver.badges] == [
        "Verified on vLLM 0.32.0 · CPU backend · 2026-11-22",
        "Verified on vLLM 0.31.0 · CUDA backend · 2026-11-22",
    ]


def test_missing_results_dir_is_not_an_error(tmp_path):
    assert load_results(tmp_path / "nothing-here") == []


@pytest.mark.parametrize(
    "text, needle",
    [
        ("{not json", "not valid JSON"),
        ("[]", "must be a JSON object"),
        (json.dumps({"date": "2026-11-22"}), "needs 'vllm_version'"),
        (json.dumps(_results({"x": {"status": "maybe"}})), "entries.x.status must be one of pass, fail, skip"),
        (json.dumps(_results({"x": {**PASS, "fixes": {"f": {"status": "works"}}}})), "entries.x.fixes.f.status"),
        (json.dumps({**_results({}), "backend": "cuda"}), "file name says 'cpu'"),
        (json.dumps({**_results({}), "date": "yesterday"}), "ISO date"),
    ],
)
def test_bad_results_files_name_the_file_and_the_key(text, needle):
    with pytest.raises(ResultsError) as err:
        parse_results(text, "reproductions/results/cpu.json", "cpu")
    assert "reproductions/results/cpu.json" in str(err.value) and needle in str(err.value)


def test_tail_strips_colours_and_keeps_the_end():
    out, shown, total = tail("\n".join(f"\x1b[32mline {i}\x1b[0m" for i in range(200)), limit=5)
    assert (shown, total) == (5, 200)
    assert out.splitlines() == [f"line {i}" for i in range(195, 200)]


# --- pages -----------------------------------------------------------------------------------------


def _page(entry, results=()):
    titles = {entry.id: entry.title, **{r.id: f"Title of {r.id}" for r in entry.related}}
    return render.render_entry(entry, titles, list(results))


def test_entry_page_has_every_part(entry):
    md = _page(entry)
    assert md.startswith("---\n") and "\ntags:\n- max-model-len-exceeds-kv-cache\n" in md
    # the short title heads the page; the exact error line (escaped: it is text) right below it
    head = md.split("\n<h1 class=\"kvkb-title\">", 1)[1]
    assert head.startswith(f"{entry.short_title}</h1>\n\n<p class=\"kvkb-error-line\"><code>ValueError: To serve at least one request")
    assert "model&#39;s max seq len" in head.split("\n\n", 2)[1]
    # signature table: versions, engine, backend, exception, template with readable placeholders
    assert "| 0.9.1 – 0.21.0 | v1 | any | `ValueError` | `To serve at least one request with the models's max seq len (<max_model_len>)" in md
    # verbatim samples in the lead section (before the first ## heading) for search
    lead = md.split("\n## ", 1)[0]
    for sig in entry.signatures:
        for sample in sig.samples:
            assert sample in lead
    # fixes in content tabs with readable placeholders, status shown
    assert '=== "CLI"\n\n    ``` bash\n    vllm serve MODEL --max-model-len <max_model_len_fit>\n' in md
    assert '=== "Python"' in md
    assert "kvkb-fix-unverified" in md
    # broken vs fixed tabs, the changed line highlighted
    assert '=== "Broken: raises this error"' in md and 'hl_lines="' in md
    for heading in ("## What it means", "## Causes and fixes", "## Workaround", "## Prevention", "## Detection",
                    "## How to verify the fix", "## Does not work", "## Related errors", "## References"):
        assert heading in md
    assert "<device> KV cache size: <kv_tokens> tokens" in md
    # ineffective advice: claim + reason
    assert "**The claim:** Set max\\_seq\\_len to shorten the context." in md
    assert "EngineArgs.__init__() got an unexpected keyword" in md
    # related links point at sibling generated pages, with the relation spelled out
    assert "[Title of prompt-exceeds-max-model-len](prompt-exceeds-max-model-len.md)" in md
    assert "**You may hit next:**" in md
    assert "[source at v0.32.0](https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/v1/core/kv_cache_utils.py)" in md
    assert '!!! note "Not yet reproduced"' in md


def test_entry_page_shows_results(entry):
    res = parse_results(json.dumps(_results({entry.id: PASS})), "cpu.json", "cpu")
    md = _page(entry, [res])
    assert '!!! success "Verified on vLLM 0.32.0 · CPU backend · 2026-11-22"' in md
    assert "12,345 KV-cache tokens, maximum concurrency 3.01x" in md
    assert '??? note "Broken program: exit code 1, raised the error, 20.1 s"' in md
    assert '??? note "Fixed program: exit code 0, started and generated, 21.0 s"' in md
    assert "\x1b[" not in md and "        ValueError: To serve at least one request with the model's max seq len (32768)" in md
    # the results decide a fix's shown status, and say where it was established
    fp8 = md.split("#### Fix: Store the KV cache in fp8", 1)[1].split("####", 1)[0]
    assert "kvkb-fix-ineffective" in fp8 and "reproduced on vLLM 0.32.0 · CPU backend · 2026-11-22" in fp8


def test_entry_page_for_a_failed_run_says_so(entry):
    failed = {**PASS, "status": "fail", "broken": {**PASS["broken"], "passed": False}}
    res = parse_results(json.dumps(_results({entry.id: failed})), "cpu.json", "cpu")
    md = _page(entry, [res])
    assert '!!! failure "Reproduction failed on vLLM 0.32.0 · CPU backend · 2026-11-22"' in md
    assert "did NOT raise the expected error" in md


def test_index_groups_by_phase_then_category(entry):
    serving = entry.model_copy(update={"id": "serving-one", "phase": "serving", "category": "request"})
    md = render.render_index({entry.id: entry, "serving-one": serving}, [], has_fit=False)
    startup_at = md.index("## At startup")
    serving_at = md.index("## While serving")
    assert startup_at < md.index("### KV-cache capacity") < serving_at < md.index("### Per-request limits")
    assert f"(errors/{entry.id}.md)" in md and "(errors/serving-one.md)" in md
    assert "fit.md" not in md
    assert "(fit.md)" in render.render_index({entry.id: entry}, [], has_fit=True)


def test_group_entries_skips_empty_groups(entry):
    groups = render.group_entries({entry.id: entry})
    assert [(p.value, [c.value for c, _ in cats]) for p, cats in groups] == [("startup", ["kv-capacity"])]


def test_nav_tree_groups_like_the_index_and_lists_short_titles(entry):
    serving = entry.model_copy(update={"id": "serving-one", "phase": "serving", "category": "request",
                                       "short_title": "Serving one"})
    oom = entry.model_copy(update={"id": "a-gpu-one", "category": "device-memory", "short_title": "A <GPU> one & more"})
    other = entry.model_copy(update={"id": "b-first", "short_title": "Aaa first by title"})
    nav = render.nav_tree({e.id: e for e in (entry, serving, oom, other)})
    assert nav == [
        {"Errors at startup": [
            # sorted by short title within a category; the id stays the page's URL
            {"KV-cache capacity": [{"Aaa first by title": "errors/b-first.md"}, {entry.short_title: f"errors/{entry.id}.md"}]},
            # mkdocs' theme does not escape nav titles: the label is escaped here
            {"Device memory (GPU and accelerators)": [{"A &lt;GPU&gt; one &amp; more": "errors/a-gpu-one.md"}]},
        ]},
        {"Errors while serving": [{"Per-request limits": [{"Serving one": "errors/serving-one.md"}]}]},
    ]


def test_entry_page_title_is_escaped_text(entry):
    """material puts the front matter title into <title>, the header and the search index as HTML."""
    odd = entry.model_copy(update={"title": "unable to mmap N bytes from file <model.safetensors> & more",
                                   "short_title": "Host <b>RAM</b>"})
    md = _page(odd)
    meta = yaml.safe_load(md.split("---\n")[1])
    assert meta["title"] == "Host &lt;b&gt;RAM&lt;/b&gt; — unable to mmap N bytes from file &lt;model.safetensors&gt; &amp; more"
    assert '<h1 class="kvkb-title">Host &lt;b&gt;RAM&lt;/b&gt;</h1>' in md
    assert "<code>unable to mmap N bytes from file &lt;model.safetensors&gt; &amp; more</code>" in md


def test_index_lists_short_titles_with_the_error_line_below(entry):
    md = render.render_index({entry.id: entry}, [], has_fit=False)
    assert f"| [{render.plain(entry.short_title)}](errors/{entry.id}.md)<br><span class=\"kvkb-error-line\">ValueError: To serve" in md


def test_templates_ship_with_the_package():
    names = {p.name for p in Path(render.TEMPLATES).iterdir()}
    assert {"entry.md.j2", "index.md.j2"} <= names


@pytest.mark.parametrize("backend", [b.value for b in Backend])
def test_each_signature_shows_its_backend_in_the_table_and_the_sample_label(entry, backend):
    # plugin accelerators (npu, tpu, hpu) print their own OOM texts: the page must say whose text it is
    sig = entry.signatures[0].model_copy(update={"backend": Backend(backend)})
    md = _page(entry.model_copy(update={"signatures": [sig, *entry.signatures[1:]]}))
    row = next(line for line in md.splitlines() if line.startswith(f"| {render.versions_text(sig.versions)} | {sig.engine.value} |"))
    assert row.split(" | ")[2] == backend
    assert f"· {sig.engine.value} engine · {backend} backend</p>" in md


def test_a_cause_lists_its_signs_as_code():
    from kvkb.validate import load_valid_kb
    from kvkb.loader import kb_dir

    entry = load_valid_kb(kb_dir())["container-shm-too-small"]
    cause = next(c for c in entry.causes if c.signs)
    md = _page(entry)
    section = md.split(f"{cause.title}", 1)[1].split("#### Fix", 1)[0]
    assert "Signs in a log that point here" in section
    assert all(render.inline_code(s) in section for s in cause.signs)
    plain = next(c for c in entry.causes if not c.signs)
    assert "Signs in a log" not in md.split(f"{plain.title}", 1)[1].split("#### Fix", 1)[0]


def test_an_advisory_wording_says_healthy_runs_print_it_too():
    from kvkb.validate import load_valid_kb
    from kvkb.loader import kb_dir

    entry = load_valid_kb(kb_dir())["cpu-kv-cache-space"]
    md = _page(entry)
    rows = [line for line in md.splitlines() if line.startswith("| ") and " | v1 | cpu | " in line or " | any | cpu | " in line]
    for sig in entry.signatures:
        row = next(r for r in rows if render.versions_text(sig.versions) in r and sig.backend.value in r
                   and (sig.exception or sig.level) in r and render.cell(render.readable(sig.template)) in r)
        assert ("printed by healthy runs too" in row) == sig.advisory, sig.id
    assert any(s.advisory for s in entry.signatures) and not all(s.advisory for s in entry.signatures)
