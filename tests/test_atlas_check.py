"""kvkb.atlas.check (lint KB070-KB079) on the synthetic releases of atlas_world: a planted wrong range,
exception, missing flag / parameter / variable, stale foreign declaration or wrong default each fails."""

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from atlas_world import build
from kvkb.atlas.check import check_entry, explained
from kvkb.entry import Entry

BASE = yaml.safe_load((Path(__file__).parent / "data" / "broken-entries" / "ok-baseline.yaml").read_text())
OLD = "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
NEW = "No available memory for the KV cache blocks. Raise `gpu_memory_utilization` when starting the engine."


@pytest.fixture(scope="module")
def atlas(tmp_path_factory):
    return build(tmp_path_factory.mktemp("atlas") / "atlas.json.gz")


def sig(text, versions, exception="ValueError", **extra):
    return {"id": "s1", "exception": exception, "template": text, "versions": versions, "engine": "any",
            "backend": "any", "samples": [f"{exception}: {text}" if exception else text], **extra}


def make(signatures=None, fixes=None, **extra):
    data = copy.deepcopy(BASE)
    data.pop("ineffective")
    data.pop("broken_code")
    data["signatures"] = signatures or [sig(OLD, "==0.1.0")]
    data["causes"][0]["fixes"] = fixes or [{"id": "fix", "title": "Lower it", "cli": "vllm serve MODEL", "versions": ">=0.1.0"}]
    data.update(extra)
    return Entry.model_validate(data)


def problems(entry, atlas):
    out = []
    check_entry(entry, atlas, lambda path, code, msg: out.append((code, path, msg)))
    return out


def test_right_ranges_are_clean(atlas):
    entry = make([sig(OLD, "==0.1.0"), {**sig(NEW, ">=0.2.0", exception="RuntimeError"), "id": "s2"},
                  {**sig("Only 3 GPU blocks: expect preemption", ">=0.1.0", exception=None, level="WARNING"), "id": "s3"}])
    assert problems(entry, atlas) == []


def test_planted_wrong_range_fails_naming_first_last_and_the_range_to_write(atlas):
    [(code, path, msg)] = problems(make([sig(OLD, ">=0.1.0")]), atlas)
    assert code == "KB070" and path == ("signatures", 0, "versions")
    assert "not printed by 0.2.0 inside it" in msg
    assert "first 0.1.0 vllm/worker/worker.py:9" in msg and "last 0.1.0 vllm/worker/worker.py:9" in msg
    assert 'write versions: ">=0.1.0,<=0.1.0"' in msg


def test_wrong_exception_and_level_fail(atlas):
    [(code, path, msg)] = problems(make([sig(NEW, ">=0.2.0", exception="ValueError")]), atlas)
    assert code == "KB071" and "raises it as RuntimeError" in msg and "vllm/worker/worker.py:11" in msg
    logged = sig("Only 3 GPU blocks: expect preemption", ">=0.1.0", exception=None, level="INFO")
    [(code, _, msg)] = problems(make([logged]), atlas)
    assert code == "KB071" and "logs it at WARNING" in msg


def test_text_no_release_prints_fails_unless_declared_foreign(atlas):
    torch = "CUDA out of memory. Tried to allocate 20.00 MiB."
    [(code, _, _)] = problems(make([sig(torch, ">=0.1.0", exception="OutOfMemoryError")]), atlas)
    assert code == "KB072"
    assert problems(make([sig(torch, ">=0.1.0", exception="OutOfMemoryError", origin="torch")]), atlas) == []


def test_declared_foreign_but_found_in_vllm_fails(atlas):
    [(code, path, msg)] = problems(make([sig(OLD, "==0.1.0", origin="torch")]), atlas)
    assert code == "KB073" and path == ("signatures", 0, "origin") and "vllm/worker/worker.py:9" in msg


def fix(versions, **forms):
    return [{"id": "fix", "title": "Change it", "versions": versions, **forms}]


def test_planted_missing_flag_parameter_and_variable_fail(atlas):
    [(code, path, msg)] = problems(make(fixes=fix(">=0.1.0", cli="vllm serve MODEL --swap-space 8")), atlas)
    assert code == "KB074" and path == ("causes", 0, "fixes", 0)
    assert "--swap-space, which 0.2.0 lack" in msg and 'versions to write: ">=0.1.0,<=0.1.0"' in msg
    assert problems(make(fixes=fix("==0.1.0", cli="vllm serve MODEL --swap-space 8")), atlas) == []
    [(code, _, msg)] = problems(make(fixes=fix(">=0.1.0", python="LLM(model=MODEL, kv_cache_memory_bytes=2**30)")), atlas)
    assert code == "KB075" and "kv_cache_memory_bytes, which 0.1.0 lack" in msg
    [(code, _, msg)] = problems(make(fixes=fix(">=0.1.0", env="VLLM_OLD_KNOB=1")), atlas)
    assert code == "KB076" and "VLLM_OLD_KNOB" in msg
    # --no-X of a BooleanOptionalAction, and an EngineArgs field through LLM(**kwargs)
    assert problems(make(fixes=fix("==0.1.0", cli="vllm serve MODEL --no-enable-prefix-caching")), atlas) == []
    assert problems(make(fixes=fix("==0.2.0", python="LLM(model=MODEL, kv_cache_memory_bytes={kv})")), atlas) == []


