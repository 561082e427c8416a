"""The findings of the fact-check against vLLM's wheels (shared/reference/factcheck.md) stay mended.

Each case names the finding (A = wrong advice, V = wrong range, C = cosmetic) and fails on the
claim the knowledge base or `kvkb fit` made before. Ranges are the releases whose code prints or
accepts the thing (read in every wheel 0.4.0-0.33.0); the atlas lint (KB070-KB079) checks wording
ranges in general, these pin the cases that no string index can see and the ones that were wrong.
"""

from functools import lru_cache
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from kvkb.fit.budget import estimate_budget
from kvkb.fit.capacity import fit, reserves_null_block
from kvkb.fit.hfconfig import load_shape
from kvkb.fit.sitepage import render_markdown
from kvkb.fit.sizes import GiB
from kvkb.fit.versions import CUDAGRAPH_CHARGED_FROM, release_name
from kvkb.fit import MODELS_PATH
from kvkb.loader import kb_dir, load_entry

MEMORY_PAGE = Path(__file__).resolve().parent.parent / "site_src" / "docs" / "memory.md"


@lru_cache(maxsize=None)
def entry(entry_id: str):
    e, problems, _ = load_entry(kb_dir() / f"{entry_id}.yaml")
    assert e is not None, problems
    return e


def signature(entry_id: str, sig_id: str):
    return next(s for s in entry(entry_id).signatures if s.id == sig_id)


def fix(entry_id: str, fix_id: str):
    return next(f for f in entry(entry_id).all_fixes if f.id == fix_id)


def cause(entry_id: str, cause_id: str):
    return next(c for c in entry(entry_id).causes if c.id == cause_id)


def covers(versions: str, release: str) -> bool:
    return SpecifierSet(versions).contains(release, prereleases=True)


def assert_range(versions: str, inside: list[str], outside: list[str]) -> None:
    assert [r for r in inside if not covers(versions, r)] == [], f"{versions!r} must include these"
    assert [r for r in outside if covers(versions, r)] == [], f"{versions!r} must exclude these"


def shipped(name: str):
    return load_shape(Path(MODELS_PATH) / name.replace("/", "--", 1))[0]


# --- A: advice a user would act on ---------------------------------------------------------------

def test_a1_xpu_kv_cache_memory_bytes_only_from_0_16():
    # 0.10.2-0.15.1 XPUWorker.determine_available_memory never reads kv_cache_memory_bytes
    f = fix("xpu-out-of-memory", "cap-kv-cache-bytes")
    assert_range(f.versions, ["0.16.0", "0.33.0"], ["0.10.2", "0.12.0", "0.15.0", "0.15.1"])
    e = entry("xpu-out-of-memory")
    assert "ignore" in e.workaround and "0.16.0" in e.workaround
    assert "0.16.0" in e.prevention


def test_a2_fit_charges_cuda_graphs_from_0_20_like_the_site():
    s = shipped("Qwen/Qwen2.5-7B-Instruct")
    kw = dict(gpu_memory=int(79.18 * GiB), utilization=0.92, tp=1, dtype="auto", max_num_batched_tokens=8192,
              max_num_seqs=1024, enforce_eager=False)
    at_020 = estimate_budget(s, vllm_version="0.20.0", **kw)
    at_0191 = estimate_budget(s, vllm_version="0.19.1", **kw)
    assert at_020["cuda_graphs"][0] > 0 and at_0191["cuda_graphs"] == [0, 0]
    assert at_020["kv_high"] < at_0191["kv_high"]
    assert "since 0.20" in at_020["cuda_graphs_reason"] and "before 0.20" in at_0191["cuda_graphs_reason"]
    # the calculator's page and the hand-written memory page name the same release
    since = release_name(CUDAGRAPH_CHARGED_FROM)
    assert since == "0.20"
    assert f"From vLLM {since} the estimated CUDA-graph pool" in render_markdown()
    assert f"by default from **{since}**" in MEMORY_PAGE.read_text()


@pytest.mark.parametrize("entry_id", ["preemption-kv-cache-space", "no-memory-for-cache-blocks"])
def test_a3_kv_cache_memory_bytes_keeps_the_startup_fraction_check(entry_id):
    note = fix(entry_id, "kv-cache-memory-bytes").risk_note
    assert "bypasses the utilisation check" not in note
    assert "free-memory check still compares free memory" in note
    assert "lower the" in note and "fraction too" in note


def test_a3_memory_page_says_the_fraction_is_still_checked():
    text = MEMORY_PAGE.read_text()
    assert "start-up free-memory check above still uses the fraction" in text


