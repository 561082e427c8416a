"""matcher/evidence.py: what a log states before (or instead of) its error, and what that points to."""

from __future__ import annotations

import json

from kvkb.matcher.evidence import Scanner, hints
from kvkb.matcher.segment import parse

from matcher_helpers import matcher

V1_START = [
    "(APIServer pid=1) INFO 11-20 10:12:01 [api_server.py:1805] vLLM API server version 0.10.1.1",
    "(EngineCore_DP0 pid=9) INFO 11-20 10:12:02 [core.py:74] Initializing a V1 LLM engine (v0.10.1.1) with config: "
    "model='Qwen/Qwen2.5-7B-Instruct', max_seq_len=32768, block_size=16",
    "(EngineCore_DP0 pid=9) INFO 11-20 10:12:30 [gpu_model_runner.py:2007] Model loading took 15.2619 GiB and 53.18 seconds",
]


def scan(lines: list[str]) -> Scanner:
    sc = Scanner()
    sc.feed(parse([(i + 1, ln) for i, ln in enumerate(lines)]))
    return sc


def ids(sc: Scanner, visible: bool = False) -> list[tuple[str, str]]:
    return [(h.entry, h.tier) for h in hints(sc, visible)]


def test_a_healthy_startup_points_nowhere():
    sc = scan(V1_START + [
        "(EngineCore_DP0 pid=9) INFO 11-20 10:12:40 [gpu_worker.py:276] Available KV cache memory: 5.36 GiB",
        "(EngineCore_DP0 pid=9) INFO 11-20 10:12:40 [kv_cache_utils.py:849] GPU KV cache size: 78,208 tokens",
        "(EngineCore_DP0 pid=9) INFO 11-20 10:12:40 [kv_cache_utils.py:853] Maximum concurrency for 32,768 tokens per request: 2.39x",
        "(APIServer pid=1) INFO:     Application startup complete.",
    ])
    assert ids(sc) == [] and not sc.truncated and sc.restarts == 0
    assert sc.stage == "serving"


def test_each_new_startup_is_counted_and_resets_the_numbers():
    crash = ["(EngineCore_DP0 pid=9) INFO 11-20 10:12:40 [gpu_worker.py:276] Available KV cache memory: -1.5 GiB",
             "(EngineCore_DP0 pid=9) ERROR 11-20 10:12:40 [core.py:708] EngineCore failed to start."]
    sc = scan(V1_START + crash + V1_START + crash + V1_START)
    assert sc.restarts == 2
    assert ids(sc) == []  # the last start-up has not reached KV sizing: the earlier ones' numbers do not count


def test_negative_or_zero_kv_memory_is_no_memory_for_the_cache():
    for line in ("Available KV cache memory: -3.75 GiB", "# GPU blocks: 0, # CPU blocks: 2048",
                 "# cuda blocks: 0, # CPU blocks: 4096", "GPU KV cache size: 0 tokens",
                 "the rest of the memory reserved for KV Cache is -1.05GiB.",
                 "Available memory: 0, total memory: 65452113920"):
        got = ids(scan(V1_START + [f"INFO 11-20 10:12:40 [x.py:1] {line}"]))
        assert got[:1] == [("no-memory-for-cache-blocks", "likely")], (line, got)


def test_blocks_times_block_size_below_max_model_len():
    sc = scan(["INFO 01-11 15:51:02 llm_engine.py:70] Initializing an LLM engine with config: model='m', max_seq_len=4096",
               "INFO 01-11 15:51:18 llm_engine.py:275] # GPU blocks: 229, # CPU blocks: 512"])
    [h] = hints(sc, False)
    assert h.entry == "max-model-len-exceeds-kv-cache" and h.tier == "likely"
    assert "229 blocks x 16 tokens = 3664 tokens" in h.facts[0].says
    assert sc.values()["kv_tokens"] == 229 * 16


def test_concurrency_below_one_and_a_kv_check_that_failed():
    assert ids(scan(V1_START + ["INFO 1 [x.py:1] Maximum concurrency for 4096 tokens per request: 0.40x"]))[0] == \
        ("max-model-len-exceeds-kv-cache", "likely")
    # V1 prints the available memory, checks it, then prints the size: a failure in between is the check
    failed = V1_START + ["(EngineCore_DP0 pid=9) INFO 11-25 18:39:23 [gpu_worker.py:348] Available KV cache memory: 0.44 GiB",
                         "(EngineCore_DP0 pid=9) ERROR 11-25 18:39:23 [core.py:842] EngineCore failed to start."]
    assert ids(scan(failed))[0] == ("max-model-len-exceeds-kv-cache", "likely")
    # ...but not when vLLM got past the check and printed the size (the failure was something else)
    passed = failed[:-1] + ["INFO 1 [kv_cache_utils.py:1] GPU KV cache size: 1,782,000 tokens", failed[-1]]
    got = ids(scan(passed))
    assert not any(e in ("max-model-len-exceeds-kv-cache", "no-memory-for-cache-blocks") for e, _ in got)
    # (what runs after the size is printed: the KV cache allocation and graph capture, PyTorch's OOM)
    assert got == [("cuda-oom-during-startup", "likely")]
    # ...and not when the error itself is visible (then the error line decides)
    assert ids(scan(failed), visible=True) == []


def test_a_paste_cut_inside_a_traceback_is_truncated_and_its_deepest_call_counts():
    lines = ["Traceback (most recent call last):",
             '  File "/x/vllm/v1/core/kv_cache_utils.py", line 943, in get_kv_cache_config',
             "    check_enough_kv_cache_memory(vllm_config, kv_cache_spec, available_memory)"]
    sc = scan(lines)
    assert sc.truncated
    got = ids(sc)
    assert got == [("no-memory-for-cache-blocks", "likely"), ("max-model-len-exceeds-kv-cache", "likely")]
    assert not scan(lines + ["ValueError: something"]).truncated


def test_frames_of_a_stage_alone_are_only_possible_unless_the_person_says_oom():
    lines = ["Traceback (most recent call last):",
             '  File "/x/vllm/entrypoints/llm.py", line 304, in generate',
             "    outputs = self._run_engine(use_tqdm=use_tqdm)"]
    assert ids(scan(lines)) == [("cuda-oom-during-serving", "possible")]
    assert ids(scan(["With prompt_logprobs=1 I immediately get OOM:"] + lines)) == [("cuda-oom-during-serving", "likely")]


