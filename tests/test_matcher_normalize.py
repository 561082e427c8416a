"""kvkb.matcher.normalize and .segment: what a pasted log looks like after clean-up."""
import pytest

from kvkb.matcher.normalize import clean_line, normalise, strip_ansi_bytes, strip_prefixes, to_number
from kvkb.matcher.segment import segment, split_lines

V1_LINE = (
    "ValueError: To serve at least one request with the model's max seq len (16,384), (5.62 GiB KV cache is needed, "
    "which is larger than the available KV cache memory (4.50 GiB). Based on the available memory, the estimated "
    "maximum model length is 13,088."
)


def records(text: str):
    return segment(list(enumerate(split_lines(text), 1)))[0]


def test_ansi_is_stripped_from_bytes_and_text():
    assert strip_ansi_bytes(b"\x1b[1;31mERROR\x1b[0m x") == b"ERROR x"
    assert clean_line("\x1b[33mWARNING\x1b[0m \x1b]0;title\x07y") == "WARNING y"


def test_crlf_and_carriage_return_progress_bars_split_lines():
    text = "a\r\nLoading 10%\rLoading 100%\rValueError: No available memory for the cache blocks.\r\n"
    assert split_lines(text) == ["a", "Loading 10%", "Loading 100%", "ValueError: No available memory for the cache blocks.", ""]


def test_transport_prefixes_stack_and_give_the_level():
    line = "2024-06-28T06:11:52.685Z (EngineCore_DP0 pid=2312) ERROR 11-20 10:12:01 [core.py:708] ValueError: boom"
    assert strip_prefixes(line) == ("ValueError: boom", "ERROR", True)
    assert strip_prefixes("(RayWorkerWrapper pid=77, ip=10.0.0.2) WARNING 01-02 03:04:05 scheduler.py:1141] x")[0:2] == ("x", "WARNING")
    assert strip_prefixes("vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: y")[0] == "ValueError: y"
    assert strip_prefixes("[pod/vllm-0/vllm] [rank0]: Traceback (most recent call last):")[0] == "Traceback (most recent call last):"
    assert strip_prefixes("(4096) is not a prefix") == ("(4096) is not a prefix", None, False)
    # a launcher's time of day alone, before the process tag and vLLM's header
    assert strip_prefixes("18:03:00  (Worker_TP0) INFO [gpu_model_runner.py:5332] Loading drafter model...")[0:2] \
        == ("Loading drafter model...", "INFO")


def test_box_borders_are_removed():
    assert clean_line("╭──────────────────╮") == ""
    assert clean_line("│ ValueError: No available memory │") == "ValueError: No available memory"


def test_numbers_are_masked_but_parse_back():
    norm = normalise(V1_LINE)
    assert "(<n>)" in norm and "<n> gib" in norm and "16,384" not in norm
    assert to_number("16,384") == 16384 and to_number("5.62") == 5.62 and to_number(" 3984)") == 3984
    assert normalise("the models's max seq len") == normalise("the model's max seq len")
    assert normalise("File /usr/lib/python3/site-packages/vllm/x.py at 0x7f00ab") == "file <path> at <hex>"


def test_exception_lines_keep_the_users_numbers():
    [rec] = records("(EngineCore_DP0 pid=1) ERROR 11-20 10:12:01 [core.py:708] " + V1_LINE)
    assert rec.kind == "exception" and rec.type == "ValueError" and rec.level == "ERROR"
    assert "(16,384)" in rec.message and "13,088" in rec.message


def test_hard_wrapped_message_is_joined():
    text = (
        "ValueError: The model's max seq len (30000) is larger than the maximum number of tokens that can be stored in KV cache (\n"
        "3984). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.\n"
        "```\nHow could that be?\n"
    )
    [rec] = records(text)
    assert "KV cache (3984). Try increasing" in rec.message
    assert "How could" not in rec.message


def test_chained_exceptions_and_repr_form_are_records():
    text = """Traceback (most recent call last):
  File "/x/worker.py", line 10, in load_model
    raise ValueError("a")
ValueError: first failure here
The above exception was the direct cause of the following exception:
RuntimeError: Engine core initialization failed. See root cause above.
ERROR 12-19 09:33:44 engine.py:135] OutOfMemoryError('Error in model execution: CUDA out of memory. Tried to allocate 2.00 GiB')
"""
    recs = records(text)
    assert [(r.type, r.line) for r in recs] == [("ValueError", 4), ("RuntimeError", 6), ("OutOfMemoryError", 7)]
    assert recs[0].cues == {"startup"}  # the frame 'load_model' names the stage
    assert recs[2].message.endswith("Tried to allocate 2.00 GiB")


