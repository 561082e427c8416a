"""`kvkb fit MODEL`: will this model and context fit in vLLM's KV cache? Exit 0 fits (or may fit),
1 does not fit, 2 bad input."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kvkb.fit.capacity import DEFAULT_VLLM_VERSION, fit
from kvkb.fit.hfconfig import ConfigError, load_shape, read_config
from kvkb.fit.kvspec import VLLM_KV_CACHE_DTYPES, FitError
from kvkb.fit.sizes import SizeError, parse_size, parse_tokens

SHIPPED = Path(__file__).resolve().parent.parent / "fit" / "models"

EPILOG = """\
SIZE: bytes, or a number with GiB/MiB/GB/MB (binary/decimal), or vLLM's K/M/G (binary) and
k/m/g (decimal) forms: 24GiB, 80GB, 512MiB, 2G. Decimals are fine: --kv-cache-memory 12.34GiB.

With --kv-cache-memory (vLLM's "Available KV cache memory: X GiB" line) the answer is exact:
no weight or activation estimate is involved. Otherwise weights come from the checkpoint
(safetensors index) or the config's parameter count, and activations/CUDA graphs are a range.

Speculative decoding (EAGLE, a draft model, MTP): the drafter's attention layers take KV from the
same pool. --draft-config gives the draft's (or EAGLE head's) config.json; --draft-layers N alone
adds N layers shaped like the target's (MTP), or with --draft-config overrides its layer count.

