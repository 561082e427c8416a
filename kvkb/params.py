"""Values kbmatch derives from a user's numbers to fill fix templates (beyond raw placeholders).

Entries may use these names in fix cli/python/env; kvkb.matcher.fill computes each one (a test
checks every name here has an implementation). Lint rejects any other unknown placeholder.
"""

DERIVED: dict[str, str] = {
    "max_model_len_fit": "largest max_model_len that fits the KV memory the error reports",
    "gpu_memory_utilization_fit": "gpu_memory_utilization that would fit max_model_len (needs the total memory in the log)",
    "gpu_memory_utilization_free": "gpu_memory_utilization that fits in the free memory reported at startup",
    "kv_cache_space_gib": "VLLM_CPU_KVCACHE_SPACE in whole GiB that holds one max_model_len request",
    "max_num_batched_tokens_fit": "max_num_batched_tokens that is at least max_model_len",
}
