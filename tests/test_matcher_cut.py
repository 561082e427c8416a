"""Pastes cut before (or inside) their error line: what kbmatch still reads from them.

Each test here is about one mechanism (an indented log, an error line cut mid-word, the accelerator
a cut traceback runs on, the code a cut traceback stops in); each fails without it.
"""

from __future__ import annotations

from kvkb.matcher.normalize import strip_prefixes_shaped

from matcher_helpers import matcher


def first(text: str) -> tuple[str | None, str | None]:
    """(id, confidence) of the first answer kbmatch shows."""
    report = matcher().match(text)
    return (report.matches[0].id, report.matches[0].confidence) if report.matches else (None, None)


def shown(text: str) -> list[tuple[str, str]]:
    return [(m.id, m.confidence) for m in matcher().match(text).matches]


# --- an indented log keeps its record headers ------------------------------------------------------


def test_an_indented_log_line_keeps_its_header():
    line = "  (EngineCore pid=1332) ERROR 06-16 07:42:55 [core.py:1138]   File \".../vllm/v1/core/sched/scheduler.py\", line 467, in schedule"
    content, level, shape = strip_prefixes_shaped(line)
    assert level == "ERROR" and content.startswith("  File ") and "!" in shape


def test_an_indented_source_line_is_not_a_header():
    line = "    (a, b) = self.step_fn()"
    assert strip_prefixes_shaped(line) == (line, None, ())


def test_an_indented_cut_traceback_is_read_as_one():
    # a log pasted as a markdown list item: every line indented by two spaces
    log = "\n".join("  " + ln for ln in [
        "(EngineCore pid=1332) ERROR 06-16 07:42:55 [core.py:1138] EngineCore encountered a fatal error.",
        "(EngineCore pid=1332) ERROR 06-16 07:42:55 [core.py:1138] Traceback (most recent call last):",
        '(EngineCore pid=1332) ERROR 06-16 07:42:55 [core.py:1138]   File ".../vllm/v1/engine/core.py", line 471, in step_with_batch_queue',
        "(EngineCore pid=1332) ERROR 06-16 07:42:55 [core.py:1138]     scheduler_output = self.scheduler.schedule()",
        '(EngineCore pid=1332) ERROR 06-16 07:42:55 [core.py:1138]   File ".../vllm/v1/core/sched/scheduler.py", line 467, in schedule',
        "(EngineCore pid=1332) ERROR 06-16 07:42:55 [core.py:1138]",
    ])
    report = matcher().match(log)
    assert report.truncated
    got = [m for m in report.matches if m.confidence == "likely"]
    assert got and any("schedule" in f.text for f in got[0].evidence)


# --- the paste stops inside its error line ----------------------------------------------------------


def test_an_error_message_cut_mid_line_names_the_one_entry_it_begins():
    text = ("When running vLLM on WSL2, engine initialization consistently fails with:\n\n"
            "RuntimeError: UVA is\n")
    eid, conf = first(text)
    assert (eid, conf) == ("cpu-offload-requires-pinned-memory", "likely")
    m = matcher().match(text).matches[0]
    assert m.evidence[0].line == 3 and "begins" in m.evidence[0].says
    assert matcher().match(text).not_memory is None


def test_a_qualified_class_cut_mid_name_names_its_entry():
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.8/dist-packages/vllm/engine/async_llm_engine.py", line 220, in _run_workers_async',
        "    all_outputs = await asyncio.gather(*all_outputs)",
        '  File "/usr/lib/python3.8/asyncio/tasks.py", line 695, in _wrap_awaitable',
        "    return (yield from awaitable.__await__())",
        "ray.exceptions.OutOfMe",
    ])
    assert first(text) == ("ray-memory-monitor-kill", "likely")


def test_a_cut_line_that_several_entries_begin_with_says_nothing():
    # "CUDA out of memory" begins the wording of the start-up, capture and serving entries alike
    text = "some output\ntorch.OutOfMemoryError: CUDA out of mem"
    assert all(m.id != "cuda-oom-during-startup" or m.confidence != "likely" or
               "begins" not in m.evidence[0].says for m in matcher().match(text).matches)


def test_a_whole_error_line_is_not_a_cut_one():
    # the line ends the paste but is complete: no entry's wording is longer and begins with it
    text = "RuntimeError: UVA is not available for this thing at all"
    assert all("begins" not in m.evidence[0].says for m in matcher().match(text).matches)