def test_the_raise_line_inside_the_last_frame_is_evidence():
    sc = scan(["Traceback (most recent call last):",
               '  File "/x/vllm/worker/worker.py", line 500, in _check_if_gpu_supports_dtype',
               '    raise ValueError("No available memory for the cache blocks. "'])
    [h] = [h for h in hints(sc, False) if h.entry.startswith("raise:")]
    assert h.entry == "raise:ValueError:No available memory for the cache blocks. " and h.tier == "likely"


def test_engine_answers_a_cut_paste_as_likely_with_its_evidence():
    text = "\n".join(V1_START + ["Traceback (most recent call last):",
                                '  File "/x/vllm/v1/core/kv_cache_utils.py", line 943, in get_kv_cache_config',
                                "    check_enough_kv_cache_memory(vllm_config, kv_cache_spec, available_memory)"]) + "\n"
    report = matcher().match(text)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["root_cause"] is None and data["truncated"] is True
    top = data["matches"][0]
    assert top["confidence"] == "likely" and top["confident"] is False
    assert top["id"] in ("no-memory-for-cache-blocks", "max-model-len-exceeds-kv-cache")
    assert [e["line"] for e in top["evidence"]] == [6, 4]  # the call, then where the cut traceback starts
    assert "paste ends inside this traceback" in top["evidence"][1]["says"]
    assert "Qwen/Qwen2.5-7B-Instruct" in (top["fix"] or "")  # the likely fix is filled from the log


def test_restarts_and_the_last_startups_answer_in_the_text_report():
    from kvkb.matcher.render import report_text

    oom = ("(EngineCore_DP0 pid=9) ERROR 11-20 10:12:41 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. "
           "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.55 GiB of which 1.12 GiB is free.")
    text = "\n".join(V1_START + [oom] + V1_START + [oom]) + "\n"
    report = matcher().match(text)
    assert report.root_cause == "cuda-oom-during-startup" and report.restarts == 1
    root = report.matches[0]
    assert root.line_no == 8  # the second start-up's error, not the first
    assert "1 restart (2 start-ups)" in report_text(report, 3, False)


# --- INFO lines that carry the whole evidence; host RAM kills (issue 18) ---------------------------


def test_sleep_mode_that_freed_nothing_is_likely_memory_not_released():
    sc = scan(["(WorkerDict pid=9) INFO 07-07 10:00:00 [gpu_worker.py:100] Sleep mode freed 0.00 GiB memory, "
               "71.32 GiB memory is still in use."])
    assert ("sleep-mode-memory-not-released", "likely") in ids(sc)
    healthy = scan(["INFO 07-07 10:00:00 [gpu_worker.py:100] Sleep mode freed 59.52 GiB memory, 7.67 GiB memory is still in use."])
    assert ids(healthy) == []


def test_a_wrapper_over_a_sigkill_points_to_the_host_memory_category():
    lines = ["ERROR 05-01 10:05:00 [multiproc_executor.py:146] Worker proc VllmWorker-1 died unexpectedly, shutting down executor.",
             "Killed"]
    got = hints(scan(lines), False)
    assert [(h.entry, h.tier) for h in got] == [("category:host-memory", "likely")]
    assert len(got[0].facts) == 2  # the kill and the wrapper, each with its line
    # a plain "Killed" followed by another error is not evidence: a person can kill -9 too
    assert ids(scan(["Killed", "ValueError: something else went wrong here"])) == []


def test_the_oom_killer_or_ray_monitor_alone_is_strong_evidence():
    for line in ("[ 661.5] Out of memory: Killed process 2314 (VLLM::Worker_TP) total-vm:98765432kB",
                 "Last State: Terminated  Reason: OOMKilled  Exit Code: 137",
                 "(raylet) 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed"):
        assert ("category:host-memory", "likely") in ids(scan([line, "ValueError: later error"])), line


def test_the_engine_resolves_the_host_category_by_its_entries_not_by_id():
    from matcher_helpers import entry_ids

    report = matcher().match("ERROR 05-01 10:05:00 [multiproc_executor.py:146] Worker proc VllmWorker-1 died "
                             "unexpectedly, shutting down executor.\nKilled\n")
    likely = [m for m in report.matches if m.confidence == "likely"]
    if not any(e.startswith("host-oom") for e in entry_ids()):
        return
    assert likely and all(m.category == "host-memory" for m in likely)
    assert report.root_cause is None  # the wrapper is not claimed over the kill


def test_an_assert_line_at_the_cut_is_evidence():
    sc = scan(["Traceback (most recent call last):",
               '  File "/x/vllm/utils/torch_utils.py", line 798, in get_accelerator_view_from_cpu_tensor',
               '    assert cpu_tensor.is_pinned(), "CPU tensor must be pinned"'])
    assert sc.last_raise == (3, "AssertionError", "CPU tensor must be pinned")


def test_the_device_of_a_cut_traceback_comes_from_its_files():
    sc = scan(["Traceback (most recent call last):",
               '  File "/x/vllm_ascend/worker/worker_v1.py", line 1, in determine_available_memory',
               "    self.model_runner.profile_run()"])
    assert sc.frame_device() == "npu" and sc.frame_stage() == "startup"


# --- cut pastes: device, timeline step, worker method, flattened and IPython frames, the person's words ---

def _scan_with_table(lines: list[str]) -> Scanner:
    sc = Scanner(matcher().index.get("callees"))
    sc.feed(parse([(i + 1, ln) for i, ln in enumerate(lines)]))
    return sc


def _likely(lines: list[str], visible: bool = False) -> list[str]:
    sc = _scan_with_table(lines)
    return [h.entry for h in hints(sc, visible, matcher()._stage_oom_entries()) if h.tier == "likely"]


KV_ALLOC_CUT = ["Traceback (most recent call last):",
                '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 1, in initialize_kv_cache',
                "    kv_caches = self.initialize_kv_cache_tensors(kv_cache_config)"]


def test_a_kv_allocation_cut_is_the_start_up_oom_of_the_logs_device_never_the_invented_message():
    assert _likely(KV_ALLOC_CUT)[0] == "cuda-oom-during-startup"
    assert "kv-cache-allocation-failed" not in _likely(KV_ALLOC_CUT)  # a message no vLLM prints
    npu = ["INFO 09-17 04:55:01 [__init__.py:216] Automatically detected platform npu."] + KV_ALLOC_CUT
    assert _scan_with_table(npu).device() == "npu"
    assert _likely(npu)[0] == "npu-out-of-memory"
    xpu = ["[2024-09-02 16:44:36,387] [INFO] [real_accelerator.py:203:get_accelerator] Setting ds_accelerator to xpu"]
    assert _scan_with_table(xpu + KV_ALLOC_CUT).device() == "xpu"
    # "output" holds "tpu", "CPU" is no NPU: words, not letters
    assert _scan_with_table(["model_output = self.model(x)", "CPU blocks: 2048"]).device() is None


