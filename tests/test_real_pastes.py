"""Real pastes from public vLLM issues (../shared/fixtures/real-pastes) name the right entry."""

import json

import pytest

from matcher_helpers import PASTES, entry_ids, matcher

CLASS_TO_IDS = {  # /work/shared/README.md
    "max_len_exceeds_kv_capacity": {"max-model-len-exceeds-kv-cache"},
    "no_memory_for_cache_blocks": {"no-memory-for-cache-blocks"},
    "insufficient_free_memory_at_startup": {"insufficient-free-memory-at-startup"},
    "memory_profiling_error": {"memory-profiling-error"},
    "cuda_oom_profiling": {"cuda-oom-during-startup"},
    "cuda_oom_cudagraph": {"cuda-oom-during-cudagraph-capture"},
    "cuda_oom_runtime": {"cuda-oom-during-serving"},
    "preemption_kv_space": {"preemption-kv-cache-space"},
    "engine_dead_after_oom": {"engine-dead-after-oom", "cuda-oom-during-serving"},
    "cpu_kvcache_space": {"cpu-kv-cache-space"},
}
NEGATIVE_ALLOWED = {"prompt-exceeds-max-model-len"}

LABELS = json.loads((PASTES / "labels.json").read_text()) if PASTES.is_dir() else []
pytestmark = pytest.mark.skipif(not PASTES.is_dir(), reason=f"shared fixtures not found at {PASTES}")


@pytest.mark.parametrize("label", LABELS, ids=[lab["file"] for lab in LABELS])
def test_real_paste(label):
    report = matcher().match((PASTES / label["file"]).read_bytes())
    got = report.root_cause
    if label["label"] == "negative":
        assert got is None or got in NEGATIVE_ALLOWED, (got, report.matches[0].score if report.matches else None)
        return
    expected = CLASS_TO_IDS[label["label"]]
    if not expected & entry_ids():
        pytest.skip(f"entry {sorted(expected)} is not in kb/ yet")
    assert got in expected, [(m.id, round(m.score, 1), m.confident, m.stage) for m in report.matches[:3]]
