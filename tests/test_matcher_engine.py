"""kvkb.matcher.engine: each entry's own samples, real vLLM CPU output, root cause over wrappers."""

import subprocess
import sys

import pytest

from kvkb.lint import names
from matcher_helpers import VLLM_LOGS, entry_ids, kb_entries, matcher

MUST = [(e.id, i, s) for e in kb_entries() for i, s in enumerate(e.samples.match)]
MUST_NOT = [(e.id, i, s) for e in kb_entries() for i, s in enumerate(e.samples.no_match)]
SIGNATURE_SAMPLES = [(e.id, sig.id, s) for e in kb_entries() for sig in e.signatures for s in sig.samples]


@pytest.mark.parametrize("entry_id,n,paste", MUST, ids=[f"{e}-{n}" for e, n, _ in MUST])
def test_must_match_samples_name_their_entry(entry_id, n, paste):
    report = matcher().match(paste)
    entry = next(e for e in kb_entries() if e.id == entry_id)
    assert names(report, entry), [(m.id, m.score, m.runner_up) for m in report.matches[:3]]


@pytest.mark.parametrize("entry_id,n,paste", MUST_NOT, ids=[f"{e}-{n}" for e, n, _ in MUST_NOT])
def test_must_not_match_samples_do_not(entry_id, n, paste):
    assert matcher().match(paste).root_cause != entry_id


@pytest.mark.parametrize("entry_id,sig_id,line", SIGNATURE_SAMPLES, ids=[f"{e}-{s}-{i}" for i, (e, s, _) in enumerate(SIGNATURE_SAMPLES)])
def test_every_signature_sample_matches_its_entry(entry_id, sig_id, line):
    # entries whose wording is shared (torch's OOM text) are told apart by context a lone line lacks,
    # so this asks only that the entry scores as a match; the pastes above test the choice
    scores = matcher().scores(line)
    assert scores.get(entry_id, 0) >= 80, sorted(scores.items(), key=lambda t: -t[1])[:3]


@pytest.mark.parametrize("log,entry_id,fix_value", [
    ("kv-too-small.log", "max-model-len-exceeds-kv-cache", "--max-model-len 1792"),
    ("no-kv-space.log", "no-memory-for-cache-blocks", None),
])
def test_real_vllm_cpu_output_matches_top_confident(log, entry_id, fix_value):
    report = matcher().match((VLLM_LOGS / log).read_bytes())
    assert report.root_cause == entry_id
    top = report.matches[0]
    assert top.confident and top.id == entry_id and top.signature["id"] == "v1-0.22"
    assert top.line_no == 60  # the EngineCore's own line, before the wrapper's copy
    if fix_value:
        assert fix_value in top.fix
    # the RuntimeError wrapper is not what we answer with
    assert all(m.id != "engine-dead-after-oom" or not m.confident or m is not report.matches[0] for m in report.matches)


def test_root_cause_beats_the_wrapper_and_distinct_errors_come_in_log_order():
    paste = """WARNING 08-20 10:18:39 scheduler.py:1141] Sequence group 147 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=1
ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}
"""
    report = matcher().match(paste)
    assert report.root_cause == "no-memory-for-cache-blocks"  # fatal beats a warning, inner beats wrapper
    ids = [m.id for m in report.confident]
    if "preemption-kv-cache-space" in entry_ids():
        assert "preemption-kv-cache-space" in ids


def test_no_confident_match_gives_an_issue_link_with_the_line():
    report = matcher().match("ModuleNotFoundError: No module named 'flash_attn'\n")
    assert report.root_cause is None
    assert report.new_issue_url.startswith("https://github.com/kvkb/kvkb/issues/new?template=new-entry.yml&title=")
    assert "flash_attn" in report.new_issue_url


def test_the_issue_link_quotes_the_line_that_reports_a_failure_not_the_greeting_above_it():
    paste = ("Hi, I run a chat UI in front of a local server.\n"
             "Whatever I set, I get this error:\n"
             "Request failed: the upstream returned an unexpected status 500\n")
    url = matcher().match(paste).new_issue_url
    assert url is not None and "upstream+returned" in url and "chat+UI" not in url


def test_base_url_is_configurable(monkeypatch):
    from kvkb.matcher.engine import Matcher

    m = Matcher({"entries": [], "signatures": []}, "http://localhost:8000/kb")
    assert m.url("x-y") == "http://localhost:8000/kb/errors/x-y/"
    monkeypatch.setenv("KVKB_BASE_URL", "https://mirror.example/")
    assert Matcher({"entries": [], "signatures": []}).url("x-y") == "https://mirror.example/errors/x-y/"


