"""The stage an out-of-memory error happened in (start-up, CUDA-graph capture, serving), read from the
traceback's frames and the log's timeline; near misses; one notion of a device OOM (matcher/engine.py,
segment.py, score.py)."""

from __future__ import annotations

import pytest

from matcher_helpers import entry_ids, matcher

P = "(EngineCore_DP0 pid=7) ERROR 05-02 10:05:11 [core.py:711] "
TORCH_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.27 GiB. GPU 0 has a total capacity of "
             "79.19 GiB of which 3.56 GiB is free. Process 1 has 75.62 GiB memory in use.")


def frame(path: str, func: str, source: str) -> list[str]:
    return [f'{P}  File "/usr/local/lib/python3.12/dist-packages/{path}", line 100, in {func}', f"{P}    {source}"]


def tb(*frames: list[str], error: str = TORCH_OOM) -> str:
    lines = [f"{P}Traceback (most recent call last):"]
    for f in frames:
        lines += f
    return "\n".join(lines + [P + error]) + "\n"


def top(text: str):
    report = matcher().match(text)
    return report, report.matches[0] if report.matches else None


SERVING_FRAMES = {
    "worker_busy_loop": frame("vllm/v1/executor/multiproc_executor.py", "worker_busy_loop", "output = func(*args, **kwargs)"),
    "sampler": frame("vllm/v1/sample/sampler.py", "compute_logprobs", "return logits.log_softmax(dim=-1)"),
    "get_logprobs": frame("vllm/model_executor/layers/sampler.py", "get_logprobs", "logprobs = torch.log_softmax(x)"),
    "serving_chat": frame("vllm/entrypoints/openai/serving_chat.py", "chat_completion_full_generator", "async for res in g:"),
}


@pytest.mark.parametrize("name", sorted(SERVING_FRAMES))
def test_an_oom_raised_while_serving_is_the_serving_entry_with_its_frame_shown(name):
    report, m = top(tb(SERVING_FRAMES[name]))
    assert report.root_cause == "cuda-oom-during-serving", [(x.id, x.confidence) for x in report.matches]
    stage_facts = [f for f in m.evidence if f.says.startswith("stage serving")]
    assert stage_facts and stage_facts[0].line == 2  # the frame that decided it (line 1 is the Traceback header)


def test_a_startup_frame_below_the_rpc_loop_still_makes_it_startup():
    report, m = top(tb(SERVING_FRAMES["worker_busy_loop"],
                       frame("vllm/v1/worker/gpu_worker.py", "determine_available_memory", "self.model_runner.profile_run()")))
    assert report.root_cause == "cuda-oom-during-startup"


def test_capture_end_with_the_newer_torch_class_is_a_capture_oom():
    text = tb(frame("vllm/v1/worker/gpu_model_runner.py", "_capture_cudagraphs", "self._dummy_run(n)"),
              frame("torch/cuda/graphs.py", "capture_end", "super().capture_end()"),
              error="torch.AcceleratorError: CUDA error: out of memory")
    report, _ = top(text)
    assert report.root_cause == "cuda-oom-during-cudagraph-capture"


def test_the_timeline_after_engine_start_is_serving():
    text = ("INFO 05-02 10:00:02 [core.py:171] init engine (profile, create kv cache, warmup model) took 45.3 seconds\n"
            + TORCH_OOM + "\n")
    report, m = top(text)
    assert report.root_cause == "cuda-oom-during-serving"
    assert any(f.line == 1 and "last step the log reached" in f.says for f in m.evidence)


def test_no_stage_in_view_gives_no_confident_stage_claim():
    report, m = top(TORCH_OOM + "\n")
    assert report.root_cause is None
    assert m.id == "cuda-oom-during-startup" and m.confidence == "likely"
    assert any("no frame or log line shows the stage" in f.says for f in m.evidence)


def test_the_multimodal_profilers_warning_is_start_up():
    # vLLM's multi-modal profiler warns while it builds the profile run's dummy batch: start-up
    warn = ("WARNING 04-27 16:27:59 [profiling.py:245] The sequence length used for profiling (max_num_batched_tokens / "
            "max_num_seqs = 8192) is too short to hold the multi-modal embeddings in the worst case (16384 tokens in "
            "total, out of which {'image': 16384} are reserved for multi-modal embeddings).\n")
    report, _ = top(warn + TORCH_OOM + "\n")
    assert report.root_cause == "cuda-oom-during-startup"
    # what vLLM's code says of it (the release atlas): a WARNING of the dummy data built for the profile run
    from kvkb.atlas.store import load_default
    atlas = load_default()
    items = atlas.search("is too short to hold the multi-modal embeddings in the worst case")
    assert items and all(i.role == "log:WARNING" and "dummy_data" in i.qual for i in items)
    assert {"0.7.0", "0.8.4", "0.10.2"} <= {atlas.releases[k] for i in items for k in i.indexes}


