"""kvkb.fit.capacity: vLLM 0.32.0's block/concurrency/fit rules, checked three ways:
1. every observation vLLM itself printed on the CPU backend (tests/data/fit-observations.json,
   captured by kvkb/fit/capture.py) is predicted exactly;
2. real log lines quoted in shared/reference (CPU runs, GitHub issues) are reproduced;
3. MLA is also worked by hand from the cited source (DeepSeek-V3 at GPU block size 64; the CPU runs
   cover DeepSeek-V2-Lite at the CPU MLA block size 16).
"""

import json
from pathlib import Path

import pytest

from kvkb.fit.capacity import (Group, capacity, default_block_size, default_gpu_memory_utilization, fit,
                               kv_groups, reserves_null_block)
from kvkb.fit.hfconfig import load_shape, parse_config
from kvkb.fit.kvspec import FitError, kv_layout
from kvkb.fit.sitepage import MODELS_DIR

OBS = Path(__file__).parent / "data" / "fit-observations.json"
GiB, MiB = 2**30, 2**20


def shipped(name, **kw):
    return load_shape(MODELS_DIR / name.replace("/", "--", 1), **kw)[0]


# ---- 1. exact against vLLM's own output ------------------------------------------------------

def _observations():
    doc = json.loads(OBS.read_text())
    return [pytest.param(o, id=o["id"]) for o in doc["observations"]]


def test_observation_file_is_real_and_broad():
    doc = json.loads(OBS.read_text())
    obs = doc["observations"]
    assert doc["vllm_version"] == "0.32.0" and doc["backend"] == "cpu"
    assert len(obs) >= 8
    assert len({o["model"] for o in obs}) >= 4
    assert any("sliding" in o["id"] or "hybrid" in o["id"] for o in obs if o["ok"])
    assert any("estimated_max_model_len" in o for o in obs)  # a failing run is in the table
    assert len({o["settings"]["block_size"] for o in obs if "settings" in o}) >= 2


def _fit_for(o, max_model_len):
    s = o.get("settings", {})
    shape = load_shape(MODELS_DIR / o["model"], num_layers=o.get("num_layers"))[0]
    return shape, fit(shape, device="cpu", kv_cache_memory=o["kv_cache_memory_bytes"], max_model_len=max_model_len,
                      block_size=o.get("block_size"), kv_cache_dtype=o.get("kv_cache_dtype", "auto"),
                      max_num_batched_tokens=s.get("max_num_batched_tokens", o.get("max_num_batched_tokens", 4096)))


@pytest.mark.parametrize("o", _observations())
def test_predicts_vllm_cpu_output_exactly(o):
    if o.get("ok") is False and "estimated_max_model_len" not in o and not o.get("no_memory"):
        pytest.skip(f"vLLM could not run this case on CPU: {o.get('skip_reason', 'see log_tail')}")
    mml = o.get("max_model_len")
    if mml == -1:  # --max-model-len auto: vLLM searched up to the model's length and logged the result
        shape, r = _fit_for(o, None)
        assert r.max_model_len_that_fits == o["autofit_max_model_len"]
        mml = o["autofit_max_model_len"]
    shape, r = _fit_for(o, mml)
    if o["ok"] and not o["engine_started"]:
        # sizing ran and was logged, then a kernel this CPU lacks stopped the engine (fp8 KV needs AVX-512)
        assert o["engine_error"]
    if "settings" in o:  # our CPU defaults are vLLM's
        assert r.block_size == o["settings"]["block_size"]
        assert (o.get("block_size") or default_block_size(shape, "cpu")) == o["settings"]["block_size"]
        assert r.max_model_len == o["settings"]["max_model_len"]
    if o["ok"]:
        assert r.fits is True
        assert r.kv_tokens == o["kv_tokens"]
        assert f"{r.max_concurrency:.2f}" == o["max_concurrency"]
        assert r.max_model_len == o["logged_max_model_len"]
        if "settings" in o:
            assert r.num_blocks == o["settings"]["num_gpu_blocks"]
    else:
        assert r.fits is False
        assert r.vllm_estimated_max_model_len == o["estimated_max_model_len"]
        if "needed_gib" in o:
            assert r.error_line is not None
            assert f"({o['needed_gib']} GiB KV cache is needed" in r.error_line
            assert f"available KV cache memory ({o['available_gib']} GiB)" in r.error_line


# ---- 2. real log lines quoted in the reference -----------------------------------------------

TINY_LLAMA = {  # shared/reference/vllm-errors.md §5: the 2-layer model behind cases A-G (1024 B/token)
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 128, "intermediate_size": 256,
    "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 64,
    "vocab_size": 1024, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}


def test_reference_cpu_case_a_one_gib():
    r = fit(TINY_LLAMA, device="cpu", kv_cache_memory=GiB)
    assert r.capacity_line == ("CPU KV cache size: 1,048,576 tokens, Maximum concurrency for 4,096 tokens per "
                               "request: 256.00x")