def test_match_path_imports_no_pydantic_torch_or_jinja(tmp_path):
    from matcher_helpers import cli_env, sane_kb_copy

    kb = sane_kb_copy(tmp_path / "kb")
    env = cli_env(kb)
    subprocess.run([sys.executable, "-m", "kvkb.cli.main", "index"], env=env, check=True, capture_output=True)
    code = (
        "import sys; from kvkb.matcher.cli import main; rc = main(['--json', sys.argv[1]]);"
        "bad = [m for m in ('pydantic', 'jinja2', 'mkdocs', 'vllm', 'torch', 'yaml') if m in sys.modules];"
        "print(bad, file=sys.stderr); sys.exit(3 if bad else rc)"
    )
    run = subprocess.run([sys.executable, "-c", code, str(VLLM_LOGS / "kv-too-small.log")], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_interpreter_start_loads_no_import_hook():
    """The editable install is a plain .pth line (pyproject: dev-mode-dirs) and kvkb/__init__.py
    finds matcher/ beside it. An import-hook finder (setuptools' editable default for this layout)
    imports pathlib and importlib.util at every interpreter start: ~20 ms, most of the margin kbmatch
    has over its floor (the interpreter with rapidfuzz, re and json imported: goal 1.75x that)."""
    code = "import sys, kvkb.matcher; print(kvkb.matcher.__file__); print(' '.join(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    where, modules = run.stdout.splitlines()
    assert where.endswith("matcher/__init__.py")
    loaded = modules.split()
    assert [m for m in loaded if "editable" in m or m in ("pathlib", "importlib.util")] == []


def test_a_paste_costs_no_avoidable_imports(tmp_path):
    """Start-up is measured: a plain run must not import what only --json, --explain, --help,
    a rebuild or a big log need (each costs milliseconds)."""
    from matcher_helpers import cli_env, sane_kb_copy

    kb = sane_kb_copy(tmp_path / "kb")
    env = cli_env(kb)
    subprocess.run([sys.executable, "-m", "kvkb.cli.main", "index"], env=env, check=True, capture_output=True)
    avoidable = ("argparse", "json", "hashlib", "dataclasses", "inspect", "textwrap", "mmap", "pydantic", "yaml")
    code = (
        "import sys; before = set(sys.modules); from kvkb.matcher.cli import main; rc = main([sys.argv[1]]);"
        f"bad = [m for m in {avoidable!r} if m in sys.modules and m not in before];"
        "print(bad, file=sys.stderr); sys.exit(3 if bad else rc)"
    )
    run = subprocess.run([sys.executable, "-c", code, str(VLLM_LOGS / "kv-too-small.log")], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_a_warning_healthy_runs_print_is_never_a_confident_root_cause():
    # VLLM_CPU_KVCACHE_SPACE unset is warned on every CPU start-up; "Possibly too large swap space"
    # whenever swap is above 40% of RAM: neither shows that anything failed (kb signatures[].advisory)
    healthy = ("WARNING 06-21 08:32:55 [cpu.py:120] VLLM_CPU_KVCACHE_SPACE not set. Using 4 GiB for KV cache.\n"
               "WARNING 06-21 08:32:55 config.py:1148] Possibly too large swap space. 4.00 GiB out of the 7.74 GiB "
               "total CPU memory is allocated for the swap space.\n"
               "INFO 06-21 08:33:55 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000\n")
    report = matcher().match(healthy)
    assert report.root_cause is None and not report.confident
    shown = {m.id: m.confidence for m in report.matches}
    assert shown.get("cpu-kv-cache-space") == "possible" and shown.get("swap-space-too-large") == "possible"
    assert all("healthy runs" in m.notes["advisory"] for m in report.matches if m.id in shown)


def test_the_error_beside_an_advisory_warning_is_still_confident():
    text = ("WARNING 06-21 08:32:55 config.py:1148] Possibly too large swap space. 12.00 GiB out of the 15.01 GiB "
            "total CPU memory is allocated for the swap space.\n"
            "ValueError: Too large swap space. 16.00 GiB out of the 15.01 GiB total CPU memory is allocated for the "
            "swap space.\n")
    report = matcher().match(text)
    assert report.root_cause == "swap-space-too-large"
    assert "advisory" not in report.matches[0].notes


def test_the_long_context_warning_is_no_profiling_step():
    # "may cause OOM during the initial memory profiling phase" is said before any profiling ran
    text = ("WARNING 06-21 08:32:55 arg_utils.py:1145] The model has a long context length (131072). This may cause "
            "OOM errors during the initial memory profiling phase, or result in low performance due to small KV cache "
            "space. Consider setting --max-model-len to a smaller value.\n")
    assert matcher().match(text).reached != "memory profiled"


def test_a_runtimes_text_in_another_programs_paste_is_no_confident_claim():
    # NCCL, torch and XLA print the same out-of-memory texts under SGLang, Ollama or a JAX trainer: with
    # another program in view and vLLM nowhere, the vLLM entry is only likely
    xla = ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of "
           "memory in memory space hbm. Used 63.80G of 30.75G hbm. Exceeded hbm capacity by 33.05G.\n")
    assert matcher().match(xla).root_cause == "tpu-hbm-resource-exhausted"  # nothing says whose run it was
    other = '  File "/opt/easydel/trainers/base.py", line 88, in train_step\n' + xla
    report = matcher().match(other)
    assert report.root_cause is None
    m = report.matches[0]
    assert m.id == "tpu-hbm-resource-exhausted" and m.confidence == "likely"
    assert any("never vLLM" in f.says for f in m.evidence)
    # the same frames under vLLM: vLLM's run, the claim stands
    assert matcher().match('  File "/usr/lib/python3/site-packages/vllm/worker/tpu_worker.py", line 9, in x\n'
                           + other).root_cause == "tpu-hbm-resource-exhausted"


def test_a_signal_is_a_meaning_word():
    # Ray's C++ core reports every fatal signal alike; SIGBUS is a shared-memory page with no room,
    # SIGSEGV a crash: one word apart, other errors
    line = "(RayWorkerWrapper pid=2) [2024-07-25 10:46:00,050 E 2 2] logging.cc:440: *** {} received at time=1721904360 on cpu 140 ***\n"
    assert matcher().match(line.format("SIGBUS")).root_cause == "container-shm-too-small"
    report = matcher().match(line.format("SIGSEGV"))
    assert report.root_cause is None and "container-shm-too-small" not in [m.id for m in report.confident]


def test_a_line_with_words_of_failure_is_never_called_error_free():
    # a wrapper's prose ("Failed to load model with Error: ...") is not a record kind the segmenter
    # knows, but it is an error: the answer must not say the paste has none
    report = matcher().match("I am unable to load the model.\nFailed to load model with Error: something odd\n")
    assert report.no_error is None


def test_a_hugging_face_flax_model_is_another_program():
    text = ("XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space "
            "hbm. Used 30.21G of 15.48G hbm. Exceeded hbm capacity by 14.73G.\n"
            '     Operator: op_name="pjit(generate)/jit(main)/FlaxGemmaForCausalLMModule/model/embed_tokens"\n')
    report = matcher().match(text)
    assert report.root_cause is None and report.matches[0].confidence == "likely"


def test_a_log_flattened_onto_one_line_reads_as_the_log():
    # its line breaks lost on the way (a chat message, a form field): logger headers, the traceback's
    # header, frames and the exception line each start a line again
    from kvkb.matcher.segment import unflatten

    log = ("ERROR 04-28 15:55:45 worker_base.py:157] Error executing method initialize_cache. This might cause deadlock in distributed execution.\n"
           "ERROR 04-28 15:55:45 worker_base.py:157] Traceback (most recent call last):\n"
           'ERROR 04-28 15:55:45 worker_base.py:157]   File "/opt/vllm/worker/worker.py", line 171, in initialize_cache\n'
           "ERROR 04-28 15:55:45 worker_base.py:157]     raise_if_cache_size_invalid(num_gpu_blocks,\n"
           'ERROR 04-28 15:55:45 worker_base.py:157]   File "/opt/vllm/worker/worker.py", line 335, in raise_if_cache_size_invalid\n'
           "ERROR 04-28 15:55:45 worker_base.py:157]     raise ValueError(\n"
           "ERROR 04-28 15:55:45 worker_base.py:157] ValueError: The model's max seq len (32768) is larger than the maximum number of "
           "tokens that can be stored in KV cache (23296). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n")
    flat = " ".join(log.split("\n"))
    assert unflatten(flat) == log.rstrip("\n").split("\n")
    assert matcher().match(flat).root_cause == matcher().match(log).root_cause == "max-model-len-exceeds-kv-cache"
    # prose quoting one log line is no flattened log
    prose = "I saw ERROR 04-28 15:55:45 worker_base.py:157] once, then it worked again " + "and again " * 20
    assert unflatten(prose) == [prose]


@pytest.mark.parametrize("text,entry", [
    # after a colon mid-sentence
    ("which exceeded the available Mamba cache blocks during engine initialization: ValueError: max_num_seqs (1024) "
     "exceeds available Mamba cache blocks (524)\n", "mamba-cache-blocks-below-max-num-seqs"),
    # inside markdown emphasis
    ("After loading the model it takes ~5-6 min of waiting until I get the **ValueError: No available memory "
     "for the cache blocks**:\n", "no-memory-for-cache-blocks"),
])
def test_an_exception_quoted_mid_sentence_is_read(text, entry):
    assert matcher().match(text).root_cause == entry


def test_an_exception_class_missing_its_first_letter_is_restored():
    # a terminal selection that starts one character late: "untimeError", "orch.cuda.OutOfMemoryError"
    text = ("untimeError: CUDA error: out of memory\n"
            "INFO 12-18 21:44:36 model_runner.py:394] Capturing the model for CUDA graphs. This may lead to unexpected "
            "consequences if the model is not static.\n")
    assert matcher().match(text).root_cause == "cuda-oom-during-cudagraph-capture"
    assert matcher().match(text.replace("untimeError", "RuntimeError")).root_cause == "cuda-oom-during-cudagraph-capture"
    # too short to tell, or the end of two classes: left as pasted
    from kvkb.matcher.engine import Matcher

    m = matcher()
    assert m._restored_type("Error") == "Error" and m._restored_type("unknownThingError") == "unknownThingError"


def test_the_persons_killed_about_a_device_oom_is_no_host_ram_kill():
    text = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 640.00 MiB.\n"
            "GPU 0 has a total capacity of 79.25 GiB of which 287.94 MiB is free.\n"
            "The OOM killed the EngineCore and every in-flight request (`EngineDeadError`).\n")
    assert "host-oom-killer" not in [m.id for m in matcher().match(text).matches]
    # the same words with no device OOM in view still point at the host
    words = "The OOM killed the EngineCore and every in-flight request, memory ran out.\n"
    assert "host-oom-killer" in [m.id for m in matcher().match(words).matches]


