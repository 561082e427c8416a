"""`kvkb verify`: usage errors, and a whole run against a fake vLLM judged by the real kbmatch."""

import json
import shutil
import sys

import pytest
import yaml

from kvkb.cli.main import main
from kvkb.loader import REPO_ROOT

from test_repro_bootstrap import FAKE_VLLM  # noqa: E402  (tests/ is on sys.path under pytest)

ENTRY = "max-model-len-exceeds-kv-cache"


@pytest.fixture
def one_entry_kb(tmp_path, monkeypatch):
    """A kb/ holding only the exemplar (without `related`, whose targets are not in this kb)."""
    kb = tmp_path / "kb"
    kb.mkdir()
    data = yaml.safe_load((REPO_ROOT / "kb" / f"{ENTRY}.yaml").read_text())
    data.pop("related", None)
    (kb / f"{ENTRY}.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    shutil.copy(REPO_ROOT / "kb" / "schema.json", kb / "schema.json")
    monkeypatch.setenv("KVKB_KB_DIR", str(kb))
    return kb


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    pkg = tmp_path / "fake" / "vllm"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_VLLM)
    monkeypatch.setenv("PYTHONPATH", str(pkg.parent))
    return pkg.parent


def test_unknown_id_is_a_usage_error(one_entry_kb, capsys):
    assert main(["verify", "no-such-entry", "--python", sys.executable]) == 2
    assert "unknown entry id(s): no-such-entry" in capsys.readouterr().err


def test_missing_python_is_a_usage_error(one_entry_kb, capsys):
    assert main(["verify", ENTRY, "--python", "/nonexistent/python"]) == 2
    assert "no such Python interpreter" in capsys.readouterr().err


def test_python_without_vllm_is_a_usage_error(one_entry_kb, capsys, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "")
    assert main(["verify", ENTRY, "--python", sys.executable]) == 2
    err = capsys.readouterr().err
    assert "cannot import vllm" in err and "Traceback" not in err


def test_relative_python_path_is_made_absolute(one_entry_kb, capsys, monkeypatch, tmp_path):
    """Runs start in their own folders: `--python .venv-vllm/bin/python` must reach them absolute
    (it crashed with a FileNotFoundError traceback). Here the interpreter has no vllm, so the
    check that imports it runs and fails cleanly: it found the interpreter."""
    import os

    monkeypatch.setenv("PYTHONPATH", "")
    rel = os.path.relpath(sys.executable)
    assert main(["verify", ENTRY, "--python", rel]) == 2
    err = capsys.readouterr().err
    assert "cannot import vllm" in err and os.path.abspath(rel) in err and "Traceback" not in err


def test_env_names_the_default_python(one_entry_kb, capsys, monkeypatch):
    monkeypatch.setenv("KVKB_VLLM_PYTHON", "/nonexistent/python3")
    assert main(["verify", ENTRY]) == 2
    assert "/nonexistent/python3" in capsys.readouterr().err


def test_bad_timeout(one_entry_kb, capsys):
    assert main(["verify", "--timeout", "0"]) == 2


