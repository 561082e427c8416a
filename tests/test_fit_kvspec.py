"""kvkb.fit.kvspec: bytes per token per rank, worked by hand from vLLM 0.32.0's spec classes.

page_size_bytes = block_size * num_kv_heads * (head_size + head_size_v) * dtype_size
(v1/kv_cache_interface.py:545-561); MLA: num_kv_heads=1, head_size=kv_lora_rank+qk_rope_head_dim,
head_size_v=0 (layers/attention/mla_attention.py:1350-1378, kv_cache_interface.py:698).
"""

import pytest

from kvkb.fit.hfconfig import load_shape, parse_config
from kvkb.fit.kvspec import FitError, kv_layout
from kvkb.fit.sitepage import MODELS_DIR


def shipped(name, **kw):
    return load_shape(MODELS_DIR / name.replace("/", "--", 1), **kw)[0]


@pytest.mark.parametrize("model,expected", [
    # L x 2 x H_kv x head_dim x 2 B
    ("meta-llama/Llama-3.1-8B-Instruct", 32 * 2 * 8 * 128 * 2),  # 128 KiB, kv-sizing.md §7
    ("meta-llama/Llama-3.1-70B-Instruct", 80 * 2 * 8 * 128 * 2),  # 320 KiB
    ("Qwen/Qwen2.5-7B-Instruct", 28 * 2 * 4 * 128 * 2),  # 56 KiB
    ("Qwen/Qwen2.5-0.5B-Instruct", 24 * 2 * 2 * 64 * 2),
    ("google/gemma-2-9b-it", 42 * 2 * 8 * 256 * 2),  # explicit head_dim 256, not 3584/16
    ("deepseek-ai/DeepSeek-V3", 61 * (512 + 64) * 2),  # 70,272 B: MLA latent
    ("deepseek-ai/DeepSeek-V2-Lite-Chat", 27 * 576 * 2),
])
def test_bytes_per_token(model, expected):
    assert kv_layout(shipped(model)).bytes_per_token == expected


def test_tp_shards_kv_heads_until_replicated():
    s = shipped("Qwen/Qwen2.5-7B-Instruct")  # 4 KV heads
    per_tp = {tp: kv_layout(s, tensor_parallel_size=tp).bytes_per_token for tp in (1, 2, 4)}
    assert per_tp == {1: 57344, 2: 28672, 4: 14336}
    # TP 3 does not divide 4 KV heads (nor 28 attention heads): vLLM refuses
    with pytest.raises(FitError, match="not divisible"):
        kv_layout(s, tensor_parallel_size=3)
    llama70 = shipped("meta-llama/Llama-3.1-70B-Instruct")  # 8 KV heads, 64 attention heads
    l8 = kv_layout(llama70, tensor_parallel_size=8)
    l16 = kv_layout(llama70, tensor_parallel_size=16)
    assert l8.bytes_per_token == l16.bytes_per_token == 80 * 2 * 1 * 128 * 2  # 40 KiB, then replicated
    assert not l8.replicated and l16.replicated


def test_mla_not_sharded_by_tp():
    s = shipped("deepseek-ai/DeepSeek-V3")
    assert kv_layout(s, tensor_parallel_size=8).bytes_per_token == 70272


def test_fp8_halves_and_fp8_ds_mla_packs_656():
    s = shipped("meta-llama/Llama-3.1-8B-Instruct")
    assert kv_layout(s, kv_cache_dtype="fp8").bytes_per_token == 65536
    assert kv_layout(s, kv_cache_dtype="fp8_e5m2").bytes_per_token == 65536
    v3 = shipped("deepseek-ai/DeepSeek-V3")
    assert kv_layout(v3, kv_cache_dtype="fp8").bytes_per_token == 61 * 576
    assert kv_layout(v3, kv_cache_dtype="fp8_ds_mla").bytes_per_token == 61 * 656
    with pytest.raises(FitError, match="only for MLA"):
        kv_layout(s, kv_cache_dtype="fp8_ds_mla")


def test_fp8_matches_real_log_vllm_25350():
    # vLLM #25350: fp8 KV, "10.12 GiB KV cache is needed" at 221,000 tokens on a 48-layer,
    # 4-KV-head, head_dim 128 model (kv-sizing.md §1.6): 49,152 B/token.
    cfg = {"model_type": "qwen3_moe", "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
           "head_dim": 128, "hidden_size": 2048, "vocab_size": 151936, "max_position_embeddings": 262144}
    lay = kv_layout(parse_config(cfg), kv_cache_dtype="fp8")
    assert lay.bytes_per_token == 49152
    needed = -(-221000 // 16) * 16 * lay.bytes_per_token
    assert f"{round(needed / 2**30, 2)}" == "10.12"


@pytest.mark.parametrize("dtype,needle", [("int8", "not a vLLM 0.32.0 value"), ("fp4", "not a vLLM"),
                                          ("nvfp4", "does not model")])
def test_kv_cache_dtype_errors(dtype, needle):
    with pytest.raises(FitError, match=needle):
        kv_layout(shipped("Qwen/Qwen2.5-0.5B-Instruct"), kv_cache_dtype=dtype)


def test_sliding_layers_carry_window():
    lay = kv_layout(shipped("google/gemma-3-270m-it"))
    kinds = [layer.kind for layer in lay.layers]
    assert kinds.count("sliding") == 15 and kinds.count("full") == 3
    assert {layer.sliding_window for layer in lay.layers if layer.kind == "sliding"} == {512}