def test_a_ray_actors_death_is_a_wrapper_not_a_non_memory_root():
    # Ray reports that an actor died; why (often the kernel's OOM killer) is not in that line
    text = ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
            "\tclass_name: ActorWorker\n")
    report = matcher().match(text)
    assert report.not_memory is None
    assert matcher().match("ValueError: something unrelated happened in the tokenizer config\n").not_memory is not None


def test_memory_that_is_insufficient_is_never_called_not_a_memory_error():
    # a device's shortage in other words (a translated or reworded allocator message) is still a shortage
    text = "RuntimeError: NPU memory is insufficient. Attempting to allocate 96.00 MiB (NPU 0; free 12.00 MiB)\n"
    assert matcher().match(text).not_memory is None


def test_a_traceback_of_hugging_faces_loader_with_no_vllm_is_another_program():
    # a trainer loading checkpoint shards onto the NPU with transformers/accelerate: torch_npu's OOM text,
    # no vLLM anywhere; the vLLM entry's advice would not apply
    text = ('  File "/usr/lib/python3.10/site-packages/transformers/modeling_utils.py", line 936, in _load_state_dict_into_meta_model\n'
            "    set_module_tensor_to_device(model, param_name, param_device, **set_module_kwargs)\n"
            '  File "/usr/lib/python3.10/site-packages/accelerate/utils/modeling.py", line 400, in set_module_tensor_to_device\n'
            "    new_value = value.to(device)\n"
            "RuntimeError: NPU out of memory. Tried to allocate 386.00 MiB (NPU 2; 60.97 GiB total capacity; 59.57 GiB "
            "already allocated; 59.57 GiB current active; 16.54 MiB free; 60.06 GiB reserved in total by PyTorch)\n")
    report = matcher().match(text)
    assert report.root_cause is None and report.matches[0].id == "npu-out-of-memory"
    assert report.matches[0].confidence == "likely"
    # under vLLM (its frames in the paste) the same lines are vLLM's
    vllm = '  File "/usr/lib/python3.10/site-packages/vllm/model_executor/model_loader/loader.py", line 9, in load_model\n'
    assert matcher().match(vllm + text).root_cause == "npu-out-of-memory"


def test_an_oom_raised_in_a_whole_traceback_with_no_vllm_frame_is_not_vllms():
    # RL frameworks run a trainer beside vLLM: the trainer's OOM, in a traceback whose head is in view
    # and none of whose frames is vLLM's, is not vLLM's error even when the paste names vLLM elsewhere
    tb = ("INFO 03-01 09:59:00 [api_server.py:1000] vLLM API server version 0.10.0\n"
          "INFO 03-01 10:00:00 [gpu_model_runner.py:1800] Model loading took 14.2 GiB and 12.3 seconds\n"
          "Application startup complete.\n"
          "Traceback (most recent call last):\n"
          '  File "/opt/conda/lib/python3.10/runpy.py", line 196, in _run_module_as_main\n'
          '  File "/opt/conda/lib/python3.10/site-packages/verl/trainer/fsdp_workers.py", line 88, in update_actor\n'
          "    loss.backward()\n"
          '  File "/opt/conda/lib/python3.10/site-packages/torch/_tensor.py", line 521, in backward\n'
          "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
          "79.25 GiB of which 1.02 GiB is free.\n")
    report = matcher().match(tb)
    assert report.root_cause is None
    m = report.matches[0]
    assert m.id == "cuda-oom-during-serving" and m.confidence == "likely"
    assert any("'verl'" in f.says and "none of its frames is vLLM's" in f.says for f in m.evidence)
    # one vLLM frame in it: vLLM's error, confident
    vllm = tb.replace("  File \"/opt/conda/lib/python3.10/site-packages/torch/_tensor.py\"",
                      '  File "/opt/conda/lib/python3.10/site-packages/vllm/v1/worker/gpu_model_runner.py", line 9, in execute_model\n'
                      '  File "/opt/conda/lib/python3.10/site-packages/torch/_tensor.py"')
    assert matcher().match(vllm).root_cause == "cuda-oom-during-serving"
    # its head cut off, or frames left out by the person: whose frames they were is not known
    headless = tb.replace("Traceback (most recent call last):\n", "")
    assert matcher().match(headless).root_cause == "cuda-oom-during-serving"
    elided = tb.replace("    loss.backward()\n", "    loss.backward()\n...\n")
    assert matcher().match(elided).root_cause == "cuda-oom-during-serving"
    # ... unless vLLM is named nowhere: then the frames' package (verl) is whose run it was
    unnamed = headless.replace("INFO 03-01 09:59:00 [api_server.py:1000] vLLM API server version 0.10.0\n", "")
    assert matcher().match(unnamed).root_cause is None


