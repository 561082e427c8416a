"""kvkb fit against the capacity vLLM printed in every CPU reproduction's fixed run (results/cpu.json).

The fixed runs are real vLLM 0.32.0 CPU runs; where their KV budget is explicit (the scenario's
machine or the entry's own code sets kv_cache_memory_bytes), fit must predict vLLM's
"CPU KV cache size: N tokens" and "Maximum concurrency ... Cx" exactly.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from kvkb.fit.capacity import fit
from kvkb.loader import load_kb

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "reproductions" / "results" / "cpu.json"
CONFIG = json.loads((ROOT / "reproductions" / "models" / "qwen2.5-0.5b-instruct" / "config.json").read_text())


def _llm_kwargs(code: str) -> dict:
    """Literal keyword arguments of the LLM(...) call in an entry's program."""
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "LLM":
            out = {}
            for kw in node.keywords:
                try:
                    out[kw.arg] = eval(compile(ast.Expression(kw.value), "<kw>", "eval"), {"__builtins__": {}})
                except Exception:
                    continue  # not a literal (a variable): unknown here
            return out
    return {}


def _cases():
    results = json.loads(RESULTS.read_text())["entries"]
    entries = load_kb().entries
    cases = []
    for eid, res in sorted(results.items()):
        fixed = res.get("fixed") or {}
        if not fixed.get("passed") or not fixed.get("kv_tokens"):
            continue
        # the harness applies the machine's kwargs as defaults; the program's own values win
        kwargs = dict((res.get("machine") or {}).get("llm_kwargs") or {})
        kwargs.update(_llm_kwargs(entries[eid].fixed_code or ""))
        if "kv_cache_memory_bytes" in kwargs:
            cases.append(pytest.param(eid, kwargs, fixed, _model_config(eid), id=eid))
    return cases


def _model_config(eid: str) -> dict:
    """The config.json of the model the entry's scenario runs (the shrunk audio model for the
    multimodal entries, Qwen2.5-0.5B for most)."""
    import yaml

    scenario = ROOT / "reproductions" / "scenarios" / f"{eid}.yaml"
    models = (yaml.safe_load(scenario.read_text()) or {}).get("models") if scenario.exists() else None
    if not models:
        return CONFIG
    [local] = set(models.values())
    return json.loads((ROOT / "reproductions" / "models" / local / "config.json").read_text())


CASES = _cases()


def test_enough_fixed_runs_have_an_explicit_budget():
    assert len(CASES) >= 4, [c.id for c in CASES]


@pytest.mark.parametrize("eid,kwargs,fixed,config", CASES)
def test_fit_predicts_the_capacity_vllm_printed(eid, kwargs, fixed, config):
    result = fit(config, kv_cache_memory=int(kwargs["kv_cache_memory_bytes"]), device="cpu",
                 max_model_len=fixed["max_model_len"], max_num_seqs=kwargs.get("max_num_seqs"),
                 block_size=kwargs.get("block_size"), vllm_version="0.32.0")
    assert result.kv_tokens == fixed["kv_tokens"]
    assert round(result.max_concurrency, 2) == fixed["max_concurrency"]