def test_reference_cpu_case_c_too_small():
    r = fit(TINY_LLAMA, device="cpu", kv_cache_memory=2_000_000)
    assert r.fits is False and r.vllm_estimated_max_model_len == 1792
    assert "(0.0 GiB KV cache is needed" in r.error_line and "maximum model length is 1792" in r.error_line


def test_reference_cpu_case_g_autofit():
    r = fit(TINY_LLAMA, device="cpu", kv_cache_memory=2_000_000)
    assert r.max_model_len_that_fits == 1792
    after = fit(TINY_LLAMA, device="cpu", kv_cache_memory=2_000_000, max_model_len=1792)
    assert after.capacity_line == ("CPU KV cache size: 1,920 tokens, Maximum concurrency for 1,792 tokens per "
                                   "request: 1.07x")


def test_qwen3_coder_480b_estimate_within_log_rounding():
    # kv-sizing.md §3.4: 48.66 GiB available, 253,952 B/token, block 16 -> vLLM printed 205,728.
    cfg = {"model_type": "qwen3_moe", "num_hidden_layers": 62, "num_attention_heads": 96, "num_key_value_heads": 8,
           "head_dim": 128, "hidden_size": 6144, "vocab_size": 151936, "max_position_embeddings": 262144}
    lo = fit(cfg, kv_cache_memory=int(48.655 * GiB), max_model_len=262144, suggest=False)
    hi = fit(cfg, kv_cache_memory=int(48.665 * GiB), max_model_len=262144, suggest=False)
    assert lo.bytes_per_token == 253952
    assert lo.vllm_estimated_max_model_len <= 205728 <= hi.vllm_estimated_max_model_len


def test_deepseek_v2_lite_needed_matches_issue_15871():
    # vLLM #15871 (0.8.3): DeepSeek-V2-Lite at max_model_len 32768 -> "0.95 GiB KV cache is needed".
    r = fit(shipped("deepseek-ai/DeepSeek-V2-Lite-Chat"), kv_cache_memory=2**29, max_model_len=32768)
    assert r.needed_bytes == 27 * 576 * 2 * 32768
    assert "(0.95 GiB KV cache is needed" in r.error_line


# ---- 3. worked by hand -----------------------------------------------------------------------

def test_mla_deepseek_v3_by_hand():
    # page = 64 tokens x 1 head x 576 x 2 B per layer (kv_cache_interface.py:552-561, :698);
    # bytes_per_block = 61 layers x page (kv_cache_utils.py:1520); num_blocks = avail // that (:1627);
    # blocks/request = cdiv(163840, 64) = 2560 (:1195); tokens = int(C x L) (:2300).
    r = fit(shipped("deepseek-ai/DeepSeek-V3"), kv_cache_memory=20 * GiB, block_size=64)
    assert r.bytes_per_block == 61 * 64 * 576 * 2 == 4_497_408
    assert r.num_blocks == 20 * GiB // 4_497_408 == 4774
    assert r.max_concurrency == 4774 / 2560
    assert r.kv_tokens == int(4774 / 2560 * 163840) == 305_536
    assert r.fits is True  # 2560 blocks needed <= 4773 usable after the null block


def test_mla_default_block_sizes():
    v3 = shipped("deepseek-ai/DeepSeek-V3")
    assert default_block_size(v3, "gpu") == 64  # FlashMLA (v1/attention/backends/mla/flashmla.py:59)
    assert default_block_size(v3, "cpu") == 16  # reference CPU MLA kernel (platforms/cpu.py:273-280)
    assert default_block_size(shipped("Qwen/Qwen2.5-0.5B-Instruct"), "cpu") == 128  # platforms/cpu.py:292


def test_uniform_estimate_is_floor_of_usable_blocks():
    s = shipped("meta-llama/Llama-3.1-8B-Instruct")
    avail = 5 * GiB + 12345
    r = fit(s, kv_cache_memory=avail)
    block = 16 * 131072
    assert r.vllm_estimated_max_model_len == (avail - block) // block * 16


def test_null_block_decides_the_edge():
    s = shipped("meta-llama/Llama-3.1-8B-Instruct")
    block = 16 * 131072
    needed = 8192 // 16 * block
    assert fit(s, kv_cache_memory=needed, max_model_len=8192).fits is False
    assert fit(s, kv_cache_memory=needed + block, max_model_len=8192).fits is True
    # before 0.29 no block was held back
    assert fit(s, kv_cache_memory=needed, max_model_len=8192, vllm_version="0.19.0").fits is True
    assert reserves_null_block("0.32.0") and not reserves_null_block("0.11.0")


def test_no_memory():
    r = fit(shipped("Qwen/Qwen2.5-0.5B-Instruct"), device="cpu", kv_cache_memory=1000)
    assert r.no_memory and r.fits is False
    assert r.error_line.startswith("No available memory for the cache blocks.")


