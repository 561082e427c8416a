"""The shrunk model directories behind the long-tail reproductions stay usable stand-ins.

Each keeps its real model's token ids (the processor expands <|AUDIO|> into the id
the model's config expects, or vLLM rejects the prompt), a head dim vLLM's CPU attention accepts,
and a tokenizer whose every id is below the model's vocab size; nothing here needs vLLM.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

MODELS = Path(__file__).resolve().parent.parent / "reproductions" / "models"

# model dir -> (config keys naming a special token id, the token text it must be in tokenizer.json)
SPECIAL_IDS = {
    "qwen2-audio-7b-instruct-shrunk": {"audio_token_index": "<|AUDIO|>"},
    "qwen3-next-80b-a3b-instruct-shrunk": {"eos_token_id": "<|im_end|>", "bos_token_id": "<|endoftext|>"},
}


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _text_config(config: dict) -> dict:
    return config.get("text_config", config)


def _head_dim(cfg: dict) -> int:
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


@pytest.mark.parametrize("name", sorted(SPECIAL_IDS))
def test_special_tokens_keep_the_config_ids(name):
    config = _json(MODELS / name / "config.json")
    tok = _json(MODELS / name / "tokenizer.json")
    added = {t["content"]: t["id"] for t in tok["added_tokens"]}
    for key, text in SPECIAL_IDS[name].items():
        want = config.get(key, _text_config(config).get(key))
        assert added.get(text) == want, f"{name}: {text} is {added.get(text)} in tokenizer.json, {key} is {want}"
        assert tok["model"]["vocab"].get(text) == want, f"{name}: {text} missing from the BPE vocab"


@pytest.mark.parametrize("name", sorted(SPECIAL_IDS))
def test_tokenizer_ids_below_vocab_size(name):
    config = _json(MODELS / name / "config.json")
    vocab_size = _text_config(config).get("vocab_size", config.get("vocab_size"))
    ids = list(_json(MODELS / name / "tokenizer.json")["model"]["vocab"].values())
    assert ids and max(ids) < vocab_size


@pytest.mark.parametrize("name", sorted(SPECIAL_IDS))
def test_head_dim_is_one_the_cpu_backend_accepts(name):
    config = _json(MODELS / name / "config.json")
    assert _head_dim(_text_config(config)) == 64
    if "audio_config" in config:
        audio = config["audio_config"]
        assert audio["d_model"] // audio["encoder_attention_heads"] == 64


def test_qwen2_audio_keeps_the_750_token_clip():
    """The reproductions' numbers (750 tokens per 30 s clip) come from these fields."""
    fe = _json(MODELS / "qwen2-audio-7b-instruct-shrunk" / "preprocessor_config.json")
    audio = _json(MODELS / "qwen2-audio-7b-instruct-shrunk" / "config.json")["audio_config"]
    mel_frames = fe["chunk_length"] * fe["sampling_rate"] // fe["hop_length"]
    # Qwen2-Audio: a stride-2 conv, then a stride-2 average pool
    tokens = ((mel_frames - 1) // 2 + 1 - 2) // 2 + 1
    assert mel_frames == 3000 and audio["max_source_positions"] == 1500 and tokens == 750