MODEL may also name a shipped config: {names}
"""


def _shipped_names() -> list[str]:
    if not SHIPPED.is_dir():
        return []
    return sorted(d.name.replace("--", "/", 1) for d in SHIPPED.iterdir() if (d / "config.json").is_file())


def add_parser(sub) -> None:
    p = sub.add_parser("fit", help="will MODEL fit? KV bytes/token, capacity, concurrency, largest max_model_len",
                       description=__doc__, epilog=EPILOG.format(names=", ".join(_shipped_names())),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="model folder with config.json, a config.json file, or a shipped org/name")
    g = p.add_argument_group("memory")
    g.add_argument("--kv-cache-memory", "--kv-cache-memory-bytes", dest="kv_cache_memory", metavar="SIZE",
                   help="KV memory per GPU, e.g. from 'Available KV cache memory: 22.5 GiB' (exact mode)")
    g.add_argument("--gpu-memory", metavar="SIZE",
                   help="total memory of one GPU as CUDA reports it (default: detect with NVML)")
    g.add_argument("--gpu-memory-utilization", type=float, metavar="F",
                   help="default as in --vllm-version: 0.9 up to 0.19, 0.92 from 0.20")
    e = p.add_argument_group("engine options (as in vllm serve)")
    e.add_argument("--vllm-version", default=DEFAULT_VLLM_VERSION)
    e.add_argument("--tensor-parallel-size", "-tp", type=int, default=1, metavar="N")
    e.add_argument("--kv-cache-dtype", default="auto", metavar="DTYPE",
                   help=f"auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2, ... (vLLM accepts: "
                        f"{', '.join(VLLM_KV_CACHE_DTYPES)})")
    e.add_argument("--dtype", default="auto", help="model dtype: auto, bfloat16, float16, float32")
    e.add_argument("--block-size", type=int, metavar="N", help="default: 16 on GPU (64 MLA), 128 on CPU (16 MLA)")
    e.add_argument("--max-model-len", metavar="TOKENS", help="default: the model's own (32k = 32000, 32K = 32768)")
    e.add_argument("--max-num-seqs", type=int, metavar="N")
    e.add_argument("--max-num-batched-tokens", metavar="TOKENS")
    e.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs (drops their memory term)")
    e.add_argument("--disable-hybrid-kv-cache-manager", action="store_true",
                   help="sliding-window layers then cost as much as full attention")
    e.add_argument("--device", choices=("gpu", "cpu"), default="gpu",
                   help="cpu: vLLM's CPU backend rules (block 128, no async scheduling)")
    e.add_argument("--num-layers", type=int, metavar="N",
                   help="override num_hidden_layers (as hf_overrides={'num_hidden_layers': N})")
    d = p.add_argument_group("speculative decoding (the drafter's KV shares the pool)")
    d.add_argument("--draft-config", metavar="PATH",
                   help="draft model / EAGLE head: folder with config.json, a config.json, or a shipped org/name")
    d.add_argument("--draft-layers", type=int, metavar="N",
                   help="alone: N draft layers shaped like the target's (MTP); with --draft-config: its layer count")
    d.add_argument("--draft-tensor-parallel-size", type=int, metavar="N",
                   help="as in speculative_config: 1 or the target's TP (default: the target's)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=run)


def _resolve_model(arg: str) -> tuple[Path, str | None]:
    path = Path(arg)
    if path.exists():
        return path, None
    shipped = SHIPPED / arg.replace("/", "--", 1)
    if "/" in arg and (shipped / "config.json").is_file():
        return shipped, f"using the config.json shipped with kvkb for {arg}"
    return path, None


def run(args) -> int:
    try:
        return _run(args)
    except (ConfigError, FitError, SizeError) as e:
        print(f"kvkb fit: {e}", file=sys.stderr)
        return 2


def _run(args) -> int:
    path, note = _resolve_model(args.model)
    shape, folder = load_shape(path, num_layers=args.num_layers)
    kv_mem = parse_size(args.kv_cache_memory) if args.kv_cache_memory else None
    gpu_mem = parse_size(args.gpu_memory) if args.gpu_memory else None
    detected = None
    if kv_mem is None and gpu_mem is None:
        if args.device == "cpu":
            raise FitError("on the CPU backend the KV memory depends on the process's RSS at startup; pass "
                           "--kv-cache-memory SIZE (VLLM_CPU_KVCACHE_SPACE or --kv-cache-memory-bytes)")
        from kvkb.fit.gpu import detect_gpu_memory

        gpu_mem, detected = detect_gpu_memory()
        if gpu_mem is None:
            raise FitError(f"no GPU memory to size against: {detected}. Pass --gpu-memory SIZE (e.g. 79.2GiB "
                           "for an 80 GB H100 as CUDA reports it) or --kv-cache-memory SIZE")
    draft_cfg = None
    if args.draft_config:
        draft_path, _ = _resolve_model(args.draft_config)
        draft_cfg, _ = read_config(draft_path)
    weight_bytes = weight_source = None
    if kv_mem is None:
        from kvkb.fit.weights import weight_bytes as wb

        weight_bytes, weight_source = wb(shape, None if note else folder, args.dtype)
        if args.num_layers is not None and "config.json" not in weight_source:
            from kvkb.fit.weights import estimate_from_config

            weight_bytes, weight_source = estimate_from_config(shape, args.dtype)
    result = fit(
        shape, kv_cache_memory=kv_mem, gpu_memory=gpu_mem, gpu_memory_utilization=args.gpu_memory_utilization,
        vllm_version=args.vllm_version, tensor_parallel_size=args.tensor_parallel_size,
        kv_cache_dtype=args.kv_cache_dtype, dtype=args.dtype, block_size=args.block_size,
        max_model_len=parse_tokens(args.max_model_len) if args.max_model_len else None,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=parse_tokens(args.max_num_batched_tokens) if args.max_num_batched_tokens else None,
        device=args.device, enforce_eager=args.enforce_eager,
        hybrid_kv_cache_manager=not args.disable_hybrid_kv_cache_manager,
        weight_bytes=weight_bytes, weight_source=weight_source, name=args.model,
        draft_config=draft_cfg, draft_layers=args.draft_layers,
        draft_tensor_parallel_size=args.draft_tensor_parallel_size,
    )
    if detected:
        result.notes.insert(0, f"GPU memory detected: {detected}")
    if note:
        result.notes.insert(0, note)
    from kvkb.fit.report import render_json, render_text

    print(render_json(result) if args.json else render_text(result))
    return 1 if result.fits is False else 0