def test_gpu_memory_utilization_default_by_version():
    assert default_gpu_memory_utilization("0.19.1") == 0.9
    assert default_gpu_memory_utilization("0.20.0") == 0.92
    assert default_gpu_memory_utilization("0.32.0") == 0.92


def test_hybrid_groups_gemma3():
    # 15 sliding + 3 full -> group size 3 -> 6 groups of 3 layers (kv_cache_utils.py:1362-1502)
    lay = kv_layout(shipped("google/gemma-3-270m-it"))
    groups = kv_groups(lay, 128)
    assert [(g.kind, g.num_layers) for g in groups] == [("sliding", 3)] * 5 + [("full", 3)]
    lay1b = kv_layout(shipped("google/gemma-3-1b-it"))  # 22 sliding + 4 full: 6 sliding groups of <= 4
    assert sorted(g.num_layers for g in kv_groups(lay1b, 128) if g.kind == "sliding") == [3, 3, 4, 4, 4, 4]


def test_hybrid_groups_close_counts_use_the_larger_size():
    # 12 sliding + 13 full: 13 < 1.5 x 12, so one group each (the gpt-oss + eagle case in the source)
    cfg = dict(TINY_LLAMA, num_hidden_layers=25, sliding_window=128,
               layer_types=["sliding_attention"] * 12 + ["full_attention"] * 13)
    groups = kv_groups(kv_layout(parse_config(cfg)), 16)
    assert sorted((g.kind, g.num_layers) for g in groups) == [("full", 13), ("sliding", 12)]


def test_sliding_window_caps_blocks_per_request():
    g = Group("sliding", 2, 1, 4096)
    # cdiv(min(4096 - 1 + 2048, 32768), 128) + 1
    assert g.blocks_per_request(32768, 128, 2048) == 49
    assert g.blocks_per_request(1000, 128, 2048) == 9  # short contexts: cdiv(1000, 128) + 1
    assert Group("full", 2, 1).blocks_per_request(32768, 128, 2048) == 256


def test_disable_hybrid_manager_promotes_sliding_to_full():
    s = shipped("google/gemma-2-9b-it")
    on = fit(s, kv_cache_memory=8 * GiB, max_model_len=8192, max_num_batched_tokens=512)
    off = fit(s, kv_cache_memory=8 * GiB, max_model_len=8192, max_num_batched_tokens=512,
              hybrid_kv_cache_manager=False)
    assert len(off.groups) == 1 and off.needed_bytes == 8192 * s.num_layers * 2 * 8 * 256 * 2
    # sliding layers hold cdiv(min(4095 + 2 x 512, 8192), 16) + 1 = 321 blocks instead of 512
    assert on.max_concurrency == (8 * GiB // (21 * 16 * 8192)) / (512 + 321)
    assert on.max_concurrency > off.max_concurrency


def test_capacity_pure_function():
    cap = capacity([Group("full", 2, 512 * 128)], block_size=128, available=2_000_000, max_model_len=4096,
                   in_flight_tokens=4096)
    assert (cap.num_blocks, cap.blocks_per_request, cap.vllm_estimate, cap.fits) == (15, 32, 1792, False)


def test_estimate_mode_gives_ranges_and_reasons():
    r = fit(shipped("meta-llama/Llama-3.1-8B-Instruct"), gpu_memory=int(79.18 * GiB), max_model_len=32768)
    assert r.kv_memory_source == "estimated"
    lo, hi = r.available_bytes_range
    assert lo < hi and r.kv_tokens_range[0] < r.kv_tokens_range[1]
    b = r.budget
    assert b["requested"] == -(-int(79.18 * GiB) * 92 // 100) or abs(b["requested"] - 0.92 * 79.18 * GiB) < 2
    assert b["weights"] == 8_030_261_248 * 2  # 8.03 B parameters in bf16
    assert r.fits is True


def test_suggestions_when_it_does_not_fit():
    r = fit(shipped("meta-llama/Llama-3.1-8B-Instruct"), kv_cache_memory=6 * GiB, max_model_len=131072)
    assert r.fits is False
    text = "\n".join(r.suggestions)
    assert f"--max-model-len {r.vllm_estimated_max_model_len}" in text
    assert "--tensor-parallel-size 4" in text  # 16 GiB at TP1 -> 4 GiB/rank at TP4 fits 6 GiB
    r8 = fit(shipped("meta-llama/Llama-3.1-8B-Instruct"), kv_cache_memory=9 * GiB, max_model_len=131072)
    assert "--kv-cache-dtype fp8" in "\n".join(r8.suggestions)  # 8 GiB at fp8 fits 9 GiB


def test_bad_engine_options():
    s = shipped("Qwen/Qwen2.5-0.5B-Instruct")
    with pytest.raises(FitError):
        fit(s, kv_cache_memory=GiB, gpu_memory_utilization=1.5)
    with pytest.raises(FitError):
        fit(s)  # neither memory given
    with pytest.raises(FitError):
        fit(s, kv_cache_memory=GiB, vllm_version="latest")