def test_a4_limit_mm_per_prompt_from_0_5_5_and_json_from_0_8_5():
    json_form = fix("cuda-oom-during-startup", "limit-mm-per-prompt")
    kv_form = fix("cuda-oom-during-startup", "limit-mm-per-prompt-key-value")
    assert "{" in json_form.cli and "image=1" in kv_form.cli
    # the flag and EngineArgs field appear in 0.5.5; the CLI parses JSON from 0.8.5, KEY=VALUE up to 0.9.2
    assert_range(json_form.versions, ["0.8.5", "0.33.0"], ["0.5.0", "0.5.4", "0.5.5", "0.8.4"])
    assert_range(kv_form.versions, ["0.5.5", "0.8.4"], ["0.5.0", "0.5.4", "0.10.0"])
    npu = fix("npu-out-of-memory", "limit-mm-per-prompt")
    assert "{" in npu.cli and not covers(npu.versions, "0.8.4")


def test_a5_blocks_override_blamed_only_where_it_precedes_auto_fit():
    # 0.14.0-0.20.0 apply the override after auto-fit (may_override_num_blocks); 0.20.1 moved it before
    f = fix("auto-fit-max-model-len-failed", "drop-blocks-override")
    assert_range(f.versions, ["0.20.1", "0.28.0", "0.33.0"], ["0.14.0", "0.19.1", "0.20.0"])
    diagnosis = cause("auto-fit-max-model-len-failed", "num-gpu-blocks-override").diagnosis
    assert "0.14.0-0.20.0" in diagnosis and "cannot" in diagnosis
    # the null block is held back before the checks only from 0.29.0
    small = cause("auto-fit-max-model-len-failed", "kv-size-set-too-small").diagnosis
    assert "0.29.0" in small and "two blocks" not in small.split("0.29.0")[0]


def test_a5_fit_holds_the_null_block_back_from_0_29():
    assert not reserves_null_block("0.28.0") and reserves_null_block("0.29.0")
    s = shipped("meta-llama/Llama-3.1-8B-Instruct")
    block = 16 * 131072
    needed = 8192 // 16 * block
    assert fit(s, kv_cache_memory=needed, max_model_len=8192, vllm_version="0.28.0").fits is True
    assert fit(s, kv_cache_memory=needed, max_model_len=8192, vllm_version="0.29.0").fits is False
    assert "the null block it keeps back, from vLLM 0.29" in render_markdown()


# --- V: ranges ------------------------------------------------------------------------------------

SIGNATURE_RANGES = [
    # finding, entry, signature, releases that print it, releases that do not
    ("V1", "cuda-oom-during-serving", "v0-model-execution", ["0.6.1.post1", "0.6.2", "0.7.1"], ["0.6.1", "0.7.2", "0.10.2"]),
    ("V2", "sleep-mode-wake-up-oom", "wake-up-utility-0.11.1", ["0.7.3", "0.8.5", "0.11.0", "0.33.0"], ["0.7.2"]),
    ("V3", "prompt-exceeds-max-model-len", "v1-0.20-to-0.31-total", ["0.18.0", "0.19.1", "0.31.0"], ["0.17.1", "0.32.0"]),
    ("V3", "prompt-exceeds-max-model-len", "v1-0.20-to-0.31-chars", ["0.18.0", "0.31.0"], ["0.17.1", "0.32.0"]),
    ("V4", "prompt-exceeds-max-model-len", "openai-0.10.2-to-0.17-input", ["0.10.1", "0.10.1.1", "0.17.1"], ["0.10.0"]),
    ("V4", "prompt-exceeds-max-model-len", "openai-0.10.2-to-0.17-max-tokens", ["0.10.1", "0.17.1"], ["0.10.0", "0.18.0"]),
    ("V5", "prompt-exceeds-max-model-len", "max-tokens-over-context-0.20-to-0.29", ["0.20.0", "0.30.0"], ["0.19.1", "0.31.0"]),
    ("V5", "prompt-exceeds-max-model-len", "max-tokens-over-context-0.16-to-0.19", ["0.16.0", "0.19.1"], ["0.15.1", "0.20.0"]),
    ("V5", "prompt-exceeds-max-model-len", "max-tokens-over-context-0.31", ["0.31.0"], ["0.30.0"]),
    ("V6", "prompt-exceeds-max-model-len", "offline-decoder-prompt-0.29", ["0.27.0", "0.28.0"], ["0.26.0"]),
    ("V6", "prompt-exceeds-max-model-len", "offline-prompt-equals-context", ["0.27.0", "0.28.0"], ["0.26.0"]),
    ("V6", "prompt-exceeds-max-model-len", "offline-prompt-equals-context-valueerror", ["0.11.1", "0.26.0"],
     ["0.11.0", "0.27.0"]),
    ("V6", "prompt-exceeds-max-model-len", "offline-decoder-prompt-valueerror", ["0.8.4", "0.26.0"], ["0.8.3", "0.27.0"]),
    ("V7", "memory-profiling-error", "free-bytes-0.5.4-to-0.9.0", ["0.5.4", "0.9.2", "0.15.1"], ["0.5.3", "0.16.0"]),
    ("V9", "engine-dead-after-oom", "v0-task-finished", ["0.4.1", "0.5.5", "0.7.3"],
     ["0.5.0", "0.5.0.post1", "0.5.3.post1", "0.5.4", "0.8.0"]),
    ("V9", "engine-dead-after-oom", "v0-task-finished-0.5.0", ["0.5.0", "0.5.4"], ["0.4.3", "0.5.5"]),
    ("V9", "engine-dead-after-oom", "v0-task-finished-0.8", ["0.8.0", "0.10.2"], ["0.7.3", "0.11.0"]),
    ("V10", "engine-dead-after-oom", "v1-worker-failed", ["0.8.5", "0.33.0"], ["0.8.4"]),
    ("V11", "engine-dead-after-oom", "v0-engine-process-failed", ["0.6.4", "0.10.2"], ["0.6.2", "0.6.3.post1"]),
    ("V13", "cpu-kv-cache-space", "warn-not-set-0.13-to-0.19", ["0.13.0", "0.19.1"], ["0.20.0"]),
    ("V14", "kv-offload-host-memory", "platform-0.11.1", ["0.11.1", "0.22.1"], ["0.23.0"]),
    ("V15", "preemption-kv-cache-space", "v1-stats-gpu-0.7-to-0.29", ["0.7.3", "0.29.0"], ["0.7.1", "0.7.2"]),
    ("V17", "swap-space-too-large", "pydantic-0.9.2-to-0.17", ["0.17.1"], ["0.18.0"]),
    ("V17", "swap-space-too-large", "warning", ["0.17.1"], ["0.18.0"]),
]


