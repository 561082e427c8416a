"""kvkb/fit/capture.py: log parsing (pure) and, with vLLM available, a live capture checked against fit()."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from kvkb.fit.capacity import fit
from kvkb.fit.capture import CASES, parse_log
from kvkb.fit.hfconfig import load_shape
from kvkb.fit.sitepage import MODELS_DIR

CAPTURE = Path(__file__).resolve().parent.parent / "kvkb" / "fit" / "capture.py"


def test_parse_capacity_and_error_lines():
    log = ("INFO [kv_cache_utils.py:2330] CPU KV cache size: 87,296 tokens, Maximum concurrency for 32,768 tokens "
           "per request: 2.66x\n")
    assert parse_log(log)["kv_tokens"] == 87296 and parse_log(log)["max_concurrency"] == "2.66"
    err = ("ValueError: To serve at least one request with the model's max seq len (32768), (0.38 GiB KV cache is "
           "needed, which is larger than the available KV cache memory (0.28 GiB). Based on the available memory, "
           "the estimated maximum model length is 23808. Try increasing")
    got = parse_log(err)
    assert got["estimated_max_model_len"] == 23808 and got["needed_gib"] == "0.38" and "kv_tokens" not in got
    assert parse_log("Auto-fit max_model_len: reduced from 32768 to 8064 to fit")["autofit_max_model_len"] == 8064


def test_cases_use_shipped_configs():
    for case in CASES:
        assert (MODELS_DIR / case["model"] / "config.json").is_file(), case["id"]


def _vllm_python():
    py = os.environ.get("KVKB_VLLM_PYTHON")
    if not py or not Path(py).exists():
        pytest.skip("KVKB_VLLM_PYTHON (a python with vLLM) is unset or missing")
    return py


@pytest.mark.vllm
@pytest.mark.slow
def test_live_capture_matches_fit(tmp_path):
    py = _vllm_python()
    out = tmp_path / "obs.json"
    p = subprocess.run([py, str(CAPTURE), "--only", "smollm2-256mib-bs32", "--out", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    (o,) = json.loads(out.read_text())["observations"]
    assert o["ok"], o.get("log_tail")
    shape = load_shape(MODELS_DIR / o["model"])[0]
    r = fit(shape, device="cpu", kv_cache_memory=o["kv_cache_memory_bytes"], block_size=o["block_size"],
            max_num_batched_tokens=o["settings"]["max_num_batched_tokens"])
    assert (r.kv_tokens, f"{r.max_concurrency:.2f}") == (o["kv_tokens"], o["max_concurrency"])
