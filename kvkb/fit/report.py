"""Text and JSON renderings of a FitResult."""

from __future__ import annotations

import json

from kvkb.fit.capacity import FitResult
from kvkb.fit.sizes import human_bytes, human_tokens

BAR_WIDTH = 50


def budget_bar(parts: list[tuple[str, int, str]], total: int, width: int = BAR_WIDTH) -> str:
    """One-line picture of how a memory total splits: [WWWWWWaaKKKKKKKKK....]."""
    cells, used = [], 0
    for _label, size, ch in parts:
        n = round(width * max(size, 0) / total) if total else 0
        n = min(n, width - used)
        cells.append(ch * n)
        used += n
    return "[" + "".join(cells) + "." * (width - used) + "]"


def _range(lo: int, hi: int) -> str:
    return human_bytes(lo) if lo == hi else f"{human_bytes(lo)} - {human_bytes(hi)}"


def _verdict(r: FitResult) -> str:
    lo_hi = r.available_bytes_range
    if r.no_memory and lo_hi and lo_hi[1] > r.bytes_per_block:
        left = f"{human_bytes(0)} - {human_bytes(lo_hi[1])}"
        return f"NO: {left} would be left for KV cache after weights and overhead, depending on the overhead"
    if r.no_memory:
        return "NO: no memory left for KV cache blocks after the weights and overhead"
    if r.fits is True:
        return f"YES: one {r.max_model_len:,}-token request needs {human_bytes(r.needed_bytes)} of KV cache"
    if r.fits is False:
        return (f"NO: one {r.max_model_len:,}-token request needs {human_bytes(r.needed_bytes)}, more than the "
                f"{human_bytes(max(r.available_bytes - r.bytes_per_block, 0))} usable")
    return ("MAYBE: it fits at the low end of the overhead estimate but not at the high end; the real "
            "answer is in vLLM's 'Available KV cache memory' line (pass it as --kv-cache-memory)")


def render_text(r: FitResult, *, source_note: str | None = None) -> str:
    out = []
    tp = f", TP {r.tensor_parallel_size}" if r.tensor_parallel_size > 1 else ""
    out.append(f"{r.model}  (vLLM {r.vllm_version} rules, {r.device.upper()}{tp})")
    if source_note:
        out.append(f"  {source_note}")
    out.append(f"KV cache dtype {r.kv_cache_dtype}, block size {r.block_size}, max_model_len {r.max_model_len:,}")
    out.append("")
    out.append(f"Bytes per token   {r.bytes_per_token:,} B ({human_bytes(r.bytes_per_token)})"
               f"{' per GPU' if r.tensor_parallel_size > 1 else ''}")
    out.append(f"                  = {r.bytes_per_token_formula}")
    if r.draft:
        d = r.draft
        out.append(f"Draft KV          {r.draft_bytes_per_token:,} B per token, {d['num_layers']} layer"
                   f"{'s' if d['num_layers'] > 1 else ''} in the same pool")
        out.append(f"                  = {d['formula']}")
    out.append(f"Bytes per block   {r.bytes_per_block:,} B ({human_bytes(r.bytes_per_block)}, {r.block_size} tokens"
               + (f", widest of {len(r.groups)} KV groups" if len(r.groups) > 1 else "") + ")")
    if r.budget:
        b = r.budget
        out.append("")
        out.append(f"Memory per GPU    {human_bytes(b['gpu_memory'])} x {b['utilization']:.2f} utilization "
                   f"= {human_bytes(b['requested'])} for vLLM")
        out.append(f"  weights         {human_bytes(b['weights'])}  ({b['weights_source']})")
        out.append(f"  non-torch       {_range(*b['non_torch'])}  (CUDA context extras, NCCL)")
        out.append(f"  activation peak {_range(*b['activation'])}  ({b['activation_reason']})")
        out.append(f"  CUDA graphs     {_range(*b['cuda_graphs'])}  ({b['cuda_graphs_reason']})")
        out.append(f"  KV cache        {_range(max(b['kv_low'], 0), max(b['kv_high'], 0))}  (what is left)")
        parts = [("weights", b["weights"], "W"), ("other", b["requested"] - b["weights"] - b["kv_high"], "o"),
                 ("range", b["kv_high"] - b["kv_low"], "~"), ("kv", b["kv_low"], "K")]
        out.append(f"  {budget_bar(parts, b['gpu_memory'])}  W weights, o activations/graphs/non-torch, "
                   "~ estimate range, K KV cache, . left unused (1 - utilization)")
    else:
        out.append(f"KV memory         {human_bytes(r.available_bytes)} ({r.available_bytes:,} B, given)")
    out.append("")
    if r.kv_tokens_range and r.kv_tokens_range[0] != r.kv_tokens_range[1]:
        lo, hi = r.kv_tokens_range
        clo, chi = r.max_concurrency_range
        out.append(f"KV capacity       {lo:,} - {hi:,} tokens")
        out.append(f"Max concurrency   {clo:.2f}x - {chi:.2f}x at {r.max_model_len:,} tokens per request")
    else:
        out.append(f"KV capacity       {r.kv_tokens:,} tokens ({r.num_blocks:,} blocks)")
        out.append(f"Max concurrency   {r.max_concurrency:.2f}x at {r.max_model_len:,} tokens per request")
        out.append(f"vLLM would log    {r.capacity_line}")
    out.append(f"Fits              {_verdict(r)}")
    if r.max_model_len_that_fits_range and r.max_model_len_that_fits_range[0] != r.max_model_len_that_fits_range[1]:
        lo, hi = r.max_model_len_that_fits_range
        out.append(f"Longest context   {lo:,} - {hi:,} tokens fit one request")
    else:
        m = r.max_model_len_that_fits
        cap = " (the model's maximum)" if m >= r.model_max_len else ""
        short = f" ({human_tokens(m)})" if human_tokens(m) != f"{m:,}" else ""
        out.append(f"Longest context   {m:,} tokens{short} fits one request{cap}")
    if r.error_line and r.fits is False:
        out.append("")
        where = " at the high-overhead end of the estimate" if r.budget else ""
        out.append(f"vLLM would stop with ({'its' if r.vllm_version == '0.32.0' else '0.32.0'} wording){where}:")
        out.append(f"  ValueError: {r.error_line}")
    if r.suggestions:
        out.append("")
        out.append("What would make it fit:" if r.fits is not True else "Worth knowing:")
        out.extend(f"  - {s}" for s in r.suggestions)
    if r.notes:
        out.append("")
        out.extend(f"Note: {n}" for n in r.notes)
    return "\n".join(out)


def render_json(r: FitResult, **extra) -> str:
    d = r.to_json()
    d.update(extra)
    return json.dumps(d, indent=2)