def test_a_cut_line_above_more_log_is_not_where_the_paste_stops():
    text = "RuntimeError: UVA is\nINFO 10-16 20:27:43 registry.py:424] something else"
    assert all("begins" not in (m.evidence[0].says if m.evidence else "") for m in matcher().match(text).matches)


# --- the accelerator a cut traceback runs on ---------------------------------------------------------

MOVE_TB = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.11/dist-packages/torch/nn/modules/module.py", line 810, in _apply',
    "    module._apply(fn)",
    '  File "/usr/local/lib/python3.11/dist-packages/torch/nn/modules/module.py", line 1158, in convert',
    "    return t.to(device, dtype if t.is_floating_point() or t.is_complex() else None, non_blocking)",
]


def test_a_cut_traceback_moving_the_weights_onto_the_device_is_the_startup_oom():
    got = shown("\n".join(MOVE_TB))
    assert got[0] == ("cuda-oom-during-startup", "likely")
    m = matcher().match("\n".join(MOVE_TB)).matches[0]
    assert "Module.to" in m.evidence[0].says and m.evidence[0].line == 4


def test_a_launchers_tag_names_the_accelerator():
    # docker compose prefixes every line with the service's name; "intel-gpu" is an Intel GPU: an XPU
    text = "\n".join(f"intel-gpu-vllm  | ERROR 12-20 00:16:06 worker_base.py:464] {ln}" for ln in MOVE_TB)
    got = shown(text)
    assert got[0] == ("xpu-out-of-memory", "likely")


def test_a_tag_without_a_device_keeps_cuda():
    text = "\n".join(f"vllm-service  | ERROR 12-20 00:16:06 worker_base.py:464] {ln}" for ln in MOVE_TB)
    assert shown(text)[0] == ("cuda-oom-during-startup", "likely")


def test_intel_gpu_in_words_is_an_xpu_not_a_xeon():
    from kvkb.matcher.evidence import _LOG_DEVICE_RE

    assert _LOG_DEVICE_RE.search("running on an Intel GPU (Arc)").lastgroup == "xpu"
    assert _LOG_DEVICE_RE.search("Intel(R) Xeon(R) Platinum 8480+") is None


def test_an_ascend_frame_makes_the_cut_kv_allocation_the_npu_oom():
    text = "\n".join([
        "ERROR 02-07 18:18:59 [multiproc_executor.py:824] WorkerProc hit an exception.",
        "ERROR 02-07 18:18:59 [multiproc_executor.py:824] Traceback (most recent call last):",
        'ERROR 02-07 18:18:59 [multiproc_executor.py:824]   File "/usr/lib/python3.11/site-packages/vllm/v1/worker/worker_base.py", line 320, in initialize_from_config',
        "ERROR 02-07 18:18:59 [multiproc_executor.py:824]     self.worker.initialize_from_config(kv_cache_config)",
        'ERROR 02-07 18:18:59 [multiproc_executor.py:824]   File "/vllm-workspace/vllm-ascend/vllm_ascend/worker/worker_v1.py", line 402, in initialize_from_config',
        "ERROR 02-07 18:18:59 [multiproc_executor.py:824]     self.model_runner.initialize_kv_cache(kv_cache_config)",
    ])
    assert shown(text)[0] == ("npu-out-of-memory", "likely")


# --- the code a cut traceback stops in -----------------------------------------------------------------

COMPUTE_TB = [
    "ERROR 03-20 17:39:14 [core.py:1100] Traceback (most recent call last):",
    'ERROR 03-20 17:39:14 [core.py:1100]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/attention/ops/vit_attn_wrappers.py", line 268, in vit_torch_sdpa_wrapper',
    "ERROR 03-20 17:39:14 [core.py:1100]     return torch.ops.vllm.torch_sdpa_wrapper(",
    'ERROR 03-20 17:39:14 [core.py:1100]   File "/usr/local/lib/python3.12/dist-packages/torch/_ops.py", line 1209, in __call__',
    "ERROR 03-20 17:39:14 [core.py:1100]     return self._op(*args, **kwargs)",
    'ERROR 03-20 17:39:14 [core.py:1100]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/attention/ops/vit_attn_wrappers.py", line 236, in torch_sdpa_wrapper',
    "ERROR 03-20 17:39:14 [core.py:1100]     output_i = apply_sdpa(q_i, k_i, v_i, scale=scale)",
]