@pytest.mark.parametrize("finding,entry_id,sig_id,inside,outside", SIGNATURE_RANGES,
                         ids=[f"{c[0]}-{c[2]}" for c in SIGNATURE_RANGES])
def test_signature_ranges(finding, entry_id, sig_id, inside, outside):
    assert_range(signature(entry_id, sig_id).versions, inside, outside)


def test_v5_no_space_form_matches_its_release():
    sig = signature("prompt-exceeds-max-model-len", "max-tokens-over-context-0.16-to-0.19")
    assert "tokens={max_tokens}cannot be greater" in sig.template


def test_v6_exception_classes():
    assert signature("prompt-exceeds-max-model-len", "offline-decoder-prompt-valueerror").exception == "ValueError"
    assert covers(signature("prompt-exceeds-max-model-len", "offline-decoder-prompt-valueerror").versions, "0.26.0")
    assert "0.27-0.28 not examined" not in signature("prompt-exceeds-max-model-len", "offline-decoder-prompt-0.29").note


def test_v8_strict_assert_until_0_15_1():
    c = cause("memory-profiling-error", "unchanged-free-memory-old-release")
    assert "up to 0.14" not in c.title and "before 0.16" in c.title
    assert "up to 0.15.1" in entry("memory-profiling-error").meaning


FIX_RANGES = [
    ("V12", "lmcache-cpu-buffer-full", "kv-offloading-size-lmcache", ["0.11.1", "0.21.0", "0.22.1"], ["0.23.0"]),
    # VLLM_USE_V1 is gone from envs.py in 0.11.1
    ("V16", "cpu-swap-space-exhausted", "move-to-v1", ["0.8.0", "0.10.2"], ["0.11.1", "0.17.0"]),
]


@pytest.mark.parametrize("finding,entry_id,fix_id,inside,outside", FIX_RANGES, ids=[c[0] for c in FIX_RANGES])
def test_fix_ranges(finding, entry_id, fix_id, inside, outside):
    assert_range(fix(entry_id, fix_id).versions, inside, outside)


def test_v18_function_name_by_release():
    refs = {r.title: r.versions for r in entry("no-memory-for-cache-blocks").references}
    assert_range(refs["kv_cache_utils.py: check_enough_kv_cache_memory"], ["0.7.0", "0.13.0"], ["0.14.0"])
    assert_range(refs["kv_cache_utils.py: _check_enough_kv_cache_memory"], ["0.14.0", "0.32.0"], ["0.13.0"])