def test_wrapper_lines_yield_the_inner_error():
    line = ("(VllmWorkerProcess pid=232) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226] Exception in worker "
            "VllmWorkerProcess while processing method init_device: NCCL error: unhandled system error, Traceback (most recent call last):")
    recs = records(line)
    assert recs[-1].kind == "inner" and recs[-1].message == "NCCL error: unhandled system error"
    assert "startup" in recs[-1].cues


def test_frames_carets_and_blank_lines_are_not_records():
    text = '  File "/a.py", line 1, in f\n    x = y(\n        ^^^^\n\n'
    assert records(text) == []


PYDANTIC = """Traceback (most recent call last):
  File "/usr/lib/python3.12/site-packages/vllm/engine/arg_utils.py", line 2050, in create_model_config
    return ModelConfig(
(APIServer pid=1) pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig
(APIServer pid=1)   Value error, User-specified max_model_len (65536) is greater than the derived max_model_len (max_position_embeddings=32768.0 or model_max_length=None in model's config.json). [type=value_error, input_value=ArgsKwargs((), {'model': 'x', 'y': [1]}), input_type=ArgsKwargs]
(APIServer pid=1)     For further information visit https://errors.pydantic.dev/2.11/v/value_error
"""


def test_pydantic_validation_error_record_is_the_value_error_text():
    [rec] = records(PYDANTIC)
    assert rec.kind == "exception" and rec.type == "pydantic_core._pydantic_core.ValidationError" and rec.line == 5
    assert rec.message.startswith("User-specified max_model_len (65536) is greater")
    assert rec.message.endswith("in model's config.json).")  # pydantic's [type=..., input_value=...] tail is gone
    assert "pydantic.dev" not in rec.message


def test_pydantic_items_hard_wrapped_several_and_field_errors():
    text = (
        "pydantic_core._pydantic_core.ValidationError: 2 validation errors for SchedulerConfig\n"
        "  Value error, max_num_batched_tokens (2048) is smaller than max_model_len (8192). This effectively\n"
        "limits the maximum sequence length [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]\n"
        "    For further information visit https://errors.pydantic.dev/2.11/v/value_error\n"
        "gpu_memory_utilization\n"
        "  Input should be less than or equal to 1 [type=less_than_equal, input_value=1.5, input_type=float]\n"
        "INFO 11-20 10:12:01 [core.py:1] next\n"
    )
    recs = records(text)
    assert [(r.type.rsplit(".", 1)[-1], r.message) for r in recs[:2]] == [
        ("ValidationError", "max_num_batched_tokens (2048) is smaller than max_model_len (8192). This effectively limits the maximum sequence length"),
        # a constraint error keeps its field: "Input should be ..." alone could be any field's
        ("ValidationError", "gpu_memory_utilization Input should be less than or equal to 1"),
    ]
    assert recs[2].message == "next"


def test_lone_value_error_line_is_a_pydantic_record():
    [rec] = records("  Value error, Too large swap space. 32.00 GiB out of the 31.26 GiB total CPU memory is allocated for the swap space. [type=value_error]")
    assert rec.type == "pydantic_core._pydantic_core.ValidationError"
    assert rec.message == "Too large swap space. 32.00 GiB out of the 31.26 GiB total CPU memory is allocated for the swap space."


def test_http_error_bodies_yield_the_servers_message():
    client = ("openai.BadRequestError: Error code: 400 - {'error': {'message': \"This model's maximum context length is 8192 tokens. "
              "However, you requested 9048 tokens.\", 'type': 'BadRequestError', 'param': None, 'code': 400}}")
    recs = records(client)
    assert recs[0].type == "openai.BadRequestError"
    assert recs[1].kind == "inner" and recs[1].message == "This model's maximum context length is 8192 tokens. However, you requested 9048 tokens."
    raw = ('{"object":"error","message":"This model\'s maximum context length is 2048 tokens. \\"x\\" \\u00e9\\nend",'
           '"type":"BadRequestError","param":null,"code":400}')
    recs = records(raw)
    assert recs[-1].kind == "inner" and recs[-1].message == 'This model\'s maximum context length is 2048 tokens. "x" é end'
    single = "ERROR x: {'message': 'It\\'s too long for this model, sorry', 'code': 400}"
    assert records(single)[-1].message == "It's too long for this model, sorry"