def test_a_cut_traceback_in_the_models_forward_code_is_the_device_oom():
    report = matcher().match("\n".join(COMPUTE_TB))
    assert (report.matches[0].id, report.matches[0].confidence) == ("cuda-oom-during-startup", "likely")
    assert "forward pass" in report.matches[0].evidence[0].says and report.matches[0].evidence[0].line == 6


def test_a_cut_forward_pass_after_a_launch_command_takes_the_stage_the_person_names():
    # the frames name no stage and the log's only step is the launch: their words say when it failed
    launch = ["vllm serve meta-llama/Llama-3.3-70B-Instruct --max-model-len 32768 \\",
              "--compilation-config '{\"cudagraph_mode\": \"FULL\"}'", ""]
    said = "It runs out of memory when capturing full cuda graph of mixed prefill-decode batches."
    assert first("\n".join([said, ""] + launch + COMPUTE_TB)) == ("cuda-oom-during-cudagraph-capture", "likely")
    assert first("\n".join(launch + COMPUTE_TB)) == ("cuda-oom-during-startup", "likely")  # the launch alone: start-up


def cut_tb(*frames: tuple[str, int, str, str]) -> str:
    """A traceback cut after its last frame's source line: (path, line, function, source) per frame."""
    lines = ["Traceback (most recent call last):"]
    for path, line, func, source in frames:
        lines += [f'  File "{path}", line {line}, in {func}', f"    {source}"]
    return "\n".join(lines)


def test_a_cut_in_a_layers_function_can_end_in_the_device_oom():
    # `apply` (a quantisation method's) reaches few entries by name, but a layer's forward code
    # allocates its outputs: PyTorch's OOM is an answer there too, and the commonest
    text = cut_tb(("/x/site-packages/vllm/model_executor/layers/linear.py", 367, "forward",
                   "output_parallel = self.quant_method.apply(self, input_, bias)"),
                  ("/x/site-packages/vllm/model_executor/layers/linear.py", 135, "apply", "return F.linear(x, layer.weight, b"))
    assert first(text) == ("cuda-oom-during-startup", "likely")


def test_a_call_on_pytorchs_own_line_is_not_vllms_function_of_that_name():
    # torch.autograd.Function.apply's source line calls super().apply: PyTorch's, not the `apply` of
    # vLLM's quantisation methods; the cut is in the model's forward code, below which PyTorch allocates
    text = cut_tb(("/x/dist-packages/vllm/model_executor/layers/fla/ops/chunk.py", 230, "chunk_gated_delta_rule",
                   "o, final_state = ChunkGatedDeltaRuleFunction.apply("),
                  ("/x/dist-packages/torch/autograd/function.py", 596, "apply",
                   "return super().apply(*args, **kwargs)  # type: ignore[misc]"))
    assert first(text) == ("cuda-oom-during-startup", "likely")


def test_a_cut_in_pytorchs_cuda_graph_module_is_a_capture_oom():
    text = cut_tb(("/x/site-packages/vllm/compilation/backends.py", 677, "__call__",
                   "with torch.cuda.graph(cudagraph, pool=self.graph_pool):"),
                  ("/x/site-packages/torch/cuda/graphs.py", 186, "__exit__", "self.cuda_graph.capture_end()"))
    assert first(text) == ("cuda-oom-during-cudagraph-capture", "likely")


def test_a_faulthandler_dump_is_no_cut_traceback():
    text = "\n".join([
        "Fatal Python error: Segmentation fault",
        "",
        "Current thread 0x00007fcf597eb640 (most recent call first):",
        '  File "/usr/local/lib/python3.10/dist-packages/flashinfer/decode.py", line 514 in begin_forward',
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/attention/backends/flashinfer.py", line 149 in begin_forward',
    ])
    report = matcher().match(text)
    assert not report.truncated
    assert not any(m.confidence in ("confident", "likely") for m in report.matches)


# --- host memory --------------------------------------------------------------------------------------


