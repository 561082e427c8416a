"""A cause's signs (kb causes[].signs) choose which fix kbmatch shows: the first cause, in the entry's
rank order, whose sign the log holds; the top cause's fix otherwise; and the answer says which sign."""

from __future__ import annotations

import pytest

from kvkb.matcher.engine import Matcher

from matcher_helpers import kb_entries, matcher

KILL = "Out of memory: Killed process 4242 (python3) total-vm:91234567kB, anon-rss:60123456kB, file-rss:0kB\n"


def _entry(eid):
    return next(e for e in kb_entries() if e.id == eid)


def _first(text: str):
    return matcher().match(text.encode()).matches[0]


def test_no_sign_keeps_the_top_cause_fix():
    m = _first(KILL)
    assert m.id == "host-oom-killer"
    assert m.fix_title == _entry("host-oom-killer").top_fix.title and "cause" not in m.notes


def test_a_sign_in_the_log_chooses_its_cause_fix_and_says_so():
    entry = _entry("host-oom-killer")
    container = next(c for c in entry.causes if "OOMKilled" in c.signs)
    m = _first("vllm-0    0/1     OOMKilled   3          10m\n" + KILL)
    assert m.id == "host-oom-killer"
    assert m.fix_title == container.fixes[0].title
    assert "'OOMKilled' (line 1)" in m.notes["cause"] and container.title in m.notes["cause"]


def test_the_higher_ranked_cause_wins_when_both_show():
    entry = _entry("host-oom-killer")
    offload = next(c for c in entry.causes if "'cpu_offload_gb'" in c.signs)
    assert entry.causes.index(offload) < next(i for i, c in enumerate(entry.causes) if "OOMKilled" in c.signs)
    text = "INFO 11-20 10:11:05 [utils.py:233] non-default args: {'model': 'x', 'cpu_offload_gb': 40}\n" \
           "vllm-0    0/1     OOMKilled   3          10m\n" + KILL
    m = _first(text)
    assert m.fix_title == offload.fixes[0].title and "'cpu_offload_gb'" in m.notes["cause"]


def test_no_sign_is_in_every_wording_of_its_entry():
    # a sign in each of the entry's own error texts would be in every log of it: it could not tell causes
    # apart (one wording among several may be a sign: the cgroup form of the kernel's kill line)
    for entry in kb_entries():
        texts = [s.template for s in entry.signatures]
        for cause in entry.causes:
            for sign in cause.signs:
                assert not all(sign in t for t in texts), (entry.id, cause.id, sign)


def test_signs_reach_the_index_in_rank_order():
    m = Matcher.from_entries([_entry("host-oom-killer")])
    signed = m.entries[0]["signed"]
    causes = [c.title for c in _entry("host-oom-killer").causes if c.signs]
    assert [c["cause"] for c in signed] == causes and all(c["signs"] for c in signed)


NON_DEFAULT = "INFO 11-20 10:11:05 [utils.py:233] non-default args: {{'model': 'org/model', {}}}\n"
CONFIG_CPU = ("INFO 11-20 10:11:06 [core.py:77] Initializing a V1 LLM engine (v0.12.0) with config: model='org/model', "
              "kv_cache_dtype=auto, device_config=cpu, seed=0, served_model_name=org/model\n")

