"""kvkb.fit.weights and kvkb.fit.budget: weight bytes and the stated non-KV range."""

import json
import struct

import pytest

from kvkb.fit.budget import activation_range, estimate_budget
from kvkb.fit.hfconfig import load_shape
from kvkb.fit.sitepage import MODELS_DIR
from kvkb.fit.sizes import GiB
from kvkb.fit.weights import estimate_from_config, param_count, weight_bytes


def shipped(name):
    return load_shape(MODELS_DIR / name.replace("/", "--", 1))[0]


@pytest.mark.parametrize("model,billions", [
    ("meta-llama/Llama-3.1-8B-Instruct", 8.03), ("meta-llama/Llama-3.1-70B-Instruct", 70.55),
    ("Qwen/Qwen2.5-7B-Instruct", 7.62), ("Qwen/Qwen2.5-0.5B-Instruct", 0.49),
    ("google/gemma-2-9b-it", 9.24), ("google/gemma-3-270m-it", 0.27),
    ("mistralai/Mistral-7B-Instruct-v0.1", 7.24), ("deepseek-ai/DeepSeek-V2-Lite-Chat", 15.71),
    ("deepseek-ai/DeepSeek-V3", 671.03),  # published: 671 B (+ 14 B MTP, not loaded)
])
def test_param_counts_match_published_sizes(model, billions):
    assert round(sum(param_count(shipped(model)).values()) / 1e9, 2) == pytest.approx(billions, abs=0.01)


def test_fp8_checkpoint_counts_one_byte_per_linear_weight():
    nbytes, why = estimate_from_config(shipped("deepseek-ai/DeepSeek-V3"))
    assert "fp8" in why and 620 * GiB < nbytes < 640 * GiB


def test_index_total_size_wins(tmp_path):
    (tmp_path / "config.json").write_text((MODELS_DIR / "Qwen--Qwen2.5-0.5B-Instruct" / "config.json").read_text())
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 987654321}}))
    shape, folder = load_shape(tmp_path)
    assert weight_bytes(shape, folder) == (987654321, "model.safetensors.index.json total_size")


def test_safetensors_data_bytes(tmp_path):
    (tmp_path / "config.json").write_text((MODELS_DIR / "Qwen--Qwen2.5-0.5B-Instruct" / "config.json").read_text())
    header = b'{"a":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}}'
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 1000)
    shape, folder = load_shape(tmp_path)
    assert weight_bytes(shape, folder)[0] == 1000


def test_activation_grows_with_batched_tokens_and_seqs_not_context():
    s = shipped("meta-llama/Llama-3.1-8B-Instruct")
    small = activation_range(s, tp=1, dtype="auto", max_num_batched_tokens=2048, max_num_seqs=256)
    big = activation_range(s, tp=1, dtype="auto", max_num_batched_tokens=8192, max_num_seqs=1024)
    assert small[0] < small[1] and big[0] > small[0] and big[1] > small[1]
    # sampler logits alone: 256 rows x 128,256 vocab x 4 B
    assert small[0] >= 256 * 128256 * 4


def test_budget_charges_cuda_graphs_only_from_0_20_and_not_eager():
    s = shipped("Qwen/Qwen2.5-7B-Instruct")
    kw = dict(gpu_memory=int(79.18 * GiB), utilization=0.92, tp=1, dtype="auto", max_num_batched_tokens=8192,
              max_num_seqs=1024)
    new = estimate_budget(s, vllm_version="0.32.0", enforce_eager=False, **kw)
    old = estimate_budget(s, vllm_version="0.19.0", enforce_eager=False, **kw)
    eager = estimate_budget(s, vllm_version="0.32.0", enforce_eager=True, **kw)
    assert new["cuda_graphs"][1] > 0 and old["cuda_graphs"] == [0, 0] and eager["cuda_graphs"] == [0, 0]
    assert new["kv_low"] < old["kv_low"]
    assert new["requested"] == -(-int(79.18 * GiB) * 92 // 100) or abs(new["requested"] - int(79.18 * GiB) * 0.92) <= 1
    parts = new["weights"] + new["non_torch"][1] + new["activation"][1] + new["cuda_graphs"][1]
    assert new["kv_low"] == new["requested"] - parts