def test_rays_worker_died_report_names_the_kernels_oom_killer_first():
    text = ("2023-10-30 06:14:35,574\tWARNING worker.py:2037 -- A worker died or was killed while executing a task by an "
            "unexpected system error. Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a "
            "connection error code 2. End of file. There are some potential root causes. (1) The process is killed by "
            "SIGKILL by OOM killer due to high memory usage. (2) ray stop --force is called. (3) The worker is crashed "
            "unexpectedly due to SIGSEGV or other unexpected errors.")
    report = matcher().match(text)
    top = report.matches[0]
    assert (top.id, top.confidence) == ("host-oom-killer", "likely")
    assert "Ray says" in top.evidence[0].says and not any(m.confidence == "confident" for m in report.matches)


# --- the container image the frames' paths come from ----------------------------------------------------

ASCEND_IMAGE_TB = [
    "ERROR 11-04 09:45:23 [core.py:588] EngineCore encountered a fatal error.",
    "ERROR 11-04 09:45:23 [core.py:588] Traceback (most recent call last):",
    'ERROR 11-04 09:45:23 [core.py:588]   File "/vllm-workspace/vllm/vllm/v1/engine/core.py", line 579, in run_engine_core',
    "ERROR 11-04 09:45:23 [core.py:588]     engine_core.run_busy_loop()",
    'ERROR 11-04 09:45:23 [core.py:588]   File "/vllm-workspace/vllm/vllm/v1/engine/core.py", line 606, in run_busy_loop',
    "ERROR 11-04 09:45:23 [core.py:588]     self._process_engine_step()",
]


def test_vllm_installed_from_the_ascend_images_source_tree_is_an_npu():
    report = matcher().match("\n".join(ASCEND_IMAGE_TB))
    assert (report.matches[0].id, report.matches[0].confidence) == ("npu-out-of-memory", "likely")


def test_the_image_layout_gives_way_to_vllms_own_platform_line():
    text = "\n".join(["INFO 11-04 09:40:00 [__init__.py:216] Automatically detected platform cuda."] + ASCEND_IMAGE_TB)
    assert matcher().match(text).matches[0].id == "cuda-oom-during-serving"


def test_the_image_layout_never_decides_a_confident_answer():
    from kvkb.matcher.evidence import Scanner
    from kvkb.matcher.segment import parse

    sc = Scanner()
    sc.feed(parse([(i + 1, ln) for i, ln in enumerate(ASCEND_IMAGE_TB)]))
    assert sc.device() == "npu" and sc.device(layout=False) is None


# --- what can end a cut traceback in the scheduler -------------------------------------------------------

V0_SCHED_TB = [
    "Traceback (most recent call last):",
    '  File "/env/lib/python3.9/site-packages/vllm/entrypoints/llm.py", line 879, in _run_engine',
    "    step_outputs = self.llm_engine.step()",
    '  File "/env/lib/python3.9/site-packages/vllm/engine/llm_engine.py", line 1339, in step',
    "    ) = self.scheduler[virtual_engine].schedule()",
    '  File "/env/lib/python3.9/site-packages/vllm/core/scheduler.py", line 1220, in schedule',
    "    scheduler_outputs: SchedulerOutputs = self._schedule()",
]
V1_SCHED_TB = [
    "(EngineCore pid=1332) ERROR 06-16 07:42:55 [core.py:1138] Traceback (most recent call last):",
    '(EngineCore pid=1332) ERROR 06-16 07:42:55 [core.py:1138]   File ".../vllm/v1/engine/core.py", line 471, in step_with_batch_queue',
    "(EngineCore pid=1332) ERROR 06-16 07:42:55 [core.py:1138]     scheduler_output = self.scheduler.schedule()",
    '(EngineCore pid=1332) ERROR 06-16 07:42:55 [core.py:1138]   File ".../vllm/v1/core/sched/scheduler.py", line 467, in schedule',
]


def likely_ids(lines: list[str]) -> list[str]:
    return [m.id for m in matcher().match("\n".join(lines)).matches if m.confidence == "likely"]


def test_a_cut_v0_scheduler_traceback_is_the_swap_out_first():
    got = likely_ids(V0_SCHED_TB)
    assert got[:2] == ["cpu-swap-space-exhausted", "no-free-blocks-internal"]


def test_a_warning_never_ends_a_traceback():
    # V0's scheduler logs a prompt too long for the KV cache and goes on: no traceback ends in it
    got = likely_ids(V0_SCHED_TB)
    assert "prompt-exceeds-kv-capacity" not in got and "preemption-kv-cache-space" not in got
    m = matcher().match("\n".join(V0_SCHED_TB)).matches[0]
    assert "never raised" in m.evidence[0].says


