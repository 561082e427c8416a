"""kvkb.matcher.fill: fix templates filled with the user's numbers, nothing invented."""

from kvkb.matcher import fill
from kvkb.params import DERIVED


def derive(params: dict, context: str = "") -> tuple[dict, dict]:
    return fill.all_values(fill.clean_params(params), fill.context_values(context))


def test_every_derived_name_has_an_implementation():
    rich = {"max_model_len": "4096", "estimated_max_len": "1792", "needed_gib": "7.81", "available_gib": "4.45",
            "free_gib": "20", "total_gib": "80", "gpu_memory_utilization": "0.9", "kv_tokens": "1000"}
    values, _ = derive(rich)
    assert set(DERIVED) <= set(values)


def test_v1_estimate_is_vllms_own():
    values, notes = derive({"max_model_len": "4096", "estimated_max_len": "3712", "needed_gib": "0.0", "available_gib": "0.0"})
    assert values["max_model_len_fit"] == "3712"
    assert "3712" in notes["max_model_len_fit"]


def test_v0_kv_tokens_round_down_to_a_block():
    assert derive({"max_model_len": "29000", "kv_tokens": "23648"})[0]["max_model_len_fit"] == "23648"
    assert derive({"max_model_len": "32768", "kv_tokens": "26630"})[0]["max_model_len_fit"] == "26624"
    assert derive({"max_model_len": "30000", "kv_tokens": "3984)."})[0]["max_model_len_fit"] == "3984"


def test_gib_only_wording_scales_linearly():
    # 0.8.3-0.9.0 print no estimate: 32768 tokens need 4.00 GiB, 2.13 GiB available
    values, _ = derive({"max_model_len": "32,768", "needed_gib": "4.00", "available_gib": "2.13"})
    assert values["max_model_len_fit"] == str(int(32768 * 2.13 / 4.0) // 16 * 16)


def test_utilization_fit_needs_the_total_from_another_line():
    params = {"max_model_len": "131072", "needed_gib": "7.81", "available_gib": "4.45"}
    values, _ = derive(params)
    assert "gpu_memory_utilization_fit" not in values  # no total, no utilisation: stays <name>
    log = "Free memory on device cuda:0 (70.1/79.19 GiB) on startup ...\nnon-default args: {'gpu_memory_utilization': 0.9}"
    values, notes = derive(params, log)
    # 0.9 + (7.81 - 4.45) / 79.19 = 0.9424 -> 0.95
    assert values["gpu_memory_utilization_fit"] == "0.95"
    assert "79.19" in notes["gpu_memory_utilization_fit"]


def test_utilization_beyond_the_device_is_not_offered():
    values, notes = derive({"needed_gib": "16.0", "available_gib": "0.71"}, "total_gpu_memory (23.65 GiB)\ngpu_memory_utilization=0.9")
    assert "gpu_memory_utilization_fit" not in values
    assert "no utilisation fits" in notes["gpu_memory_utilization_fit"]


def test_free_memory_fit_rounds_down():
    values, _ = derive({"free_gib": "7.34", "total_gib": "139.72", "gpu_memory_utilization": "0.9"})
    assert values["gpu_memory_utilization_free"] == "0.05"
    values, _ = derive({}, "Available memory on node 0 (12.51/13.96 GiB) on startup is less than desired CPU memory utilization (0.92, 12.85 GiB).")
    assert values["gpu_memory_utilization_free"] == "0.89"


def test_cpu_kv_space_in_whole_gib():
    assert derive({"needed_gib": "0.0", "available_gib": "0.0", "max_model_len": "4096"})[0]["kv_cache_space_gib"] == "1"
    assert derive({"needed_gib": "2.5", "available_gib": "1.0"})[0]["kv_cache_space_gib"] == "3"
    # V0 CPU: 4 GiB (the default the warning names) holds 26624 tokens; 32768 need 5 GiB
    log = "Environment variable VLLM_CPU_KVCACHE_SPACE (GiB) for CPU backend is not set, using 4 by default."
    assert derive({"max_model_len": "32768", "kv_tokens": "26624"}, log)[0]["kv_cache_space_gib"] == "5"


def test_batched_tokens_at_least_max_model_len():
    assert derive({"max_num_batched_tokens": "2048", "max_model_len": "8192"})[0]["max_num_batched_tokens_fit"] == "8192"


def test_unknown_values_stay_visible():
    assert fill.fill("vllm serve MODEL --max-model-len {max_model_len_fit}", {}) == "vllm serve MODEL --max-model-len <max_model_len_fit>"
    assert fill.fill("LLM(max_model_len={max_model_len_fit})", {"max_model_len_fit": "1792"}) == "LLM(max_model_len=1792)"
