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


# --- kvkb fit fills max_model_len when vLLM's message carries no estimate ---------------------------

PASTE_085 = """\
INFO 05-02 09:12:44 [api_server.py:1043] args: Namespace(model='meta-llama/Llama-3.1-8B-Instruct', max_model_len=None)
INFO 05-02 09:13:40 [gpu_worker.py:227] Available KV cache memory: 5.62 GiB
ERROR 05-02 09:13:41 [core.py:396] ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (5.62 GiB). Based on the available memory,  Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.
"""


def test_fit_fills_max_model_len_for_a_shipped_model_when_vllm_gives_no_estimate():
    from kvkb.matcher.engine import Matcher
    from kvkb.fit.capacity import fit
    from kvkb.matcher.fill import shipped_config

    report = Matcher.load().match(PASTE_085)
    top = report.matches[0]
    assert report.root_cause == "max-model-len-exceeds-kv-cache" and top.confident
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 head_dim x 2 (K,V) x 2 bytes = 131072 bytes/token
    _, config = shipped_config("meta-llama/Llama-3.1-8B-Instruct")
    expected = fit(config, kv_cache_memory=int((5.62 - 0.005) * 2**30), max_model_len=131072).max_model_len_that_fits
    assert 45000 < expected < 46100  # ~5.6 GiB / 128 KiB per token
    assert f"--max-model-len {expected}" in top.fix_forms["cli"]
    assert "kvkb fit" in top.notes["max_model_len_fit"]


def test_fit_is_not_used_for_unknown_models_or_when_vllm_estimates():
    from kvkb.matcher import fill

    assert fill.shipped_config("acme/never-heard-of-it") is None
    assert fill.shipped_config("/models/Llama-3.1-8B-Instruct")[0] == "meta-llama/Llama-3.1-8B-Instruct"
    values, notes = fill.derive({"estimated_max_len": 3712, "model": "meta-llama/Llama-3.1-8B-Instruct",
                                 "needed_gib": 16.0, "available_gib": 0.45, "max_model_len": 131072})
    assert values["max_model_len_fit"] == "3712" and "vLLM's own estimate" in notes["max_model_len_fit"]
    values, _ = fill.derive({"model": "acme/x", "needed_gib": 16.0, "available_gib": 5.62, "max_model_len": 131072})
    assert values["max_model_len_fit"] == str(int(131072 * 5.62 / 16.0) // 16 * 16)  # the linear fallback


def test_fix_names_the_users_model_when_the_log_does():
    from kvkb.matcher.engine import Matcher

    top = Matcher.load().match(PASTE_085).matches[0]
    assert top.fix_forms["cli"].startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len ")
    python = top.fix_forms["python"]
    assert python.startswith("LLM(model='meta-llama/Llama-3.1-8B-Instruct', max_model_len=")
    compile(python, "<fix>", "eval")  # still valid Python


def test_a_quote_left_open_in_the_persons_code_names_no_model():
    from kvkb.matcher.fill import context_values

    text = ('llm = LLM(model="TheBloke/Llama-2-70B-AWQ, quantization=\'awq\', tensor_parallel_size=8)\n\n'
            'And this results in OOM:\n\nllm = LLM(model="x", tensor_parallel_size=4)\n')
    assert context_values(text).get("model") != "TheBloke/Llama-2-70B-AWQ, quantization='awq', tensor_parallel_size=8)"
    assert "\n" not in context_values(text).get("model", "")
    assert context_values('LLM(model="meta-llama/Llama-3.1-8B", dtype="half")')["model"] == "meta-llama/Llama-3.1-8B"


def test_the_model_of_vllm_serve_written_with_the_older_model_flag():
    from kvkb.matcher.fill import context_values

    assert context_values("vllm serve --model nvidia/Gemma-4-31B-IT-NVFP4 --max_num_seqs 1")["model"] == "nvidia/Gemma-4-31B-IT-NVFP4"
    assert context_values("vllm serve --model=my/model --tp 2")["model"] == "my/model"
    assert context_values("vllm serve Qwen/Qwen3-8B --max-model-len 4096")["model"] == "Qwen/Qwen3-8B"
    assert "model" not in context_values("vllm serve --config cfg.yaml")


def test_the_settings_a_paste_states_in_each_form():
    text = ("vllm serve my/model --max-model-len 8192 --tensor_parallel_size=2 --enforce-eager --kv-cache-dtype fp8\n"
            "(APIServer pid=1) INFO non-default args: {\u2018gpu_memory_utilization\u2019: 0.95, 'max_num_seqs': 16}\n"
            'LLM(model="x", swap_space=4)')
    got = fill.settings_in(text)
    assert got["max_model_len"] == "8192" and got["tensor_parallel_size"] == "2" and got["kv_cache_dtype"] == "fp8"
    assert got["gpu_memory_utilization"] == "0.95" and got["max_num_seqs"] == "16" and got["swap_space"] == "4"
    assert "enforce_eager" not in got  # a switch holds no value (the next flag is not one)
    assert fill.settings_in("no settings here") == {}


def test_a_fix_the_run_already_had():
    settings = {"tensor_parallel_size": "2", "gpu_memory_utilization": "0.9", "max_model_len": "8,192"}
    assert fill.already_set("vllm serve M --tensor-parallel-size 2", settings) == ["--tensor-parallel-size 2"]
    assert fill.already_set("vllm serve M --gpu-memory-utilization 0.90", settings) == ["--gpu-memory-utilization 0.90"]
    assert fill.already_set("vllm serve M --max-model-len 8192", settings) == ["--max-model-len 8192"]
    assert fill.already_set("vllm serve M --tensor-parallel-size 4", settings) == []
    # every flag must already be set; a switch or a value left unfilled compares with nothing
    assert fill.already_set("vllm serve M --tensor-parallel-size 2 --max-num-seqs 8", settings) == []
    assert fill.already_set("vllm serve M --max-model-len <max_model_len_fit>", settings) == []
    assert fill.already_set("vllm serve M --enforce-eager", {"enforce_eager": "True"}) == []


def test_an_awq_checkpoint_of_the_model_is_not_named_after_the_users_model():
    values = {"model": "org/Model-7B"}
    assert fill.fill("vllm serve MODEL-AWQ --quantization awq", values) == "vllm serve MODEL-AWQ --quantization awq"
    assert fill.fill("vllm serve MODEL --tp 2", values) == "vllm serve org/Model-7B --tp 2"
