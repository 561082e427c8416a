"""vLLM version strings as tuples. Its own module so budget and capacity both import it one way
(capacity -> budget -> versions), with no import cycle between them."""

from __future__ import annotations

from kvkb.fit.kvspec import FitError

# The release from which vLLM charges its estimated CUDA-graph pool to the KV budget by default:
# 0.20.0 defaults VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS to "1" (envs.py:1725; 0.19.1 has "0") and
# subtracts the estimate (v1/worker/gpu_worker.py:399-424), although its log says "default since v0.21.0".
CUDAGRAPH_CHARGED_FROM = (0, 20, 0)
# The release from which the KV-capacity check and auto-fit hold back BlockPool's null block first
# ("Reserve the null block" in v1/core/kv_cache_utils.py, absent in 0.28.0).
NULL_BLOCK_RESERVED_FROM = (0, 29, 0)


def release_name(release: tuple[int, ...]) -> str:
    """(0, 20, 0) -> '0.20', (0, 20, 1) -> '0.20.1': how the site and the CLI name a release."""
    return ".".join(map(str, release[:2] if release[2:] == (0,) else release))


def version_tuple(v: str) -> tuple[int, ...]:
    parts = []
    for p in str(v).lstrip("v").split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        if not digits:
            raise FitError(f"cannot read --vllm-version {v!r} (expected e.g. 0.32.0)")
        parts.append(int(digits))
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)
