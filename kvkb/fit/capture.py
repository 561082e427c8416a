"""Capture vLLM's own KV-capacity numbers on the CPU backend, for kvkb fit's exact-match tests.

Run with a python that has vLLM (stdlib + vllm only; kvkb need not be installed there):

    /work/venvs/vllm/bin/python kvkb/fit/capture.py                # all cases -> tests/data/fit-observations.json
    /work/venvs/vllm/bin/python kvkb/fit/capture.py --only qwen05-1gib --out /tmp/obs.json
    # speculative decoding cases (a drafter's layers in the pool) -> their own file:
    .venv-vllm/bin/python kvkb/fit/capture.py --only smollm2-eagle-1l --only smollm2-eagle-1l-150mib-fail \
        --only smollm2-draft-2l-1kvh --out tests/data/fit-observations-spec-decode.json

Each case starts one engine in its own process group (one at a time, killed afterwards) on a
shipped config.json with random weights (`load_format="dummy"`, no hub access), a fixed
`kv_cache_memory_bytes`, and records the lines vLLM prints:
  "CPU KV cache size: N tokens, Maximum concurrency for L tokens per request: Cx"
  "... the estimated maximum model length is E" (failing runs)
  "Auto-fit max_model_len: reduced from X to Y" (max_model_len=-1 runs)
plus the engine settings it resolved (block size, dtypes, batched tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODELS = HERE / "models"
DEFAULT_OUT = HERE.parent.parent / "tests" / "data" / "fit-observations.json"
MiB, GiB = 1 << 20, 1 << 30

# id, model folder, engine kwargs. num_layers uses hf_overrides to keep big models in RAM; kvkb fit
# takes the same override (--num-layers). Budgets are chosen to land on both sides of the fit check.
CASES: list[dict] = [
    {"id": "qwen05-1gib", "model": "Qwen--Qwen2.5-0.5B-Instruct", "kv_cache_memory_bytes": 1 * GiB},
    {"id": "qwen05-300mb-fail", "model": "Qwen--Qwen2.5-0.5B-Instruct", "kv_cache_memory_bytes": 300_000_000},
    {"id": "qwen05-odd-len-bs64", "model": "Qwen--Qwen2.5-0.5B-Instruct", "kv_cache_memory_bytes": 123_456_789,
     "max_model_len": 4000, "block_size": 64},
    {"id": "qwen05-fp8", "model": "Qwen--Qwen2.5-0.5B-Instruct", "kv_cache_memory_bytes": 500_000_000,
     "max_model_len": 8192, "kv_cache_dtype": "fp8"},
    {"id": "qwen05-autofit", "model": "Qwen--Qwen2.5-0.5B-Instruct", "kv_cache_memory_bytes": 100_000_000,
     "max_model_len": -1},
    {"id": "smollm2-256mib-bs32", "model": "HuggingFaceTB--SmolLM2-135M-Instruct",
     "kv_cache_memory_bytes": 256 * MiB, "block_size": 32},
    {"id": "llama8b-2l-1.5gib", "model": "meta-llama--Llama-3.1-8B-Instruct", "num_layers": 2,
     "kv_cache_memory_bytes": 1536 * MiB},
    {"id": "llama8b-2l-400mb-fail", "model": "meta-llama--Llama-3.1-8B-Instruct", "num_layers": 2,
     "kv_cache_memory_bytes": 400_000_000},
    {"id": "mistral-2l-sliding", "model": "mistralai--Mistral-7B-Instruct-v0.1", "num_layers": 2,
     "kv_cache_memory_bytes": 64 * MiB, "max_num_batched_tokens": 2048},
    {"id": "gemma3-270m-hybrid", "model": "google--gemma-3-270m-it", "kv_cache_memory_bytes": 200 * MiB,
     "max_num_batched_tokens": 2048},
    {"id": "gemma3-270m-hybrid-fail", "model": "google--gemma-3-270m-it", "kv_cache_memory_bytes": 20 * MiB,
     "max_num_batched_tokens": 2048},
    {"id": "gemma2-2l-hybrid", "model": "google--gemma-2-9b-it", "num_layers": 2,
     "kv_cache_memory_bytes": 1 * GiB, "max_num_batched_tokens": 2048},
    {"id": "deepseek-v2-lite-2l-mla-fail", "model": "deepseek-ai--DeepSeek-V2-Lite-Chat", "num_layers": 2,
     "kv_cache_memory_bytes": 64 * MiB, "max_model_len": 32768, "max_num_batched_tokens": 2048},
    {"id": "deepseek-v2-lite-2l-mla", "model": "deepseek-ai--DeepSeek-V2-Lite-Chat", "num_layers": 2,
     "kv_cache_memory_bytes": 160 * MiB, "max_model_len": 32768, "max_num_batched_tokens": 2048},
    # Speculative decoding: the drafter's attention layers join the same KV pool. The draft config
    # is the target's config.json with `draft_overrides` applied (an EAGLE head is one Llama layer;
    # the draft model has other KV heads, so its page differs from the target's).
    {"id": "smollm2-eagle-1l", "model": "HuggingFaceTB--SmolLM2-135M-Instruct", "kv_cache_memory_bytes": 256 * MiB,
     "speculative": {"method": "eagle", "num_speculative_tokens": 2, "draft_overrides": {"num_hidden_layers": 1}}},
    {"id": "smollm2-eagle-1l-150mib-fail", "model": "HuggingFaceTB--SmolLM2-135M-Instruct",
     "kv_cache_memory_bytes": 150 * MiB,
     "speculative": {"method": "eagle", "num_speculative_tokens": 2, "draft_overrides": {"num_hidden_layers": 1}}},
    {"id": "smollm2-draft-2l-1kvh", "model": "HuggingFaceTB--SmolLM2-135M-Instruct",
     "kv_cache_memory_bytes": 256 * MiB,
     "speculative": {"method": "draft_model", "num_speculative_tokens": 2,
                     "draft_overrides": {"num_hidden_layers": 2, "num_key_value_heads": 1}}},
]

CAPACITY = re.compile(r"(\w+) KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens per "
                      r"request: ([\d.]+)x")
ESTIMATE = re.compile(r"estimated maximum model length is (\d+)")
NEEDED = re.compile(r"max seq len \((\d+)\), \(([\d.]+) GiB KV cache is needed, which is larger than the "
                    r"available KV cache memory \(([\d.]+) GiB\)")
AUTOFIT = re.compile(r"Auto-fit max_model_len: reduced from (\d+) to (\d+)")
NO_MEMORY = "No available memory for the cache blocks"
SETTINGS = re.compile(r"^KVKB_SETTINGS (.*)$", re.M)
ENGINE_ERROR = re.compile(r"Worker failed with error '([^']+)'")


def run_engine(case: dict) -> None:
    """Child: build the engine and print the settings it resolved. Errors propagate (logged)."""
    from vllm import LLM  # noqa: PLC0415 - only the child needs vLLM

    kwargs = dict(model=case["_dir"], load_format="dummy", skip_tokenizer_init=True, enforce_eager=True,
                  kv_cache_memory_bytes=case["kv_cache_memory_bytes"], max_num_seqs=case.get("max_num_seqs", 8),
                  seed=0)
    for k in ("max_model_len", "block_size", "kv_cache_dtype", "max_num_batched_tokens", "dtype"):
        if k in case:
            kwargs[k] = case[k]
    if "num_layers" in case:
        kwargs["hf_overrides"] = {"num_hidden_layers": case["num_layers"]}
    if "speculative" in case:
        spec = case["speculative"]
        kwargs["speculative_config"] = {"method": spec["method"], "model": case["_draft_dir"],
                                        "num_speculative_tokens": spec["num_speculative_tokens"]}
    llm = LLM(**kwargs)
    cfg = llm.llm_engine.vllm_config
    print("KVKB_SETTINGS " + json.dumps({
        "block_size": cfg.cache_config.block_size,
        "cache_dtype": str(cfg.cache_config.cache_dtype),
        "model_dtype": str(cfg.model_config.dtype).replace("torch.", ""),
        "max_model_len": cfg.model_config.max_model_len,
        "max_num_batched_tokens": cfg.scheduler_config.max_num_batched_tokens,
        "async_scheduling": bool(cfg.scheduler_config.async_scheduling),
        "num_gpu_blocks": cfg.cache_config.num_gpu_blocks,
        "disable_hybrid_kv_cache_manager": bool(cfg.scheduler_config.disable_hybrid_kv_cache_manager),
    }), flush=True)


def write_draft_config(target_config: Path, spec: dict, folder: Path) -> Path:
    """The draft's config.json: the target's with spec["draft_overrides"] applied."""
    cfg = json.loads(target_config.read_text(encoding="utf-8"))
    cfg.update(spec.get("draft_overrides") or {})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg, indent=1), encoding="utf-8")
    return folder


def parse_log(text: str) -> dict:
    out: dict = {}
    if m := CAPACITY.search(text):
        out.update(device=m.group(1), kv_tokens=int(m.group(2).replace(",", "")),
                   logged_max_model_len=int(m.group(3).replace(",", "")), max_concurrency=m.group(4))
    if m := ESTIMATE.search(text):
        out["estimated_max_model_len"] = int(m.group(1))
    if m := NEEDED.search(text):
        out.update(needed_gib=m.group(2), available_gib=m.group(3))
    if m := AUTOFIT.search(text):
        out["autofit_max_model_len"] = int(m.group(2))
    out["no_memory"] = NO_MEMORY in text
    if m := SETTINGS.search(text):
        out["settings"] = json.loads(m.group(1))
    return out


def capture(case: dict, python: str, timeout: int) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="kvkb-fit-"))
    try:
        mdir = tmp / case["model"]
        mdir.mkdir()
        shutil.copy(MODELS / case["model"] / "config.json", mdir / "config.json")
        child = dict(case, _dir=str(mdir))
        if "speculative" in case:
            child["_draft_dir"] = str(write_draft_config(mdir / "config.json", case["speculative"], tmp / "draft"))
        env = dict(os.environ, VLLM_LOGGING_LEVEL="INFO", TOKENIZERS_PARALLELISM="false")
        env.pop("VLLM_CPU_KVCACHE_SPACE", None)
        t0 = time.monotonic()
        proc = subprocess.Popen([python, __file__, "--child", json.dumps(child)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)

        def kill_group() -> None:
            # the engine spawns workers in our new session: end that whole group, nothing else
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout, kill_group)
        timer.start()
        lines = []
        try:
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("KVKB_SETTINGS"):
                    break  # numbers are in; engine shutdown can be slow, so do not wait for it
        finally:
            timer.cancel()
            kill_group()
            proc.wait()
        log = "".join(lines)
        obs = {k: v for k, v in case.items() if not k.startswith("_")}
        obs.update(parse_log(log), seconds=round(time.monotonic() - t0, 1), exit_code=proc.returncode)
        obs["ok"] = "kv_tokens" in obs  # vLLM sized the cache and logged capacity
        obs["engine_started"] = "settings" in obs
        if m := ENGINE_ERROR.search(log):
            obs["engine_error"] = m.group(1)  # e.g. a kernel this CPU lacks, after sizing succeeded
        elif not obs["engine_started"] and "estimated_max_model_len" not in obs and not obs["no_memory"]:
            obs["log_tail"] = log[-3000:]
        return obs
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--only", action="append", help="case id (repeatable)")
    ap.add_argument("--python", default=sys.executable, help="python with vLLM for the engine runs")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        run_engine(json.loads(args.child))
        return 0
    cases = [c for c in CASES if not args.only or c["id"] in args.only]
    if not cases:
        print(f"no such case; ids: {', '.join(c['id'] for c in CASES)}", file=sys.stderr)
        return 2
    version = subprocess.run([args.python, "-c", "import vllm; print(vllm.__version__)"],
                             capture_output=True, text=True).stdout.strip()
    results = []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for case in cases:
        obs = capture(case, args.python, args.timeout)
        print(f"{case['id']}: ok={obs['ok']} tokens={obs.get('kv_tokens')} conc={obs.get('max_concurrency')} "
              f"est={obs.get('estimated_max_model_len')} autofit={obs.get('autofit_max_model_len')} "
              f"({obs['seconds']} s)", file=sys.stderr, flush=True)
        results.append(obs)
        # rewrite after every case: a long capture keeps what it has if stopped
        doc = {"vllm_version": version, "backend": "cpu", "captured_with": "kvkb/fit/capture.py",
               "note": "dummy weights, enforce_eager, skip_tokenizer_init, max_num_seqs 8 unless set",
               "observations": results}
        args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(results)} observations to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
