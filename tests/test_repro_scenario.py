"""Scenario files (reproductions/scenarios/*.yaml): validation, and that every entry with code has one."""

from pathlib import Path

import pytest

from kvkb.loader import load_kb
from kvkb.reproductions.runner import has_reproduction
from kvkb.reproductions.scenario import (
    BACKEND_DEFAULTS, SCENARIO_DIR, ScenarioError, load_scenario, load_scenarios, parse_scenario,
)

P = Path("max-model-len-exceeds-kv-cache.yaml")


def parse(**data):
    return parse_scenario({"entry": "max-model-len-exceeds-kv-cache", "backends": {"cpu": {}}, **data}, P)


def test_defaults_and_machine():
    s = parse(backends={"cpu": {"llm_kwargs": {"kv_cache_memory_bytes": 1024}, "env": {"X": 1}}})
    m = s.machine("cpu")
    assert m.effective_llm_kwargs() == {**BACKEND_DEFAULTS["cpu"], "kv_cache_memory_bytes": 1024}
    assert m.env == {"X": "1"}  # env values become strings
    assert s.machine("cuda") is None
    assert s.expected_match("cpu") == s.entry
    assert s.model_dirs()["Qwen/Qwen2.5-0.5B-Instruct"].endswith("models/qwen2.5-0.5b-instruct")


@pytest.mark.parametrize(
    "data, message",
    [
        ({"entry": "other-id", "backends": {"cpu": {}}}, "file name"),
        ({"backends": {"tpu": {}}}, "unknown backend"),
        ({"backends": {}}, "at least one"),
        ({"backends": {"cpu": {"llm_kwargs": {"max_model_len": 10}}}}, "change the program"),
        ({"backends": {"cpu": {"ballast": {"leave_available_fraction": 2}}}}, "between 0 and 1"),
        ({"backends": {"cpu": {"timeout_s": -1}}}, "positive"),
        ({"backends": {"cpu": {"skip": ""}}}, "reason"),
        ({"backends": {"cpu": {"colour": 1}}}, "unknown key"),
        ({"broken": {"expect": "warning"}, "backends": {"cpu": {}}}, "require"),
        ({"broken": {"expect": "crash"}, "backends": {"cpu": {}}}, "'error' or 'warning'"),
        ({"broken": {"require": ["("]}, "backends": {"cpu": {}}}, "regular expression"),
        ({"models": {"x/y": "no-such-dir"}, "backends": {"cpu": {}}}, "config.json"),
        ({"surprise": 1, "backends": {"cpu": {}}}, "unknown key"),
    ],
)
def test_bad_scenarios_are_named(data, message):
    data = {"entry": "max-model-len-exceeds-kv-cache", **data}
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(data, P)


def test_unreadable_yaml(tmp_path):
    bad = tmp_path / "x-y.yaml"
    bad.write_text("entry: [unclosed\n")
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(bad)


def test_shipped_scenarios_load():
    scenarios = load_scenarios()
    assert "max-model-len-exceeds-kv-cache" in scenarios
    for s in scenarios.values():
        assert s.machines, s.entry


def test_every_entry_with_code_has_a_scenario_and_its_fix_exists():
    kb = load_kb()
    scenarios = load_scenarios(SCENARIO_DIR)
    for entry_id, entry in kb.entries.items():
        if not has_reproduction(entry):
            continue
        assert entry_id in scenarios, f"{entry_id} has code but no reproductions/scenarios/{entry_id}.yaml"
        s = scenarios[entry_id]
        fix_ids = {f.id for f in entry.all_fixes}
        if s.fix:
            assert s.fix in fix_ids, f"{entry_id}: scenario fix {s.fix!r} is not a fix of the entry"
        for backend in ("cpu", "cuda"):
            match = s.expected_match(backend)
            assert match == entry_id or match in kb.entries or not kb.entries, match


def test_cpu_skips_say_why():
    for s in load_scenarios().values():
        m = s.machine("cpu")
        if m and m.skip:
            assert len(m.skip) > 20