def test_the_old_allocator_layout_reads_as_the_new_one():
    from kvkb.matcher.normalize import canonical

    old = ("XPU out of memory. Tried to allocate 1.50 GiB (GPU 0; 15.11 GiB total capacity; 13.20 GiB already "
           "allocated; 1.02 GiB free; 13.50 GiB reserved in total by PyTorch)")
    assert canonical(old) == ("XPU out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 15.11 GiB "
                              "of which 1.02 GiB is free.")
    assert canonical("CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 10.76 GiB total capacity; 9.89 GiB "
                     "already allocated; 0 bytes free; 9.93 GiB reserved in total by PyTorch)").endswith("of which 0 bytes is free.")
    npu = "NPU out of memory. Tried to allocate 22.00 MiB (NPU 6; 60.97 GiB total capacity; 10.24 GiB already allocated)"
    assert canonical(npu) == npu  # torch_npu's own layout is its entry's wording


def test_process_tags_with_a_rank_and_the_innermost_level():
    from kvkb.matcher.normalize import strip_prefixes

    assert strip_prefixes("(VllmWorker rank=5 pid=3073)   File \"/x.py\", line 1, in f")[0] == '  File "/x.py", line 1, in f'
    line = ("INFO 2025-11-19T20:16:36.096680376Z [resource.labels.containerName: vllm] (EngineCore_DP0 pid=270) "
            "ERROR 11-19 12:16:36 [v1/engine/core.py:842] torch.OutOfMemoryError: x")
    content, level, _ = strip_prefixes(line)
    assert content == "torch.OutOfMemoryError: x" and level == "ERROR"


def test_an_exception_quoted_as_inline_code_is_a_record():
    recs = records("This PR fixes the server failing with `ValueError: max_num_batched_tokens (2048) is smaller than "
                   "max_model_len (8192).` when chunked prefill is off.")
    assert [(r.kind, r.type) for r in recs][-1] == ("inner", "ValueError")


# --- issue 18: wrappers and parse cases seen in real pastes --------------------------------------


def test_syslog_escaped_ansi_is_stripped():
    # rsyslog writes the ESC byte as "#033": the colour codes must not stay glued to the text
    line = "#033[2m#033[33m(raylet)#033[0m Refer to the documentation"
    assert clean_line(line) == "(raylet) Refer to the documentation"


def test_exception_raised_without_arguments_is_its_class_name():
    # logger.exception(repr(e)) of an argless exception, and a traceback's last line for one
    recs = records("ERROR 12-13 08:58:11 engine.py:165] NoFreeBlocksError()\n")
    assert [(r.kind, r.type, r.message) for r in recs] == [("exception", "NoFreeBlocksError", "NoFreeBlocksError")]
    recs = records("vllm.core.block.interfaces.BlockAllocator.NoFreeBlocksError\nsome words that follow it here\n")
    assert (recs[0].type, recs[0].message) == ("vllm.core.block.interfaces.BlockAllocator.NoFreeBlocksError",
                                               "NoFreeBlocksError")
    # a repr with arguments keeps them, without the closing parenthesis
    assert records("ValueError('boom here')\n")[0].message == "boom here"
    assert records("KeyError(3)\n")[0].message == "3"


def test_source_line_above_a_caret_is_not_an_error_even_without_the_traceback_header():
    text = (
        "(EngineCore pid=229) ERROR 04-19 12:21:04 [core.py:1134]     out = self._continuation_prefill(\n"
        "(EngineCore pid=229) ERROR 04-19 12:21:04 [core.py:1134]           ^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "(EngineCore pid=229) ERROR 04-19 12:21:04 [core.py:1134] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 72.00 MiB.\n"
    )
    recs = records(text)
    assert [r.type for r in recs] == ["torch.OutOfMemoryError"]
    # an indented line a person wrote, with no caret or frame under it, is still read
    assert records("    ValueError: No available memory for the cache blocks.\nthanks\n")[0].type == "ValueError"


def test_html_stored_comment_is_read_as_the_text_it_shows():
    from kvkb.matcher.segment import unhtml

    line = 'the failure was:</p><pre><code class="language-text">torch.OutOfMemoryError: x &gt; y &#39;z&#39;'
    assert unhtml(line) == ["the failure was:", "torch.OutOfMemoryError: x > y 'z'"]
    assert unhtml("List[int] <n> tokens & more") == ["List[int] <n> tokens & more"]  # no HTML: as it is
    recs = records('  File &quot;/x/vllm/engine/llm_engine.py&quot;, line 577, in step\nValueError: boom boom\n')
    assert [r.type for r in recs] == ["ValueError"]
    assert "execute_model" not in {c for r in recs for c in r.cues}


