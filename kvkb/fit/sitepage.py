"""The site's "Will it fit?" page: generated tables from the shipped configs + what each term means.

`render_markdown()` returns Markdown (tables, admonitions, one inline SVG) that builds under
`mkdocs build --strict` with mkdocs-material. Every number comes from kvkb.fit.capacity.fit.
"""

from __future__ import annotations

from pathlib import Path

from kvkb.fit.capacity import DEFAULT_VLLM_VERSION, FitResult, default_gpu_memory_utilization, fit
from kvkb.fit.hfconfig import ModelShape, load_shape
from kvkb.fit.kvspec import kv_layout
from kvkb.fit.sizes import GiB, human_bytes
from kvkb.fit.versions import CUDAGRAPH_CHARGED_FROM, NULL_BLOCK_RESERVED_FROM, release_name

from kvkb.fit import MODELS_PATH, shipped_configs

MODELS_DIR = Path(MODELS_PATH)

# Total memory as CUDA reports it (what vLLM multiplies by gpu_memory_utilization), not the
# marketing size: reference/kv-sizing.md §5 and the "total capacity" of CUDA OOM messages.
GPUS: tuple[tuple[str, float], ...] = (
    ("24 GB (RTX 4090)", 23.99),
    ("40 GB (A100 40GB)", 39.39),
    ("48 GB (L40S)", 44.42),
    ("80 GB (H100)", 79.18),
    ("141 GB (H200)", 139.8),
)
CONTEXTS = (8192, 32768, 131072)
# Table order: small to large.
MODEL_ORDER = (
    "HuggingFaceTB/SmolLM2-135M-Instruct", "google/gemma-3-270m-it", "Qwen/Qwen2.5-0.5B-Instruct",
    "google/gemma-3-1b-it", "Qwen/Qwen2.5-7B-Instruct", "mistralai/Mistral-7B-Instruct-v0.1",
    "meta-llama/Llama-3.1-8B-Instruct", "google/gemma-2-9b-it", "deepseek-ai/DeepSeek-V2-Lite-Chat",
    "meta-llama/Llama-3.1-70B-Instruct", "deepseek-ai/DeepSeek-V3", "moonshotai/Kimi-K2-Instruct",
)


def shipped_models() -> list[tuple[str, ModelShape]]:
    found = {repo: Path(path).parent for repo, path in shipped_configs()}
    order = [m for m in MODEL_ORDER if m in found] + sorted(set(found) - set(MODEL_ORDER))
    out = []
    for name in order:
        shape, _ = load_shape(found[name])
        out.append((name, shape))
    return out


def _arch(shape: ModelShape) -> str:
    if shape.is_mla:
        return "MLA"
    kind = "MHA" if shape.num_kv_heads == shape.num_attention_heads else "GQA"
    if shape.num_sliding_layers == shape.num_layers:
        return f"{kind}, all sliding ({shape.sliding_window:,})"
    if shape.num_sliding_layers:
        return f"{kind}, {shape.num_sliding_layers}/{shape.num_layers} sliding ({shape.sliding_window:,})"
    return kind


def cell(shape: ModelShape, gpu_gib: float, context: int, tp: int = 1) -> tuple[str, FitResult | None]:
    """Table cell for one model/GPU/context at vLLM's defaults."""
    if context > shape.max_model_len:
        return "—", None
    r = fit(shape, gpu_memory=int(gpu_gib * GiB), max_model_len=context, tensor_parallel_size=tp,
            suggest=False)
    if r.fits is True:
        return f"✓ {r.max_concurrency:.1f}×", r
    if r.fits is None:
        return "~", r
    return "✗", r


def _bytes_table(models) -> list[str]:
    rows = ["| Model | Attention | Layers | KV heads × head_dim | KV per token (bf16) | fp8 KV | "
            "one 8k request | one 32k request | max context |",
            "|---|---|---:|---|---:|---:|---:|---:|---:|"]
    for name, s in models:
        lay = kv_layout(s)
        f8 = kv_layout(s, kv_cache_dtype="fp8").bytes_per_token
        heads = (f"latent {s.mla['kv_lora_rank']}+{s.mla['qk_rope_head_dim']}" if s.is_mla
                 else f"{s.num_kv_heads} × {s.head_dim}")
        per_req = []
        for ctx in (8192, 32768):
            if ctx > s.max_model_len:
                per_req.append("—")
                continue
            r = fit(s, kv_cache_memory=1 << 50, max_model_len=ctx, suggest=False)
            per_req.append(human_bytes(r.needed_bytes))
        rows.append(f"| {name} | {_arch(s)} | {s.num_layers} | {heads} | {human_bytes(lay.bytes_per_token)} | "
                    f"{human_bytes(f8)} | {per_req[0]} | {per_req[1]} | {s.max_model_len:,} |")
    return rows