def test_a_launch_command_before_the_error_is_start_up():
    report, _ = top("$ vllm serve Qwen/Qwen3-32B --tensor-parallel-size 2\n" + TORCH_OOM + "\n")
    assert report.root_cause == "cuda-oom-during-startup"


def test_a_model_constructor_frame_is_start_up_in_the_old_layout():
    text = ('Traceback (most recent call last):\n'
            '  File "/venv/lib/python3.9/site-packages/vllm/model_executor/models/llama.py", line 200, in __init__\n'
            '    self.layers = nn.ModuleList([\n'
            'torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 160.00 MiB (GPU 0; 79.35 GiB total '
            'capacity; 78.58 GiB already allocated; 145.19 MiB free; 78.58 GiB reserved in total by PyTorch)\n')
    report, _ = top(text)
    assert report.root_cause == "cuda-oom-during-startup"


def test_torch_oom_class_with_a_cut_message_is_the_stage_oom():
    text = tb(frame("vllm/worker/model_runner.py", "profile_run", "self.execute_model(model_input)"),
              error="torch.OutOfMemoryError: Error in model executi")
    report, m = top(text)
    assert report.root_cause == "cuda-oom-during-startup" and report.not_memory is None
    assert "PyTorch's device out-of-memory error" in m.evidence[0].says


def test_the_oom_text_inside_a_vllm_log_line_is_read():
    text = (P + "Failed to create unquantized linear weights: CUDA out of memory. Tried to allocate 896.00 MiB. GPU 0 has a "
            "total capacity of 93.09 GiB of which 739.81 MiB is free.\n"
            + tb(frame("vllm/model_executor/layers/linear.py", "create_weights", "weight = torch.empty(n)"),
                 error=TORCH_OOM))
    assert matcher().match(text).root_cause == "cuda-oom-during-startup"


# --- near misses: one word that carries the meaning differs ---------------------------------------


def test_a_driver_error_that_is_not_out_of_memory_is_no_oom():
    text = tb(frame("vllm/model_executor/layers/quantization/gptq_marlin.py", "process_weights_after_loading",
                    "ops.gptq_marlin_repack(w)"),
              error="RuntimeError: CUDA driver error: the operation cannot be performed in the present state")
    report, _ = top(text)
    assert report.root_cause is None
    assert report.not_memory is not None  # it is another error, shown as such


def test_xla_on_chip_memory_is_not_the_hbm_entry():
    line = ("RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory "
            "in memory space smem. Used 1.02M of 1.00M smem. Exceeded smem capacity by 16.0K.")
    report = matcher().match(line + "\n")
    assert report.root_cause != "tpu-hbm-resource-exhausted"
    if "tpu-smem-vmem-exhausted" in entry_ids():
        assert report.root_cause == "tpu-smem-vmem-exhausted"
    hbm = line.replace("smem", "hbm").replace("1.02M of 1.00M", "20.44G of 15.75G")
    assert matcher().match(hbm + "\n").root_cause == "tpu-hbm-resource-exhausted"


def test_a_wrapper_does_not_stand_in_for_a_memory_error_no_entry_covers():
    text = (P + "EngineCore failed to start.\n"
            "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory "
            "in memory space cmem. Used 9M of 8M cmem. Exceeded cmem capacity by 1M.\n")
    report = matcher().match(text)
    assert report.root_cause != "engine-dead-after-oom"


# --- one device OOM across torch's classes and layouts --------------------------------------------


def test_intel_xpu_oom_in_the_old_layout_as_runtime_error():
    text = tb(frame("vllm/worker/xpu_worker.py", "determine_num_available_blocks", "self.model_runner.profile_run()"),
              error="RuntimeError: XPU out of memory. Tried to allocate 1.50 GiB (GPU 0; 15.11 GiB total capacity; "
                    "13.20 GiB already allocated; 1.02 GiB free; 13.50 GiB reserved in total by PyTorch)")
    assert matcher().match(text).root_cause == "xpu-out-of-memory"