def test_xinference_actor_address_is_not_part_of_the_message():
    rec = records("torch.cuda.OutOfMemoryError: [address=0.0.0.0:43411, pid=101] CUDA out of memory. Tried to allocate "
                  "70.00 MiB.\n")[0]
    assert rec.message == "CUDA out of memory. Tried to allocate 70.00 MiB."
    # the same words elsewhere in a message stay
    assert "[address=" in records("ValueError: bad value [address=0.0.0.0:1, pid=2] here\n")[0].message


def test_argless_exception_is_shown_once():
    rec = records("asyncio.exceptions.CancelledError\n")[0]
    assert rec.text == "asyncio.exceptions.CancelledError"


def test_prefix_shape_tells_launcher_tags_from_record_headers():
    from kvkb.matcher.normalize import same_message, strip_prefixes_shaped

    # the kernel's dmesg timestamps (plain and -T) are record headers: stripped, and each starts a message
    assert strip_prefixes_shaped("[ 2448.628970] Out of memory: Killed process 1 (x)") == \
        ("Out of memory: Killed process 1 (x)", None, ("!",))
    assert strip_prefixes_shaped("[Mon Nov 23 10:02:11 2026] Out of memory")[0] == "Out of memory"
    first = strip_prefixes_shaped("vllm-1  | ERROR 11-18 18:07:28 [core.py:1] ValueError: y")[2]
    same = strip_prefixes_shaped("vllm-1  | rest of the message")[2]
    other = strip_prefixes_shaped("other-1  | rest of the message")[2]
    header = strip_prefixes_shaped("vllm-1  | [ 12.000001] oom-kill:constraint=x")[2]
    assert same_message(first, same) and same_message(first, ())  # the launcher's own tag; a hard wrap
    assert not same_message(first, other) and not same_message(first, header)
    # a stamp that changes line by line (kubectl/CRI) compares by kind
    a = strip_prefixes_shaped("2025-01-12T13:44:22.654793722Z stdout F Foo: bar")[2]
    b = strip_prefixes_shaped("2025-01-12T11:09:30.870622023Z stderr F more text")[2]
    assert same_message(a, b)


def test_a_message_keeps_its_lines_under_a_launcher_prefix():
    text = ["CompileTimeScopedVmemOom: Ran out of memory in memory space vmem ... for",
            "%flash_attention.1 = bf16[1,16,25344,80] ... Scoped allocation with size",
            "37.22M and limit 32.00M exceeded scoped vmem limit by 5.22M."]
    plain, _ = segment(list(enumerate(text, 1)))
    composed, _ = segment(list(enumerate((f"vllm-1  | {t}" for t in text), 1)))
    assert [r.message for r in plain] == [r.message for r in composed] and len(plain) == 1


def test_a_line_glued_under_an_info_line_is_read_on_its_own():
    lines = ["INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
             "kubectl describe pod vllm-0 says:  Last State: Terminated  Reason: OOMKilled  Exit Code: 137"]
    recs, _ = segment(list(enumerate(lines, 1)))
    assert any(r.line == 2 and r.kind == "bare" and r.message.startswith("kubectl") for r in recs)


def test_a_message_quoted_in_cjk_prose_is_read_on_its_own():
    from kvkb.matcher.segment import quoted_in_prose

    quote = ("Free memory on device (0.75/14.57GiB) on startup is less than desired GPU memory "
             "utilization(0.4,5.83GiB).")
    line = f"调用api接口解析时就报错：{quote}我监控nvidia-smi，显示显卡有资源的。"
    assert quoted_in_prose(line) == quote
    inner = [r for r in records(line) if r.kind == "inner"]
    assert [r.message for r in inner] == [quote]
    # an exception quoted that way keeps its class
    msg = "No available memory for the cache blocks. Try increasing `gpu_memory_utilization`"
    assert [(r.type, r.message) for r in records(f"这时候报错：ValueError: {msg}。") if r.kind == "inner"] == [
        ("ValueError", msg)]
    # no such script, or only short Latin words among it: nothing is taken out
    assert quoted_in_prose(f"The server said: {quote} and stopped") is None
    assert quoted_in_prose("我配置好了mineru，从gradio页面传扫描件可以正常解析") is None