def test_another_programs_out_of_memory_gets_no_vllm_stage_from_words():
    # llama.cpp's log says "out of memory" and "failed to load model": its stages are not vLLM's
    text = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 14136.04 MiB on device 0: cudaMalloc failed: out of memory\n"
            "srv    load_model: failed to load model, 'models/x.gguf'\n")
    assert [m.id for m in matcher().match(text).matches if m.confidence != "possible"] == []
    # the same words from a person running vLLM: the start-up OOM, likely
    said = "When I launch vllm serve it fails to load the model: CUDA out of memory\n"
    m = matcher().match(said).matches[0]
    assert (m.id, m.confidence) == ("cuda-oom-during-startup", "likely")


_STARTUP_OOM = ("INFO 05-01 10:00:00 [gpu_model_runner.py:1500] Starting to load model /models/m...\n"
                "Traceback (most recent call last):\n"
                '  File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 1510, in load_model\n'
                "    self.model = model_loader.load_model(vllm_config=self.vllm_config)\n"
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                "23.55 GiB of which 1.10 GiB is free.\n")


@pytest.mark.parametrize("dress", ["json", "escaped", "quote", "indented", "list"])
def test_a_log_stored_as_data_or_indented_as_a_whole_reads_as_the_log(dress):
    # the traceback's own indentation tells frames, source lines and the exception apart: a dress that
    # adds its own over every line, or keeps the log as data, must not hide them
    import json as _json

    lines = _STARTUP_OOM.rstrip("\n").split("\n")
    text = {"json": "\n".join(_json.dumps({"log": ln + "\n", "stream": "stderr"}) for ln in lines),
            "escaped": '{"status": "FAILED", "error": "' + "\\n".join(ln.replace('"', '\\"') for ln in lines) + '"}',
            "quote": "\n".join("> " + ln for ln in lines),
            "indented": "\n".join("    " + ln for ln in lines),
            "list": "1. run it:\n   ```\n" + "\n".join("   " + ln for ln in lines) + "\n   ```\n2. it dies"}[dress]
    report = matcher().match(text)
    # confident only with the stage in view: the frame (load_model) under the dress was read
    assert report.root_cause == "cuda-oom-during-startup", [(m.id, m.confidence) for m in report.matches]


def test_escaped_line_breaks_in_prose_stay_prose():
    from kvkb.matcher.segment import dedent_blocks, unescape_log

    assert unescape_log('print("a\\nb\\nc")') is None  # no traceback or log shape in it
    assert unescape_log('{"level": "info"}') is None  # a JSON record with no text field
    assert unescape_log("{not json at all}") is None
    assert unescape_log('{"log": "ERROR x\\n"}') == ["ERROR x"]
    # a quoted block inside an otherwise unindented paste: only the block loses its indent
    assert dedent_blocks(["Hi", "  ```", "  File \"a.py\", line 1, in f", "  ```", "  two"]) == \
        ["Hi", "  ```", 'File "a.py", line 1, in f', "  ```", "  two"]
    assert dedent_blocks(["  a", "    b", ""]) == ["a", "  b", ""]
    assert dedent_blocks(["a", "  b"]) == ["a", "  b"]
    # a JSON logger's record (message beside its time) is a log line; an HTTP error body is not
    assert unescape_log('{"time": "2025-01-01T00:00:00Z", "message": "ERROR a\\nb"}') == ["ERROR a", "b"]
    assert unescape_log('{"object": "error", "message": "too long\\nend", "code": 400}') is None


def test_an_exceptions_text_logged_without_its_class_is_that_error_word_for_word():
    # V0's engine logs `logger.exception(e)`: str(e), no class, then the traceback (often cut)
    line = ("ERROR 08-20 03:10:01 [engine.py:467] CUDA out of memory. Tried to allocate 33.75 GiB. GPU 0 has a total "
            "capacity of 44.40 GiB of which 26.88 GiB is free.\n")
    step = "INFO 08-20 03:10:00 [model_runner.py:1112] Model loading took 16.5557 GiB and 2.803817 seconds\n"
    assert matcher().match(step + line).root_cause == "cuda-oom-during-startup"
    m = matcher().match(line).matches[0]  # no stage in view
    assert (m.id, m.confidence) == ("cuda-oom-during-startup", "likely")
    # only word for word: a logged sentence that merely resembles the text is no claim
    loose = "ERROR 08-20 03:10:01 [engine.py:467] we ran CUDA out of memory while allocating 33.75 GiB on GPU 0 of 44.40 GiB\n"
    assert matcher().match(step + loose).root_cause is None


def test_a_launchers_prefix_learned_from_the_paste_shows_the_traceback_it_hid():
    # DJL Serving puts "WARN  PyProcess W-252-model-stderr: " in front of every line of the model's
    # stderr: no known shape, but the same text up to ': ' on many lines, hiding the frames
    pre = "WARN  PyProcess W-252-model-stderr: "
    log = [pre + "2024-02-13 20:43:43,457     ERROR worker.py:405 -- Unhandled error: ray::RayWorkerVllm.execute_method()",
           pre + '  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/ray_utils.py", line 30, in execute_method',
           pre + "    return executor(*args, **kwargs)",
           pre + '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 125, in warm_up_model',
           pre + "    self.model_runner.capture_model(self.gpu_cache)"]
    m = matcher().match("\n".join(log) + "\n").matches[0]
    assert (m.id, m.confidence) == ("cuda-oom-during-cudagraph-capture", "likely")
    from kvkb.matcher.segment import strip_learned_prefix

    # a prefix that hides no traceback, or repeated lines of one log, are left as they are
    plain = ["note: a", "note: b", "note: c"]
    assert strip_learned_prefix(plain) == plain
    dup = ["INFO 04-06 22:52:16 [kv_cache_utils.py:566] GPU KV cache size: 54,048 tokens"] * 4 + ['  File "x.py", line 1, in f']
    assert strip_learned_prefix(dup) == dup


