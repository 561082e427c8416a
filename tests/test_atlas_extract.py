"""kvkb.atlas.extract: texts with their wildcards, roles and lines; flags, fields, variables, LLM params."""

import ast

from kvkb.atlas.extract import WILD, module_strings, release_facts


def strings(src, path="vllm/x.py"):
    return {(t, role, qual): line for _, _, t, role, qual, line in module_strings(path, ast.parse(src))}


def test_implicit_concatenation_fstring_and_raise_class_with_qualname():
    found = strings('''
class Worker:
    def check(self, n):
        raise ValueError(f"No memory for {n} blocks. "
                         "Try increasing `gpu_memory_utilization`.")
''')
    assert found == {(f"No memory for {WILD} blocks. Try increasing `gpu_memory_utilization`.",
                      "raise:ValueError", "Worker.check"): 4}


def test_plus_percent_and_format_fields_become_wildcards():
    found = strings('''
def f(x, y, logger):
    a = "tokens " + str(x) + " exceed the limit"
    b = "%d blocks (%.1f%%) free" % (x, y)
    c = "need {} GiB, have {:.2f} GiB".format(x, y)
    logger.warning("KV cache usage %.1f%% of %s", x, y)
''')
    texts = {t: role for t, role, _ in found}
    assert texts[f"tokens {WILD} exceed the limit"] == ""
    assert texts[f"{WILD} blocks ({WILD}%) free"] == ""
    assert texts[f"need {WILD} GiB, have {WILD} GiB"] == ""
    assert texts[f"KV cache usage {WILD}% of {WILD}"] == "log:WARNING"


def test_message_bound_to_a_name_takes_the_raise_role_and_docstrings_are_skipped():
    found = strings('''
def f(n):
    """This docstring is not a message at all."""
    msg = f"Cannot allocate {n} blocks for the KV cache"
    raise RuntimeError(msg)
''')
    assert list(found) == [(f"Cannot allocate {WILD} blocks for the KV cache", "raise:RuntimeError", "f")]


def test_identifiers_are_not_messages_but_raised_and_env_names_are_kept():
    found = strings('''
x = {"max_model_len": 1}
y = "VLLM_CPU_KVCACHE_SPACE"
def f():
    raise KeyError("oops")
    assert False, "Invalid block"
''')
    assert {t for t, _, _ in found} == {"VLLM_CPU_KVCACHE_SPACE", "oops", "Invalid block"}
    assert ("Invalid block", "raise:AssertionError", "f") in found


def test_release_facts_resolve_defaults_and_derive_flags():
    sources = [
        ("vllm/config.py", "class CacheConfig:\n    gpu_memory_utilization: float = 0.92\n"),
        ("vllm/engine/arg_utils.py", '''
import argparse
class EngineArgs:
    gpu_memory_utilization: float = CacheConfig.gpu_memory_utilization
    enable_prefix_caching: bool = False
    def add_cli_args(parser):
        for name in ["gpu_memory_utilization", "enable_prefix_caching"]:
            parser.add_argument(f"--{name.replace('_', '-')}", action=argparse.BooleanOptionalAction)
        parser.add_argument("--model", "-m")
'''),
        ("vllm/envs.py", 'import os\nenvironment_variables = {"VLLM_X": lambda: os.getenv("VLLM_X", "1")}\n'),
        ("vllm/entrypoints/llm.py", "class LLM:\n    def __init__(self, model, seed=0, **kwargs):\n        pass\n"),
        ("vllm/broken.py", "def f(:\n"),  # does not parse: skipped, not fatal
    ]
    facts = set(release_facts(sources))
    assert ("arg", "gpu_memory_utilization", "0.92") in facts
    flags = {f[1] for f in facts if f[0] == "flag"}
    assert {"--model", "--gpu-memory-utilization", "--enable-prefix-caching", "--no-enable-prefix-caching"} <= flags
    assert "--no-gpu-memory-utilization" not in flags  # only booleans get --no-
    assert ("env", "VLLM_X", "'1'") in facts
    assert {("llm", "model", "<required>"), ("llm", "seed", "0"), ("llm", "**kwargs", "")} <= facts


def test_a_format_string_passed_through_a_variable_still_has_wildcards():
    found = strings('''
def f(log_fn, n):
    log_fn("Running: %d reqs, GPU KV cache usage: %.1f%%, ", n, 1.0)
''')
    assert list(found) == [(f"Running: {WILD} reqs, GPU KV cache usage: {WILD}%, ", "", "f")]


def test_a_message_combined_into_a_logged_text_takes_the_log_role():
    found = strings('''
def load(logger, e):
    msg = "Failed to load model - not enough GPU memory."
    combined = f"{msg} (original error: {e})"
    logger.error(combined)
''')
    assert found[("Failed to load model - not enough GPU memory.", "log:ERROR", "load")] == 5
    assert (f"{WILD} (original error: {WILD})", "log:ERROR", "load") in found


def test_raises_in_pydantic_configs_are_marked_as_printed_by_pydantic():
    found = strings('''
from pydantic.dataclasses import dataclass


@dataclass
class CacheConfig:
    def __post_init__(self):
        raise ValueError("GPU memory utilization must be at most 1.")


class Plain:
    def f(self):
        raise ValueError("A plain ValueError line.")


@config
class ModelConfig:
    def g(self, x):
        assert x, "An assertion in a config"
''')
    assert ("GPU memory utilization must be at most 1.", "raise:ValueError@pydantic", "CacheConfig.__post_init__") in found
    assert ("A plain ValueError line.", "raise:ValueError", "Plain.f") in found
    assert ("An assertion in a config", "raise:AssertionError@pydantic", "ModelConfig.g") in found