def test_a_traceback_cut_after_a_start_up_step_answers_with_what_runs_next():
    cut = ["INFO 08-25 08:17:11 model_runner.py:175] Loading model weights took 5.1039 GB",
           "Traceback (most recent call last):",
           '  File "/x/run.py", line 46, in <module>',
           "    engine = make_my_engine(args.model)"]  # no function vLLM's code knows
    sc = _scan_with_table(cut)
    got = hints(sc, False, matcher()._stage_oom_entries())
    assert got and got[0].entry == "cuda-oom-during-startup" and got[0].tier == "likely"
    says = " ".join(f.says for f in got[0].facts)
    assert "weights loaded" in says and "paste the lines after the cut" in says
    # the same traceback with no step before it says nothing; a visible non-memory error stops it too
    assert _likely(cut[1:]) == []
    assert _likely(cut + ["ValueError: some other failure"], visible=True) == []


def test_an_error_line_cut_mid_word_after_the_block_count_is_a_cut_failure():
    lines = ["INFO 06-12 08:12:23 distributed_gpu_executor.py:45] # GPU blocks: 507, # CPU blocks: 1024",
             "ERROR 06-12 08:12:23 worker_base.py:145] Error execut"]
    sc = _scan_with_table(lines)
    assert sc.cut_failure() is not None and not sc.truncated
    got = _likely(lines)
    assert "max-model-len-exceeds-kv-cache" in got and "cuda-oom-during-startup" in got
    # a log that just ends after the count (no failure shown) is no answer
    assert _likely(lines[:1]) == []


def test_a_worker_method_named_by_its_error_line_is_a_frame():
    lines = ["(VllmWorkerProcess pid=42878) ERROR 08-04 16:54:59 [multiproc_worker_utils.py:238] Exception in worker "
             "VllmWorkerProcess while processing method determine_num_available_blocks."]
    sc = _scan_with_table(lines)
    assert sc.truncated and sc.deepest()[1] == "determine_num_available_blocks"
    assert _likely(lines)[0] == "cuda-oom-during-startup"


def test_a_method_called_by_name_on_a_source_line_is_a_frame():
    lines = ["Traceback (most recent call last):",
             '  File "/x/vllm/engine/llm_engine.py", line 357, in _init_cache',
             '    self._run_workers("init_cache_engine", cache_config=self.cache_config)']
    sc = _scan_with_table(lines)
    assert sc.deepest()[1] == "init_cache_engine"
    assert _likely(lines) == ["cuda-oom-during-startup"]


def test_ipython_frames_count_only_the_line_that_ran():
    lines = ["File /v/vllm/worker/worker.py:139, in Worker.determine_num_available_blocks(self)",
             "    135 torch.cuda.empty_cache()",
             "    137 # Execute a forward pass with dummy inputs",
             "--> 139 self.model_runner.profile_run()"]
    sc = _scan_with_table(lines)
    assert sc.truncated and [f[1] for f in sc.last_tb] == ["determine_num_available_blocks", "profile_run"]


def test_a_traceback_flattened_onto_one_line_keeps_its_frames():
    line = ('Traceback (most recent call last): File "/x/vllm/v1/executor/multiproc_executor.py", line 847, in '
            'worker_busy_loop output = func(*args, **kwargs) File "/x/vllm/v1/worker/gpu_model_runner.py", line 9, in '
            'sample_tokens x = 1')
    sc = _scan_with_table([line])
    assert sc.truncated and [f[1] for f in sc.last_tb] == ["worker_busy_loop", "sample_tokens"]
    assert _likely([line])[0] == "cuda-oom-during-serving"  # the frames' stage: serving


def test_the_persons_oom_words_and_the_stage_the_log_shows():
    start = ["$ vllm serve my/model --max-model-len 4096", "INFO 04-07 09:53:06 [api_server.py:1034] vLLM API server version 0.8.3"]
    assert _likely(["@someone still have OOM"] + start) == ["cuda-oom-during-startup"]
    assert _likely(["still have OOM"]) == []  # no stage: no answer
    assert _likely(start) == []  # no failure and no words: no answer
    # CJK text around the word, and the step the person names
    assert _likely(["在训练过程中, 导致再次wake up weight就会oom。"]) == ["sleep-mode-wake-up-oom"]


def test_info_and_warning_lines_that_carry_the_evidence():
    assert _likely(["INFO 01-01 00:00:00 metrics.py:1] Running: 2 reqs, GPU KV cache usage: 100.0%, CPU KV cache usage: 0.0%"]) \
        == ["preemption-kv-cache-space"]
    assert _likely(["INFO metrics.py:1] GPU KV cache usage: 42.0%"]) == []
    shm = "WARNING services.py:1996 -- The object store is using /tmp instead of /dev/shm because /dev/shm has only 67108864 bytes available."
    assert _likely(["docker run vllm --tensor-parallel-size 2", shm]) == ["container-shm-too-small"]
    assert _likely(["docker run vllm --tensor-parallel-size 1", shm]) == []  # one GPU: NCCL needs no shm
    assert _likely(["WARNING 09-16 13:18:12 [gpu_worker.py:208] cudaHostRegister failed for rank=0"]) == ["kv-offload-host-memory"]
    assert _likely(["on a TPU v4-8 with 16MB of vmem it still fails"]) == ["tpu-smem-vmem-exhausted"]
    assert _likely(["my GPU has 16MB of vmem"]) == []  # no TPU named
    ray = ["I got OOM.", "PID     MEM(GB) COMMAND", "40126   11.20   ray::WorkerDict.actor_rollout_generate_sequences"]
    assert "category:host-memory" in _likely(ray)
    # Ray's memory monitor lists the workers it weighed, each with the host memory it used
    worker = ("  Selected to kill: (Task: job ID=02000000, lease ID=0a00000002000000ffffffff, task name=rollout, "
              "required resources={GPU: 1}, pid=4242, actual memory used=31.50GB, worker ID=5f5f5f)")
    assert _likely([worker]) == ["ray-memory-monitor-kill"]
    assert _likely(["(Actor(9a9a9a01000000): job ID=01000000, lease ID=07, task name=Engine.__init__, "
                    "required resources={}, pid=77, actual memory used=2.10GB, worker ID=1b1b)"]) == ["ray-memory-monitor-kill"]
    assert _likely(["the actual memory used=31.50GB according to top"]) == []  # not Ray's worker record
    # none of them over an error line that names another cause
    assert _likely(["GPU KV cache usage: 100.0%", "ValueError: bad request"], visible=True) == []