def _fit_table(models, context: int) -> list[str]:
    head = "| Model | " + " | ".join(g for g, _ in GPUS) + " |"
    rows = [head, "|---|" + "---:|" * len(GPUS)]
    for name, s in models:
        cells = [cell(s, gib, context)[0] for _, gib in GPUS]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


def _tp_table(models) -> list[str]:
    """Smallest tensor-parallel size that fits each context on 80 GB and 141 GB cards."""
    picks = [GPUS[3], GPUS[4]]
    rows = ["| Model | " + " | ".join(f"{g} @ {c // 1024}k" for g, _ in picks for c in CONTEXTS) + " |",
            "|---|" + "---:|" * (len(picks) * len(CONTEXTS))]
    for name, s in models:
        cells = []
        for _, gib in picks:
            for ctx in CONTEXTS:
                if ctx > s.max_model_len:
                    cells.append("—")
                    continue
                best, maybe = "> 8", None
                for tp in (1, 2, 4, 8):
                    try:
                        r = fit(s, gpu_memory=int(gib * GiB), max_model_len=ctx, tensor_parallel_size=tp,
                                suggest=False)
                    except ValueError:
                        continue  # a split vLLM refuses (heads not divisible)
                    if r.fits is None and maybe is None:
                        maybe = tp
                    if r.fits is True:
                        best = str(tp)
                        break
                cells.append(best if maybe is None else f"{best} (~{maybe})")
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


def budget_svg(r: FitResult, title: str) -> str:
    """Stacked bar of one GPU's memory; a single HTML block (no blank lines) so Markdown keeps it whole."""
    b = r.budget
    total = b["gpu_memory"]
    other_hi = b["requested"] - b["weights"] - b["kv_low"]
    parts = [
        ("weights", b["weights"], "#5b8def"),
        ("activations, CUDA graphs, non-torch (high estimate)", other_hi, "#f0a35e"),
        ("KV cache", b["kv_low"], "#4caf7d"),
        (f"kept free (1 - {b['utilization']:.2f})", total - b["requested"], "#c9ced6"),
    ]
    width, x, rects, legend = 640.0, 0.0, [], []
    for i, (label, size, color) in enumerate(parts):
        w = width * max(size, 0) / total
        rects.append(f'<rect x="{x:.1f}" y="28" width="{w:.1f}" height="34" fill="{color}"/>')
        x += w
        ly = 84 + 20 * i
        legend.append(f'<rect x="0" y="{ly - 11}" width="12" height="12" fill="{color}"/>'
                      f'<text x="18" y="{ly}" font-size="13" fill="currentColor">{label}: {human_bytes(max(size, 0))}</text>')
    h = 84 + 20 * len(parts)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {int(width)} {h}" width="100%" '
            f'role="img" aria-label="{title}">'
            f'<text x="0" y="18" font-size="14" font-weight="bold" fill="currentColor">{title}</text>'
            + "".join(rects) + "".join(legend) + "</svg>")