def test_an_exception_pasted_above_its_cut_traceback_takes_the_traceback_stage():
    # the person pasted the error first, then its traceback, cut before the exception comes again
    text = ("torch.cuda.OutOfMemoryError: HIP out of memory. Tried to allocate 4.70 GiB. GPU 0 has a total capacity of "
            "63.98 GiB of which 3.06 GiB is free.\n\n"
            "Traceback (most recent call last):\n"
            '  File "/opt/conda/lib/python3.9/site-packages/vllm/entrypoints/api_server.py", line 106, in <module>\n'
            "    engine = AsyncLLMEngine.from_engine_args(\n"
            '  File "/opt/conda/lib/python3.9/site-packages/vllm/engine/async_llm_engine.py", line 348, in from_engine_args\n')
    assert matcher().match(text).root_cause == "cuda-oom-during-startup"
    # without the traceback nothing shows the stage
    assert matcher().match(text.split("\n\n")[0] + "\n").root_cause is None


def test_a_stage_split_oom_with_no_stage_is_never_confident_whatever_ranks_second():
    # with nothing showing serving, start-up entries get a bonus: an unrelated start-up entry may rank
    # second, above the OOM's serving and capture siblings; they still share the wording
    table = ("| Runner | `Available KV cache memory` (profiler) | KV pool | startup | saturating load |\n"
             "|---|---|---|---|---|\n"
             "| MRv2 | 11.43 GiB | 103,812 tokens | OK | engine dies: `torch.OutOfMemoryError: CUDA out of memory. Tried to "
             "allocate 52.00 MiB. GPU 0 ... 42.06 MiB is free` on both ranks |\n")
    report = matcher().match(table)
    assert report.root_cause is None
    # a table's cells are a person's summary, no step the log reached; its words still say "load"
    m = report.matches[0]
    assert (m.id, m.confidence) == ("cuda-oom-during-serving", "likely")
    assert any("their words" in f.says for f in m.evidence)


def test_the_persons_words_order_stage_siblings_when_nothing_else_shows_the_stage():
    # "it OOMed at capture": still likely (no frame or step shows it), but capture comes first
    said = ("On a 24 GB laptop GPU it OOMed at capture:\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 500.00 MiB. GPU 0 has a total capacity of "
            "31.98 GiB of which 136.00 MiB is free.\n")
    m = matcher().match(said).matches[0]
    assert (m.id, m.confidence) == ("cuda-oom-during-cudagraph-capture", "likely")


def test_a_traceback_through_another_programs_package_with_vllm_named_nowhere_is_that_program():
    # IPython's layout (no traceback header in view): Unsloth loading through bitsandbytes, no vLLM
    text = ("File ~/anaconda3/envs/unsloth/lib/python3.11/site-packages/bitsandbytes/functional.py:1212, in quantize_4bit(A, absmax)\n"
            "   1211     mod = dtype2bytes[quant_storage] * 2\n"
            "-> 1212     out = torch.zeros(((n + 1) // mod, 1), dtype=quant_storage, device=A.device)\n"
            "\n"
            "RuntimeError: CUDA driver error: out of memory\n")
    report = matcher().match(text)
    assert report.root_cause is None and report.matches[0].confidence == "likely"
    assert any("'bitsandbytes'" in f.says for f in report.matches[0].evidence)


def test_pytorchs_allocator_warning_is_a_hint_named_for_pytorch():
    # torch 2.13+ logs every failed cudaMalloc, then frees its cache and retries: healthy start-ups print it too
    line = ("[rank1]:[W812 16:00:28.643448608 CUDACachingAllocator.cpp:3933] memory allocation failed with OOM on "
            "device 1 while trying to allocate 20971520 bytes (free: 15794176, total: 150111977472).\n")
    report = matcher().match(line)
    assert report.root_cause is None
    m = report.matches[0]
    assert m.id in ("cuda-oom-during-startup", "cuda-oom-during-serving", "cuda-oom-during-cudagraph-capture")
    assert m.confidence == "possible" and m.notes["advisory"].startswith("PyTorch prints this line")
    # the OOM that follows when the retry fails too is the failure
    raised = line + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 1 has a total capacity of 139.80 GiB of which 15.06 MiB is free.\n"
    assert matcher().match(raised).matches[0].confidence == "likely"


def test_a_runtimeerror_carrying_another_classs_wording_is_that_entry():
    # vLLM's executors re-raise a worker's ValueError as RuntimeError; a paste may keep that class with its
    # text. vLLM's own words, whole to a sentence's end, are the entry's whichever process raised them
    text = "RuntimeError: max_num_seqs (256) exceeds available Mamba cache blocks (200).\n"
    assert matcher().match(text).root_cause == "mamba-cache-blocks-below-max-num-seqs"
    assert matcher().match(text.replace("RuntimeError", "ValueError")).root_cause == "mamba-cache-blocks-below-max-num-seqs"
    # the words cut inside the sentence: likely, and it says why
    cut = "RuntimeError: max_num_seqs (256) exceeds available Mamba cache blocks and so on\n"
    m = matcher().match(cut).matches[0]
    assert (m.id, m.confidence) == ("mamba-cache-blocks-below-max-num-seqs", "likely")
    assert any("not RuntimeError" in f.says for f in m.evidence)
    # a RuntimeError with words of no entry stays unmatched
    other = matcher().match("RuntimeError: the cache blocks were weighed and found wanting\n")
    assert not [m for m in other.matches if m.confidence != "possible"]


def test_an_oom_with_far_more_free_than_asked_is_not_memory_running_out():
    free = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a total capacity of "
            "79.11 GiB of which 60.00 GiB is free. Including non-PyTorch memory, this process has 0 bytes memory in use.\n")
    log = 'INFO:     10.0.0.5:41234 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n' + free
    report = matcher().match(log)
    assert report.root_cause is None
    m = report.matches[0]
    assert m.confidence == "likely" and any("memory did not run out" in f.says for f in m.evidence)
    # the same error with the device full is the OOM
    full = log.replace("60.00 GiB is free", "12.00 MiB is free")
    assert matcher().match(full).root_cause == "cuda-oom-during-serving"


def test_a_command_a_sentence_introduces_is_not_shown_as_the_error():
    # CJK prose then the command it introduces: the command is a quote to score, never "the first error"
    text = ("我用下面的命令启动了服务，命令如下：\n"
            "python -m vllm.entrypoints.openai.api_server --model my/model --tensor-parallel-size 8 --port 8000 \\\n"
            "  --gpu-memory-utilization 0.9\n")
    report = matcher().match(text)
    assert report.first_error is None
    from kvkb.matcher.render import report_text

    assert "No error in this paste" in report_text(report, 3, False)