# --- C: notes and wording -------------------------------------------------------------------------

# (finding, entry, the false phrase it no longer says, a phrase of the correction)
WORDING = [
    ("A2", "cuda-oom-during-cudagraph-capture", "the default from 0.20/0.21", "the default from 0.20.0"),
    ("C1", "max-model-len-exceeds-kv-cache", None, "only when the estimate is positive"),
    ("C2", "preemption-kv-cache-space", "an unsupported GPU falls back", "On 0.8.0-0.8.1 any --kv-cache-dtype"),
    ("C2", "max-model-len-exceeds-kv-cache", "silently falls back", "On 0.8.0-0.8.1 any --kv-cache-dtype"),
    ("C3", "kv-cache-page-size-not-divisible", "1-256 powers of two", "1, 8,\n      16, 32, 64, 128 and 256"),
    ("C4", "kv-cache-allocation-failed", "and a debug\n      line),", "Engram"),
    ("C5", "max-model-len-exceeds-model-limit", "From 0.10.2 the text goes on with", "that sentence is there from 0.5.4"),
    ("C6", "swap-space-too-large", "format the numbers slightly differently", "prints the same text"),
    ("C7", "sleep-mode-memory-not-released", "in 0.33.0), so it counts", "from 0.25.0"),
    ("C8", "prompt-exceeds-max-model-len", "(from the left or right, per `truncation_side`)", "only from 0.22.0"),
    ("C9", "auto-fit-max-model-len-failed", None, "To serve at least one request with the model's max seq len ..."),
    ("C10", "no-memory-for-cache-blocks", None, "v1/worker/gpu_worker.py (0.6.4-0.6.6)"),
]


@pytest.mark.parametrize("finding,entry_id,false,true", WORDING, ids=[f"{c[0]}-{c[1]}" for c in WORDING])
def test_wording(finding, entry_id, false, true):
    text = (kb_dir() / f"{entry_id}.yaml").read_text()
    if false:
        assert false not in text
    assert true in text


# --- the same findings read from the committed atlas: they fail if vLLM's code and the claim part -----

@lru_cache(maxsize=None)
def atlas():
    from kvkb.atlas.store import load_default

    return load_default()


def releases_where(test) -> list[str]:
    a = atlas()
    held = set().union(*(it.indexes for it in a.strings() if test(it)))
    return [a.releases[i] for i in sorted(held)]


def test_a1_the_fix_range_excludes_every_release_whose_xpu_worker_sizes_the_kv_cache_itself():
    # XPUWorker.determine_available_memory (its own override, which never reads kv_cache_memory_bytes)
    own = releases_where(lambda it: it.file == "vllm/v1/worker/xpu_worker.py"
                         and it.qual == "XPUWorker.determine_available_memory")
    assert own and own[-1] == "0.15.1"
    f = fix("xpu-out-of-memory", "cap-kv-cache-bytes")
    assert [r for r in own if covers(f.versions, r)] == []
    assert covers(f.versions, atlas().releases[atlas().releases.index(own[-1]) + 1])


def test_a2_fit_charges_cuda_graphs_from_the_release_whose_envs_default_the_estimate_on():
    on = sorted((i for it in atlas().named("env", "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS")
                 if it.default.strip("'\"") not in {"0", "False", ""} for i in it.indexes))
    first = atlas().releases[on[0]]
    assert release_name(CUDAGRAPH_CHARGED_FROM) == release_name(tuple(int(x) for x in first.split(".")[:3]))


def test_a4_the_limit_mm_fix_ranges_hold_the_flag_in_every_release():
    a = atlas()
    held = {a.releases[i] for i in a.holders("flag", "--limit-mm-per-prompt")}
    for fid in ("limit-mm-per-prompt", "limit-mm-per-prompt-key-value"):
        versions = fix("cuda-oom-during-startup", fid).versions
        assert [r for r in a.releases if covers(versions, r) and r not in held] == []


def test_a5_the_override_fix_excludes_releases_that_apply_it_after_auto_fit():
    # may_override_num_blocks runs when the config is built, after auto-fit searched the profiled memory;
    # from 0.20.1 get_kv_cache_configs applies the override before auto-fit
    def logged_in(qual):
        return releases_where(lambda it: it.text.startswith("Overriding num_gpu_blocks=") and it.level
                              and it.qual.endswith(qual))
    after, before = logged_in("may_override_num_blocks"), logged_in("get_kv_cache_configs")
    f = fix("auto-fit-max-model-len-failed", "drop-blocks-override")
    assert [r for r in after if covers(f.versions, r)] == []
    assert [r for r in before if not covers(f.versions, r)] == []
