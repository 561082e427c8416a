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


# --- the committed atlas: 0.33.0 added again to the atlas without it (issue 17's rehearsal) -----------

import pytest  # noqa: E402
from packaging.specifiers import SpecifierSet  # noqa: E402

from kvkb.atlas.store import ATLAS_PATH  # noqa: E402
from kvkb.loader import load_kb  # noqa: E402


@pytest.fixture(scope="module")
def committed():
    return Atlas.load(ATLAS_PATH)


def test_cut_then_add_the_newest_release_rebuilds_the_committed_atlas(committed):
    newest, previous = committed.releases[-1], committed.releases[-2]
    cut = committed.until(previous)
    assert cut.releases == committed.releases[:-1]
    assert not any(len(committed.releases) - 1 in it.indexes for it in cut.strings())
    # a run that went on past the cut has no known line at it; one that started there keeps its own
    assert all(it.line_at(len(cut.releases) - 1) is None or it.line_at(len(cut.releases) - 1) > 0
               for it in cut.strings())
    cut.add_release(newest, committed.facts_of(newest))
    assert cut.dumps() == ATLAS_PATH.read_bytes()


def test_drift_of_0_33_0_against_the_knowledge_base(committed):
    # the rehearsal the issue asks for: 0.33.0 as the "new" release, the KB as it stands
    cut = committed.until("0.32.0")
    cut.add_release("0.33.0", committed.facts_of("0.33.0"))
    kb = load_kb().entries
    d = drift(cut, "0.33.0", kb)
    assert d.previous == "0.32.0" and not d.empty
    # every signature reported gone: its entry claims the previous release and not the new one
    for eid, sid, message, near, line in d.gone:
        spec = SpecifierSet(next(s for s in kb[eid].signatures if s.id == sid).versions)
        assert spec.contains("0.32.0") and not spec.contains("0.33.0")
    # 0.33.0 rewrote the CPU worker's start-up check: its old wording is gone, the new raise is suggested
    gone = {(eid, sid): (near, line) for eid, sid, _, near, line in d.gone}
    near, line = gone[("insufficient-free-memory-at-startup", "cpu-0.22-to-0.32")]
    assert near.file == "vllm/v1/worker/cpu_worker.py" and near.exception == "ValueError" and line > 0
    # each reported removal / default change is one the atlas holds
    p, n = committed.releases.index("0.32.0"), committed.releases.index("0.33.0")
    for kind, name in d.removed:
        assert p in committed.holders(kind, name) and n not in committed.holders(kind, name)
    for kind, name, old, new in d.defaults:
        assert {it.default for it in committed.named(kind, name) if n in it.indexes} == {new}
    # new raise sites: in 0.33.0 and not 0.32.0, raised or warned, about the topic
    assert d.uncovered and all(n in it.indexes and p not in it.indexes and (it.exception or it.level)
                               for it, _ in d.uncovered)
    text = format_drift(d, cut)
    assert text.startswith("# vLLM 0.33.0: drift against 0.32.0")
    assert "vllm/v1/worker/cpu_worker.py:" in text



def test_the_nearest_literal_is_a_message_not_a_bare_name(committed):
    # 0.20.0 drops "VLLM_CPU_KVCACHE_SPACE not set. Using ... GiB for KV cache.": a bare variable name
    # that is still a literal there is no template for it
    from kvkb.atlas.drift import _nearest

    n, p = committed.releases.index("0.20.0"), committed.releases.index("0.19.1")
    new = [it for it in committed.strings() if n in it.indexes and p not in it.indexes]
    assert _nearest("VLLM_CPU_KVCACHE_SPACE not set. Using 15.62 GiB for KV cache.", new) is None
    n, p = committed.releases.index("0.22.0"), committed.releases.index("0.21.0")
    new = [it for it in committed.strings() if n in it.indexes and p not in it.indexes]
    near = _nearest("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                    "initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ "
                    "for more details.", new)
    assert near.exception == "ValueError" and near.text.startswith("No available memory for the cache blocks.")