def test_after_the_block_count_a_check_the_numbers_passed_is_no_answer():
    config = "INFO 08-25 08:17:00 llm_engine.py:100] Initializing an LLM engine (v0.4.2) with config: model='m', max_seq_len=4096, block_size=16"
    fits = [config, "INFO 08-25 08:17:12 gpu_executor.py:114] # GPU blocks: 11749, # CPU blocks: 728",
            "Traceback (most recent call last):", '  File "/x/run.py", line 46, in <module>', "    engine = make_my_engine(m)"]
    got = _likely(fits)
    assert got[0] == "cuda-oom-during-startup" and "max-model-len-exceeds-kv-cache" not in got
    short = [fits[0], fits[1].replace("11749", "100")] + fits[2:]  # 1,600 tokens < 4,096: the check fails
    assert _likely(short)[0] == "max-model-len-exceeds-kv-cache"


def test_the_persons_words_name_the_device_the_step_and_a_kill():
    # a device other than CUDA has one out-of-memory entry whatever the stage
    assert _likely(["any allocation on XPU fails with a false `OutOfMemoryError` on 2x Arc B580"]) == ["xpu-out-of-memory"]
    assert _likely(["使用8张910b3部署，模型权重正常加载但在启动阶段显存不足"]) == ["npu-out-of-memory"]
    # the step they name, when the log shows none
    assert _likely(["Same here when loading Qwen1.5 7B model: it throws a torch.cuda.OutOfMemoryError."]) == \
        ["cuda-oom-during-startup"]
    assert _likely(["Resolves `CUDA out of memory` errors during vLLM initialization on 8x H100."]) == ["cuda-oom-during-startup"]
    assert _likely(["加载Llama2-13b-Chat 出现CUDA out of memory"]) == ["cuda-oom-during-startup"]
    assert _likely(["随着并发请求增加，显存不断上涨，最后OOM"]) == ["cuda-oom-during-serving"]  # more concurrent requests
    assert _likely(["It runs fine, then OOMs after a few hours under heavy load."]) == ["cuda-oom-during-serving"]
    assert _likely(["It OOMs, no idea why."]) == []  # no step named: no stage to give
    assert _likely(["The kernel warmup needs more temporary memory, causing startup OOMs."]) == ["cuda-oom-during-startup"]
    assert _likely(["I am not sure what is causing the OOM at loading time on L40s."]) == ["cuda-oom-during-startup"]
    assert _likely(["With tensor parallelism the model initialization fails with an OOM error on GPU 0."]) == \
        ["cuda-oom-during-startup"]
    assert _likely(["It OOMs even before running any requests."]) == ["cuda-oom-during-startup"]
    assert _likely(["QwQ loads successfully, but qwen2.5-vl all go OOM."]) == ["cuda-oom-during-startup"]
    assert _likely(["With prompt_logprobs = 1 a long input results in an out-of-memory (OOM) error."]) == \
        ["cuda-oom-during-serving"]
    assert _likely(["The engine OOMs and fails every in-flight request."]) == ["cuda-oom-during-serving"]
    # evaluation and benchmark runs send requests; a profiling stage and "attempting to deploy" are start-up
    assert _likely(["We see CUDA OOM while running the GSM8K evaluation with lm_eval."]) == ["cuda-oom-during-serving"]
    assert _likely(["Out of memory when trying to benchmark the model at batch 64."]) == ["cuda-oom-during-serving"]
    assert _likely(["The OOM comes during the image encoder profiling step."]) == ["cuda-oom-during-startup"]
    assert _likely(["It fails with an OOM error when attempting to deploy Qwen2-VL."]) == ["cuda-oom-during-startup"]
    # the step named on the line of their OOM beats one named on another line
    assert _likely(["The dummy sampler warmup underestimates the peak memory.",
                    "So the engine may later hit CUDA OOM during real speculative decoding."]) == ["cuda-oom-during-serving"]
    # killed as memory ran out, in their words: the host-memory entries
    assert "category:host-memory" in _likely(["128gb的内存，跑着跑着就经常oom直接被kill了"])
    assert "category:host-memory" in _likely(["Container is killed by Kubernetes when memory crosses the defined limit"])
    assert _likely(["I killed the server and restarted it"]) == []  # a kill with no memory word
    # the shells' own reports of a SIGKILL: zsh's job line, bash's "Killed" glued to the bar being drawn
    assert "category:host-memory" in _likely(["Loading weights: 50%|#####     | 4/8 [00:09<00:09,  2.2s/it][1]    4242 killed     python serve.py"])
    assert "category:host-memory" in _likely(["Loading safetensors checkpoint shards:  38% Completed | 3/8 [00:08<00:14,  2.91s/it]Killed"])
    assert _likely(["the reviewer said: [1] approved, 2 killed bugs"]) == []
    # the KV cache too small: at start-up the capacity check, while serving the preemption
    got = _likely(["the engine crashes immediately at startup due to insufficient KV cache memory"])
    assert set(got) == {"max-model-len-exceeds-kv-cache", "no-memory-for-cache-blocks"}
    assert _likely(["why with only two requests is the kv cache usage 100%?"]) == ["preemption-kv-cache-space"]


def test_a_frame_is_vllms_by_the_package_not_by_a_directory_name():
    from kvkb.matcher.evidence import _vllm_frame

    assert _vllm_frame("/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py")
    assert _vllm_frame("/x/site-packages/vllm-0.1.2-py3.9-linux-x86_64.egg/vllm/model_executor/models/llama.py")
    assert _vllm_frame("/mnt/share/A3-OOM/vllm-ascend/vllm_ascend/ops/fused_moe/token_dispatcher.py")
    assert _vllm_frame("/workspace/vllm/vllm/v1/engine/core.py")
    # torch's file in an environment the user keeps under a directory named vllm
    assert not _vllm_frame("/mnt/share/vllm/conda_envs/py311/lib/python3.11/site-packages/torch/_ops.py")
    assert not _vllm_frame("/home/me/vllm-tests/run.py")


