"""bootstrap.py: the entry program runs unmodified as __main__; only the model and machine change.

A fake `vllm` package (FAKE_VLLM, also used by tests/test_verify.py) stands in for vLLM so these
tests run anywhere; it applies vLLM 0.32's start-up KV check to the kwargs it gets.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvkb.reproductions.runner import BOOTSTRAP

FAKE_VLLM = r'''
"""Fake vLLM for kvkb's tests: the KV start-up check of vLLM 0.32 on the CPU backend."""
import json, os, sys
__version__ = "0.32.0"
_KNOWN = {"model", "tokenizer", "load_format", "max_model_len", "kv_cache_memory_bytes",
          "gpu_memory_utilization", "enforce_eager", "max_num_seqs", "disable_log_stats"}


class SamplingParams:
    def __init__(self, max_tokens=16, **kw):
        self.max_tokens = max_tokens


class _Completion:
    def __init__(self, n):
        self.token_ids = list(range(100, 100 + n))
        self.text = ""


class _Output:
    def __init__(self, n):
        self.outputs = [_Completion(n)]


class LLM:
    def __init__(self, model, **kwargs):
        for key in kwargs:
            if key not in _KNOWN:
                raise TypeError(f"EngineArgs.__init__() got an unexpected keyword argument '{key}'")
        print("FAKE-LLM " + json.dumps({"model": model, **kwargs}, sort_keys=True), flush=True)
        cfg = json.load(open(os.path.join(model, "config.json")))
        head = cfg["hidden_size"] // cfg["num_attention_heads"]
        per_token = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head * 2
        max_len = kwargs.get("max_model_len") or cfg["max_position_embeddings"]
        kv = kwargs.get("kv_cache_memory_bytes")
        available = kv - 128 * per_token
        if max_len * per_token > available:
            est = available // per_token // 128 * 128
            raise ValueError(
                f"To serve at least one request with the model's max seq len ({max_len}), "
                f"({round(max_len * per_token / 2**30, 2)} GiB KV cache is needed, which is larger than the "
                f"available KV cache memory ({round(available / 2**30, 2)} GiB). Based on the available memory, "
                f"the estimated maximum model length is {est}. Try increasing `gpu_memory_utilization` (which "
                "also controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing "
                "the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
            )
        tokens = kv // per_token // 128 * 128
        print(f"INFO [kv_cache_utils.py:1300] CPU KV cache size: {tokens:,} tokens, Maximum concurrency for "
              f"{max_len:,} tokens per request: {tokens / max_len:.2f}x", flush=True)

    def generate(self, prompts, params=None):
        return [_Output(params.max_tokens if params else 16) for _ in prompts]
'''


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    pkg = tmp_path / "fakevllm" / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_VLLM)
    monkeypatch.setenv("PYTHONPATH", str(pkg.parent) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return pkg.parent


PROGRAM = '''
import sys
from vllm import LLM, SamplingParams

if __name__ == "__main__":
    print("argv0", sys.argv[0].endswith("prog.py"))
    llm = LLM(model="Qwen/Qwen2.5-0.5B-Instruct", max_model_len=4096{extra})
    out = llm.generate(["The capital of France is"], SamplingParams(max_tokens=5))
    print("text", repr(out[0].outputs[0].text))
'''


def run_bootstrap(tmp_path, program: str, llm_kwargs: dict, models: dict | None = None):
    models = models or {"Qwen/Qwen2.5-0.5B-Instruct": str(Path(BOOTSTRAP).parent / "models/qwen2.5-0.5b-instruct")}
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"models": models, "llm_kwargs": llm_kwargs}))
    prog = tmp_path / "prog.py"
    prog.write_text(program)
    return subprocess.run([sys.executable, str(BOOTSTRAP), str(spec), str(prog)], capture_output=True,
                          text=True, timeout=60)


def fake_call(stdout: str) -> dict:
    line = next(l for l in stdout.splitlines() if l.startswith("FAKE-LLM "))
    return json.loads(line[len("FAKE-LLM "):])


def test_model_swapped_and_machine_defaults_applied(fake_vllm, tmp_path):
    proc = run_bootstrap(tmp_path, PROGRAM.format(extra=""), {"kv_cache_memory_bytes": 64 << 20})
    assert proc.returncode == 0, proc.stderr
    call = fake_call(proc.stdout)
    assert call["model"].endswith("reproductions/models/qwen2.5-0.5b-instruct")
    assert call["load_format"] == "dummy"
    assert call["kv_cache_memory_bytes"] == 64 << 20
    assert call["max_model_len"] == 4096  # the program's own argument, untouched
    assert "argv0 True" in proc.stdout  # ran as __main__ with its own argv[0]
    assert "[kvkb-repro] request 0: generated 5 tokens" in proc.stdout


def test_the_programs_own_keyword_beats_the_machine(fake_vllm, tmp_path):
    proc = run_bootstrap(tmp_path, PROGRAM.format(extra=", kv_cache_memory_bytes=512 << 20"),
                         {"kv_cache_memory_bytes": 64 << 20})
    assert proc.returncode == 0, proc.stderr
    assert fake_call(proc.stdout)["kv_cache_memory_bytes"] == 512 << 20


def test_errors_propagate_with_a_traceback_and_exit_1(fake_vllm, tmp_path):
    program = PROGRAM.format(extra="").replace("max_model_len=4096", "max_model_len=32768")
    proc = run_bootstrap(tmp_path, program, {"kv_cache_memory_bytes": 64 << 20})
    assert proc.returncode == 1
    assert "ValueError: To serve at least one request" in proc.stderr


def test_other_models_are_left_alone(fake_vllm, tmp_path):
    program = PROGRAM.format(extra="").replace("Qwen/Qwen2.5-0.5B-Instruct", "some/other-model")
    proc = run_bootstrap(tmp_path, program, {"kv_cache_memory_bytes": 64 << 20})
    # no swap: the fake cannot find some/other-model/config.json, as vLLM could not offline
    assert "FAKE-LLM" in proc.stdout and '"model": "some/other-model"' in proc.stdout
    assert "load_format" not in fake_call(proc.stdout)
    assert proc.returncode == 1


def test_usage(tmp_path):
    proc = subprocess.run([sys.executable, str(BOOTSTRAP)], capture_output=True, text=True)
    assert proc.returncode == 2 and "usage" in proc.stderr
