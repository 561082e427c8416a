"""kvkb fit with speculative decoding: the drafter's KV layers share the target's pool.

The observations are real vLLM 0.32.0 CPU runs (kvkb/fit/capture.py, SmolLM2-135M target with dummy
weights): an EAGLE head (1 Llama layer, the target's KV shape) and a 2-layer draft model with 1 KV
head instead of 3 (another page size, so vLLM's one-group UniformTypeKVCacheSpecs path).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kvkb.cli.main import main
from kvkb.fit.capacity import fit, kv_groups
from kvkb.fit.hfconfig import parse_config
from kvkb.fit.kvspec import FitError, kv_layout

ROOT = Path(__file__).resolve().parents[1]
OBS = json.loads((ROOT / "tests" / "data" / "fit-observations-spec-decode.json").read_text())
MODELS = ROOT / "kvkb" / "fit" / "models"
SMOL_DIR = MODELS / "HuggingFaceTB--SmolLM2-135M-Instruct"
SMOL = json.loads((SMOL_DIR / "config.json").read_text())
MiB = 1 << 20


def test_observations_are_real_spec_decode_runs():
    assert OBS["vllm_version"] == "0.32.0" and OBS["backend"] == "cpu"
    ids = {o["id"] for o in OBS["observations"]}
    assert {"smollm2-eagle-1l", "smollm2-eagle-1l-150mib-fail", "smollm2-draft-2l-1kvh"} <= ids
    assert all("speculative" in o for o in OBS["observations"])


@pytest.mark.parametrize("o", OBS["observations"], ids=lambda o: o["id"])
def test_predicts_what_vllm_printed_with_a_drafter(o):
    draft = dict(SMOL, **o["speculative"]["draft_overrides"])
    r = fit(SMOL, kv_cache_memory=o["kv_cache_memory_bytes"], device="cpu", max_num_seqs=8, draft_config=draft)
    if "kv_tokens" in o:
        assert r.kv_tokens == o["kv_tokens"]
        assert f"{r.max_concurrency:.2f}" == o["max_concurrency"]
        assert r.num_blocks == o["settings"]["num_gpu_blocks"]
        # without the drafter the same memory holds more: the drafter really costs capacity
        assert r.kv_tokens_without_draft > r.kv_tokens
    else:
        assert r.fits is False
        assert r.vllm_estimated_max_model_len == o["estimated_max_model_len"]
        assert f"({o['needed_gib']} GiB KV cache is needed" in r.error_line
        assert f"available KV cache memory ({o['available_gib']} GiB)" in r.error_line


def test_without_the_drafter_the_same_runs_would_be_wrong():
    # the point of the option: ignoring the drafter overstates capacity
    o = next(o for o in OBS["observations"] if o["id"] == "smollm2-eagle-1l")
    plain = fit(SMOL, kv_cache_memory=o["kv_cache_memory_bytes"], device="cpu", max_num_seqs=8)
    assert plain.kv_tokens != o["kv_tokens"]
    fail = next(o for o in OBS["observations"] if o["id"] == "smollm2-eagle-1l-150mib-fail")
    plain = fit(SMOL, kv_cache_memory=fail["kv_cache_memory_bytes"], device="cpu", max_num_seqs=8)
    assert plain.vllm_estimated_max_model_len != fail["estimated_max_model_len"]


def test_draft_layers_alone_copy_the_targets_layer():
    by_config = fit(SMOL, kv_cache_memory=256 * MiB, device="cpu", draft_config=dict(SMOL, num_hidden_layers=1))
    by_count = fit(SMOL, kv_cache_memory=256 * MiB, device="cpu", draft_layers=1)
    assert by_count.kv_tokens == by_config.kv_tokens == 11264
    assert by_count.draft["source"] == "layers" and by_config.draft["source"] == "config"
    assert by_count.draft_bytes_per_token == 768  # 2 x 3 heads x 64 x 2 B
    # bytes_per_token stays the target's; the block carries both
    assert by_count.bytes_per_token == 23040
    assert by_count.bytes_per_block == (23040 + 768) * 128


def test_other_heads_make_one_group_with_summed_pages():
    target = parse_config(SMOL)
    draft = parse_config(dict(SMOL, num_hidden_layers=2, num_key_value_heads=1))
    layout = kv_layout(target)
    both = type(layout)(layout.layers + kv_layout(draft).layers, layout.kv_dtype, 3, False, "")
    groups = kv_groups(both, 128)
    assert len(groups) == 1
    assert groups[0].num_layers == 32
    assert groups[0].bytes_per_block == 30 * 768 * 128 + 2 * 256 * 128  # sum of the layers' pages


def test_draft_config_with_draft_layers_overrides_its_count():
    r = fit(SMOL, kv_cache_memory=256 * MiB, device="cpu", draft_config=dict(SMOL, num_hidden_layers=4),
            draft_layers=1)
    assert r.draft["num_layers"] == 1 and r.kv_tokens == 11264


def test_draft_runs_in_the_targets_dtype():
    # a float32 draft config still gets the target's bfloat16 KV (config/speculative.py:1301)
    r = fit(SMOL, kv_cache_memory=256 * MiB, device="cpu",
            draft_config=dict(SMOL, num_hidden_layers=1, torch_dtype="float32"))
    assert r.draft_bytes_per_token == 768


def test_draft_tensor_parallel():
    llama = json.loads((MODELS / "meta-llama--Llama-3.1-8B-Instruct" / "config.json").read_text())
    same = fit(llama, kv_cache_memory=10 << 30, tensor_parallel_size=2, draft_layers=1)
    assert same.draft["kv_heads_per_rank"] == 4
    one = fit(llama, kv_cache_memory=10 << 30, tensor_parallel_size=2,
              draft_config=dict(llama, num_hidden_layers=1), draft_tensor_parallel_size=1)
    assert one.draft["kv_heads_per_rank"] == 8 and one.draft_bytes_per_token == 2 * same.draft_bytes_per_token
    with pytest.raises(FitError, match="only 1 or the target's"):
        fit(llama, kv_cache_memory=10 << 30, tensor_parallel_size=4, draft_layers=1, draft_tensor_parallel_size=2)


def test_mtp_layers_on_an_mla_model_are_mla():
    ds = json.loads((MODELS / "deepseek-ai--DeepSeek-V3" / "config.json").read_text())
    r = fit(ds, kv_cache_memory=20 << 30, draft_layers=1)
    assert r.draft_bytes_per_token == (512 + 64) * 2
    assert len(r.groups) == 1 and r.groups[0]["kind"] == "mla" and r.groups[0]["num_layers"] == 62


def test_sliding_target_with_other_draft_page_is_refused_not_guessed():
    gemma = json.loads((MODELS / "google--gemma-3-1b-it" / "config.json").read_text())
    with pytest.raises(FitError, match="does not model"):
        fit(gemma, kv_cache_memory=1 << 30, draft_config=dict(gemma, num_hidden_layers=1, num_key_value_heads=4,
                                                               layer_types=["full_attention"]))


def test_no_draft_keeps_the_old_answer_and_keys():
    r = fit(SMOL, kv_cache_memory=256 * MiB, device="cpu", max_num_seqs=8)
    assert r.draft is None and r.draft_bytes_per_token == 0 and r.kv_tokens_without_draft is None
    assert r.kv_tokens == 11648 and r.groups[0]["block_bytes"] is None  # 91 blocks of 30 layers


def test_estimate_mode_adds_the_draft_weights():
    plain = fit(SMOL, gpu_memory=8 << 30)
    draft = fit(SMOL, gpu_memory=8 << 30, draft_config=dict(SMOL, num_hidden_layers=2))
    assert draft.budget["weights"] > plain.budget["weights"]
    assert "+ draft" in draft.budget["weights_source"]


def test_bad_draft_input():
    with pytest.raises(FitError, match="at least 1"):
        fit(SMOL, kv_cache_memory=256 * MiB, draft_layers=0)


def test_cli_draft_options_and_json(capsys):
    code = main(["fit", str(SMOL_DIR), "--kv-cache-memory", "256MiB", "--device", "cpu", "--max-num-seqs", "8",
                 "--draft-config", str(SMOL_DIR), "--draft-layers", "1", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    d = json.loads(out.out)
    assert d["kv_tokens"] == 11264 and d["draft_bytes_per_token"] == 768 and d["kv_tokens_without_draft"] == 11648
    assert d["draft"]["num_layers"] == 1 and d["draft"]["tensor_parallel_size"] == 1
    code = main(["fit", str(SMOL_DIR), "--kv-cache-memory", "256MiB", "--device", "cpu", "--draft-layers", "1"])
    text = capsys.readouterr().out
    assert "Draft KV          768 B per token, 1 layer in the same pool" in text
    assert "3.3% fewer" in text


def test_cli_bad_draft_config_is_a_clean_error(capsys, tmp_path):
    code = main(["fit", str(SMOL_DIR), "--kv-cache-memory", "1GiB", "--draft-config", str(tmp_path / "nope")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("kvkb fit: no such file") and "Traceback" not in err


def test_budget_and_capacity_import_one_way():
    """capacity may import budget; budget must not import capacity (no cycle)."""
    for module, forbidden in (("budget", "kvkb.fit.capacity"), ("versions", "kvkb.fit.capacity"),
                              ("draft", "kvkb.fit.capacity")):
        tree = ast.parse((ROOT / "kvkb" / "fit" / f"{module}.py").read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert forbidden not in imported, module