def test_v1s_worker_loop_alone_says_serving_only_after_start_up():
    # V1's worker runs the engine's start-up calls (KV cache, graph capture) in its busy loop too
    head = ["INFO 04-06 22:52:16 [kv_cache_utils.py:566] GPU KV cache size: 54,048 tokens",
            "(VllmWorker rank=1 pid=112) ERROR 04-06 22:53:39 [multiproc_executor.py:379] WorkerProc hit an exception: %s",
            "(VllmWorker rank=1 pid=112) ERROR 04-06 22:53:39 [multiproc_executor.py:379] Traceback (most recent call last):",
            '(VllmWorker rank=1 pid=112) ERROR 04-06 22:53:39 [multiproc_executor.py:379]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 372, in worker_busy_loop',
            "(VllmWorker rank=1 pid=112) ERROR 04-06 22:53:39 [multiproc_executor.py:379]     output = func(*args, **kwargs)",
            "It gives OOM."]
    assert _likely(head)[0] == "cuda-oom-during-startup"
    served = head[:1] + ["INFO:     Application startup complete."] + head[1:]
    assert _likely(served)[0] == "cuda-oom-during-serving"


def test_a_cut_inside_the_sampler_warm_up_is_its_start_up_oom():
    # vLLM's own code there catches PyTorch's OOM and raises its start-up message: the function allocates
    lines = ["INFO 03-14 02:45:05 [gpu_model_runner.py:1434] Graph capturing finished in 22 secs, took 0.64 GiB",
             "ERROR 03-14 02:45:06 [core.py:337] EngineCore hit an exception: Traceback (most recent call last):",
             'ERROR 03-14 02:45:06 [core.py:337]   File "/home/u/vllm/vllm/v1/worker/gpu_model_runner.py", line 1292, in _dummy_sampler_run',
             "ERROR 03-14 02:45:06 [core.py:337]     sampler_output = self.model.sample("]
    assert _likely(lines)[0] == "cuda-oom-during-startup"


def test_the_persons_words_for_shared_memory_and_a_tpus_hbm():
    assert _likely(["Otherwise we may run out of shm for NCCL init during subsequent crashes"]) == ["container-shm-too-small"]
    assert _likely(["Fixes the test failures caused by vLLM running out of shared memory."]) == ["container-shm-too-small"]
    # Triton's per-block limit and the broadcast queue's wait are other errors
    assert _likely(["out of resource: shared memory, Required: 98304, Hardware limit: 65536"]) == []
    assert _likely(["No available shared memory broadcast block found in 60 second."]) == []
    assert _likely(["The failure occurs due to TPU HBM fragmentation, preventing allocation of model weights"]) == \
        ["tpu-hbm-resource-exhausted"]
    assert _likely(["the H100 has 80GB of HBM and it failed"]) == []  # no TPU named
    assert _likely(["This is easy to hit on the common 64 MB default `/dev/shm` used by Docker."]) == ["container-shm-too-small"]
    assert _likely(["对象存储正在使用 /tmp 目录而不是 /dev/shm 目录。这通常是由于 /dev/shm 的可用空间不足导致的。"]) == \
        ["container-shm-too-small"]


def test_rays_task_error_wraps_the_tasks_own_error():
    # "RayTaskError: ray::f()" is followed by the remote traceback: it is never the root cause itself
    text = ("Memory grows after each step and can cause OOM when waking up the inference engine weights/KV cache.\n"
            "ray.exceptions.RayTaskError: ray::skyrl_entrypoint() (pid=17195, ip=172.25.101.68)\n")
    report = matcher().match(text)
    assert report.not_memory is None
    assert report.matches[0].id == "sleep-mode-wake-up-oom" and report.matches[0].confidence == "likely"


def test_an_oom_told_with_only_the_hosts_memory_named_is_the_hosts():
    text = ["The checkpoint is one 200GB pytorch_model.bin and this causes an OOM error even though the available "
            "memory is more than 1TB. I run `free -h` while loading and the usage keeps going up."]
    got = _likely(text)
    assert got and got[0] == "category:host-memory"
    # an accelerator named anywhere (8xH100, cuda_12.4): the words do not say whose memory ran out
    assert "category:host-memory" not in _likely(["env: cuda_12.4, 8xH100, MEM = 2TB"] + text)


def test_the_platforms_environment_names_the_device():
    lines = ["export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True", "export HCCL_BUFFSIZE=1200",
             "vllm serve model-path --tensor-parallel-size 8"]
    assert _scan_with_table(lines).device() == "npu"
    assert _scan_with_table(["export ZE_AFFINITY_MASK=0,1"]).device() == "xpu"
    assert _scan_with_table(["export CUDA_VISIBLE_DEVICES=0,1"]).device() is None


def test_a_launch_command_alone_gives_way_to_the_stage_the_person_names():
    cmd = "vllm serve Qwen/Qwen3-8B --max-model-len 32000 --gpu-memory-utilization 0.8"
    said = "With echo=True and logprobs=1 the server hits a CUDA Out of Memory (OOM) error during load testing."
    assert _likely([said, cmd]) == ["cuda-oom-during-serving"]
    assert _likely(["It hits a CUDA OOM.", cmd]) == ["cuda-oom-during-startup"]  # no step named: the launch
    assert _likely(["The config triggers the OOM after startup.", cmd]) == ["cuda-oom-during-serving"]


def test_room_left_reads_pytorchs_two_layouts():
    import pytest

    from matcher.evidence import room_left

    new = "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 7 has a total capacity of 79.11 GiB of which 66.43 GiB is free."
    assert room_left(new) == pytest.approx((20 / 1024, 66.43))
    old = "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.35 GiB total capacity; 10.00 GiB already allocated; 40.00 GiB free; 11.00 GiB reserved)"
    assert room_left(old) == pytest.approx((2.0, 40.0))
    # a full device, or free not far above the ask, is memory running out
    assert room_left(new.replace("66.43 GiB is free", "11.06 MiB is free")) is None
    assert room_left(old.replace("40.00 GiB free", "3.00 GiB free")) is None
    assert room_left("CUDA out of memory") is None


def test_an_oom_told_with_no_step_at_all_is_the_commonest_stage_as_a_guess():
    said = ["使用basic_demo/openai_api_server.py 只是说显存不足", "v100 gpu * 4"]
    sc = _scan_with_table(said)
    got = [h for h in hints(sc, False, matcher()._stage_oom_entries()) if h.tier == "likely"]
    assert [h.entry for h in got] == ["cuda-oom-during-startup"]
    assert any("a guess" in f.says for f in got[0].facts)
    # no accelerator named, or the host's memory named too: no guess
    assert _likely(["it always gives OOM"]) == []
    assert _likely(["it always gives OOM on the GPU, even with 64GB of RAM"]) == []


