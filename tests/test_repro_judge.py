"""Pass rules of the reproduction runner (kvkb.reproductions.judge): pure functions over outputs."""

from pathlib import Path

import pytest

from kvkb.reproductions import judge
from kvkb.reproductions.scenario import parse_scenario

E02 = (
    "(EngineCore pid=1) ERROR 11-22 02:25:12 [core.py:1510] ValueError: To serve at least one request with the "
    "model's max seq len (32768), (0.38 GiB KV cache is needed, which is larger than the available KV cache "
    "memory (0.06 GiB). Based on the available memory, the estimated maximum model length is 5248.\n"
    "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore': 1}\n"
)
FIXED = (
    "(EngineCore pid=9) INFO 11-22 02:30:01 [kv_cache_utils.py:1300] CPU KV cache size: 5,376 tokens, "
    "Maximum concurrency for 4,096 tokens per request: 1.31x\n"
    "[kvkb-repro] request 0: generated 16 tokens: [1, 2, 3]\n"
)


def scenario(**extra):
    data = {"entry": "max-model-len-exceeds-kv-cache", "backends": {"cpu": {}}, **extra}
    return parse_scenario(data, Path("max-model-len-exceeds-kv-cache.yaml"))


def test_capacity_one_line_form_with_commas():
    cap = judge.parse_capacity(FIXED)
    assert (cap.device, cap.kv_tokens, cap.max_model_len, cap.max_concurrency) == ("CPU", 5376, 4096, 1.31)


def test_capacity_two_line_form_of_older_releases_and_last_report_wins():
    out = ("GPU KV cache size: 100 tokens\nMaximum concurrency for 64 tokens per request: 1.56x\n"
           "INFO GPU KV cache size: 23,648 tokens\nINFO Maximum concurrency for 29,000 tokens per request: 0.82x\n")
    cap = judge.parse_capacity(out)
    assert (cap.kv_tokens, cap.max_model_len, cap.max_concurrency) == (23648, 29000, 0.82)


def test_capacity_absent():
    assert judge.parse_capacity("Available KV cache memory: 0.06 GiB\n") is None


def test_generated_tokens_per_request():
    out = "[kvkb-repro] request 0: generated 16 tokens: []\n[kvkb-repro] request 1: generated 0 tokens: []\n"
    assert judge.generated_tokens(out) == [16, 0]


@pytest.mark.parametrize(
    "line, expected",
    [
        ("TypeError: EngineArgs.__init__() got an unexpected keyword argument 'max_seq_len'", "keyword argument 'max_seq_len'"),
        ("WARNING 11-22 [interface.py:1457] Unknown vLLM environment variable detected: VLLM_MAX_BATCH_SIZE", "VLLM_MAX_BATCH_SIZE"),
        ("vllm serve: error: unrecognized arguments: --swap-space 4", "--swap-space 4"),
        ("ValueError: invalid literal for int() with base 10: '8GB'", "'8GB'"),
        ("  Value error, invalid literal for int() with base 10: '8GB' [type=value_error, input_value=", "'8GB'"),
    ],
)
def test_rejections(line, expected):
    assert expected in judge.rejection(f"noise\n{line}\n")


def test_no_rejection_in_plain_error():
    assert judge.rejection(E02) is None


def test_broken_passes_only_on_error_named_by_kbmatch():
    s = scenario()
    assert judge.judge_broken(s, 1, E02, "max-model-len-exceeds-kv-cache").passed
    assert not judge.judge_broken(s, 0, E02, "max-model-len-exceeds-kv-cache").passed  # did not fail
    assert not judge.judge_broken(s, None, E02, "max-model-len-exceeds-kv-cache").passed  # timed out
    wrong = judge.judge_broken(s, 1, E02, "no-memory-for-cache-blocks")
    assert not wrong.passed and "no-memory-for-cache-blocks" in wrong.reason
    assert not judge.judge_broken(s, 1, E02, None).passed
    assert not judge.judge_broken(s, 1, E02, None, "kbmatch exited 2").passed


def test_wrapper_scenario_expects_the_inner_entry_per_backend():
    s = parse_scenario(
        {"entry": "engine-dead-after-oom", "backends": {"cpu": {}, "cuda": {}},
         "broken": {"match": {"cpu": "cpu-kv-cache-space", "cuda": "no-memory-for-cache-blocks"}}},
        Path("engine-dead-after-oom.yaml"),
    )
    assert judge.judge_broken(s, 1, E02, "cpu-kv-cache-space", backend="cpu").passed
    assert not judge.judge_broken(s, 1, E02, "cpu-kv-cache-space", backend="cuda").passed


def test_warning_scenario_needs_symptoms_and_a_live_run():
    s = scenario(broken={"expect": "warning", "require": [r"Waiting: [1-9]", r"KV cache usage: 100\.0%"]})
    stats = "Running: 1 reqs, Waiting: 7 reqs, CPU KV cache usage: 100.0%\n"
    assert judge.judge_broken(s, 0, stats, "max-model-len-exceeds-kv-cache").passed
    assert not judge.judge_broken(s, 0, "Running: 1 reqs, Waiting: 0 reqs, CPU KV cache usage: 40.0%",
                                  "max-model-len-exceeds-kv-cache").passed
    assert not judge.judge_broken(s, 1, stats, "max-model-len-exceeds-kv-cache").passed


def test_fixed_needs_exit_0_tokens_and_capacity():
    s = scenario()
    assert judge.judge_fixed(s, 0, FIXED).passed
    assert not judge.judge_fixed(s, 1, FIXED).passed
    assert not judge.judge_fixed(s, 0, FIXED.replace("generated 16", "generated 2")).passed
    assert not judge.judge_fixed(s, 0, FIXED.splitlines()[1]).passed  # no capacity line


def test_fixed_forbidden_symptom():
    s = scenario(fixed={"forbid": [r"Waiting: [1-9]"]})
    assert not judge.judge_fixed(s, 0, FIXED + "Running: 1 reqs, Waiting: 3 reqs\n").passed


def test_ineffective_rules():
    s = scenario()
    reject = "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'max_seq_len'\n"
    assert judge.judge_ineffective(s, 1, reject, None).passed
    same = judge.judge_ineffective(s, 1, E02, "max-model-len-exceeds-kv-cache")
    assert same.passed and "same error" in same.reason
    other = judge.judge_ineffective(s, 1, "ValueError: No available memory", "no-memory-for-cache-blocks")
    assert other.passed and "no-memory-for-cache-blocks" in other.reason
    # an unknown environment variable is only a warning: the run goes on, the advice is ignored
    warned = "WARNING Unknown vLLM environment variable detected: VLLM_MAX_BATCH_SIZE\n" + FIXED
    assert judge.judge_ineffective(s, 0, warned, None).passed
    # advice that lets the program run is not ineffective
    assert not judge.judge_ineffective(s, 0, FIXED, None).passed
    # a crash nobody can name is not proof either
    assert not judge.judge_ineffective(s, 1, "SyntaxError: invalid syntax", None).passed