def test_a_short_wording_in_a_first_person_sentence_is_the_persons_words():
    said = "I\u2019m experiencing an XPU out of memory error when fine-tuning a model with PyTorch 2.7.0+xpu on a laptop.\n"
    report = matcher().match(said)
    assert report.root_cause is None
    m = report.matches[0]
    assert (m.id, m.confidence) == ("xpu-out-of-memory", "likely")
    # the line a program printed is the error
    assert matcher().match("RuntimeError: XPU out of memory. Tried to allocate 2.00 GiB.\n").root_cause == "xpu-out-of-memory"


def test_a_log_lines_logger_names_the_program_when_vllm_is_named_nowhere():
    line = ("[2025-05-06 18:36:50,956] [ERROR] [axolotl.utils.models.load_model:1273] [PID:6160] [RANK:0] "
            "XPU out of memory. Tried to allocate 7.09 GiB. GPU 0 has a total capacity of 28.56 GiB.\n")
    m = matcher().match(line).matches[0]
    assert m.confidence == "likely" and any("'axolotl'" in f.says for f in m.evidence)
    # vLLM's own location ("[core.py:500]") is a file, not a logger of another program
    own = line.replace("[axolotl.utils.models.load_model:1273]", "[core.py:500]")
    assert matcher().match(own).root_cause == "xpu-out-of-memory"


def test_a_device_with_one_oom_entry_has_no_stage_to_contradict():
    # CANN's report in a worker's error, then the API server's serving traceback: the NPU's entry covers every stage
    p = "(EngineCore_DP0 pid=10) ERROR 12-03 12:16:41 [core.py:710] "
    q = "(APIServer pid=9) ERROR 12-03 12:16:41 [async_llm.py:480] "
    text = (p + "        Possible Cause: Available memory is insufficient.\n"
            + p + "        Solution: Close applications not in use.\n"
            + p + "', please check the stack trace above for the root cause\n"
            + q + "AsyncLLM output_handler failed.\n"
            + q + "Traceback (most recent call last):\n"
            + q + '  File "/vllm-workspace/vllm/vllm/v1/engine/async_llm.py", line 439, in output_handler\n'
            + q + "    outputs = await engine_core.get_output_async()\n")
    assert matcher().match(text).root_cause == "npu-out-of-memory"


def test_requests_aborted_right_after_an_error_say_it_came_while_serving():
    frames = ('  File "/env/lib/python3.9/site-packages/vllm/model_executor/layers/linear.py", line 122, in apply\n'
              "    return F.linear(x, layer.weight, bias)\n")
    oom = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 426.00 MiB. GPU 0 has a total capacity of 23.6 GiB of which 20.1 MiB is free.\n"
    abort = "2024-08-19 09:56:50,278 vllm.engine.async_llm_engine 156873 INFO     Aborted request 98e28f78.\n"
    assert matcher().match(frames + oom + abort).root_cause == "cuda-oom-during-serving"
    # without the aborts nothing shows the stage
    assert matcher().match(frames + oom).root_cause is None


def test_a_bar_quoting_a_traceback_is_taken_off_and_a_trainers_frames_show_whose_run_it_is():
    # a report quoting the traceback under an indented bar (as Python's exception groups print "  | "):
    # its frames are a trainer's, never vLLM's, so Habana's runtime text is that trainer's error
    bar = "    \t| "
    text = "\n".join([
        "  * 1 x RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::268435456 (256)MB",
        bar + "Traceback (most recent call last):",
        bar + '  File "/home/u/venv/lib/python3.10/site-packages/voir/cli.py", line 128, in main',
        bar + "\tov(sys.argv[1:] if argv is None else argv)",
        bar + '  File "/home/u/bench/__main__.py", line 120, in train',
        bar + "\tloss = self.model(**data)",
        bar + "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::268435456 (256)MB",
    ]) + "\n"
    report = matcher().match(text)
    assert report.root_cause is None
    assert report.matches[0].id == "hpu-devmem-allocation-failed" and report.matches[0].confidence == "likely"


def test_keras_on_a_tpu_is_another_program_not_vllm():
    paste = ('keras_nlp.models.GemmaCausalLM.from_preset("hf://google/gemma-2-27b-it")\n\n'
             "#XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 4.39G. "
             "That was not possible. There are 2.30G free.; (0x0x0_HBM0)\n")
    report = matcher().match(paste)
    assert report.root_cause is None
    assert report.matches and report.matches[0].id == "tpu-hbm-resource-exhausted"  # likely, with the reason
    assert "'keras', never vLLM" in " ".join(f.says for f in report.matches[0].evidence)


def test_a_log_kept_with_escaped_line_breaks_orders_its_lines_as_the_log_does():
    # all its lines are line 1 of the paste: the error pasted above the steps (or the cut traceback)
    # that led to it still takes their stage
    above_steps = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 70.00 MiB. GPU 0 has a total capacity "
                   "of 23.65 GiB of which 10.12 MiB is free.\n"
                   "INFO 07-11 13:46:49 model_runner.py:854] Capturing the model for CUDA graphs. This may lead to "
                   "unexpected consequences if the model is not static.\n"
                   "INFO 07-11 13:46:49 model_runner.py:858] CUDA graphs can take additional 1~3 GiB memory per GPU.\n")
    above_tb = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.70 GiB. GPU 0 has a total capacity of "
                "63.98 GiB of which 3.06 GiB is free.\n\n"
                "Traceback (most recent call last):\n"
                '  File "/x/vllm/worker/worker.py", line 1, in determine_num_available_blocks\n'
                "    self.model_runner.profile_run()\n"
                '  File "/x/vllm/worker/model_runner.py", line 2, in profile_run\n')
    for paste, want in ((above_steps, "cuda-oom-during-cudagraph-capture"), (above_tb, "cuda-oom-during-startup")):
        assert matcher().match(paste).root_cause == want
        assert matcher().match(paste.replace("\n", "\\n")).root_cause == want


def test_the_kernels_oom_report_quoted_up_to_its_flags_is_the_hosts_oom_kill():
    report = matcher().match("The dmesg output told the real story:\nVLLM::Worker_TP invoked oom-killer: gfp_mask=0x102cc2(GFP_HIGHUSER)\n")
    assert report.root_cause == "host-oom-killer"


def test_a_training_run_told_in_words_is_another_program_when_vllm_is_named_nowhere():
    oom = ("RuntimeError: NPU out of memory. Tried to allocate 1.04 GiB (NPU 4; 60.97 GiB total capacity; 56.45 GiB "
           "already allocated; 56.45 GiB current active; 1017.81 MiB free; 56.84 GiB reserved in total by PyTorch)\n")
    assert matcher().match(oom).root_cause == "npu-out-of-memory"
    report = matcher().match("在训练过程中，常见显存溢出报错，示例如下：\n" + oom)
    assert report.root_cause is None and report.matches[0].id == "npu-out-of-memory"  # likely, with the reason
    # an RL run whose rollout is vLLM names vLLM: its text stays vLLM's
    assert matcher().match("during training the vLLM rollout failed:\n" + oom).root_cause == "npu-out-of-memory"