def test_a_cut_v1_scheduler_traceback_has_no_v0_swap():
    got = likely_ids(V1_SCHED_TB)
    assert got[0] == "no-free-blocks-internal" and "cpu-swap-space-exhausted" not in got


# --- the step the log reached ------------------------------------------------------------------------------


def test_a_failure_right_after_the_kv_sizing_is_the_capacity_check_first():
    text = "\n".join([
        "INFO 06-12 08:12:23 distributed_gpu_executor.py:45] # GPU blocks: 507, # CPU blocks: 1024",
        "ERROR 06-12 08:12:23 worker_base.py:145] Error execut",
    ])
    got = likely_ids(text.splitlines())
    assert got[0] == "max-model-len-exceeds-kv-cache"
    # 507 blocks: the cache is not empty, so "no available memory for the cache blocks" is not first either
    assert got.index("cuda-oom-during-startup") > 0


def test_a_call_into_torch_is_no_vllm_function():
    # vLLM has a function named all_reduce too; `torch.distributed.all_reduce(` on a source line is torch's
    text = "\n".join([
        "ERROR 12-10 11:33:24 multiproc_worker_utils.py:229] Traceback (most recent call last):",
        'ERROR 12-10 11:33:24 multiproc_worker_utils.py:229]   File "/src/vllm/distributed/parallel_state.py", line 375, in _all_reduce_in_place',
        "ERROR 12-10 11:33:24 multiproc_worker_utils.py:229]     torch.distributed.all_reduce(input_, group=self.device_group)",
    ])
    assert "no-free-blocks-internal" not in likely_ids(text.splitlines())
    from kvkb.matcher.evidence import Scanner
    from kvkb.matcher.segment import parse

    sc = Scanner({"functions": {"all_reduce": {"no-free-blocks-internal": ["0.33.0"]}}})
    sc.feed(parse([(i + 1, ln) for i, ln in enumerate(text.splitlines())]))
    assert sc.deepest() is None


# --- where the KB says a wording is raised -----------------------------------------------------------------


def test_the_kb_notes_name_constructors_that_raise():
    sites = matcher().index["raise_sites"]["constructors"]
    assert sites["UvaBuffer"] == ["cpu-offload-requires-pinned-memory"]


def test_a_paste_cut_where_a_raising_constructor_is_called_names_its_entry():
    text = "\n".join([
        'File ".../vllm/v1/worker/gpu_worker.py", line 465, in init_device',
        "    self.model_runner: GPUModelRunner = GPUModelRunnerV2(",
        'File ".../vllm/v1/worker/gpu/buffer_utils.py", line 141, in __init__',
        "    self._uva_buf = UvaBuffer(size, dtype)",
        'File ".../vllm/v1/worker/gpu/buffer_u',
    ])
    report = matcher().match(text)
    top = report.matches[0]
    assert (top.id, top.confidence) == ("cpu-offload-requires-pinned-memory", "likely")
    assert top.evidence[0].line == 4 and "UvaBuffer" in top.evidence[0].says


# --- a paste with no error at all asks for what came after it ----------------------------------------

HEALTHY_START = """INFO 10-16 20:27:43 [api_server.py:1034] vLLM API server version 0.8.4
INFO 10-16 20:27:49 [gpu_model_runner.py:1134] Loading model weights took 14.9888 GB
"""


def test_a_paste_with_no_error_says_where_it_ends_and_proposes_no_entry():
    from kvkb.matcher.render import report_text

    report = matcher().match(HEALTHY_START)
    assert report.root_cause is None and report.first_error is None
    assert report.no_error == {"line": 2, "text": "Loading model weights took 14.9888 GB"}
    # a new-entry proposal would quote an ordinary INFO line as if it were the error
    assert report.new_issue_url is None
    text = report_text(report, 3, color=False)
    assert "No error in this paste" in text and "line 2:" in text and "propose an entry" not in text


def test_a_paste_with_an_error_is_not_called_error_free():
    report = matcher().match(HEALTHY_START + "RuntimeError: something kvkb has never heard of\n")
    assert report.no_error is None and report.new_issue_url is not None