# (entry, cause id, a line that holds the sign, a text that picks the entry's error sample or match paste: the first holding it)
SIGNED = [
    ("auto-fit-max-model-len-failed", "kv-size-set-too-small", "$ vllm serve org/model --kv-cache-memory-bytes 1M\n", ""),
    ("auto-fit-max-model-len-failed", "num-gpu-blocks-override",
     "INFO 11-20 10:11:05 [kv_cache_utils.py:1250] Overriding num_gpu_blocks=5000 with num_gpu_blocks_override=0\n", ""),
    ("kv-cache-page-size-not-divisible", "quantized-kv-dtype", NON_DEFAULT.format("'kv_cache_dtype': 'fp8_e4m3'"), ""),
    ("kv-cache-page-size-not-divisible", "forced-block-size", "$ vllm serve org/model --block-size 64\n", ""),
    ("kv-cache-page-size-not-divisible", "uneven-pipeline-partition",
     "$ VLLM_PP_LAYER_PARTITION=10,30 vllm serve org/model --pipeline-parallel-size 2\n", ""),
    ("workspace-locked-growth", "feature-combination", "$ vllm serve org/model --kv-cache-dtype fp8\n", ""),
    ("sleep-mode-memory-not-released", "expandable-segments-on", "", "Expandable segments"),
    ("cuda-oom-during-startup", "sampler-warmup-too-wide", "", "warming up sampler"),
    ("kv-offload-host-memory", "unsupported-platform", CONFIG_CPU, "CPU Offloading"),
    ("kv-offload-host-memory", "backend-without-size", "", "You must set kv_offloading_size"),
    ("kv-offload-host-memory", "hand-written-connector", "", "cpu_bytes_to_use"),
    ("mm-item-exceeds-encoder-cache", "precomputed-embeddings", NON_DEFAULT.format("'enable_mm_embeds': True"), ""),
    ("cuda-oom-during-cudagraph-capture", "too-many-capture-sizes",
     "$ vllm serve org/model --max-cudagraph-capture-size 1024\n", "capture_model"),
    ("tpu-hbm-resource-exhausted", "weights-do-not-fit", "", "Unable to load model"),
    ("insufficient-free-memory-at-startup", "cpu-default-fraction", "", "desired CPU memory utilization"),
    ("insufficient-free-memory-at-startup", "external-weights-exceed-budget", "", "Externally held weights"),
    ("host-oom-loading-weights", "bin-checkpoint-per-worker", "$ vllm serve org/model --load-format pt --tensor-parallel-size 4\n", ""),
    ("host-oom-loading-weights", "eager-or-prefetch", "$ vllm serve /nfs/model --safetensors-load-strategy eager\n", ""),
    ("host-oom-loading-weights", "streamer-buffers", "$ vllm serve s3://bucket/model --load-format runai_streamer\n", ""),
    ("host-oom-loading-weights", "container-limit-page-cache", "vllm-0    0/1     OOMKilled   2          4m\n", ""),
    ("engine-dead-after-oom", "memory-check-at-startup", "", "EngineCore failed to start."),
    ("engine-dead-after-oom", "killed-by-os",
     "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': -9}\n",
     "Engine core initialization failed"),
    ("prompt-exceeds-max-model-len", "max-tokens-too-large", "", "'max_tokens' or 'max_completion_tokens'"),
    ("cpu-kv-cache-space", "explicit-size-too-large", "", "Decrease --kv-cache-memory-bytes"),
    ("cpu-kv-cache-space", "invalid-env-value", "", "Invalid environment variable"),
    ("tpu-smem-vmem-exhausted", "attention-blocks-vmem", "", "memory space vmem"),
    ("tpu-smem-vmem-exhausted", "attention-blocks-vmem", "", "scoped vmem limit"),
    ("kv-cache-allocation-failed", "no-room-left-for-kv",
     "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n", ""),
    ("kv-cache-allocation-failed", "cuda-oom",
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.50 GiB is free.\n", ""),
]


@pytest.mark.parametrize("eid,cid,sign_line,pick", SIGNED, ids=[f"{e}:{c}:{i}" for i, (e, c, _, _) in enumerate(SIGNED)])
def test_each_sign_chooses_its_cause_fix(eid, cid, sign_line, pick):
    entry = _entry(eid)
    cause = next(c for c in entry.causes if c.id == cid)
    samples = [s for sig in entry.signatures for s in sig.samples] + list(entry.samples.match)
    sample = next(s for s in samples if pick in s)
    matches = matcher().match((sign_line + sample + "\n").encode()).matches
    m = next(m for m in matches if m.id == eid)
    assert m.fix_title == cause.fixes[0].title, (eid, cid, m.notes)
    assert cause.title in m.notes["cause"]
    # without the sign line (and, for a sign that is a wording, with another wording) it is not this cause
    if sign_line:
        m0 = next(m for m in matcher().match((sample + "\n").encode()).matches if m.id == eid)
        assert "cause" not in m0.notes or cause.title not in m0.notes["cause"]


def test_two_threads_sharing_one_matcher_keep_their_own_signs():
    # the signs a match found are per call: a Matcher shared by threads (a server) must not lend one
    # log's sign to another log's answer
    from concurrent.futures import ThreadPoolExecutor

    shared = matcher()
    signed = ("vllm-0    0/1     OOMKilled   3          10m\n" + KILL).encode()
    plain = KILL.encode()

    def note(data: bytes) -> bool:
        return "cause" in shared.match(data).matches[0].notes

    jobs = [signed, plain] * 40
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(note, jobs))
    assert got == [data is signed for data in jobs]