def test_the_person_sending_requests_or_capturing_graphs_names_the_stage():
    cmd = "vllm serve Qwen/Qwen3-8B --max-model-len 32000"
    assert _likely(["when i send a long prompt i get a CUDA OOM", cmd]) == ["cuda-oom-during-serving"]
    assert _likely(["it OOMs in the FULL CUDA-graph capture", cmd]) == ["cuda-oom-during-cudagraph-capture"]


def test_a_kill_told_in_chinese_with_the_hosts_memory_is_the_hosts():
    said = "我机器是4个RTX4090 24G，cpu内存只有128G，启动命令起不来，会被系统OOM杀进程"
    assert _likely([said]) == ["category:host-memory"]
    assert _likely(["显存不足，启动起不来"]) != ["category:host-memory"]  # no kill: the device's memory


def test_a_person_quoting_zero_gpu_blocks_is_no_room_for_the_cache():
    said = "when I tried today `benchmark_throughput.py --tensor-parallel-size 8` I got GPU blocks 0, so it failed"
    assert _likely([said]) == ["no-memory-for-cache-blocks"]
    assert _likely(["INFO 09-30 15:27:08 gpu_executor.py:1] # GPU blocks: 0, # CPU blocks: 512"]) == ["no-memory-for-cache-blocks"]
    assert _likely(["I got GPU blocks 7877, so it should fit"]) == []


def test_an_account_in_time_order_names_the_step_it_failed_in_last():
    said = ("The model loads fine. The server starts, healthcheck passes. Then you send your first request "
            "and the whole thing crashes with a CUDA OOM")
    assert _likely([said, "vllm serve Qwen/Qwen3.5-35B-A3B"]) == ["cuda-oom-during-serving"]


def test_insufficient_memory_in_the_persons_words_is_their_oom():
    said = ["GPU: NVIDIA GeForce RTX 4060 Laptop (8GB VRAM)",
            "The current configuration fails during CUDA graph capture due to insufficient free memory."]
    assert _likely(said) == ["cuda-oom-during-cudagraph-capture"]
    # the KV cache's own shortage is the KV entries'
    assert "cuda-oom-during-startup" not in _likely(["vLLM fails at start-up: not enough memory for the KV cache on the GPU"])


def _likely_ids(text: str) -> list[str]:
    """What kbmatch shows at least likely for a whole paste (the engine sets whether vLLM is named)."""
    return [m.id for m in matcher().match(text).matches if m.confidence in ("confident", "likely")]


def test_a_model_or_context_that_does_not_fit_the_devices_memory_is_an_out_of_memory():
    # the person's way of saying it ran out: "doesn't fit in 48GB", "does not have enough VRAM"
    assert _likely_ids("vLLM: Llama-70B in bf16 will not fit into two 48 GB cards at start-up") == ["cuda-oom-during-startup"]
    assert _likely_ids("My RTX card does not have enough VRAM to load the 13B model in vLLM") == ["cuda-oom-during-startup"]
    # a fit with no size, or memory that is enough, is no claim of running out
    assert _likely_ids("vLLM: the prompt does not fit in the context window") == []
    assert _likely_ids("vLLM: we have enough memory for two replicas") == []


def test_requests_preempted_for_kv_cache_space_in_a_persons_words_are_the_preemption_entry():
    said = "With vLLM, once the KV cache is full the long requests keep getting preempted and decode slows down."
    assert _likely_ids(said) == ["preemption-kv-cache-space"]
    # preemption alone, with no word of the KV cache, is not a claim about its memory
    assert "preemption-kv-cache-space" not in _likely_ids("vLLM: my requests are preempted by higher-priority ones")


def test_vllms_capacity_check_retold_in_a_persons_words_is_the_max_model_len_entry():
    said = "vLLM would not start: max_model_len 131072 needs 9.5 GiB for one request and only 6.2 GiB is available."
    assert _likely_ids(said)[0] == "max-model-len-exceeds-kv-cache"
    # the setting named with no shortage is no claim
    assert _likely_ids("vLLM: I set max_model_len 131072 and it needs 2 GiB more RAM for the tokenizer") == []


def test_gpu_ram_and_vllms_swap_space_are_not_the_hosts_memory():
    # "CUDA RAM" / "GPU RAM" is the device's memory; "swap" in a vLLM thread is mostly its --swap-space
    said = "VLLM fails with the same OOM error on a 4xL4 (4 x 24 GB CUDA RAM) instance"
    assert _likely_ids(said) == ["cuda-oom-during-startup"]
    said = "vLLM on an RTX 4060 TI 16GB always gives out of memory, even after I reduced the size of the swap"
    assert _likely_ids(said) == ["cuda-oom-during-startup"]
    # the host's RAM named: not the device's guess
    assert "cuda-oom-during-startup" not in _likely_ids("vLLM gives OOM on the GPU box, it has 64GB of RAM")


def test_an_oom_told_in_a_vllm_paste_with_no_device_named_is_the_commonest_stage_as_a_guess():
    said = "After setting max-model-len to 8192 the OOM in vLLM went away."
    got = [m for m in matcher().match(said).matches if m.confidence == "likely"]
    assert [m.id for m in got] == ["cuda-oom-during-startup"]
    assert any("a guess" in f.says for f in got[0].evidence)
    assert _likely_ids("After setting a smaller batch the OOM went away.") == []  # vLLM named nowhere


def test_an_oom_on_vllms_cpu_backend_is_the_hosts_memory():
    got = _likely_ids("- The vllm cpu pod for llm crashes intermittently due to OOM.\n- At 150G it is stable.")
    assert got and got[0] == "host-oom-killer"  # the host entry real pastes show most, on a tie of words


def test_a_server_that_no_longer_accepts_requests_was_serving():
    said = "When the model crashes due to OOM, it is no longer able to accept new requests. vLLM v0.4.3"
    assert _likely_ids(said) == ["cuda-oom-during-serving"]
    said = "vLLM's profile_run skipped the encoder, over-allocated the KV cache, and OOM'd at runtime once the encoder ran."
    assert _likely_ids(said) == ["cuda-oom-during-serving"]
    # the server was up: the first prompt it got is a request being served
    said = "It boots, answers /health, and dies on the first prompt with `torch.OutOfMemoryError` on one 3090."
    assert _likely_ids(said) == ["cuda-oom-during-serving"]
    assert _likely_ids("It boots on one 3090, and dies with `torch.OutOfMemoryError` at the first shard.") != \
        ["cuda-oom-during-serving"]