def test_a_cut_traceback_asks_for_its_exception_line_even_with_no_answer():
    from kvkb.matcher.render import report_text

    cut = HEALTHY_START + "Traceback (most recent call last):\n  File \"/opt/app/run.py\", line 3, in <module>\n    main()\n"
    report = matcher().match(cut)
    assert report.truncated and report.no_error is None
    assert report.new_issue_url is None  # nothing in view to propose
    assert "ends before the exception line" in report_text(report, 3, color=False)


def test_a_last_line_cut_partway_through_a_wording_after_other_words_names_its_entry():
    # "... with Error: <torch's mmap ENOMEM text>" cut before its "(12)": the wording is there up to the cut
    text = ("I get the error below\n\nFailed to load model with Error: unable to mmap 4965799096 bytes from file "
            "<Llama-3.2-3B-Instruct/model-00001-of-00002.safetensors>: Cannot allocate memory (")
    assert first(text) == ("host-oom-loading-weights", "likely")
    # the same words above more log are no cut
    assert first(text + "\nINFO 01-01 00:00:00 [x.py:1] next line\n") != ("host-oom-loading-weights", "likely")


def test_cut_point_counts_the_literal_text_up_to_the_cut():
    from kvkb.matcher.literal import cut_point

    sig = {"lits": ["unable to mmap ", " bytes from file <", ">: Cannot allocate memory (12)"], "gaps": [[], ["n"], ["p"], []]}
    whole = "unable to mmap 9 bytes from file <a>: Cannot allocate memory (12)"
    assert cut_point(whole, sig)[0] == 0  # a whole match is no cut
    assert cut_point(whole[:-3], sig)[0] == len("unable to mmap  bytes from file <>: Cannot allocate memory (")
    assert cut_point("unable to mmap 9 byt", sig)[0] == len("unable to mmap ") + len(" byt")
    assert cut_point("nothing like it", sig)[0] == 0


def test_a_cut_traceback_in_v1s_api_server_process_is_no_device_oom():
    # (APIServer pid=N) is V1's OpenAI server process: it holds no model, so a request's traceback cut
    # there is a request check, never PyTorch's out-of-memory error (the engine allocates in EngineCore)
    frames = [
        '  File "/usr/local/lib/python3.12/site-packages/fastapi/routing.py", line 284, in run_endpoint_function',
        "    return await dependant.call(**values)",
        '  File "/usr/local/lib/python3.12/site-packages/vllm/entrypoints/utils.py", line 116, in wrapper',
        "    generator = await handler.create_chat_completion(request, raw_request)",
    ]
    api = "\n".join(["(APIServer pid=23) Traceback (most recent call last):"] + [f"(APIServer pid=23) {f}" for f in frames]) + "\n"
    got = shown(api)
    assert not any(m.startswith("cuda-oom") for m, _ in got)
    assert got[0] == ("prompt-exceeds-max-model-len", "likely")
    # the same frames with no process tag (V0 ran the engine in the server's process): the OOM stays possible
    bare = "Traceback (most recent call last):\n" + "\n".join(frames) + "\n"
    assert any(m.startswith("cuda-oom") for m, _ in shown(bare))


def test_the_worker_with_the_least_kv_room_is_the_one_that_failed():
    # TP ranks print their own "Available KV cache memory"; one negative is the failure even when
    # another rank, printed after it, had room
    text = ("(Worker_TP1 pid=2) INFO 12-10 03:24:48 [gpu_worker.py:298] Available KV cache memory: -3.86 GiB\n"
            "(Worker_TP0 pid=1) INFO 12-10 03:24:48 [gpu_worker.py:298] Available KV cache memory: 9.90 GiB\n"
            "(EngineCore_DP0 pid=3) ERROR 12-10 03:24:48 [core.py:708] EngineCore failed to start.\n")
    got = shown(text)
    assert got[0] == ("no-memory-for-cache-blocks", "likely")
    report = matcher().match(text)
    assert "-3.86" in report.matches[0].evidence[0].text