def test_a_quote_in_cjk_prose_is_matched_confidently():
    from matcher_helpers import matcher

    line = ("我配置好了mineru，调用api接口解析时就报错：Free memory on device (0.75/14.57GiB) on startup is less than "
            "desired GPU memory utilization(0.4,5.83GiB).我监控nvidia-smi，显示显卡有资源的。\n")
    m = matcher().match(line).matches[0]
    assert (m.id, m.confidence) == ("insufficient-free-memory-at-startup", "confident")


def test_a_message_in_quotation_marks_in_a_long_sentence_is_read_on_its_own():
    from kvkb.matcher.segment import quoted_texts
    from matcher_helpers import matcher

    line = ('Whatever utilization I pick, the server either dies with an OOM or stops with "No available memory for '
            'the cache blocks." before it ever answers a single request from the benchmark client.\n')
    m = matcher().match(line).matches[0]
    assert (m.id, m.confidence) == ("no-memory-for-cache-blocks", "confident")
    assert quoted_texts("it fails with `Cannot allocate the KV cache on this device` now") == \
        ["Cannot allocate the KV cache on this device"]
    # a path or an identifier in quotes is no message; nor is a whole line in quotes
    assert quoted_texts('set "gpu_memory_utilization_for_the_whole_node" please') == []
    assert quoted_texts('"No available memory for the cache blocks."') == []


def test_each_of_several_quoted_messages_in_one_sentence_is_read_on_its_own():
    # a title quoting two errors: the longer quote is the wrapper, the shorter one the shortage
    from kvkb.matcher.segment import quoted_texts
    from matcher_helpers import matcher

    line = ("Serving on vLLM fails: `No available memory for the cache blocks` & `Error executing method "
            "'determine_num_available_blocks'`\n")
    assert quoted_texts(line) == ["Error executing method 'determine_num_available_blocks'",
                                  "No available memory for the cache blocks"]
    m = matcher().match(line).matches[0]
    assert (m.id, m.confidence) == ("no-memory-for-cache-blocks", "confident")


def test_vllm_logger_header_without_its_date_is_stripped():
    from kvkb.matcher.normalize import strip_prefixes_shaped

    # a shipper that keeps its own time (or a user trimming the log) drops vLLM's date, not the location
    for line in ("ERROR core.py:1138 AssertionError: x", "ERROR [core.py:708] AssertionError: x",
                 "ERROR [v1/engine/core.py:708] AssertionError: x"):
        assert strip_prefixes_shaped(line) == ("AssertionError: x", "ERROR", ("!",)), line
    # a level word before ordinary text is not a location: only the level goes
    assert strip_prefixes_shaped("ERROR setup.py is missing")[0] == "setup.py is missing"


def test_a_launchers_timestamp_keeps_the_indentation_after_it():
    # kubectl --timestamps / docker logs -t put one space after the stamp: a traceback's source line
    # keeps its own indentation, or it would read as a line of its own
    from kvkb.matcher.normalize import strip_prefixes_shaped

    content, level, shape = strip_prefixes_shaped("2025-01-01T10:00:00.123456789Z     self.model_runner = X(")
    assert content == "    self.model_runner = X(" and level is None


def test_glogs_severity_letter_is_the_lines_level_except_info():
    from kvkb.matcher.normalize import strip_prefixes

    line = "E0118 22:42:45.737331   20084 tpu_pjrt_client.cc:1889] TpuClient::AllocateBuffer returning error"
    assert strip_prefixes(line) == ("TpuClient::AllocateBuffer returning error", "ERROR", True)
    assert strip_prefixes("W0118 22:42:45.737331 1 a.cc:9] low")[1] == "WARNING"
    # an INFO line of another program may report vLLM's error in it: left without a level
    assert strip_prefixes('I0902 00:55:35.305769       1 server.go:2282] "HTTP call done"')[1] is None


