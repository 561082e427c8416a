"""Values kbmatch derives from a user's numbers to fill fix templates (beyond raw placeholders).

Entries may use these names in fix cli/python/env; kvkb.matcher.fill computes each one (a test
checks every name here has an implementation). Lint rejects any other unknown placeholder.

INPUTS lists the signature placeholder names fill.py reads to compute them: name a template's
placeholders this way and the derived values work for that signature too. The same quantities
are also read from other lines of the paste (e.g. `Free memory on device (x/TOTAL GiB)`), so a
derived value may be filled even when the matched line itself lacks the number.
"""

DERIVED: dict[str, str] = {
    "max_model_len_fit": "largest max_model_len that fits the KV memory the error reports",
    "gpu_memory_utilization_fit": "gpu_memory_utilization that would fit max_model_len (needs the total memory in the log)",
    "gpu_memory_utilization_free": "gpu_memory_utilization that fits in the free memory reported at startup",
    "kv_cache_space_gib": "VLLM_CPU_KVCACHE_SPACE in whole GiB that holds one max_model_len request",
    "max_num_batched_tokens_fit": "max_num_batched_tokens that is at least max_model_len",
}

INPUTS: dict[str, str] = {
    "max_model_len": "the max_model_len vLLM checked (tokens)",
    "estimated_max_len": "V1: 'the estimated maximum model length is N'",
    "kv_tokens": "V0: 'maximum number of tokens that can be stored in KV cache (N)'",
    "needed_gib": "V1: KV memory one max_model_len request needs (GiB; needed_gb for the GB wording)",
    "available_gib": "V1: KV memory available (GiB; available_gb for the GB wording)",
    "free_gib": "free device memory at startup (GiB)",
    "total_gib": "total device memory (GiB)",
    "gpu_memory_utilization": "the gpu_memory_utilization in effect",
    "requested_gib": "memory requested by gpu_memory_utilization (GiB)",
    "max_num_batched_tokens": "the max_num_batched_tokens in effect",
}
