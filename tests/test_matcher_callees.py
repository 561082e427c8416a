"""matcher/derive_callees.py and the committed matcher/callees.json: which entries a vLLM function's
callees can raise, and the likely answers a paste cut inside that function gets."""

from __future__ import annotations

import json
from pathlib import Path

from kvkb.matcher import derive_callees as d
from kvkb.matcher.index import CALLEES_PATH, load_callees

from matcher_helpers import entry_ids, matcher

TABLE = json.loads(Path(CALLEES_PATH).read_text())
SAMPLES = [
    ("no-memory-for-cache-blocks", "No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
     ["ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."]),
    ("cuda-oom-during-startup", "CUDA out of memory occurred when warming up sampler with",
     ["RuntimeError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests. Please try lowering "
      "`max_num_seqs` or `gpu_memory_utilization` when initializing the engine."]),
]
SOURCE = '''
class Worker:
    def determine_available_memory(self):
        """Profile."""
        self.profile_run()
        return 1

    def profile_run(self):
        self._dummy_sampler_run()

    def _dummy_sampler_run(self):
        try:
            pass
        except RuntimeError as e:
            raise RuntimeError(
                "CUDA out of memory occurred when warming up sampler with "
                f"{num_reqs} dummy requests. Please try lowering "
                "`max_num_seqs` or `gpu_memory_utilization` when "
                "initializing the engine.") from e


def check_enough_kv_cache_memory(config, spec, available):
    if available <= 0:
        raise ValueError("No available memory for the cache blocks. "
                         "Try increasing `gpu_memory_utilization` when "
                         "initializing the engine.")


class Engine:
    def _initialize_kv_caches(self):
        available = self.executor.collective_rpc("determine_available_memory")
        check_enough_kv_cache_memory(1, 2, available)

    def unrelated(self):
        return "No available memory"  # too short to stand for a message
'''


def test_a_function_reaches_what_its_callees_raise():
    reach = d.release_table([("vllm/worker.py", SOURCE)], SAMPLES)
    assert reach["_dummy_sampler_run"] == {"cuda-oom-during-startup"}
    assert reach["determine_available_memory"] == {"cuda-oom-during-startup"}  # two calls down
    # collective_rpc("determine_available_memory") is a call by name, and so is a plain call
    assert reach["_initialize_kv_caches"] == {"cuda-oom-during-startup", "no-memory-for-cache-blocks"}
    assert "unrelated" not in reach


def test_a_literal_must_hold_the_wordings_own_words_and_fit_a_sample():
    cache: dict = {}
    assert d.emitted(["Try increasing `gpu_memory_utilization` when initializing the engine."], SAMPLES, cache) == set()
    gap = d._GAP
    lit = f"No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when {gap}"
    assert d.emitted([lit], SAMPLES, cache) == {"no-memory-for-cache-blocks"}
    assert d.literal_pattern("short") is None


def test_the_committed_table_names_the_expected_entries():
    funcs = TABLE["functions"]
    assert set(TABLE["releases"]) >= {"0.5.5", "0.8.5", "0.11.0"}  # V0 and V1 eras
    dam = funcs["determine_available_memory"]
    assert {"cuda-oom-during-startup", "memory-profiling-error"} <= set(dam)
    init = funcs["_initialize_kv_caches"]
    assert {"no-memory-for-cache-blocks", "max-model-len-exceeds-kv-cache", "cuda-oom-during-startup"} <= set(init)
    for ids in funcs.values():  # every function says which releases show each entry, and few entries in each
        assert ids and all(set(r) <= set(TABLE["releases"]) for r in ids.values())
        for release in TABLE["releases"]:
            assert sum(release in r for r in ids.values()) <= d.MAX_REACH
    # the V0 names of vLLM 0.3-0.4 and the class a source line constructs are in it too
    assert "max-model-len-exceeds-model-limit" in funcs["create_engine_configs"]
    assert {"0.3.3", "0.4.3"} <= set(TABLE["releases"])
    # which functions run code that allocates device memory (PyTorch's OOM can end them): start-up and
    # model steps do, a check of the KV capacity does not
    assert {"initialize_cache", "determine_available_memory", "execute_model", "load_model"} <= set(TABLE["allocates"])
    assert "check_enough_kv_cache_memory" not in TABLE["allocates"] and set(TABLE["allocates"]) <= set(funcs)


def test_the_committed_weights_are_the_corpus_counts():
    # cut answers are "ranked by how often real pastes show each": a label added without
    # `python -m matcher.derive_callees --weights-only` would leave that claim stale
    assert TABLE["weights"] == d.corpus_weights(Path(__file__).resolve().parent.parent)


def test_the_index_keeps_only_entries_that_exist():
    got = load_callees({"no-memory-for-cache-blocks": "kv-capacity"})
    assert got["functions"]["_initialize_kv_caches"] == {"no-memory-for-cache-blocks": TABLE["functions"]["_initialize_kv_caches"]["no-memory-for-cache-blocks"]}
    assert "determine_available_memory" not in got["functions"] or \
        set(got["functions"]["determine_available_memory"]) <= {"no-memory-for-cache-blocks"}
    assert got["categories"] == {"no-memory-for-cache-blocks": "kv-capacity"}
    assert load_callees({e: "x" for e in entry_ids()}, "/nonexistent.json") == \
        {"functions": {}, "weights": {}, "through": {}, "allocates": [], "categories": {}}


