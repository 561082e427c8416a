"""`kvkb fit`: output, --json keys, exit codes, and clear errors for bad input."""

import json
import subprocess
import sys

import pytest

from kvkb.cli.main import main
from kvkb.fit.sitepage import MODELS_DIR

QWEN05 = str(MODELS_DIR / "Qwen--Qwen2.5-0.5B-Instruct")


def run(capsys, *argv):
    code = main(["fit", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_keys_and_exact_values(capsys):
    code, out, err = run(capsys, QWEN05, "--kv-cache-memory", "1GiB", "--device", "cpu", "--json")
    assert code == 0, err
    d = json.loads(out)
    for key in ("bytes_per_token", "kv_tokens", "max_concurrency", "fits", "max_model_len_that_fits"):
        assert key in d
    # same numbers vLLM 0.32.0 CPU printed for this case (tests/data/fit-observations.json: qwen05-1gib)
    assert d["bytes_per_token"] == 12288 and d["kv_tokens"] == 87296 and d["fits"] is True
    assert d["capacity_line"].endswith("Maximum concurrency for 32,768 tokens per request: 2.66x")


def test_config_json_path_and_text_output(capsys):
    code, out, _ = run(capsys, f"{QWEN05}/config.json", "--kv-cache-memory", "300000000", "--device", "cpu")
    assert code == 1  # does not fit
    assert "Bytes per token   12,288 B" in out
    assert "NO:" in out and "estimated maximum model length is" in out
    assert "--max-model-len" in out


def test_shipped_name_and_estimate_range(capsys):
    code, out, _ = run(capsys, "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory", "80GB", "--max-model-len", "32K")
    assert code == 0
    assert "shipped with kvkb" in out and "activation peak" in out and " - " in out
    assert "max_model_len 32,768" in out


def test_fp8_and_tp_flags(capsys):
    code, out, _ = run(capsys, "meta-llama/Llama-3.1-70B-Instruct", "--kv-cache-memory", "10GiB", "-tp", "4",
                       "--kv-cache-dtype", "fp8", "--json")
    d = json.loads(out)
    assert d["bytes_per_token"] == 80 * 2 * 2 * 128 * 1 and d["tensor_parallel_size"] == 4


def test_num_layers_override(capsys):
    code, out, _ = run(capsys, "meta-llama/Llama-3.1-8B-Instruct", "--num-layers", "2", "--kv-cache-memory",
                       "1536MiB", "--device", "cpu", "--json")
    assert json.loads(out)["bytes_per_token"] == 2 * 2 * 8 * 128 * 2


@pytest.mark.parametrize("argv,needle", [
    (["/no/such/model", "--kv-cache-memory", "1G"], "no such file or folder"),
    ([QWEN05, "--kv-cache-memory", "24gibs"], "unknown unit"),
    ([QWEN05, "--kv-cache-memory", "0"], "more than 0"),
    ([QWEN05, "--kv-cache-memory", "1G", "--kv-cache-dtype", "int8"], "not a vLLM 0.32.0 value"),
    ([QWEN05, "--kv-cache-memory", "1G", "-tp", "3"], "not divisible"),
    ([QWEN05, "--kv-cache-memory", "1G", "--max-model-len", "lots"], "cannot read token count"),
    ([QWEN05, "--device", "cpu"], "--kv-cache-memory"),
    ([QWEN05, "--kv-cache-memory", "1G", "--vllm-version", "next"], "--vllm-version"),
])
def test_bad_input_exits_2_with_message(capsys, argv, needle):
    code, out, err = run(capsys, *argv)
    assert code == 2 and needle in err and "Traceback" not in err


def test_not_a_config(capsys, tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"hello": "world"}))
    code, _, err = run(capsys, str(p), "--kv-cache-memory", "1G")
    assert code == 2 and "not a Hugging Face model config" in err
    p.write_bytes(b"\x89PNG\x00\xff")
    code, _, err = run(capsys, str(p), "--kv-cache-memory", "1G")
    assert code == 2 and "config.json" in err


def test_no_gpu_is_said_plainly(capsys, monkeypatch):
    import kvkb.fit.gpu as gpu

    monkeypatch.setattr(gpu, "detect_gpu_memory", lambda index=0: (None, "no NVIDIA GPU driver found (test)"))
    code, _, err = run(capsys, QWEN05)
    assert code == 2 and "no NVIDIA GPU driver found" in err and "--gpu-memory" in err


def test_detected_gpu_is_used(capsys, monkeypatch):
    import kvkb.fit.gpu as gpu

    monkeypatch.setattr(gpu, "detect_gpu_memory", lambda index=0: (85_520_809_984, "GPU 0: NVIDIA H100, 79.65 GiB"))
    code, out, _ = run(capsys, QWEN05, "--json")
    d = json.loads(out)
    assert code == 0 and d["budget"]["gpu_memory"] == 85_520_809_984
    assert any("NVIDIA H100" in n for n in d["notes"])


def test_console_script_runs():
    p = subprocess.run([sys.executable, "-m", "kvkb.cli.main", "fit", QWEN05, "--kv-cache-memory", "1G",
                        "--json"], capture_output=True, text=True)
    assert p.returncode == 0 and json.loads(p.stdout)["bytes_per_token"] == 12288
