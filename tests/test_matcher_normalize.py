"""kvkb.matcher.normalize and .segment: what a pasted log looks like after clean-up."""

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