CUT = """INFO 09-01 10:00:00 [gpu_model_runner.py:2000] Model loading took 14.99 GiB and 5.1 seconds
ERROR 09-01 10:00:10 [core.py:700] EngineCore failed to start.
ERROR 09-01 10:00:10 [core.py:700] Traceback (most recent call last):
ERROR 09-01 10:00:10 [core.py:700]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 691, in run_engine_core
ERROR 09-01 10:00:10 [core.py:700]     engine_core = EngineCoreProc(*args, **kwargs)
ERROR 09-01 10:00:10 [core.py:700]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 80, in __init__
ERROR 09-01 10:00:10 [core.py:700]     self._initialize_kv_caches(vllm_config)
"""


def test_a_paste_cut_inside_a_function_is_answered_likely_from_the_table():
    report = matcher().match(CUT)
    assert report.root_cause is None and report.truncated
    likely = [m for m in report.matches if m.confidence == "likely"]
    assert likely, [(m.id, m.confidence) for m in report.matches]
    allowed = set(TABLE["functions"]["_initialize_kv_caches"])
    assert {m.id for m in likely} <= allowed
    # ranked by how often corpus pastes failing inside _initialize_kv_caches show each entry, then by how
    # often the corpus shows each at all
    w, through = TABLE["weights"], TABLE["through"]["_initialize_kv_caches"]
    keys = [(through.get(m.id, 0), w.get(m.id, 0)) for m in likely]
    assert keys == sorted(keys, reverse=True) and keys[0][0] > 0
    says = likely[0].evidence[0].says
    assert "_initialize_kv_caches" in says and "paste the lines after the cut" in says
    assert likely[0].evidence[0].line == 7  # the call on the source line is where it stopped


def test_a_cut_in_a_serving_function_drops_other_stages_oom_entries():
    text = ("Traceback (most recent call last):\n"
            '  File "/x/vllm/v1/executor/multiproc_executor.py", line 1, in worker_busy_loop\n'
            "    output = func(*args, **kwargs)\n"
            '  File "/x/vllm/v1/worker/gpu_worker.py", line 2, in execute_model\n'
            "    output = self.model_runner.execute_model(scheduler_output)\n")
    likely = [m.id for m in matcher().match(text).matches if m.confidence == "likely"]
    assert "cuda-oom-during-startup" not in likely and "cuda-oom-during-cudagraph-capture" not in likely
    if "execute_model" in TABLE["functions"]:
        assert "cuda-oom-during-serving" in likely


CLASSES = '''
class UvaBuffer:
    def __init__(self, size):
        if not available():
            raise RuntimeError("V1 CPU offloading requires uva (pin memory) support")


class States:
    def __init__(self):
        self.buf = UvaBuffer(8)


class Runner:
    def load_model(self):
        pass

    def warm(self):
        self.runner.load_model()
        check(1)

    def check(self):
        raise RuntimeError("V1 CPU offloading requires uva (pin memory) support")
'''
PINNED = [("cpu-offload-requires-pinned-memory", "V1 CPU offloading requires uva (pin memory) support",
           ["RuntimeError: V1 CPU offloading requires uva (pin memory) support"])]


def test_a_class_called_by_name_runs_its_constructor_and_allocating_callers_are_listed():
    allocating: set[str] = set()
    reach = d.release_table([("vllm/buf.py", CLASSES)], PINNED, allocating)
    assert reach["UvaBuffer"] == {"cpu-offload-requires-pinned-memory"}  # the class, for `UvaBuffer(size)`
    assert reach["States"] == {"cpu-offload-requires-pinned-memory"}  # a constructor calling a constructor
    assert {"warm", "load_model"} <= allocating and "check" not in allocating and "UvaBuffer" not in allocating


def test_more_entries_than_max_reach_in_one_release_say_nothing():
    many = [(f"e{i}", f"a message long enough number {i:02d} here", [f"RuntimeError: a message long enough number {i:02d} here"])
            for i in range(d.MAX_REACH + 1)]
    body = "\n".join(f"def f{i}():\n    raise RuntimeError('a message long enough number {i:02d} here')\n" for i in range(d.MAX_REACH + 1))
    body += "\ndef top():\n" + "".join(f"    f{i}()\n" for i in range(d.MAX_REACH + 1))
    reach = d.release_table([("vllm/many.py", body)], many)
    assert "top" not in reach and reach["f0"] == {"e0"}


def test_a_cut_in_init_device_ranks_what_real_pastes_failing_there_show():
    # init_device's free-memory check is what real pastes failing inside it show, though PyTorch's
    # start-up OOM is the commonest entry of all
    text = ("Traceback (most recent call last):\n"
            '  File "/x/vllm/v1/executor/uniproc_executor.py", line 1, in _init_executor\n'
            '    self.driver_worker.init_device()\n'
            '  File "/x/vllm/v1/worker/gpu_worker.py", line 1, in init_device\n'
            '    self.init_snapshot = MemorySnapshot()\n')
    likely = [m for m in matcher().match(text).matches if m.confidence == "likely"]
    through = TABLE["through"]["init_device"]
    assert likely[0].id == "insufficient-free-memory-at-startup" == max(through, key=through.get)
    assert TABLE["weights"]["cuda-oom-during-startup"] > TABLE["weights"]["insufficient-free-memory-at-startup"]
    assert "failing inside init_device" in likely[0].evidence[0].says


def test_through_counts_leave_out_anecdotes():
    assert all(n >= d.MIN_THROUGH_ENTRY for by in TABLE["through"].values() for n in by.values())
    assert all(sum(by.values()) >= d.MIN_THROUGH for by in TABLE["through"].values())
    assert set(TABLE["through"]) <= set(TABLE["functions"])
