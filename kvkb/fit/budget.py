"""The memory vLLM leaves for the KV cache on one GPU, as a stated range.

vLLM 0.32.0 (`v1/worker/gpu_worker.py:634-807`): requested = ceil(total x utilization); it then
*measures* weights + non-torch memory + the activation peak of a dummy forward of
max_num_batched_tokens tokens and a dummy sampler pass (fp32 logits for min(max_num_seqs,
max_num_batched_tokens) rows x vocab), and from 0.20 also the estimated CUDA-graph pool, and gives
the rest to the KV cache. Only the weights are knowable before launch, so the other terms are a
range built from the shapes that drive them (reference/kv-sizing.md §2, §5):
- activation low  = one copy of the sampler logits + the MLP gate/up output for the batch;
- activation high = 8 copies of the logits (logits, softmax, logprobs, sort values and int64
  indices) + 1.5 x the MLP, attention and residual tensors of the batch (observed peaks: 0.3 GiB
  for a 0.5B model, up to 5.6 GiB for 8B-32B models with H100 server defaults);
- non-torch (CUDA context extras, NCCL): 0.02-0.2 GiB on one GPU, 0.2-0.6 GiB with TP;
- CUDA graphs (charged from 0.20 unless --enforce-eager; vLLM's log says 0.21, its code 0.20): 0.05-0.7 GiB
  dense, up to 3.5 GiB MoE+TP.
The real numbers are in vLLM's startup log; pass "Available KV cache memory" as --kv-cache-memory.
"""

from __future__ import annotations

import math

from kvkb.fit.hfconfig import ModelShape, dtype_bytes, model_dtype
from kvkb.fit.sizes import GiB
from kvkb.fit.versions import CUDAGRAPH_CHARGED_FROM, release_name, version_tuple


def activation_range(shape: ModelShape, *, tp: int, dtype: str, max_num_batched_tokens: int,
                     max_num_seqs: int) -> tuple[int, int, str]:
    b = dtype_bytes(model_dtype(shape, dtype))
    rows = min(max_num_seqs, max_num_batched_tokens)
    logits = rows * shape.vocab_size * 4
    if shape.moe:
        inter = shape.moe["top_k"] * shape.moe["moe_intermediate_size"] + shape.moe["n_shared_experts"] * shape.moe["moe_intermediate_size"]
    else:
        inter = shape.intermediate_size
    t = max_num_batched_tokens
    mlp = t * 2 * inter * b // tp
    qkv = (shape.num_attention_heads + 2 * shape.num_kv_heads) * shape.head_dim
    rest = t * (inter + 4 * shape.hidden_size + qkv) * b // tp
    low = logits + mlp
    high = 8 * logits + int(1.5 * (mlp + rest))
    why = (f"profile run of {t:,} batched tokens and {rows:,} sampler rows x {shape.vocab_size:,} vocab "
           "(fp32 logits)")
    return low, high, why


def estimate_budget(shape: ModelShape, *, gpu_memory: int, utilization: float, tp: int, dtype: str,
                    max_num_batched_tokens: int, max_num_seqs: int, vllm_version: str,
                    enforce_eager: bool, weight_bytes: int | None = None,
                    weight_source: str | None = None) -> dict:
    """Byte ranges for each non-KV term and the KV memory left (kv_low = conservative end)."""
    if gpu_memory <= 0:
        raise ValueError("GPU memory must be positive")
    requested = math.ceil(gpu_memory * utilization)
    if weight_bytes is None:
        from kvkb.fit.weights import estimate_from_config

        weight_bytes, weight_source = estimate_from_config(shape, dtype)
    weights = weight_bytes // tp
    act_lo, act_hi, act_why = activation_range(shape, tp=tp, dtype=dtype,
                                               max_num_batched_tokens=max_num_batched_tokens,
                                               max_num_seqs=max_num_seqs)
    nt_lo, nt_hi = (int(0.02 * GiB), int(0.2 * GiB)) if tp == 1 else (int(0.2 * GiB), int(0.6 * GiB))
    cg_charged = version_tuple(vllm_version) >= CUDAGRAPH_CHARGED_FROM and not enforce_eager
    since = release_name(CUDAGRAPH_CHARGED_FROM)
    if cg_charged:
        cg_lo, cg_hi = (int(0.05 * GiB), int(0.7 * GiB))
        if shape.moe or tp > 1:
            cg_hi = int(3.5 * GiB)
    else:
        cg_lo = cg_hi = 0
    kv_hi = requested - weights - nt_lo - act_lo - cg_lo
    kv_lo = requested - weights - nt_hi - act_hi - cg_hi
    return {
        "gpu_memory": gpu_memory, "utilization": utilization, "requested": requested,
        "weights": weights, "weights_source": (weight_source or "") + (f", / TP {tp}" if tp > 1 else ""),
        "non_torch": [nt_lo, nt_hi], "activation": [act_lo, act_hi], "activation_reason": act_why,
        "cuda_graphs": [cg_lo, cg_hi],
        "cuda_graphs_reason": (f"estimated pool charged to the KV budget (default since {since})" if cg_charged else
                               ("--enforce-eager: no graphs" if enforce_eager else
                                f"not charged before {since}: graphs must fit in the 1 - utilization margin")),
        "kv_low": kv_lo, "kv_high": kv_hi,
    }
