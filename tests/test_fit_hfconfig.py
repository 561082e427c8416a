"""kvkb.fit.hfconfig: reading config.json the way vLLM 0.32.0 does."""

import json

import pytest

from kvkb.fit.hfconfig import ConfigError, load_shape, model_dtype, parse_config
from kvkb.fit.sitepage import MODELS_DIR


def shipped(name):
    return load_shape(MODELS_DIR / name.replace("/", "--", 1))[0]


def test_head_dim_defaults_to_hidden_over_heads():
    s = shipped("Qwen/Qwen2.5-0.5B-Instruct")
    assert (s.num_layers, s.num_kv_heads, s.head_dim) == (24, 2, 64)


def test_explicit_head_dim_wins():
    s = shipped("google/gemma-2-9b-it")  # 3584 / 16 = 224, but the config says 256
    assert s.head_dim == 256


def test_qwen2_sliding_window_ignored_without_use_sliding_window():
    s = shipped("Qwen/Qwen2.5-7B-Instruct")
    assert s.sliding_window is None and s.num_sliding_layers == 0


def test_mistral_every_layer_sliding():
    s = shipped("mistralai/Mistral-7B-Instruct-v0.1")
    assert s.sliding_window == 4096 and s.num_sliding_layers == 32


def test_gemma2_alternates_starting_with_sliding():
    s = shipped("google/gemma-2-9b-it")
    assert s.layer_types[:4] == ("sliding", "full", "sliding", "full")
    assert s.num_sliding_layers == 21


def test_gemma3_five_of_six_from_pattern_or_layer_types():
    explicit = shipped("google/gemma-3-270m-it")  # ships layer_types
    derived = shipped("google/gemma-3-1b-it")  # ships sliding_window_pattern only
    assert [i for i, t in enumerate(explicit.layer_types) if t == "full"] == [5, 11, 17]
    assert [i for i, t in enumerate(derived.layer_types) if t == "full"] == [5, 11, 17, 23]


def test_num_layers_override_keeps_first_layers():
    s = load_shape(MODELS_DIR / "google--gemma-2-9b-it", num_layers=2)[0]
    assert s.num_layers == 2 and s.layer_types == ("sliding", "full")


def test_mla_fields():
    s = shipped("deepseek-ai/DeepSeek-V3")
    assert s.is_mla and s.mla["kv_lora_rank"] == 512 and s.mla["qk_rope_head_dim"] == 64
    assert s.moe["n_routed_experts"] == 256


def test_max_model_len_llama3_and_yarn_not_scaled():
    assert shipped("meta-llama/Llama-3.1-8B-Instruct").max_model_len == 131072
    assert shipped("deepseek-ai/DeepSeek-V3").max_model_len == 163840


def test_max_model_len_linear_rope_scaled():
    cfg = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 128,
           "vocab_size": 100, "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}}
    assert parse_config(cfg).max_model_len == 8192


def test_tokenizer_model_max_length_caps(tmp_path):
    cfg = json.loads((MODELS_DIR / "Qwen--Qwen2.5-0.5B-Instruct" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 8192}))
    assert load_shape(tmp_path)[0].max_model_len == 8192


def test_auto_dtype_downcasts_float32_to_bfloat16():
    assert model_dtype(shipped("google/gemma-2-9b-it")) == "bfloat16"  # config says float32
    assert model_dtype(shipped("Qwen/Qwen2.5-0.5B-Instruct"), "float32") == "float32"


@pytest.mark.parametrize("cfg,needle", [
    ({"foo": 1}, "not a Hugging Face model config"),
    ({"model_type": "llama", "num_attention_heads": 2, "hidden_size": 128, "vocab_size": 10}, "num_hidden_layers"),
    ({"model_type": "llama", "num_hidden_layers": "2", "num_attention_heads": 2, "hidden_size": 128,
      "vocab_size": 10}, "positive integer"),
    ({"model_type": "jamba", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 128,
      "vocab_size": 10, "mamba_d_state": 16}, "state-space"),
    ({"model_type": "qwen3_next", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 128,
      "vocab_size": 10, "layer_types": ["linear_attention", "full_attention"]}, "linear-attention"),
    ({"model_type": "x", "num_hidden_layers": 2, "num_attention_heads": 3, "hidden_size": 128,
      "vocab_size": 10}, "not a multiple"),
])
def test_bad_configs_raise_clear_errors(cfg, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_config(cfg)


def test_read_errors(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_shape(tmp_path / "missing")
    with pytest.raises(ConfigError, match="without a config.json"):
        load_shape(tmp_path)
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_shape(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="top level"):
        load_shape(bad)
