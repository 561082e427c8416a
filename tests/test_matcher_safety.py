"""Negative safety (issue 10): a wrapper says only that the engine died, never why.

- Wrapper text alone (`EngineDeadError`, `Engine core initialization failed`, `EngineCore failed to
  start.`, ...; taken from kb/engine-dead-after-oom.yaml) yields no confident claim at all.
- A wrapper around a visible error that is NOT about memory (an illegal memory access, a KV
  connector's ValueError, an assertion in the KV-spec code, "no kernel image is available") names
  that error in the report's `not_memory` field, at the line that raised it, and claims no entry.
- uvicorn's `INFO:     ...` access lines are log lines, never exception records.

The log shapes are vLLM 0.32.0's own (v1/engine/core.py:1510 "EngineCore failed to start.",
v1/engine/utils.py:1432 "Engine core initialization failed", v1/engine/async_llm.py:906
"AsyncLLM output_handler failed.", v1/engine/exceptions.py EngineDeadError).
"""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import logworld
from matcher_helpers import REPO, kb_entries
from test_burial import matcher

QUICK = (Phase.explicit, Phase.generate)  # no shrinking (see test_burial.py)
FIXTURES2 = REPO.parent / "shared" / "fixtures" / "real-pastes-2"
WRAPPER_ID = "engine-dead-after-oom"
# a wrapper sample that quotes the inner error, or shows the OOM killer's verdict, carries its root
# cause: not "wrapper text alone"
_CARRIES_CAUSE = re.compile(r"Worker failed with error '|original error|OutOfMemory|out of memory|Available memory|OOMKilled"
                            r"|Exit Code: 137|Killed process|: -9\}", re.I)


def _wrapper_texts() -> list[str]:
    entry = next((e for e in kb_entries() if e.id == WRAPPER_ID), None)
    if entry is None:
        return []
    texts = [s for sig in entry.signatures for s in sig.samples] + list(entry.samples.match)
    return sorted({t for t in texts if not _CARRIES_CAUSE.search(t)})


WRAPPERS = _wrapper_texts()


def report_json(report) -> dict:
    from kvkb.matcher.api import report_dict

    return report_dict(report)


def _claims(report) -> list:
    data = report_json(report)
    return [(m["id"], m.get("confidence"), m.get("line_no")) for m in data["matches"]
            if m.get("confidence") == "confident" or m.get("confident")]


def test_the_wrappers_come_from_the_entry():
    assert len(WRAPPERS) >= 8, WRAPPERS
    joined = "\n".join(WRAPPERS)
    for wording in ("EngineCore encountered an issue", "Engine core initialization failed", "EngineCore failed to start.",
                    "AsyncLLM output_handler failed.", "Background loop has errored already"):
        assert wording in joined


@pytest.mark.parametrize("text", WRAPPERS, ids=[t.splitlines()[-1][-60:] for t in WRAPPERS])
def test_wrapper_alone_is_no_confident_claim(text):
    report = matcher().match(text)
    assert report.root_cause is None, _claims(report)
    assert not _claims(report)


@settings(max_examples=25, deadline=None, derandomize=True, phases=QUICK)
@given(picks=st.lists(st.sampled_from(WRAPPERS or ["-"]), min_size=1, max_size=6), seed=st.integers(0, 2**32 - 1),
       prefix=logworld.prefixes)
def test_wrappers_together_in_a_healthy_log_are_no_confident_claim(picks, seed, prefix):
    """Several wrappers, a healthy start-up and serving noise: still nothing says what went wrong."""
    rng = random.Random(seed)
    lines = logworld.startup(rng) + logworld.serving_noise(rng, 30)
    for text in picks:
        lines += text.rstrip("\n").split("\n") + logworld.serving_noise(rng, rng.randint(0, 5))
    pre = logworld.PREFIXES[prefix](rng) if prefix else None
    report = matcher().match("\n".join(logworld.apply_prefix(lines, pre)) + "\n")
    assert report.root_cause is None, _claims(report)
    assert not _claims(report)


# --- wrappers around a visible error that is not memory ---------------------------------------------

_CORE = "(EngineCore_DP0 pid=2193) ERROR 06-15 16:27:50 [core.py:1510] "
_FRAMES_STARTUP = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 1482, in run_engine_core',
    "    engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 157, in __init__',
    "    kv_cache_config = self._initialize_kv_caches(vllm_config)",
]