def render_markdown() -> str:
    models = shipped_models()
    util = default_gpu_memory_utilization(DEFAULT_VLLM_VERSION)
    example_shape = dict(models)["meta-llama/Llama-3.1-8B-Instruct"] if "meta-llama/Llama-3.1-8B-Instruct" in dict(models) else models[0][1]
    ex = fit(example_shape, gpu_memory=int(79.18 * GiB), max_model_len=32768, suggest=False)
    out: list[str] = []
    w = out.append
    w("# Will it fit?")
    w("")
    w("How much KV cache a model needs in vLLM, how many requests fit at once, and the longest context "
      "that starts at all. The numbers follow vLLM's own sizing code "
      f"(vLLM {DEFAULT_VLLM_VERSION}) and are generated by `kvkb fit` from the configs shipped with kvkb.")
    w("")
    w("```bash")
    w("kvkb fit meta-llama/Llama-3.1-8B-Instruct --gpu-memory 23.99GiB --max-model-len 32k")
    w("kvkb fit ./my-model --kv-cache-memory 22.5GiB   # exact: the 'Available KV cache memory' from your log")
    w("kvkb fit ./my-model --json")
    w("```")
    w("")
    w("## Where the memory goes")
    w("")
    w(f"vLLM takes `gpu_memory_utilization` ({util} by default) of the GPU's total memory, loads the weights, "
      "measures one dummy forward pass and sampler run, and gives everything left to the KV cache. "
      "Example: Llama-3.1-8B-Instruct on one H100 (79.18 GiB as CUDA reports it), 32k context:")
    w("")
    w(budget_svg(ex, "Llama-3.1-8B-Instruct on an 80 GB H100"))
    w("")
    w("## The terms")
    w("")
    w("**Bytes per token**: What one token of one request costs in KV cache: layers × 2 (K and V) × KV heads × head_dim × "
      "bytes per element. `head_dim` is the config's own when it has one (Gemma, Qwen3), not "
      "hidden_size / heads. MLA models (DeepSeek V2/V3, Kimi K2) store one compressed latent of "
      "kv_lora_rank + qk_rope_head_dim per layer instead.")
    w("")
    w("**Block**: vLLM allocates KV memory in blocks of `block_size` tokens (16 on most GPUs, 64 for FlashMLA, "
      "128 on the CPU backend). A request always holds whole blocks.")
    w("")
    w("**KV capacity (tokens)**: The pool size vLLM logs at startup as `GPU KV cache size: N tokens`: the available KV memory "
      "divided into blocks, expressed per max_model_len request.")
    w("")
    w("**Maximum concurrency**: How many requests of the full max_model_len fit in the pool at once "
      "(`Maximum concurrency for L tokens per request: C x`). Shorter requests share the pool, so more of "
      "them run; when the pool is full, vLLM preempts or queues requests rather than crashing.")
    w("")
    w("**Fits**: vLLM refuses to start unless one request of max_model_len fits in the KV memory minus one block "
      f"(the null block it keeps back, from vLLM {release_name(NULL_BLOCK_RESERVED_FROM)}; earlier releases check the whole "
      "KV memory). Otherwise it stops with *To serve at least one request with the "
      "model's max seq len …* and prints an estimated maximum model length: the largest length that fits.")
    w("")
    w(f"**gpu_memory_utilization**: The fraction of the GPU's **total** memory this vLLM instance may use: {util} from vLLM 0.20 "
      "(0.9 before). Memory used by other processes is not subtracted from it; if the GPU does not have "
      "that much free, vLLM stops before sizing anything.")
    w("")
    w("**Activations and CUDA graphs**: Measured by vLLM at startup, so only estimated here, as a range: the dummy forward pass grows "
      "with `max_num_batched_tokens`, the sampler with `max_num_seqs` × vocabulary size, not with "
      f"max_model_len. From vLLM {release_name(CUDAGRAPH_CHARGED_FROM)} the estimated CUDA-graph pool is also charged to the "
      "KV budget unless `--enforce-eager`.")
    w("")
    w("**Sliding window**: Layers with a sliding window (Mistral 7B v0.1, 5 of every 6 Gemma 3 layers, every other Gemma 2 "
      "layer) keep only the window plus in-flight tokens per request, so long contexts cost far less.")
    w("")
    w("**Tensor parallelism**: Each GPU holds num_key_value_heads / TP heads, so bytes per token fall with TP until TP exceeds the "
      "KV head count; then heads are copied and the per-GPU cost stops falling. MLA latents are never "
      "split: every GPU holds all of them.")
    w("")
    w("**fp8 KV cache**: `--kv-cache-dtype fp8` stores one byte per element instead of two: half the bytes per token, twice "
      "the tokens.")
    w("")
    w("## KV cost per model")
    w("")
    out.extend(_bytes_table(models))
    w("")
    w("## Does it fit on one GPU?")
    w("")
    w(f"One GPU, vLLM {DEFAULT_VLLM_VERSION} defaults (`vllm serve`: utilization {util}, bf16 KV cache, "
      "CUDA graphs on), weights estimated from the config's parameter count.")
    w("")
    w("!!! note \"How to read a cell\"")
    w("    **✓ N×**: fits even with the high end of the overhead estimate; N requests of that full length fit "
      "at once. **~**: depends on the real activation and CUDA-graph memory; run it, or pass your log's "
      "KV memory to `kvkb fit --kv-cache-memory`. **✗**: does not fit. **—**: longer than the model's "
      "context. GPU sizes are the totals CUDA reports (an 80 GB H100 shows 79.18 GiB). vLLM's batching "
      "defaults grow with the GPU (from 70 GiB: 8,192 batched tokens and 1,024 sequences), which raises the "
      "activation estimate and the tokens a sliding-window layer keeps, so some models show less concurrency "
      "on an 80 GB card than on a 48 GB one.")
    w("")
    for ctx in CONTEXTS:
        w(f"### {ctx // 1024}k context ({ctx:,} tokens)")
        w("")
        out.extend(_fit_table(models, ctx))
        w("")
    w("## How many GPUs?")
    w("")
    w("Smallest tensor-parallel size (1, 2, 4 or 8 GPUs) at which the context surely fits, same assumptions; "
      "(~N): with N GPUs it fits only if the overhead lands at the low end of the estimate.")
    w("")
    out.extend(_tp_table(models))
    w("")
    w("## How exact is this?")
    w("")
    w("The KV arithmetic (bytes per token, blocks, capacity, concurrency, the fit check and the estimated "
      "maximum model length) follows vLLM's code and is tested to match vLLM's printed numbers exactly on "
      "its CPU backend, including sliding-window models, Gemma 2 and 3's mixed layers and MLA. What vLLM measures at "
      "startup (activations, CUDA graphs, non-torch memory) can only be estimated, which is why the "
      "tables show ranges. For an exact answer on your machine, start vLLM once, copy the "
      "`Available KV cache memory: X GiB` line and run `kvkb fit MODEL --kv-cache-memory X GiB`.")
    w("")
    return "\n".join(out)