def test_cut_point_tells_a_cut_at_the_end_of_one_of_the_wordings_sentences():
    from kvkb.matcher.literal import cut_point, sentence_ends

    sig = {"lits": ["Insufficient space in ", ": ", " MiB required, ", " MiB free. Increase ", " (e.g. --shm-size or --ipc=host)."]}
    assert cut_point("Insufficient space in /dev/shm: 4095/4096 MiB required, 1405 MiB free", sig)[1] is True
    assert cut_point("Insufficient space in /dev/shm: 4095/4096 MiB required, 1405 MiB fr", sig)[1] is False
    assert sentence_ends("allocate 2.0G.", " That was not possible") and not sentence_ends("allocate 2.0", "G. That")


def test_a_paste_cut_where_a_sentence_of_one_entrys_wording_ends_names_that_error():
    whole = "RuntimeError: Insufficient space in /dev/shm: 4095/4096 MiB required, 1405 MiB free"
    report = matcher().match("On main:\n\n" + whole + "\n")
    assert report.root_cause == "container-shm-too-small"
    assert any("a sentence of that wording ends" in f.says for f in report.matches[0].evidence)
    # cut inside the sentence: likely, and the request for the whole line
    report = matcher().match("On main:\n\n" + whole[:-2] + "\n")
    assert report.root_cause is None and report.matches[0].confidence == "likely"
    # another error in view that no entry claims: the engine may have died of that one
    report = matcher().match("RuntimeError: DeepGEMM backend is not available or outdated.\n" + whole + "\n")
    assert report.root_cause is None


def test_the_method_a_worker_ran_is_read_with_or_without_its_quotes():
    # newer releases log the method with %r: "Error executing method 'execute_model'."
    for name in ("execute_model", "'execute_model'"):
        text = (f"ERROR 08-01 22:42:47 [worker_base.py:1399] Error executing method {name}. This might cause issues in "
                "distributed execution.\n"
                "ERROR 08-01 22:42:47 [worker_base.py:1399] Traceback (most recent call last):\n"
                'ERROR 08-01 22:42:47 [worker_base.py:1399]   File "/x/vllm/worker/worker_base.py", line 1395, in execute_method\n'
                "ERROR 08-01 22:42:47 [worker_base.py:1399]     return func(*args, **kwargs)\n")
        got = [(m.id, m.confidence) for m in matcher().match(text).matches]
        assert got and got[0] == ("cuda-oom-during-serving", "likely"), name


def test_a_call_on_a_source_line_with_its_frame_shown_below_is_judged_by_that_frame():
    # `main()` on a trainer's line, then the trainer's own main.py frame: not vLLM's `main`
    text = cut_tb(("/work/rl/verl/trainer/main.py", 133, "<module>", "main()"),
                  ("/work/rl/verl/trainer/main.py", 125, "main", "ray.get(runner.run.remote(config))"),
                  ("/usr/lib/python3/dist-packages/ray/_private/auto_init_hook.py", 22, "auto_init_wrapper",
                   "return fn(*args, **kwargs)"))
    assert first(text) == (None, None)
    # the same call where the paste stops still says what ran next (a last frame the cut shortened too)
    text = cut_tb(("/x/site-packages/vllm/worker/worker.py", 171, "initialize_cache",
                   "raise_if_cache_size_invalid(num_gpu_blocks,"))
    cut_name = text + '\n  File "/x/site-packages/vllm/worker/worker.py", line 335, in raise'
    assert first(text)[1] == first(cut_name)[1] == "likely"
    assert first(text)[0] == first(cut_name)[0]


def test_a_framework_that_runs_vllm_is_no_other_program():
    # Ray's memory monitor under an RL trainer's traceback (its rollouts run vLLM): the entry, confidently
    kill = ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\n"
            "Memory on the node (IP: 10.0.0.2, ID: abc) where the task (actor ID: 1, name=WorkerDict.__init__, pid=2, "
            "memory used=60.00GB) was running was 300.00GB / 314.00GB (0.955), which exceeds the memory usage threshold "
            "of 0.95. Ray killed this worker (ID: def) because it was the most recently scheduled task.\n")
    tb = cut_tb(("/work/rl/verl/trainer/main.py", 125, "main", "ray.get(runner.run.remote(config))"))
    assert first(kill + tb) == ("ray-memory-monitor-kill", "confident")
    # a program of its own (a script that is not one of them) keeps the doubt
    other = cut_tb(("/work/diffusion/train_unet.py", 40, "main", "ray.get(runner.run.remote(config))"))
    assert first(kill + other) == ("ray-memory-monitor-kill", "likely")