# (name, frames that lead to it, the line that raised, the exception type as printed, words not_memory must show)
NON_MEMORY = [
    ("illegal-memory-access", [
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3012, in _dummy_run',
        "    outputs = self.model(",
    ], "torch.AcceleratorError: CUDA error: an illegal memory access was encountered", "AcceleratorError", "illegal memory access"),
    ("illegal-memory-access-runtimeerror", [
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 2590, in execute_model',
        "    torch.cuda.synchronize()",
    ], "RuntimeError: CUDA error: an illegal memory access was encountered", "RuntimeError", "illegal memory access"),
    ("kv-connector-valueerror", [
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/kv_transfer/kv_connector/factory.py", line 52, in create_connector',
        "    connector_cls = cls.get_connector_class(kv_transfer_config)",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/kv_transfer/kv_connector/factory.py", line 93, in get_connector_class_by_name',
        "    raise ValueError(f\"Connector '{connector_name}' is not registered.\")",
    ], "ValueError: Connector 'LMCacheConnectorV2' is not registered.", "ValueError", "is not registered"),
    ("kv-connector-hma", [
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/distributed/kv_transfer/kv_connector/factory.py", line 57, in create_connector',
        "    raise ValueError(",
    ], "ValueError: Connector NixlConnector does not support HMA but HMA is enabled. Please set `--disable-hybrid-kv-cache-manager`.",
        "ValueError", "does not support HMA"),
    ("kv-spec-assertion", [
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 1292, in get_kv_cache_groups',
        "    kv_cache_spec = unify_kv_cache_spec_page_size(kv_cache_spec)",
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/kv_cache_utils.py", line 1330, in unify_kv_cache_spec_page_size',
        "    assert new_spec.page_size_bytes == max_page_size",
    ], "AssertionError", "AssertionError", "AssertionError"),
    ("no-kernel-image", [
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 270, in determine_available_memory',
        "    self.model_runner.profile_run()",
        '  File "/usr/local/lib/python3.12/dist-packages/torch/nn/modules/module.py", line 1751, in _wrapped_call_impl',
        "    return self._call_impl(*args, **kwargs)",
    ], "RuntimeError: CUDA error: no kernel image is available for execution on the device", "RuntimeError", "no kernel image is available"),
]


def startup_failure(frames: list[str], error: str) -> tuple[str, set[int]]:
    """(log, lines holding the error): vLLM 0.32's start-up failure, the EngineCore's logged traceback
    then the API server's wrapper, after a healthy beginning."""
    rng = random.Random(5)
    lines = logworld.startup_v1(rng, complete=False)
    lines.append(_CORE + "EngineCore failed to start.")
    lines += [_CORE + ln for ln in _FRAMES_STARTUP + frames]
    at = {len(lines) + 1}
    lines.append(_CORE + error)
    lines += [
        "Process EngineCore_DP0:",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
        "    self.run()",
        *frames,
    ]
    at.add(len(lines) + 1)
    lines += [error,
              "(APIServer pid=2011) Traceback (most recent call last):",
              '(APIServer pid=2011)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/utils.py", line 1432, in wait_for_engine_startup',
              "(APIServer pid=2011)     raise RuntimeError(",
              "(APIServer pid=2011) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}"]
    return "\n".join(lines) + "\n", at


def serving_failure(frames: list[str], error: str) -> tuple[str, set[int]]:
    """(log, lines holding the error): a serving step raised; the EngineCore logs it, the API server's
    output handler and every request then get EngineDeadError."""
    rng = random.Random(6)
    lines = logworld.startup_v1(rng) + logworld.serving_noise(rng, 40, api_pid=2011)
    core = "(EngineCore_DP0 pid=2193) ERROR 06-15 16:27:50 [core.py:1131] "
    lines.append(core + "EngineCore encountered a fatal error.")
    lines += [core + "Traceback (most recent call last):",
              core + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 1122, in run_engine_core',
              core + "    engine_core.run_busy_loop()"] + [core + f for f in frames]
    at = {len(lines) + 1}
    lines.append(core + error)
    api = "(APIServer pid=2011) ERROR 06-15 16:27:50 [async_llm.py:906] "
    lines += [api + "AsyncLLM output_handler failed.",
              api + "Traceback (most recent call last):",
              api + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/async_llm.py", line 870, in output_handler',
              api + "    outputs = await engine_core.get_output_async()",
              api + "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
              '(APIServer pid=2011) INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error']
    return "\n".join(lines) + "\n", at


@pytest.mark.parametrize("shape", [startup_failure, serving_failure], ids=["startup", "serving"])
@pytest.mark.parametrize("case", NON_MEMORY, ids=[c[0] for c in NON_MEMORY])
def test_wrapper_around_a_non_memory_error_names_it(case, shape):
    _, frames, error, type_, words = case
    log, at = shape(frames, error)
    report = matcher().match(log)
    assert report.root_cause is None, _claims(report)
    assert not _claims(report)
    nm = report_json(report).get("not_memory")
    assert nm, "the report must name the error that is not about memory"
    assert words in nm["text"] and type_ in (nm.get("type") or ""), nm
    assert nm["line"] in at, (nm, sorted(at))