def test_a_paste_newest_first_is_read_oldest_first():
    from kvkb.matcher.segment import newest_first
    from matcher_helpers import matcher

    lines = ["2024-02-02 21:44:03.976", "[info]", "Error initializing vLLM engine: CUDA out of memory. Tried to allocate 112.00 MiB. "
             "GPU 0 has a total capacity of 44.35 GiB of which 53.38 MiB is free.",
             "2024-02-02 21:43:49.554", "[info]", "INFO 02-03 03:43:49 model_runner.py:625] Capturing the model for CUDA graphs.",
             "2024-02-02 21:43:48.339", "[info]", "INFO 02-03 03:43:48 llm_engine.py:316] # GPU blocks: 7754, # CPU blocks: 2048",
             "2024-02-02 21:43:24.749", "[info]", "INFO 02-03 03:43:17 weight_utils.py:1] Loading weights"]
    numbered = list(enumerate(lines, 1))
    ordered = newest_first(numbered)
    # blocks oldest first, each block's own lines in their order, line numbers kept
    assert [n for n, _ in ordered] == [10, 11, 12, 7, 8, 9, 4, 5, 6, 1, 2, 3]
    report = matcher().match("\n".join(lines) + "\n")
    assert report.root_cause == "cuda-oom-during-cudagraph-capture" and report.newest_first
    # in time order (or with a step forward) nothing is reordered
    assert newest_first(list(enumerate(reversed(lines), 1))) is None
    assert newest_first([(1, "2024-01-01 00:00:03 a"), (2, "2024-01-01 00:00:02 b"), (3, "2024-01-01 00:00:04 c"),
                         (4, "2024-01-01 00:00:01 d"), (5, "2024-01-01 00:00:00 e")]) is None


def test_buildkites_bracketed_stamp_is_a_launchers_and_a_cut_header_leaves_nothing():
    line = "[2026-04-13T02:35:01Z] (StageEngineCoreProc pid=762) ERROR 04-13 02:35:01 [core.py:98] ValueError: y"
    assert strip_prefixes(line)[0:2] == ("ValueError: y", "ERROR")
    # a paste's last line cut inside vLLM's header, before its location: no text of its own
    assert strip_prefixes("[2026-04-13T02:35:01Z] (StageEngineCoreProc pid=762) ERROR 04-13 02:35:01")[0:2] == ("", "ERROR")
    # Hydra's "[date][logger][LEVEL] - " header is not this stamp
    assert strip_prefixes("[2021-06-06 21:07:33,713][vllm.engine][INFO] - x")[0:2] == ("x", "INFO")


@pytest.mark.parametrize("prefix", ["[rank0]: ", "api-1  | ", "> ", "(Worker pid=12345) "])
def test_a_paste_newest_first_behind_a_launchers_prefix_is_read_oldest_first(prefix):
    from kvkb.matcher.segment import newest_first

    lines = [prefix + s for s in ("2024-01-01 00:00:03 c", "2024-01-01 00:00:02 b", "2024-01-01 00:00:01 a",
                                  "2024-01-01 00:00:00 start")]
    ordered = newest_first(list(enumerate(lines, 1)))
    assert ordered is not None and [n for n, _ in ordered] == [4, 3, 2, 1]


def test_one_flattened_frame_behind_a_launchers_prefix_is_a_frame():
    # a pod's timestamp in front of a traceback flattened onto one line with one frame in it
    text = ('2025-06-16T07:42:55.123456789Z File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", '
            "line 381, in determine_available_memory cudagraph_memory_estimate = self.model_runner.profile_cudagraph_memory() "
            "... torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.53 GiB. GPU has a total capacity of "
            "23.00 GiB of which 1.49 GiB is free.\n")
    recs = segment(list(enumerate(split_lines(text), 1)))[0]
    assert any(r.kind == "exception" and r.type == "torch.OutOfMemoryError" for r in recs)
    # a line whose text does not open with the frame is left whole
    from kvkb.matcher.segment import parse

    plain = "2025-06-16T07:42:55.123456789Z a note naming " + text.split("Z ", 1)[1]
    assert len(parse([(1, plain)])) == 1 and len(parse([(1, text)])) > 1
    # with no prefix at all, unflatten decides: a sentence, then a traceback's header and the frame, is split
    said = "It fails at start-up with: Traceback (most recent call last): " + text.split("Z ", 1)[1]
    assert len(parse([(1, said)])) > 1


def test_a_learned_prefix_is_taken_off_a_page_stored_as_html():
    from kvkb.matcher.segment import strip_learned_prefix

    lines = ["[0] [rank0]: Traceback (most recent call last):",
             '[0] [rank0]:   File &quot;/x/model.py&quot;, line 91, in forward',
             "[0] [rank0]:     x = x + self.attn(x)",
             "[0] [rank0]: RuntimeError: boom"]
    out = strip_learned_prefix(lines)
    assert out[1] == '  File &quot;/x/model.py&quot;, line 91, in forward'