def test_other_programs_flags_must_be_declared_and_declarations_must_stay_true(atlas):
    docker = fix(">=0.1.0", cli="docker run --gpus all vllm/vllm-openai --gpu-memory-utilization 0.8")
    found = problems(make(fixes=docker), atlas)
    # docker's own flags end at the image: what follows is vLLM's and is checked
    assert [(c, m.split(":")[0]) for c, _, m in found] == [("KB079", "fix 'fix' (versions '>=0.1.0') names docker's flag --gpus")]
    assert problems(make(fixes=docker, foreign_names=["--gpus"]), atlas) == []
    [(code, path, msg)] = problems(make(fixes=docker, foreign_names=["--gpus", "--swap-space"]), atlas)
    assert code == "KB078" and path == ("foreign_names",) and "0.1.0" in msg
    # a name vLLM also has is fine to declare while the entry uses it with the other program
    smi = fix("==0.1.0", cli="nvidia-smi --swap-space && vllm serve MODEL --swap-space 4")
    assert problems(make(fixes=smi, foreign_names=["--swap-space"]), atlas) == []
    # a flag in prose (no command) is vLLM's
    [(code, _, _)] = problems(make(workaround="Pass `--no-such-flag` to vllm serve."), atlas)
    assert code == "KB079"


def test_a_stated_default_the_code_contradicts_fails(atlas):
    [(code, path, msg)] = problems(make(meaning="`gpu_memory_utilization` defaults to 0.8 here."), atlas)
    assert code == "KB077" and path == ("meaning",) and "0.9 in 0.1.0" in msg and "0.92 in 0.2.0" in msg
    assert problems(make(meaning="`gpu_memory_utilization` defaults to 0.92 from 0.2.0."), atlas) == []
    [(code, _, _)] = problems(make(meaning="VLLM_CPU_KVCACHE_SPACE (default 40) sets it."), atlas)
    assert code == "KB077"


def test_kvkb_lint_fails_on_a_planted_wrong_range(tmp_path, atlas):
    atlas.save(tmp_path / "atlas.json.gz")
    kb = tmp_path / "kb"
    kb.mkdir()
    data = copy.deepcopy(BASE)
    data["signatures"][0]["versions"] = ">=0.1.0"  # the baseline's wording is in neither release
    (kb / "ok-baseline.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    env = {"KVKB_ATLAS": str(tmp_path / "atlas.json.gz"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "kvkb.cli.main", "lint", "--no-matcher", str(kb)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 1, proc.stderr
    assert "KB072" in proc.stdout and "Traceback" not in proc.stderr


def test_the_same_literal_printed_another_way_is_claimed_by_a_sibling(atlas):
    warn = "Only 3 GPU blocks: expect preemption"
    plain = sig(warn, "==0.1.0", exception=None, level="WARNING")
    wrapped = {**sig(warn, "==0.2.0", exception="ValidationError"), "id": "s2",
               "samples": [f"  Value error, {warn} [type=value_error, input_value=1, input_type=int]"]}
    assert problems(make([plain, wrapped]), atlas) == []
    [(code, _, msg)] = problems(make([plain]), atlas)
    assert code == "KB070" and "printed by 0.2.0 outside it" in msg


def test_a_pydantic_config_prints_the_same_text_as_a_validation_error(atlas):
    text = "max_num_batched_tokens (8) must be at least max_num_seqs (16)."
    plain = {**sig(text, "==0.1.0"), "template": "max_num_batched_tokens ({n}) must be at least max_num_seqs ({m})."}
    wrapped = {**plain, "id": "s2", "exception": "pydantic_core._pydantic_core.ValidationError", "versions": ">=0.2.0",
               "samples": [f"  Value error, {text} [type=value_error, input_value=1, input_type=int]"]}
    assert problems(make([plain, wrapped]), atlas) == []
    # a plain ValueError claimed where pydantic prints it: the range is wrong
    [(code, _, msg)] = problems(make([{**plain, "versions": ">=0.1.0"}, wrapped]), atlas)
    assert code == "KB070" and "not printed by 0.2.0 inside it" in msg


def test_a_message_inside_a_value_lends_the_wrapper_neither_its_exception_nor_its_line(atlas):
    # the wrapper's '{error}' holds 0.1.0's ValueError text: that literal is no piece of the wrapper
    wrapper = "Worker failed with error '{error}', please check the stack trace above for the root cause"
    w = {**sig(wrapper, ">=0.1.0", exception="RuntimeError"),
         "samples": [f"RuntimeError: Worker failed with error '{OLD}', please check the stack trace above for the root cause"]}
    found, items = explained(make([w]).signatures[0], atlas)
    assert found == {0, 1} and [it.file for it in items] == ["vllm/executor.py"]
    assert problems(make([w]), atlas) == []
    # a wrapper said to be a ValueError is wrong although the message inside it is one
    [(code, _, msg)] = problems(make([{**w, "exception": "ValueError"}]), atlas)
    assert code == "KB071" and "raises it as RuntimeError (0.2.0 vllm/executor.py:3)" in msg
