"""Ordinary vLLM server output, generated: what surrounds a real error in `docker logs vllm 2>&1`.

Every wording below is one vLLM (0.6.3.post1, 0.10.1.1 or 0.32.0 wheels; file noted beside it) or
its launchers really print. All of it is HEALTHY: no error or exception line, no failed request,
positive KV memory, nonzero blocks, concurrency >= 1. The real healthy V0 INFO lines printed before
every graph capture do carry memory words ("If you are running out of memory ...", "If
out-of-memory error occurs during cudagraph capture"): a matcher must cope with them, so they stay.

Plain functions take a `random.Random` and return lines (no trailing newline); `strategies`
wraps them for hypothesis. Prefixes (Ray, k8s, docker compose, torchrun `[rankN]:`) are
functions line -> line applied to a whole text, as the launcher applies them to every line.
"""

from __future__ import annotations

import random
from typing import Callable

from hypothesis import strategies as st

MODELS = ("Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "mistralai/Mistral-7B-Instruct-v0.3",
          "/models/qwen2.5-72b-awq", "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B")
ARCHS = ("Qwen2ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM")
ROUTES = (("/v1/chat/completions", "POST"), ("/v1/completions", "POST"), ("/v1/models", "GET"), ("/health", "GET"),
          ("/metrics", "GET"), ("/tokenize", "POST"), ("/v1/embeddings", "POST"))
# uvicorn answers these for a healthy server (a 4xx/5xx would be a request that failed)
OK = ("200 OK",)


def _stamp(rng: random.Random) -> str:
    """vLLM's own timestamp: 'MM-DD HH:MM:SS'."""
    return f"{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"


def _pid(rng: random.Random) -> int:
    return rng.randint(100, 4_000_000)


def _v1(proc: str, pid: int, level: str, stamp: str, src: str, msg: str) -> str:
    """V1 format (0.10+): '(EngineCore_DP0 pid=N) INFO 05-05 14:36:28 [file.py:123] msg'."""
    return f"({proc} pid={pid}) {level} {stamp} [{src}] {msg}"


def _v0(level: str, stamp: str, src: str, msg: str) -> str:
    """V0 format (0.6): 'INFO 10-28 11:16:34 metrics.py:349] msg' (no bracket before the file)."""
    return f"{level} {stamp} {src}] {msg}"


# --- serving noise ---------------------------------------------------------------------------------