def test_the_kernel_killing_llama_cpps_server_is_another_program():
    # the kernel names the process it kills: llama.cpp's server is not vLLM's run
    kill = ("[Mon May 25 08:35:10 2026] {} invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, "
            "oom_score_adj=0\n")
    assert matcher().match(kill.format("python3")).root_cause == "host-oom-killer"
    report = matcher().match(kill.format("llama-server"))
    assert report.root_cause is None and report.matches[0].id == "host-oom-killer"


def test_an_exception_hard_wrapped_at_a_sentence_end_is_joined_by_its_wording():
    # a writer wraps the assertion at its first sentence's end: the lines below go on with the wording
    # word for word, so they are the same message (the first sentence alone scores under the cutoff)
    text = ("AssertionError: Expandable segments are not compatible with memory pool.\n"
            "Please track https://github.com/pytorch/pytorch/issues/147851 for the\n"
            "latest updates.\n\nThere is no clean per-actor env override, so this combination is unusable.\n")
    report = matcher().match(text)
    assert report.root_cause == "sleep-mode-memory-not-released"
    assert report.matches[0].text.endswith("for the latest updates.")
    # a line of the writer's own after the sentence is not the wording's: nothing joins
    own = "AssertionError: Expandable segments are not compatible with memory pool.\nPlease help, this blocks our run.\n"
    assert matcher().match(own).root_cause is None


def test_a_quote_with_parts_left_out_is_likely_the_one_entry_whose_wording_holds_its_pieces():
    said = ('# at 0.95 every DP worker hard-fails ("Free memory ... less than desired GPU memory utilization").\n'
            "GPU_MEM_UTIL=0.90\n")
    report = matcher().match(said)
    assert report.root_cause is None
    m = report.matches[0]
    assert (m.id, m.confidence) == ("insufficient-free-memory-at-startup", "likely")
    assert any("left out" in f.says for f in m.evidence)
    # pieces out of order, or too short to tell, say nothing
    for text in ('# it fails ("less than desired GPU memory utilization ... Free memory on device")\n',
                 '# it fails ("Free ... memory ... utilization")\n'):
        assert not any(m.confidence == "likely" and m.id == "insufficient-free-memory-at-startup"
                       for m in matcher().match(text).matches), text


PATCH = '''--- a/vllm/v1/core/encoder_cache_manager.py
+++ b/vllm/v1/core/encoder_cache_manager.py
@@ -306,16 +306,26 @@
     max_tokens_per_mm_item = max(mm_max_toks_per_item.values())
-    if (
-        scheduler_config.disable_chunked_mm_input
-        and max_tokens_per_mm_item > scheduler_config.max_num_batched_tokens
-    ):
-        raise ValueError(
-            "Chunked MM input disabled but max_tokens_per_mm_item "
-            f"({max_tokens_per_mm_item}) is larger than max_num_batched_tokens"
-            f" ({scheduler_config.max_num_batched_tokens}). Please increase "
+    return compute_budget(max_tokens_per_mm_item)
'''


def test_a_patch_is_a_files_text_not_what_the_run_printed():
    from kvkb.matcher.segment import parse, segment_parsed

    # the raise a diff removes was never raised: no record, no claim, no entry proposed for its header
    lines = list(enumerate(PATCH.splitlines(), 1))
    assert segment_parsed(parse(lines))[0] == []
    report = matcher().match(PATCH)
    assert report.confident == [] and report.new_issue_url is None
    # the same error raised in the run, after the patch, is read
    ran = PATCH + ("ValueError: Chunked MM input disabled but max_tokens_per_mm_item (16384) is larger than "
                   "max_num_batched_tokens (8192). Please increase max_num_batched_tokens.\n")
    assert matcher().match(ran).root_cause == "mm-item-exceeds-max-num-batched-tokens"
    # a comment the change adds is a person's note of the error they hit
    noted = PATCH.replace("+    return", "+    # ValueError: max_num_batched_tokens (512) is smaller than max_model_len (32768).\n+    return")
    assert matcher().match(noted).root_cause == "max-num-batched-tokens-below-max-model-len"
    # a log file kept in a repository, patched: its lines are what a run printed
    log = ("--- a/run-0.txt\n+++ b/run-0.txt\n@@ -1,2 +1,2 @@\n-started\n+ValueError: Chunked MM input disabled but "
           "max_tokens_per_mm_item (16384) is larger than max_num_batched_tokens (8192).\n")
    assert matcher().match(log).root_cause == "mm-item-exceeds-max-num-batched-tokens"


def test_a_web_log_views_line_numbers_between_the_lines_are_not_the_log():
    text = ("ERROR 08-01 22:42:47 [worker_base.py:1399] Traceback (most recent call last):\nActions for L9650\n9650\n"
            'ERROR 08-01 22:42:47 [worker_base.py:1399]   File "/x/vllm/worker/worker_base.py", line 1395, in execute_method\n'
            "Actions for L9651\n9651\n"
            "ERROR 08-01 22:42:47 [worker_base.py:1399]     return func(*args, **kwargs)\n")
    from kvkb.matcher.segment import parse

    assert [row[1].strip()[:5] for row in parse(list(enumerate(text.splitlines(), 1)))] == ["Trace", "File ", "retur"]


KILL = ("kernel: Out of memory: Killed process 1389987 ({comm}) total-vm:17422176kB, anon-rss:14819268kB, file-rss:2560kB, "
        "shmem-rss:0kB, UID:1000 pgtables:29576kB oom_score_adj:0\n")


def test_the_kernel_killing_a_program_of_another_name_is_that_programs_run():
    # a load-test client killed, vLLM named nowhere: the kernel's text, not vLLM's run
    got = matcher().match(KILL.format(comm="evalscope"))
    assert got.confident == [] and got.matches[0].id == "host-oom-killer" and "'evalscope'" in " ".join(
        f.says for f in got.matches[0].evidence)
    # the names vLLM's processes run under (and the compilers its build runs) may be vLLM's
    for comm in ("python3", "pt_main_thread", "VLLM::Worker_TP", "vLLM::EngineCor", "cicc"):
        assert matcher().match(KILL.format(comm=comm)).root_cause == "host-oom-killer", comm


def test_a_value_written_as_a_placeholder_is_a_description_not_a_runs_line():
    # a manual's sample ("Tried to allocate xxx GiB") describes the error; a run prints the number
    got = matcher().match("RuntimeError: NPU out of memory. Tried to allocate xxx GiB.")
    assert got.confident == []
    assert matcher().match("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB.").root_cause == "npu-out-of-memory"


