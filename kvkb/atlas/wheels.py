"""Fetch one vLLM release's Python sources: `pip download --no-deps` its wheel, read the zip, delete it.

Only `vllm/**/*.py` members are read, straight from the zip (no unpacking), so a 450 MB wheel costs
its download and a few MB of memory; the wheel is removed as soon as its members are read.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

from packaging.version import InvalidVersion, Version


class FetchError(RuntimeError):
    """The release could not be downloaded or is not a wheel holding vllm/ sources."""


def _pip() -> list[str]:
    """A pip command: this interpreter's when it has one (uv venvs do not), else the PATH's."""
    try:
        import pip  # noqa: F401

        return [sys.executable, "-m", "pip"]
    except ImportError:
        found = shutil.which("pip") or shutil.which("pip3")
        if found is None:
            raise FetchError("no pip found: install pip, or run with a Python that has it") from None
        return [found]


def check_version(version: str) -> str:
    """'0.9.0.1' stays as written (pip's pin must match the release exactly); junk is refused."""
    try:
        Version(version)
    except InvalidVersion:
        raise FetchError(f"{version!r} is not a version (write e.g. 0.9.2)") from None
    return version


def download_wheel(version: str, dest: Path) -> Path:
    """Download vllm==version's wheel (no dependencies) into dest and return its path."""
    check_version(version)
    cmd = [*_pip(), "download", "--no-deps", "--no-cache-dir", "--only-binary=:all:", "--quiet", "-d", str(dest), f"vllm=={version}"]
    # pip picks the wheel for this machine's platform/Python; vLLM's sources are the same in each one
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise FetchError(f"pip could not download vllm=={version}: " + " | ".join(tail))
    wheels = sorted(dest.glob("vllm-*.whl"))
    if not wheels:
        raise FetchError(f"pip downloaded no vllm wheel for {version} into {dest}")
    return wheels[0]


def wheel_sources(wheel: Path) -> Iterator[tuple[str, str]]:
    """(path, text) of every vllm/**/*.py member of a wheel, in the zip's name order."""
    with zipfile.ZipFile(wheel) as zf:
        for name in sorted(zf.namelist()):
            if not (name.startswith("vllm/") and name.endswith(".py")):
                continue
            yield name, zf.read(name).decode("utf-8", errors="replace")


def release_sources(version: str, workdir: Path) -> Iterator[tuple[str, str]]:
    """(path inside the wheel, source text) of every vllm/**/*.py of vLLM `version`.

    The wheel is downloaded into a fresh directory under workdir and deleted when the iteration ends
    (or is abandoned), so at most one wheel is on disk at a time.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"vllm-{version}-", dir=workdir))
    try:
        wheel = download_wheel(version, tmp)
        yield from wheel_sources(wheel)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def released_versions(minimum: str = "0.4.0") -> list[str]:
    """vLLM releases on the index at or above `minimum`, oldest first (`pip index versions vllm`)."""
    proc = subprocess.run([*_pip(), "index", "versions", "vllm"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise FetchError("pip index versions vllm failed: " + proc.stderr.strip()[-300:])
    for line in proc.stdout.splitlines():
        if line.startswith("Available versions:"):
            found = [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
            keep = [v for v in found if not Version(v).is_prerelease and Version(v) >= Version(minimum)]
            return sorted(keep, key=Version)
    raise FetchError("pip index versions vllm printed no 'Available versions:' line")
