"""kvkb.atlas.drift: adding a release reports what changed for the KB (synthetic 0.1.0 -> 0.2.0)."""


from atlas_world import build
from kvkb.atlas.build import add_releases
from kvkb.atlas.drift import drift, format_drift
from kvkb.atlas.store import Atlas
from test_atlas_check import OLD, make, sig

import atlas_world


def test_drift_of_a_new_release(tmp_path):
    atlas = build(tmp_path / "a.json.gz", versions=("0.1.0",))
    add_releases(atlas, ["0.2.0"], path=tmp_path / "a.json.gz", fetch=atlas_world.fetch)
    entry = make([sig(OLD, ">=0.1.0")])
    d = drift(Atlas.load(tmp_path / "a.json.gz"), "0.2.0", {entry.id: entry})
    [(eid, sid, message, near, line)] = d.gone
    assert (eid, sid, message) == (entry.id, "s1", OLD)
    assert near.text.startswith("No available memory for the KV cache blocks") and line == 11  # the raise
    assert ("flag", "--swap-space") in d.removed and ("env", "VLLM_OLD_KNOB") in d.removed
    assert ("arg", "swap_space") in d.removed
    assert ("arg", "gpu_memory_utilization", "0.9", "0.92") in d.defaults
    assert ("env", "VLLM_CPU_KVCACHE_SPACE", "'4'", "'0'") in d.defaults
    assert any(it.text.startswith("The KV cache needs") and it.exception == "ValueError" for it, _ in d.uncovered)
    text = format_drift(d, atlas)
    assert text.startswith("# vLLM 0.2.0: drift against 0.1.0")
    assert "template: No available memory for the KV cache blocks. Raise `gpu_memory_utilization`" in text
    assert "vllm/worker/worker.py:" in text and "- flag --swap-space" in text


def test_an_entry_covering_the_new_raise_site_silences_it(tmp_path):
    atlas = build(tmp_path / "a.json.gz")
    covered = make([sig("The KV cache needs {needed} blocks, more than the {free} blocks free", ">=0.2.0")])
    d = drift(atlas, "0.2.0", {covered.id: covered})
    assert not any(it.text.startswith("The KV cache needs") for it, _ in d.uncovered)
    assert drift(atlas, "0.1.0", {}).previous is None