@pytest.mark.parametrize("cls", ["torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError", "RuntimeError"])
def test_the_same_cuda_oom_under_each_class_is_one_error(cls):
    text = tb(frame("vllm/v1/worker/gpu_model_runner.py", "profile_run", "self._dummy_run(n)"),
              error=TORCH_OOM.replace("torch.OutOfMemoryError", cls))
    assert matcher().match(text).root_cause == "cuda-oom-during-startup"


CAPTURE = ("INFO 07-11 13:46:49 model_runner.py:854] Capturing the model for CUDA graphs. This may lead to "
           "unexpected consequences if the model is not static.")
LOADING = "INFO 07-11 13:40:02 model_runner.py:254] Loading model weights took 13.5 GiB"
SERVING = "INFO 07-11 13:47:30 launcher.py:28] Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"
BARE_OOM = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 70.00 MiB. GPU 0 has a total "
            "capacity of 23.65 GiB of which 12.06 MiB is free.")


def test_an_error_pasted_above_its_start_up_takes_the_step_start_up_ended_at():
    report, m = top(f"{BARE_OOM}\n{LOADING}\n{CAPTURE}\n")
    assert (m.id, m.confidence) == ("cuda-oom-during-cudagraph-capture", "confident")
    assert any(f.line == 3 and "pasted above" in f.says for f in m.evidence)
    report, m = top(f"{BARE_OOM}\n{LOADING}\n")
    assert (m.id, m.confidence) == ("cuda-oom-during-startup", "confident")


def test_an_error_pasted_above_a_start_up_that_went_on_tells_no_stage():
    # the log after the error reached serving: nothing says where the error came
    report, m = top(f"{BARE_OOM}\n{CAPTURE}\n{SERVING}\n")
    assert m.confidence == "likely"
    # a later start-up (a relaunch) is not the error's start-up
    report, m = top(f"{BARE_OOM}\nINFO 07-11 13:40:00 api_server.py:177] vLLM API server version 0.5.1\n{CAPTURE}\n")
    assert m.confidence == "likely"
    # nor across a launch command pasted after it (a relaunch as likely as the same run)
    report, m = top(f"{BARE_OOM}\nvllm serve /models/x --port 8000\n{LOADING}\n{CAPTURE}\n")
    assert m.confidence == "likely"


def test_an_error_quoted_above_a_traceback_cut_in_the_rpc_servers_start_is_start_up():
    # V0's RPC server process (entrypoints/openai/rpc/server.py) builds its engine in run_rpc_server; the traceback the person
    # pastes below their quoted error is that error's, cut before it repeats it
    cut = ("Traceback (most recent call last):\n"
           '  File "/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/openai/rpc/server.py", line 230, in run_rpc_server\n'
           "    server = AsyncEngineRPCServer(async_engine_args, usage_context, rp")
    report, m = top(f"It OOMs now:\n`{BARE_OOM}`\n\n{cut}")
    assert (m.id, m.confidence) == ("cuda-oom-during-startup", "confident")
    report, m = top(f"It OOMs now:\n`{BARE_OOM}`\n")
    assert m.confidence == "likely"


def test_the_v0_async_engines_done_callback_is_serving_and_its_line_is_named():
    # V0's AsyncLLMEngine re-raises what killed its background loop in _raise_exception_on_finish: the
    # engine was built and sized before that loop ran, so an OOM it reports came while serving
    from kvkb.matcher.render import report_text

    text = ("Future exception was never retrieved\n"
            "future: <Future finished exception=OutOfMemoryError('CUDA out of memory. Tried to allocate 96.00 MiB. GPU 0 "
            "has a total capacty of 14.54 GiB of which 60.94 MiB is free. Process 868956 has 14.47 GiB memory in use.')>\n"
            "Traceback (most recent call last):\n"
            '  File "/workspace/vllm/engine/async_llm_engine.py", line 29, in _raise_exception_on_finish\n'
            "    task.result()\n")
    report, m = top(text)
    assert report.root_cause == "cuda-oom-during-serving"
    said = report_text(report, 3, color=False)
    assert "stage seen in the log: serving, line 4:" in said and "_raise_exception_on_finish" in said
    # without the frame nothing shows the stage: no confident claim
    report, m = top("\n".join(text.splitlines()[:2]) + "\n")
    assert report.root_cause is None and m.confidence == "likely"


