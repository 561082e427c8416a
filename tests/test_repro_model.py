"""The stand-in model directory: Qwen2.5-0.5B-Instruct's real config and a tiny tokenizer."""

import json
import os
import subprocess
from pathlib import Path

import pytest

MODEL = Path(__file__).resolve().parent.parent / "reproductions" / "models" / "qwen2.5-0.5b-instruct"


def test_config_is_qwen2_5_0_5b():
    cfg = json.loads((MODEL / "config.json").read_text())
    assert cfg["architectures"] == ["Qwen2ForCausalLM"]
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (896, 24, 14, 2)
    assert cfg["max_position_embeddings"] == 32768 and cfg["vocab_size"] == 151936
    # head_dim 64: the CPU attention backend rejects 16
    assert cfg["hidden_size"] // cfg["num_attention_heads"] == 64


def test_tokenizer_ids_stay_below_the_models_vocab():
    cfg = json.loads((MODEL / "config.json").read_text())
    tok = json.loads((MODEL / "tokenizer.json").read_text())
    ids = list(tok["model"]["vocab"].values()) + [t["id"] for t in tok["added_tokens"]]
    assert ids and max(ids) < cfg["vocab_size"]
    assert len(tok["model"]["vocab"]) <= 1024  # tiny: kept in git
    config = json.loads((MODEL / "tokenizer_config.json").read_text())
    assert config["eos_token"] in {t["content"] for t in tok["added_tokens"]}


@pytest.mark.vllm
def test_tokenizer_rebuild_is_deterministic(tmp_path):
    python = os.environ.get("KVKB_VLLM_PYTHON")
    if not python or not Path(python).exists():
        pytest.skip("KVKB_VLLM_PYTHON not set (needs the `tokenizers` library of the vLLM venv)")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text((MODEL / "config.json").read_text())
    subprocess.run([python, str(MODEL.parent / "build_tokenizer.py"), str(tmp_path / "m")], check=True,
                   capture_output=True)
    assert (tmp_path / "m" / "tokenizer.json").read_bytes() == (MODEL / "tokenizer.json").read_bytes()