def test_traffic_and_the_requests_it_brings_are_serving():
    said = "The vLLM pod restarted during normal traffic and might OOM again on the next large request."
    assert _likely_ids(said) == ["cuda-oom-during-serving"]
    said = "vLLM starts fine, serves short requests, and then OOMs once traffic reaches the activation peak."
    assert _likely_ids(said) == ["cuda-oom-during-serving"]
    # after warm-up is after start-up; the warm-up itself is start-up
    assert _likely_ids("vLLM nodes hit an OOM right after warmup on the A100s.") == ["cuda-oom-during-serving"]
    assert _likely_ids("vLLM hit an OOM during the sampler warmup on the A100s.") == ["cuda-oom-during-startup"]
    # a flag's comment naming concurrent requests tells no step
    said = 'vLLM OOM on the A100: "--max_num_seqs=1",  # Number of concurrent requests.'
    assert _likely_ids(said) != ["cuda-oom-during-serving"]


def test_a_function_of_vllms_named_on_their_oom_line_is_the_step():
    said = "With V2 the KV cache claimed the whole budget and `capture_model()` OOMed at startup on vLLM 0.25.1."
    assert _likely_ids(said) == ["cuda-oom-during-cudagraph-capture"]
    # a call whose name tells no step leaves the words to say it
    said = "With vLLM 0.25.1 `llm.generate()` OOMed at startup."
    assert _likely_ids(said) == ["cuda-oom-during-startup"]


def test_oomed_is_their_oom():
    said = "vllm serve --max-num-seqs 4 (was vLLM default 256). At the default, sampler warmup OOMed after KV alloc."
    assert _likely_ids(said) == ["cuda-oom-during-startup"]


def test_intel_arc_as_people_write_it_is_the_xpu():
    assert _scan_with_table(["Faced OOM on Arc with 6k input with VLLM serving, Qwen1.5-32B on 4 ARC"]).device() == "xpu"
    assert _scan_with_table(["Model: Qwen1.5-14 on 2Arc"]).device() == "xpu"
    # the ARC benchmark and lm-eval's arc_easy task are no GPU
    assert _scan_with_table(["lm_eval --tasks arc_easy,ARC-Challenge failed: CUDA out of memory"]).device() is None


def test_an_oom_the_person_pins_on_the_host_is_the_hosts_though_a_gpu_is_named():
    assert _likely(["8xH100, MEM = 2TB", "使用EasyR1训练qwen2.5-vl-7b则出现内存oom。"]) == ["category:host-memory"]
    assert _likely(["On 8 A100 GPUs the run crashed with a 'CPU Out of Memory' error."]) == ["category:host-memory"]
    assert _likely(["Is this OOM for CPU or GPU?", "It is CPU OOM, on my 4090."]) == ["category:host-memory"]
    # the device's memory (显存) or a plain OOM on a named GPU stays the device's
    assert _likely(["8xH100", "使用EasyR1训练则出现显存oom。"]) != ["category:host-memory"]
    assert _likely(["On 8 A100 GPUs the run crashed with an OOM."]) != ["category:host-memory"]


def test_a_negative_kv_cache_told_in_words_is_no_room_for_the_cache():
    said = "On the dual GX10 the Qwen3.5-397B recipe now gives negative space for kv cache at start-up."
    assert _likely([said]) == ["no-memory-for-cache-blocks"]
    assert _likely(["a negative number of tokens was requested"]) == []


def test_memory_exhausted_in_words_is_their_oom_and_tensor_loading_is_start_up():
    said = ("During the tensor loading it seems to exhaust all the available memory, kick me out from the ssh "
            "session and after a few minutes, reboot.")
    assert _likely_ids(said + "\nvllm serve RedHatAI/Qwen3.5-122B-A10B-NVFP4 --gpu-memory-utilization 0.94") \
        == ["cuda-oom-during-startup"]  # not serving: "after a few minutes" is when it rebooted


def test_a_launch_time_stamp_and_vllms_drafter_loading_line_are_read():
    lines = ["18:03:00  (Worker_TP0) INFO [gpu_model_runner.py:5332] Loading drafter model...",
             "18:03:03  kernel: NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY]",
             "18:03:38  (EngineCore) ERROR [core.py:1349] EngineCore"]
    sc = _scan_with_table(lines)
    assert sc.step == "loading weights"
    # what loading the weights can end in, PyTorch's start-up OOM first
    assert _likely_ids("\n".join(lines))[0] == "cuda-oom-during-startup"


def test_a_device_glued_to_chinese_text_is_named():
    assert _scan_with_table(["问题1:在推理预测过程中遇到NPU out of memory"]).device() == "npu"
    assert _likely(["问题1:在推理预测过程中遇到NPU out of memory"]) == ["npu-out-of-memory"]


def test_the_end_of_pytorchs_oom_message_with_its_head_cut_off_is_an_oom():
    # a banner that shows a log's last characters: PyTorch's message from mid-word, then the API server's
    # traceback building its engine client (start-up), cut
    paste = ("Exit code: 1. Reason: ess has 0 bytes memory in use. Of the allocated memory 21.48 GiB is allocated by "
             "PyTorch, and 10.95 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
             "large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.\n"
             "Traceback (most recent call last):\n"
             '  File "/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/openai/api_server.py", line 105, in build_async_engine_client\n'
             "    async with build_async_engine_client_from_engine_args(\n"
             '  File "/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/openai/api_server.py", line 140, in build_async_engine_client_from_engine_args\n'
             "    engine_client = AsyncLLMEngine.from_engine_args(\n")
    got = _likely_ids(paste)
    assert got[0] == "cuda-oom-during-startup"
    # PyTorch's whole message (its head there) is its own error line, not the end of one
    whole = ("(EngineCore pid=229) ERROR 04-19 12:21:04 [core.py:1134] torch.OutOfMemoryError: CUDA out of memory. "
             "Tried to allocate 72.00 MiB. GPU 0 has a total capacity of 31.33 GiB of which 2.56 MiB is free. Of the "
             "allocated memory 30.6 GiB is allocated by PyTorch, and 10.95 MiB is reserved by PyTorch but unallocated.")
    said = [f.says for m in matcher().match(whole).matches for f in m.evidence]
    assert not any("first words" in s for s in said)
    # nor is its second line when the message is hard-wrapped: the head is right above it
    wrapped = whole.split("] ", 1)[1].replace(" Of the allocated", "\nProcess 1 has 4.36 GiB memory in use. Of the allocated")
    said = [f.says for m in matcher().match(wrapped).matches for f in m.evidence]
    assert not any("first words" in s for s in said)
    # without the OOM's end, the cut frame's callees decide (no OOM claimed first)
    assert _likely_ids(paste.split("\n", 1)[1])[:1] != ["cuda-oom-during-startup"]