@pytest.mark.parametrize("case", NON_MEMORY, ids=[c[0] for c in NON_MEMORY])
def test_a_real_memory_error_beside_the_wrapper_still_wins(case):
    """The not-memory rule must not silence a real memory error: the same wrapper shape around a
    real 'No available memory for the cache blocks' still names that entry."""
    _, frames, _, _, _ = case
    error = ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
             "when initializing the engine.")
    log, _ = startup_failure(frames, error)
    report = matcher().match(log)
    assert report.root_cause == "no-memory-for-cache-blocks", _claims(report)
    assert report_json(report).get("not_memory") is None


# real pastes: the wrapper's visible root cause is not memory (labels in real-pastes-2/labels.json)
REAL = [("010.txt", "AssertionError"), ("011.txt", "illegal memory access"), ("012.txt", "illegal memory access")]


@pytest.mark.skipif(not FIXTURES2.is_dir(), reason=f"shared fixtures not found at {FIXTURES2}")
@pytest.mark.parametrize("name,words", REAL, ids=[n for n, _ in REAL])
def test_real_wrappers_around_non_memory_errors(name, words):
    report = matcher().match((FIXTURES2 / name).read_bytes())
    assert report.root_cause is None, _claims(report)
    assert not _claims(report)
    nm = report_json(report).get("not_memory")
    assert nm and (words in nm["text"] or words in (nm.get("type") or "")), nm


# --- uvicorn access lines ---------------------------------------------------------------------------

access_lines = st.builds(
    lambda ip, port, method, path, status, tag: (f"(APIServer pid={tag}) " if tag else "")
    + f'INFO:     {ip}:{port} - "{method} {path} HTTP/1.1" {status}',
    st.sampled_from(["127.0.0.1", "10.0.0.7", "172.17.0.1", "[::1]"]), st.integers(1, 65535),
    st.sampled_from(["GET", "POST"]), st.sampled_from(["/v1/chat/completions", "/v1/completions", "/health", "/metrics"]),
    st.sampled_from(["200 OK", "400 Bad Request", "404 Not Found", "500 Internal Server Error", "503 Service Unavailable"]),
    st.one_of(st.none(), st.integers(1, 4_000_000)))


def _records(text: str) -> list:
    from kvkb.matcher.segment import segment

    got = segment([(i + 1, ln) for i, ln in enumerate(text.split("\n"))])
    return list(got[0] if isinstance(got, tuple) else got)


@settings(max_examples=60, deadline=None, derandomize=True, phases=QUICK)
@given(line=access_lines, prefix=logworld.prefixes, seed=st.integers(0, 1000))
def test_uvicorn_access_lines_are_never_exceptions(line, prefix, seed):
    pre = logworld.PREFIXES[prefix](random.Random(seed)) if prefix else None
    text = logworld.apply_prefix([line], pre)[0]
    assert not [r for r in _records(text) if r.kind == "exception"], _records(text)
    report = matcher().match(text + "\n")
    assert report.root_cause is None
    first = report_json(report).get("first_error")
    assert not first or "HTTP/1.1" not in first, first


def test_uvicorn_lines_in_front_of_a_real_error_are_not_the_first_error():
    """Issue 10's own case: 50 lines of a healthy server, then a real traceback: the access line is
    neither an exception nor the error shown."""
    rng = random.Random(10)
    noise = [logworld.access_line(rng, 2231) if i % 2 else logworld.stats_line_v1(rng, 2231) for i in range(50)]
    tb = ["Traceback (most recent call last):",
          '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3203, in _dummy_sampler_run',
          "    raise RuntimeError(",
          "RuntimeError: CUDA out of memory occurred when warming up sampler with 256 dummy requests. Please try lowering "
          "`max_num_seqs` or `gpu_memory_utilization` when initializing the engine."]
    text = "\n".join(noise + tb) + "\n"
    assert not [r for r in _records(text) if r.kind == "exception" and "HTTP/1.1" in r.message]
    report = matcher().match(text)
    data = report_json(report)
    assert "HTTP/1.1" not in (data.get("first_error") or ""), data.get("first_error")
    assert report.root_cause is not None, [(m["id"], m["score"]) for m in data["matches"]]


@pytest.mark.parametrize("line", ["ValueError( ", "ValueError(", "RuntimeError(   )", "torch.OutOfMemoryError("])
def test_an_exception_with_an_empty_repr_is_read_not_raised(line):
    # '"" in "\'\\""' is true: an empty repr once raised IndexError out of the segmenter
    text = 'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n' + line + "\n"
    r = matcher().match(text)
    assert r.root_cause is None