def test_entry_without_code(one_entry_kb, capsys):
    data = yaml.safe_load((one_entry_kb / f"{ENTRY}.yaml").read_text())
    for key in ("broken_code", "fixed_code"):
        data.pop(key)
    data["ineffective"] = []
    (one_entry_kb / f"{ENTRY}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["verify", ENTRY, "--python", sys.executable]) == 2
    assert "no reproduction" in capsys.readouterr().err


def test_cuda_without_a_driver_is_a_usage_error(one_entry_kb, fake_vllm, capsys, monkeypatch):
    from kvkb import gpu

    def no_driver(nvml=None):
        raise gpu.NoNvidiaDriver("no NVIDIA driver: NVML Shared Library Not Found")

    monkeypatch.setattr(gpu, "probe", no_driver)
    assert main(["verify", ENTRY, "--backend", "cuda", "--python", sys.executable]) == 2
    assert "needs an NVIDIA GPU" in capsys.readouterr().err


def test_full_run_against_fake_vllm(one_entry_kb, fake_vllm, tmp_path, capsys):
    results = tmp_path / "cpu.json"
    code = main(["verify", ENTRY, "--python", sys.executable, "--results", str(results),
                 "--workdir", str(tmp_path / "work"), "--timeout", "60"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    data = json.loads(results.read_text())
    assert data["vllm_version"] == "0.32.0" and data["backend"] == "cpu" and data["date"].endswith("Z")
    r = data["entries"][ENTRY]
    assert r["status"] == "pass"
    assert r["broken"]["exit_code"] == 1 and r["broken"]["matched"] == ENTRY
    assert "To serve at least one request" in r["broken"]["output"]
    # 64 MiB / 12 KiB per token, in 128-token blocks, as the fake computes it
    assert r["fixed"]["kv_tokens"] == 5376 and r["fixed"]["max_model_len"] == 4096
    assert r["fixed"]["generated_tokens"] == [16]
    assert r["fixes"]["lower-max-model-len"]["status"] == "verified"
    assert r["fixes"]["max-seq-len-kwarg"]["status"] == "ineffective"
    assert r["machine"]["llm_kwargs"]["kv_cache_memory_bytes"] == 67108864
    assert r["model_dirs"] == {"Qwen/Qwen2.5-0.5B-Instruct": "reproductions/models/qwen2.5-0.5b-instruct"}
    # progress lines (plain, not a TTY) and the summary table
    lines = [l for l in err.splitlines() if l.startswith("[")]
    assert sorted(l.split("  ")[0][6:] for l in lines) == [f"{ENTRY} broken", f"{ENTRY} fixed", f"{ENTRY} max-seq-len-kwarg"]
    assert [l[:5] for l in lines] == ["[1/3]", "[2/3]", "[3/3]"]  # numbered in finishing order
    assert "ineffective" in out and "1/1" in out


def test_a_failing_fix_fails_the_run(one_entry_kb, fake_vllm, tmp_path, capsys):
    path = one_entry_kb / f"{ENTRY}.yaml"
    data = yaml.safe_load(path.read_text())
    data["fixed_code"] = data["fixed_code"].replace("max_model_len=4096", "max_model_len=8192")
    data["ineffective"] = []
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    results = tmp_path / "cpu.json"
    code = main(["verify", ENTRY, "--python", sys.executable, "--results", str(results),
                 "--workdir", str(tmp_path / "work")])
    assert code == 1
    r = json.loads(results.read_text())["entries"][ENTRY]
    assert r["status"] == "fail" and r["fixed"]["passed"] is False and r["fixed"]["exit_code"] == 1
    assert r["fixes"]["lower-max-model-len"]["status"] == "unverified"


def test_jobs_usage_errors(one_entry_kb, capsys):
    assert main(["verify", ENTRY, "--jobs", "0", "--python", sys.executable]) == 2
    assert "--jobs must be at least 1" in capsys.readouterr().err
    # one GPU: every run needs it clean, so runs cannot share it
    assert main(["verify", ENTRY, "--backend", "cuda", "--jobs", "2", "--python", sys.executable]) == 2
    assert "--jobs must be 1 on cuda" in capsys.readouterr().err


def test_results_record_how_many_ran_at_once(one_entry_kb, fake_vllm, tmp_path, capsys):
    results = tmp_path / "cpu.json"
    assert main(["verify", ENTRY, "--jobs", "1", "--python", sys.executable, "--results", str(results),
                 "--workdir", str(tmp_path / "work")]) == 0
    assert json.loads(results.read_text())["jobs"] == 1
    assert "3 runs, 1 at a time" in capsys.readouterr().err


def test_an_unwritable_results_file_is_a_clean_error(one_entry_kb, fake_vllm, tmp_path, capsys):
    results = tmp_path / "taken"
    results.mkdir()  # a folder where the file should go: the first write fails
    assert main(["verify", ENTRY, "--jobs", "1", "--python", sys.executable, "--results", str(results),
                 "--workdir", str(tmp_path / "work")]) == 2
    out, err = capsys.readouterr()
    assert f"cannot write {results}" in err and "Traceback" not in err
    assert "total" not in out  # stopped: no summary of a run that could not be recorded