def test_an_elision_line_cuts_the_timeline():
    # "..." between the last start-up step and the error: the person left lines out, start-up may have
    # finished and served in them, so the step above decides no stage
    head = "INFO 12-15 10:18:11 uniproc_executor.py:64] # GPU blocks: 31207\n"
    oom = TORCH_OOM + "\n"
    report, m = top(head + oom)
    assert report.root_cause == "cuda-oom-during-startup"  # right after KV sizing: start-up
    report, m = top(head + "...\n" + oom)
    assert report.root_cause is None and m.confidence == "likely"
    # inside a traceback "..." only skips frames: the frames still tell
    tb_cut = (f"{P}Traceback (most recent call last):\n{P}...\n"
              + "\n".join(frame("vllm/v1/worker/gpu_model_runner.py", "execute_model", "x = self.model(y)")) + "\n" + P + TORCH_OOM + "\n")
    assert top(tb_cut)[0].root_cause == "cuda-oom-during-serving"


def test_allocating_the_kv_cache_is_start_up():
    # V0's CacheEngine allocates the KV cache once, while the engine starts
    text = tb(frame("vllm/worker/cache_engine.py", "__init__", "self.gpu_cache = self._allocate_kv_cache("),
              frame("vllm/worker/cache_engine.py", "_allocate_kv_cache", "layer_kv_cache = torch.zeros(alloc_shape,"))
    assert top(text)[0].root_cause == "cuda-oom-during-startup"


V0_DUMPED = ("Error in model execution (input dumped to /tmp/err_execute_model_input_20241108-023641.pkl): CUDA out of "
             "memory. Tried to allocate 296.00 MiB. GPU 0 has a total capacity of 15.61 GiB of which 55.06 MiB is free.")


def test_v0s_model_execution_wrapper_alone_is_no_stage():
    # V0's profile_run runs execute_model under the same dump wrapper, and the dump file's name
    # ("err_execute_model_input_...pkl") is no frame: no confident stage
    report, m = top("[rank0]: torch.OutOfMemoryError: " + V0_DUMPED + "\n")
    assert report.root_cause is None and m.confidence == "likely"
    # the wrapper under V0's profile run is start-up, with a confident answer
    report, _ = top(tb(frame("vllm/worker/model_runner.py", "profile_run", "self.execute_model(model_input, kv_caches)"),
                       error="torch.OutOfMemoryError: " + V0_DUMPED))
    assert report.root_cause == "cuda-oom-during-startup"


def test_v0s_engine_loop_logging_the_errors_repr_is_serving():
    # MQLLMEngine logs an exception's repr only from the loops it runs after start-up
    line = "ERROR 12-19 09:33:44 engine.py:135] OutOfMemoryError('" + V0_DUMPED + "')\n"
    report, m = top(line)
    assert report.root_cause == "cuda-oom-during-serving"


@pytest.mark.parametrize("wrapper", ["RuntimeError: Orchestrator initialization failed: ",
                                     "RuntimeError: Stage initialization failed: "])
def test_a_wrapper_saying_initialization_failed_is_start_up(wrapper):
    report, _ = top(wrapper + TORCH_OOM.split(": ", 1)[1] + "\n")
    assert report.root_cause == "cuda-oom-during-startup"
    report, _ = top("RuntimeError: Orchestrator request failed: " + TORCH_OOM.split(": ", 1)[1] + "\n")
    assert report.root_cause is None  # a wrapper that names no step says nothing of the stage


def test_one_frame_with_its_exception_glued_on_one_line_is_read_as_a_traceback():
    # a web page's "Error Message": the frame, its source, "...", then PyTorch's OOM, on one line
    line = ('File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 381, in '
            "determine_available_memory cudagraph_memory_estimate = self.model_runner.profile_cudagraph_memory() ... "
            + TORCH_OOM + "\n")
    report, _ = top(line)
    assert report.root_cause == "cuda-oom-during-cudagraph-capture"


def test_v1s_scheduler_output_dump_is_serving():
    # V1 dumps the scheduler's output only when a step of serving fails
    text = ("ERROR 03-09 21:56:25 [dump_input.py:79] Dumping scheduler output for model execution: SchedulerOutput("
            "scheduled_new_reqs=[], num_scheduled_tokens={chatcmpl-1: 1}, total_num_scheduled_tokens=1)\n" + TORCH_OOM + "\n")
    report, _ = top(text)
    assert report.root_cause == "cuda-oom-during-serving"