def test_out_of_gpu_memory_in_words_is_their_oom():
    said = "With a single H100 vllm runs out of GPU memory when trying to use this with simply vllm serve org/model-70B."
    assert _likely_ids(said) == ["cuda-oom-during-startup"]
    assert _likely_ids("vllm serve x: it is out of VRAM") == ["cuda-oom-during-startup"]


def test_a_kv_cache_shortage_told_in_chinese_is_the_kv_checks():
    got = _likely(["你的报错核心是 KV cache 内存不足:", "- 模型默认 max seq len = 262144(超长上下文)"])
    assert got and got[0] in ("max-model-len-exceeds-kv-cache", "no-memory-for-cache-blocks")
    assert "cuda-oom-during-startup" not in got


def test_a_geforce_card_named_by_its_number_is_a_gpu():
    assert _likely(["I'm trying to load this on to two 3090s and it is OOMing"]) == ["cuda-oom-during-startup"]
    assert _likely(["it is OOMing on my 4090 Ti"]) == ["cuda-oom-during-startup"]
    # a port, a version or a year is no card
    assert _likely(["it is OOMing, see localhost:3090 and v1.4090"]) == []


def test_torch_npu_named_as_a_module_attribute_is_the_npu():
    said = "the workspace for each graph under `torch.npu.graph` is not released during capturing, so OOM will happen"
    assert _scan_with_table([said]).device() == "npu"


def test_a_call_on_another_serving_engines_line_is_not_vllms_function():
    # SGLang's scheduler.py builds its own Scheduler: a traceback cut there says nothing of vLLM's code
    sglang = ('[2025-03-29 18:18:34 TP0] Scheduler hit an exception: Traceback (most recent call last):\n'
              '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1999, in run_scheduler_process\n'
              '    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)\n')
    assert [m for m in matcher().match(sglang).matches if m.confidence == "likely"] == []
    vllm = sglang.replace("/sgl-workspace/sglang/python/sglang/srt/managers/", "/usr/lib/python3/site-packages/vllm/v1/core/")
    assert [m for m in matcher().match(vllm).matches if m.confidence == "likely"] != []


def test_a_person_comparing_batched_tokens_with_max_model_len_names_the_start_up_check():
    said = "Also, let's just avoid the vLLM error by making sure max_num_batched_tokens >= max_model_len"
    assert _likely_ids(said)[:1] == ["max-num-batched-tokens-below-max-model-len"]
    said = "vLLM will not start when --max-num-batched-tokens is smaller than --max-model-len."
    assert _likely_ids(said)[:1] == ["max-num-batched-tokens-below-max-model-len"]
    # both named with no comparison between them says nothing
    assert "max-num-batched-tokens-below-max-model-len" not in _likely_ids(
        "vLLM flags: max_num_batched_tokens 8192, max_model_len 4096, both set in the yaml.")


def test_a_line_a_launcher_passed_on_from_a_process_is_not_the_persons_words():
    person = "I get OOM even with max_num_seqs=1 when sending requests to the server"
    assert scan([person]).prose_stage[0] == "serving"
    # the same stage words in a process's own line (huggingface_hub's warning, through vLLM's pid tag)
    program = "(APIServer pid=17) Warning: You are sending unauthenticated requests to the HF Hub."
    assert scan(["I get OOM even with max_num_seqs=1", program]).prose_stage is None
    assert scan(["[rank0]: sending 4 requests", "OOM"]).prose_stage is None


def test_a_person_saying_free_memory_fell_short_at_start_up_names_the_start_up_check():
    said = matcher().match("With the sidecar, whenever vllm crashes it enters a crashloop with not enough free GPU memory "
                           "and cannot recover.\nWe've confirmed the memory is reclaimed on the plain image.")
    top = said.matches[0]
    assert top.id == "insufficient-free-memory-at-startup" and top.confidence == "likely"
    # a sentence that names the step that failed is that step's out-of-memory error, not the start-up check
    step = matcher().match("The current configuration fails during CUDA graph capture due to insufficient free memory.")
    assert all(m.id != "insufficient-free-memory-at-startup" for m in step.matches if m.confidence == "likely")


def test_sizes_read_off_pytorchs_oom_text_need_a_digit():
    # a paste's ". MiB" (a number lost in copying) is no size: never a float('.') traceback
    from kvkb.matcher.evidence import pool_gib, room_left

    text = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate . MiB. GPU 0 has a total capacity of "
            "15.77 GiB of which 5.19 GiB is free. Of the allocated memory 9 GiB is allocated by PyTorch, with . MiB "
            "allocated in private pools (e.g., CUDA Graphs)")
    assert room_left(text) is None and pool_gib(text) is None
    assert matcher().match(text).matches[0].id == "cuda-oom-during-startup"
    assert pool_gib(text.replace("with . MiB", "with 46.00 MiB")) == (46.0 / 1024, "46.00 MiB")
    assert room_left(text.replace("allocate . MiB", "allocate 20.00 MiB"))[1] == 5.19


def test_a_worker_class_named_for_its_device_in_a_launchers_tag_names_the_device():
    # Ray's tag names the actor's class: vllm-ascend's "NPURayWorkerWrapper", glued to the next word
    tag = "(NPURayWorkerWrapper pid=399601, ip=10.43.132.227) ERROR 03-07 09:51:00 worker_base.py:581] "
    text = "\n".join(tag + ln for ln in [
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.10/site-packages/vllm/model_executor/models/deepseek_v2.py", line 162, in forward',
        "    final_hidden_states = self.experts(",
        '  File "/usr/local/lib/python3.10/site-packages/vllm/model_executor/layers/fused_moe/layer.py", line 586, in forward'])
    m = matcher().match(text + "\n").matches[0]
    assert (m.id, m.confidence) == ("npu-out-of-memory", "likely")
    # the same tag of vLLM's own Ray worker names no device
    m = matcher().match(text.replace("NPURayWorkerWrapper", "RayWorkerWrapper") + "\n").matches[0]
    assert m.id != "npu-out-of-memory"


def test_a_tpu_generation_names_the_device():
    m = matcher().match("Set tp=2 for tpu7x tests that have OOM issues.\n").matches[0]
    assert (m.id, m.confidence) == ("tpu-hbm-resource-exhausted", "likely")
    # a word that only holds the letters is none
    assert all(m.id != "tpu-hbm-resource-exhausted" for m in matcher().match("Set tp=2 for output7x tests that have OOM issues.\n").matches)