def test_a_pasted_html_comment_drops_the_line_numbers_and_reads_its_patch_as_code_too():
    # a comment stored as HTML goes through the same per-line reading as plain text
    from kvkb.matcher.segment import parse

    html = "<p>ERROR 08-01 22:42:47 [worker_base.py:1399] Traceback (most recent call last):</p><p>9650</p>"
    assert [row[1] for row in parse([(1, html)]) if row[1]] == ["Traceback (most recent call last):"]
    report = matcher().match("<pre>" + PATCH.replace("\n", "<br>") + "</pre>")
    assert report.confident == []


def test_a_fix_the_log_shows_already_applied_gives_way_to_the_next():
    log = "\n".join([
        "$ vllm serve org/big-model --tensor-parallel-size 2 --gpu-memory-utilization 0.9",
        "INFO 04-07 09:53:06 [api_server.py:1034] vLLM API server version 0.8.3",
        "ERROR 04-07 09:54:10 [core.py:387] EngineCore hit an exception: Traceback (most recent call last):",
        'ERROR 04-07 09:54:10 [core.py:387]   File "/usr/lib/python3/site-packages/vllm/v1/worker/gpu_model_runner.py", line 1186, in load_model',
        "ERROR 04-07 09:54:10 [core.py:387]     self.model = get_model(vllm_config=self.vllm_config)",
        "ERROR 04-07 09:54:10 [core.py:387] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total "
        "capacity of 23.55 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process has 22.42 GiB memory in use.",
    ])
    top = matcher().match(log).matches[0]
    assert top.id == "cuda-oom-during-startup" and top.confidence == "confident"
    assert "--tensor-parallel-size 2" not in top.fix_forms["cli"]
    assert "already runs with --tensor-parallel-size 2" in top.notes["already"]
    # without the setting in the log, the top fix stays
    plain = matcher().match(log.replace(" --tensor-parallel-size 2", "")).matches[0]
    assert "--tensor-parallel-size 2" in plain.fix_forms["cli"] and "already" not in plain.notes


def test_a_raise_statement_outside_a_traceback_is_code_not_output():
    # a review's view of a patch: the statement and its string literals were never printed
    diff = "\n".join([
        "vllm_ascend/worker/model_runner_v1.py:2191",
        "+            except RuntimeError as e:",
        "+                if 'out of memory' in str(e):",
        "+                    raise RuntimeError(",
        '+                        "CUDA out of memory occurred when warming up pooler "',
        '+                        f"({task=}) with {num_reqs} dummy requests. Please try "',
        '+                        "lowering `max_num_seqs` or `gpu_memory_utilization` when "',
        '+                        "initializing the engine.") from e',
    ])
    assert matcher().match(diff).confident == []
    # a flattened traceback whose raise line goes on to the error it raised is output
    flat = ('raise ValueError("No available memory for the cache blocks. " ValueError: No available memory for the '
            "cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.")
    assert matcher().match(flat).root_cause == "no-memory-for-cache-blocks"


def test_a_runtime_reason_naming_another_resource_keeps_a_generic_refusal_likely():
    log = "\n".join([
        "(EngineCore pid=1802921) [Error]: Failed to apply for memory.",
        "(EngineCore pid=1802921)         Check the remaining storage space in the hardware environment.",
        "(EngineCore pid=1802921) EE9999: Inner Error!",
        "(EngineCore pid=1802921) EE9999[PID: 1802934] 2026-04-17-09:16:39.992.922 (EE9999):  [SqCqManage]Alloc sq cq fail,"
        " stream_id=1984, retCode=0x7020023.[FUNC:Setup][FILE:stream.cc][LINE:673]",
    ])
    report = matcher().match(log)
    assert report.root_cause is None
    top = report.matches[0]
    assert top.id == "npu-out-of-memory" and top.confidence == "likely"
    assert "Alloc sq cq fail" in str(top.to_dict())
    # the memory allocation's own failure code in the trace settles it
    coded = log + "\n(EngineCore pid=1802921)        malloc physical memory failed, runtime result = 207001"
    assert matcher().match(coded).root_cause == "npu-out-of-memory"


def test_memory_in_cuda_graph_pools_puts_an_unstaged_oom_after_start_up():
    oom = ("ERROR 04-01 23:46:56 [engine.py:160] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 546.00 MiB. "
           "GPU 0 has a total capacity of 15.77 GiB of which 514.19 MiB is free. Process 562167 has 15.25 GiB memory in use. "
           "Of the allocated memory 13.73 GiB is allocated by PyTorch, with {pool} allocated in private pools (e.g., CUDA "
           "Graphs), and 736.86 MiB is reserved by PyTorch but unallocated.")
    top = matcher().match(oom.format(pool="46.00 MiB")).matches[0]
    assert top.id == "cuda-oom-during-serving" and top.confidence == "likely"
    assert any("private pools" in f.says for f in top.evidence)
    # none in the pools, or a pool that holds weights' worth (sleep mode's): the stage stays unknown
    for pool in ("0 bytes", "71.20 GiB"):
        top = matcher().match(oom.format(pool=pool)).matches[0]
        assert top.id == "cuda-oom-during-startup" and top.confidence == "likely"


def test_a_persons_sentence_that_tells_a_wordings_first_sentence_is_likely():
    text = ("The profile is a hybrid Mamba model whose default `max_num_seqs=1024` exceeds the available Mamba cache "
            "blocks on a two-GPU allocation, causing the engine to crash during CUDA-graph capture.\n")
    r = matcher().match(text)
    m = r.matches[0]
    assert r.root_cause is None and (m.id, m.confidence) == ("mamba-cache-blocks-below-max-num-seqs", "likely")
    assert "first sentence" in m.evidence[0].says
    # a first sentence that reports no failure is said of healthy runs too ("Free memory on device ... on
    # startup. Desired GPU memory utilization is ..." is an INFO line quoted in a PR)
    healthy = ("Free memory on device (177.66/178.36 GiB) on startup. Desired GPU memory utilization is (0.9, 160.53 GiB). "
               "Actual usage is 8.58 GiB for weights, and the KV cache gets the rest.\n")
    assert all(m.id != "insufficient-free-memory-at-startup" or m.confidence == "possible"
               for m in matcher().match(healthy).matches)
    # the same sentence that does not say the failure ('exceeds') is no paraphrase of it
    assert all(m.id != "mamba-cache-blocks-below-max-num-seqs" or m.confidence == "possible"
               for m in matcher().match(text.replace("exceeds", "matches")).matches)
