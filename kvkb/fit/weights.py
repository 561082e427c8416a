"""Weight memory: from the checkpoint when it is there, else from the config's parameter count.

Order of preference: model.safetensors.index.json `metadata.total_size` (exact bytes on disk);
the data bytes of the *.safetensors files in the folder; a parameter count from config.json
times bytes per parameter (fp8 checkpoints: 1 B for linear weights; AWQ/GPTQ: bits/8 + scales).
vLLM loads unquantized and fp8 checkpoints at about their on-disk size ("Model loading took").
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from kvkb.fit.hfconfig import ModelShape, dtype_bytes, model_dtype


def param_count(shape: ModelShape) -> dict[str, int]:
    """Parameters by part: embeddings, attention, mlp (dense + experts), lm_head."""
    h, v, L = shape.hidden_size, shape.vocab_size, shape.num_layers
    embed = v * h
    lm_head = 0 if shape.tie_word_embeddings else v * h
    if shape.is_mla:
        m = shape.mla
        nh, qk = shape.num_attention_heads, m["qk_nope_head_dim"] + m["qk_rope_head_dim"]
        q = (h * m["q_lora_rank"] + m["q_lora_rank"] * nh * qk) if m.get("q_lora_rank") else h * nh * qk
        kv = h * (m["kv_lora_rank"] + m["qk_rope_head_dim"]) + m["kv_lora_rank"] * nh * (m["qk_nope_head_dim"] + m["v_head_dim"])
        attn = q + kv + nh * m["v_head_dim"] * h
    else:
        q = h * shape.num_attention_heads * shape.head_dim
        kvp = 2 * h * shape.num_kv_heads * shape.head_dim
        bias = (shape.num_attention_heads + 2 * shape.num_kv_heads) * shape.head_dim if shape.attention_bias else 0
        attn = q + kvp + bias + shape.num_attention_heads * shape.head_dim * h
    dense_mlp = 3 * h * shape.intermediate_size
    if shape.moe:
        moe = shape.moe
        experts = moe["n_routed_experts"] * 3 * h * moe["moe_intermediate_size"]
        shared = moe["n_shared_experts"] * 3 * h * moe["moe_intermediate_size"]
        shared += 3 * h * moe["shared_expert_intermediate_size"]
        router = h * moe["n_routed_experts"]
        k = min(moe["first_k_dense"], L)
        mlp = k * dense_mlp + (L - k) * (experts + shared + router)
    else:
        mlp = L * dense_mlp
    norms = L * 2 * h + h
    return {"embed": embed, "attention": L * attn, "mlp": mlp, "norms": norms, "lm_head": lm_head}


def _quant_bytes(shape: ModelShape, base: int) -> tuple[float, str] | None:
    q = shape.quantization
    if not q:
        return None
    method = str(q.get("quant_method", "")).lower()
    bits = q.get("bits") or q.get("weight_bits") or q.get("w_bit")
    if method in ("fp8", "fbgemm_fp8") or q.get("fmt") in ("e4m3", "e5m2"):
        return 1.0, f"{method} checkpoint: 1 B per linear weight"
    if method in ("awq", "gptq", "gptq_marlin", "awq_marlin") and isinstance(bits, int):
        # group-wise scales/zeros add about 1/32 of a byte per weight at group size 128
        return bits / 8 + 0.03, f"{method} {bits}-bit: about {bits / 8 + 0.03:.2f} B per linear weight"
    if method == "bitsandbytes" and q.get("load_in_4bit"):
        return 0.53, "bitsandbytes 4-bit: about 0.53 B per linear weight"
    return None


def estimate_from_config(shape: ModelShape, dtype: str = "auto") -> tuple[int, str]:
    parts = param_count(shape)
    total = sum(parts.values())
    b = dtype_bytes(model_dtype(shape, dtype))
    quant = _quant_bytes(shape, b)
    if quant:
        per, why = quant
        linear = parts["attention"] + parts["mlp"]
        nbytes = int(linear * per + (total - linear) * b)
        return nbytes, f"{total / 1e9:.2f} B parameters from config.json; {why}, the rest {b} B"
    return total * b, f"{total / 1e9:.2f} B parameters from config.json x {b} B"


def _safetensors_data_bytes(path: Path) -> int:
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return 0
        (n,) = struct.unpack("<Q", head)
    return max(0, path.stat().st_size - 8 - n)


def weight_bytes(shape: ModelShape, folder: Path | None, dtype: str = "auto") -> tuple[int, str]:
    """(bytes, where the number came from) for the whole model, all ranks together."""
    if folder is not None and folder.is_dir():
        idx = folder / "model.safetensors.index.json"
        if idx.is_file():
            try:
                total = json.loads(idx.read_text(encoding="utf-8"))["metadata"]["total_size"]
                if isinstance(total, int) and total > 0:
                    return total, "model.safetensors.index.json total_size"
            except (ValueError, KeyError, TypeError, UnicodeDecodeError):
                pass
        files = sorted(folder.glob("*.safetensors"))
        if files:
            total = sum(_safetensors_data_bytes(f) for f in files)
            if total > 0:
                return total, f"{len(files)} .safetensors file(s) in the folder"
    return estimate_from_config(shape, dtype)