def access_line(rng: random.Random, api_pid: int | None = None) -> str:
    """uvicorn's access log, as vLLM's API server prints it (bare before ~0.10, then with the process tag)."""
    path, method = rng.choice(ROUTES)
    ip = rng.choice(("127.0.0.1", f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}", "172.17.0.1"))
    line = f'INFO:     {ip}:{rng.randint(1024, 65535)} - "{method} {path} HTTP/1.1" {rng.choice(OK)}'
    return f"(APIServer pid={api_pid}) {line}" if api_pid else line


def stats_line_v1(rng: random.Random, api_pid: int | None = None, level: str = "INFO") -> str:
    """v1/metrics/loggers.py (0.10.1.1): 'Engine 000: Avg prompt throughput: ...' (DEBUG when idle in 0.32)."""
    msg = (f"Engine {rng.randint(0, 3):03d}: Avg prompt throughput: {rng.uniform(0, 9000):.1f} tokens/s, "
           f"Avg generation throughput: {rng.uniform(0, 3000):.1f} tokens/s, Running: {rng.randint(0, 256)} reqs, "
           f"Waiting: {rng.randint(0, 40)} reqs, GPU KV cache usage: {rng.uniform(0, 95):.1f}%, "
           f"Prefix cache hit rate: {rng.uniform(0, 100):.1f}%")
    return _v1("APIServer", api_pid or _pid(rng), level, _stamp(rng), f"loggers.py:{rng.choice((123, 127, 257))}", msg)


def stats_line_v0(rng: random.Random) -> str:
    """engine/metrics.py (0.6.3.post1)."""
    msg = (f"Avg prompt throughput: {rng.uniform(0, 9000):.1f} tokens/s, Avg generation throughput: {rng.uniform(0, 3000):.1f} tokens/s, "
           f"Running: {rng.randint(0, 256)} reqs, Swapped: 0 reqs, Pending: {rng.randint(0, 40)} reqs, "
           f"GPU KV cache usage: {rng.uniform(0, 95):.1f}%, CPU KV cache usage: 0.0%.")
    return _v0("INFO", _stamp(rng), "metrics.py:351", msg)


# DEBUG messages from 0.32.0 (v1/engine/core.py, v1/engine/async_llm.py, distributed/device_communicators/shm_broadcast.py)
_DEBUG = (("core.py:1584", "EngineCore waiting for work."), ("core.py:1596", "EngineCore loop active."),
          ("async_llm.py:1090", "Called check_health."), ("shm_broadcast.py:215", "Poller received notify event"),
          ("shm_broadcast.py:220", "Poller timed out"))


def debug_line(rng: random.Random, pid: int | None = None) -> str:
    src, msg = rng.choice(_DEBUG)
    proc = "APIServer" if src.startswith("async_llm") else "EngineCore_DP0"
    return _v1(proc, pid or _pid(rng), "DEBUG", _stamp(rng), src, msg)


def hydra_line(rng: random.Random) -> str:
    """A vLLM INFO record re-formatted by Hydra's default job logging: '[time][logger][LEVEL] - msg'."""
    msg = rng.choice(("Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 41.3 tokens/s, Running: 1 reqs, "
                      "Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 2.4%, CPU KV cache usage: 0.0%.",
                      f"Starting to load model {rng.choice(MODELS)}...", "Using max model len 8192"))
    return (f"[2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
            f"{rng.randint(0, 59):02d},{rng.randint(0, 999):03d}][vllm.engine.metrics][INFO] - {msg}")


def tqdm_bar(rng: random.Random) -> list[str]:
    """Progress bars vLLM draws at start-up, one line per refresh as `docker logs` keeps them."""
    kind = rng.randrange(3)
    if kind == 0:  # model_loader/weight_utils.py _BAR_FORMAT
        total = rng.randint(2, 30)
        out = []
        for n in sorted({0, total, *(rng.randint(1, total) for _ in range(3))}):
            rate = "?it/s" if n == 0 else f"{rng.uniform(0.5, 3):.2f}s/it"
            left = "?" if n == 0 else f"00:{(total - n) * 2 % 60:02d}"
            out.append(f"Loading safetensors checkpoint shards: {100 * n // total:3d}% Completed | {n}/{total} "
                       f"[00:{n * 2 % 60:02d}<{left}, {rate}]")
        return out
    if kind == 1:  # v1/worker/gpu_model_runner.py desc="Capturing CUDA graphs ({}, {})"
        total = rng.choice((35, 51, 67))
        mode = rng.choice(("mixed prefill-decode, PIECEWISE", "decode, FULL"))
        return [f"Capturing CUDA graphs ({mode}): {100 * n // total:3d}%|{'█' * (10 * n // total):<10}| {n}/{total} "
                f"[00:0{n % 10}<00:00, {rng.uniform(10, 40):.2f}it/s]" for n in (0, total // 2, total)]
    # vllm.LLM.generate's own bar (entrypoints/llm.py)
    total = rng.randint(1, 500)
    return [f"Processed prompts: 100%|██████████| {total}/{total} [00:{rng.randint(1, 59):02d}<00:00, "
            f"{rng.uniform(1, 90):.2f}it/s, est. speed input: {rng.uniform(100, 9000):.2f} toks/s, "
            f"output: {rng.uniform(10, 3000):.2f} toks/s]"]


def serving_noise(rng: random.Random, n: int, api_pid: int | None = None) -> list[str]:
    """n lines (give or take a bar) of a busy, healthy server: access, stats, DEBUG, Hydra records."""
    out: list[str] = []
    api_pid = api_pid or _pid(rng)
    makers = (
        (6, lambda: [access_line(rng, api_pid if rng.random() < 0.7 else None)]),
        (3, lambda: [stats_line_v1(rng, api_pid)]),
        (1, lambda: [stats_line_v1(rng, api_pid, level="DEBUG")]),
        (2, lambda: [stats_line_v0(rng)]),
        (2, lambda: [debug_line(rng)]),
        (1, lambda: [hydra_line(rng)]),
        (1, lambda: tqdm_bar(rng)[-1:]),
    )
    weights = [w for w, _ in makers]
    while len(out) < n:
        out.extend(rng.choices([m for _, m in makers], weights)[0]())
    return out[:n]


# --- a healthy start-up ----------------------------------------------------------------------------


def startup_v1(rng: random.Random, complete: bool = True, version: str = "0.10.1.1") -> list[str]:
    """A V1 server coming up: 0.10.1.1 wordings (api_server.py, core.py, gpu_model_runner.py, gpu_worker.py,
    kv_cache_utils.py, launcher.py), the uvicorn lines after them. complete=False stops where weights are
    loaded (a crash loop's later lines are the error's own)."""
    api, core = _pid(rng), _pid(rng)
    model, arch = rng.choice(MODELS), rng.choice(ARCHS)
    max_len = rng.choice((4096, 8192, 16384, 32768))
    weights = rng.uniform(1.0, 40.0)
    kv_gib = rng.uniform(2.0, 60.0)
    tokens = int(kv_gib * rng.uniform(9000, 20000)) // 16 * 16
    s = lambda: _stamp(rng)  # noqa: E731
    A = lambda src, msg, level="INFO": _v1("APIServer", api, level, s(), src, msg)  # noqa: E731
    E = lambda src, msg: _v1("EngineCore_DP0", core, "INFO", s(), src, msg)  # noqa: E731
    out = [
        A("api_server.py:1805", f"vLLM API server version {version}"),
        A("utils.py:326", f"non-default args: {{'model': '{model}', 'max_model_len': {max_len}, 'gpu_memory_utilization': 0.9}}"),
        A("__init__.py:711", f"Resolved architecture: {arch}"),
        A("__init__.py:1750", f"Using max model len {max_len}"),
        E("core.py:74", f"Initializing a V1 LLM engine (v{version}) with config: model='{model}', speculative_config=None, "
                        f"tokenizer='{model}', dtype=torch.bfloat16, max_seq_len={max_len}, tensor_parallel_size=1, "
                        "enforce_eager=False, kv_cache_dtype=auto, seed=0, enable_prefix_caching=True"),
        E("gpu_model_runner.py:1953", f"Starting to load model {model}..."),
        *tqdm_bar_shards(rng),
        E("default_loader.py:263", f"Loading weights took {rng.uniform(1, 60):.2f} seconds"),
        E("gpu_model_runner.py:2007", f"Model loading took {weights:.4f} GiB and {rng.uniform(2, 90):.6f} seconds"),
    ]
    if not complete:
        return out
    out += [
        E("gpu_worker.py:276", f"Available KV cache memory: {kv_gib:.2f} GiB"),
        E("kv_cache_utils.py:849", f"GPU KV cache size: {tokens:,} tokens"),
        E("kv_cache_utils.py:853", f"Maximum concurrency for {max_len:,} tokens per request: {max(tokens / max_len, 1.0):.2f}x"),
        *[f"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): {p:3d}%|{'█' * (p // 10):<10}| {p * 67 // 100}/67 "
          f"[00:0{p // 20}<00:00, 19.81it/s]" for p in (0, 52, 100)],
        E("gpu_model_runner.py:2708", f"Graph capturing finished in {rng.randint(3, 40)} secs, took {rng.uniform(0.1, 2):.2f} GiB"),
        E("core.py:214", f"init engine (profile, create kv cache, warmup model) took {rng.uniform(20, 300):.2f} seconds"),
        A("api_server.py:1880", "Starting vLLM API server 0 on http://0.0.0.0:8000"),
        A("launcher.py:36", "Available routes are:"),
        *[A("launcher.py:44", f"Route: {p}, Methods: {m}") for p, m in ROUTES[: rng.randint(2, len(ROUTES))]],
        f"(APIServer pid={api}) INFO:     Started server process [{api}]",
        f"(APIServer pid={api}) INFO:     Waiting for application startup.",
        f"(APIServer pid={api}) INFO:     Application startup complete.",
    ]
    return out


def startup_v0(rng: random.Random, complete: bool = True, era: str | None = None) -> list[str]:
    """A V0 server: 0.6.3.post1 wordings (openai/api_server.py, llm_engine.py, model_runner.py, gpu_executor.py)
    or 0.10.1.1's V0 engine (worker.py's profiling summary, executor_base.py's '# cuda blocks')."""
    era = era or rng.choice(("0.6.3.post1", "0.10.1.1"))
    old = era.startswith("0.6")
    model = rng.choice(MODELS)
    max_len = rng.choice((4096, 8192, 32768))
    blocks = rng.randint(2000, 60000)
    total = rng.choice((23.64, 39.38, 79.10))
    util = rng.choice((0.85, 0.9, 0.95))
    weights = rng.uniform(1.0, total * util * 0.6)
    act = rng.uniform(0.2, 2.0)
    kv = total * util - weights - act - 0.25
    s = lambda: _stamp(rng)  # noqa: E731
    out = [
        _v0("INFO", s(), "api_server.py:528" if old else "api_server.py:1805", f"vLLM API server version {era}"),
        _v0("INFO", s(), "llm_engine.py:237" if old else "llm_engine.py:223",
            f"{'Initializing an LLM engine' if old else 'Initializing a V0 LLM engine'} (v{era}) with config: model='{model}', "
            f"speculative_config=None, tokenizer='{model}', max_seq_len={max_len}, tensor_parallel_size=1, "
            "enforce_eager=False, kv_cache_dtype=auto, seed=0"),
        _v0("INFO", s(), "model_runner.py:1056" if old else "model_runner.py:1080", f"Starting to load model {model}..."),
        *tqdm_bar_shards(rng),
        _v0("INFO", s(), "model_runner.py:1067", f"Loading model weights took {weights:.4f} GB") if old else
        _v0("INFO", s(), "model_runner.py:1112", f"Model loading took {weights:.4f} GiB and {rng.uniform(2, 90):.6f} seconds"),
    ]
    if not complete:
        return out
    if old:
        out += [
            _v0("INFO", s(), "gpu_executor.py:122", f"# GPU blocks: {blocks}, # CPU blocks: {rng.randint(512, 8192)}"),
            _v0("INFO", s(), "gpu_executor.py:126", f"Maximum concurrency for {max_len} tokens per request: {max(blocks * 16 / max_len, 1.0):.2f}x"),
            _v0("INFO", s(), "model_runner.py:1395", "Capturing the model for CUDA graphs. This may lead to unexpected consequences if "
                                                      "the model is not static. To run the model in eager mode, set 'enforce_eager=True' "
                                                      "or use '--enforce-eager' in the CLI."),
            _v0("INFO", s(), "model_runner.py:1399", "CUDA graphs can take additional 1~3 GiB memory per GPU. If you are running out "
                                                      "of memory, consider decreasing `gpu_memory_utilization` or enforcing eager mode. "
                                                      "You can also reduce the `max_num_seqs` as needed to decrease memory usage."),
            _v0("INFO", s(), "model_runner.py:1523", f"Graph capturing finished in {rng.randint(5, 40)} secs."),
        ]
    else:
        out += [
            # one logger.info call whose message holds two newlines
            _v0("INFO", s(), "worker.py:295", f"Memory profiling takes {rng.uniform(1, 9):.2f} seconds"),
            f"the current vLLM instance can use total_gpu_memory ({total:.2f}GiB) x gpu_memory_utilization ({util:.2f}) = {total * util:.2f}GiB",
            f"model weights take {weights:.2f}GiB; non_torch_memory takes 0.25GiB; PyTorch activation peak memory takes {act:.2f}GiB; "
            f"the rest of the memory reserved for KV Cache is {kv:.2f}GiB.",
            _v0("INFO", s(), "executor_base.py:114", f"# cuda blocks: {blocks}, # CPU blocks: {rng.randint(512, 8192)}"),
            _v0("INFO", s(), "executor_base.py:119", f"Maximum concurrency for {max_len} tokens per request: {max(blocks * 16 / max_len, 1.0):.2f}x"),
            _v0("INFO", s(), "model_runner.py:1383", "Capturing cudagraphs for decoding. This may lead to unexpected consequences if the "
                                                      "model is not static. To run the model in eager mode, set 'enforce_eager=True' or use "
                                                      "'--enforce-eager' in the CLI. If out-of-memory error occurs during cudagraph capture, "
                                                      "consider decreasing `gpu_memory_utilization` or switching to eager mode. You can also "
                                                      "reduce the `max_num_seqs` as needed to decrease memory usage."),
            _v0("INFO", s(), "model_runner.py:1535", f"Graph capturing finished in {rng.randint(5, 40)} secs, took {rng.uniform(0.1, 2):.2f} GiB"),
            _v0("INFO", s(), "llm_engine.py:417", f"init engine (profile, create kv cache, warmup model) took {rng.uniform(20, 300):.2f} seconds"),
        ]
    out += [
        _v0("INFO", s(), "launcher.py:19", "Available routes are:"),
        *[_v0("INFO", s(), "launcher.py:27", f"Route: {p}, Methods: {m}") for p, m in ROUTES[:3]],
        f"INFO:     Started server process [{_pid(rng)}]",
        "INFO:     Waiting for application startup.",
        "INFO:     Application startup complete.",
        "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
    ]
    return out


def tqdm_bar_shards(rng: random.Random) -> list[str]:
    total = rng.randint(1, 8)
    return [f"Loading safetensors checkpoint shards: {100 * n // total:3d}% Completed | {n}/{total} "
            f"[00:{n * 3:02d}<{'?' if n == 0 else '00:0' + str(total - n)}, {'?it/s' if n == 0 else '1.20s/it'}]"
            for n in range(total + 1)]


def startup(rng: random.Random, complete: bool = True) -> list[str]:
    return startup_v1(rng, complete) if rng.random() < 0.6 else startup_v0(rng, complete)


# --- launcher prefixes -----------------------------------------------------------------------------


def ray_prefix(rng: random.Random) -> Callable[[str], str]:
    tag = f"({rng.choice(('RayWorkerWrapper', 'WorkerDict', 'main_task'))} pid={_pid(rng)}"
    tag += f", ip=10.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}) " if rng.random() < 0.5 else ") "
    return lambda line: tag + line


def k8s_prefix(rng: random.Random) -> Callable[[str], str]:
    """CRI log format (`kubectl logs` of a node's files): RFC 3339 nanoseconds, stream, F(ull) tag."""
    day = rng.randint(1, 28)

    def pre(line: str) -> str:
        t = f"2025-01-{day:02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999_999_999):09d}Z"
        return f"{t} {rng.choice(('stdout', 'stderr'))} F {line}"

    return pre


def compose_prefix(rng: random.Random) -> Callable[[str], str]:
    name = rng.choice(("vllm-1", "vllm_1", "vllm-openai-1"))
    return lambda line: f"{name}  | {line}"


def rank_prefix(rng: random.Random) -> Callable[[str], str]:
    """torchrun / torch.distributed.elastic: '[rank0]: ' on each stderr line of a rank."""
    tag = f"[rank{rng.randint(0, 7)}]: "
    return lambda line: tag + line


PREFIXES = {"ray": ray_prefix, "k8s": k8s_prefix, "compose": compose_prefix, "rank": rank_prefix}


def apply_prefix(lines: list[str], pre: Callable[[str], str] | None) -> list[str]:
    return [pre(ln) for ln in lines] if pre else list(lines)


# --- putting a paste into a log --------------------------------------------------------------------


def lead_in(rng: random.Random, phase: str | None, before: int, earlier_startup: bool = False) -> list[str]:
    """What a log holds in front of an error of this phase: a start-up error follows a start-up that got
    that far (after whatever ran before: an earlier healthy run, serving noise); a serving error
    follows a complete start-up and traffic. phase None: noise only (no claim about the stage)."""
    head: list[str] = []
    if earlier_startup:
        head += startup(rng) + serving_noise(rng, 20)
    if phase == "serving" and not earlier_startup:
        head += startup(rng)
    head += serving_noise(rng, before)
    if phase == "startup":
        head += startup(rng, complete=False)
    return head


def bury(paste: str, rng: random.Random, before: int, after: int, prefix: str | None = None,
         earlier_startup: bool = False, phase: str | None = None) -> tuple[str, int]:
    """(log, number of lines in front of the paste): noise (see lead_in), the paste, noise; the
    launcher prefix (if any) on every line of it, the paste included."""
    head = lead_in(rng, phase, before, earlier_startup)
    tail = serving_noise(rng, after)
    body = paste.rstrip("\n").split("\n")
    pre = PREFIXES[prefix](rng) if prefix else None
    lines = apply_prefix(head, pre) + apply_prefix(body, pre) + apply_prefix(tail, pre)
    return "\n".join(lines) + "\n", len(head)


def crash_loop(paste: str, rng: random.Random, startups: int, prefix: str | None = None,
               phase: str | None = "startup") -> tuple[str, int]:
    """(log, 1-based line where its last start-up begins): a restarting container's log, `startups`
    times a start-up (cut after weight loading for a start-up error; complete, then traffic, for a
    serving error), then the same error."""
    body = paste.rstrip("\n").split("\n")
    lines: list[str] = []
    last = 1
    for _ in range(startups):
        last = len(lines) + 1
        if phase == "serving":
            lines += startup(rng) + serving_noise(rng, rng.randint(0, 30))
        else:
            lines += startup(rng, complete=False)
        lines += body
    pre = PREFIXES[prefix](rng) if prefix else None
    return "\n".join(apply_prefix(lines, pre)) + "\n", last


def big_log(paste: str, total_lines: int = 20_000, seed: int = 0, phase: str | None = None) -> str:
    """The paste buried in the middle of `total_lines` lines of a long-running healthy server."""
    rng = random.Random(seed)
    lines = startup(rng) + serving_noise(rng, total_lines // 2)
    if phase == "startup":  # the server was restarted and failed while coming up
        lines += startup(rng, complete=False)
    lines += paste.rstrip("\n").split("\n")
    lines += serving_noise(rng, max(0, total_lines - len(lines)))
    return "\n".join(lines) + "\n"


# --- hypothesis strategies -------------------------------------------------------------------------

prefixes = st.sampled_from([None, *PREFIXES])
burials = st.fixed_dictionaries({
    "seed": st.integers(0, 2**32 - 1),
    "before": st.integers(0, 300),
    "after": st.integers(0, 300),
    "prefix": prefixes,
    "earlier_startup": st.booleans(),
})
crash_loops = st.fixed_dictionaries({"seed": st.integers(0, 2**32 - 1), "startups": st.integers(2, 5), "prefix": prefixes})
noise_lines = st.builds(lambda seed, n: serving_noise(random.Random(seed), n), st.integers(0, 2**32 - 1), st.integers(1, 400))
startups = st.builds(lambda seed, full: startup(random.Random(seed), full), st.integers(0, 2**32 - 1), st.booleans())
