"""Host limits a scenario's machine can declare: a memory cap (a cgroup) and a small /dev/shm.

A container's memory limit and its /dev/shm size are the two host limits behind the host-memory
entries. Both are played with the same kernel features a container runtime uses, so vLLM meets
the real thing: the kernel's OOM killer inside a memory cgroup (v2 `memory.max`, or v1
`memory.limit_in_bytes`), and a tmpfs of the declared size on /dev/shm in a private mount
namespace (`unshare -m`, as Docker's `--shm-size` does). Both need root; where they are not
available the run is skipped with the reason, never run without the limit.

After the run, the kernel's own log lines about this run's cgroup (what `dmesg` shows a user after
an OOM kill) are appended to the run's log, marked, so kbmatch sees what a user would paste.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
CGROUP_ROOT = Path("/sys/fs/cgroup")
KERNEL_MARK = "[kvkb-repro] kernel log (dmesg) for this run's memory cgroup:"


class LimitUnavailable(RuntimeError):
    """The host cannot play this limit (not root, no memory controller, no unshare)."""


def parse_size(value) -> int:
    """'3G', '64M', '512MiB' or a number of bytes -> bytes (binary units, like docker's --shm-size)."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"a size must be positive (got {value})")
        return value
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ValueError(f"not a size: {value!r} (use e.g. 64M, 3G or a number of bytes)")
    size = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if size <= 0:
        raise ValueError(f"a size must be positive (got {value!r})")
    return size


def shm_prefix(size_bytes: int) -> list[str]:
    """A command prefix that runs the rest with a private tmpfs of this size on /dev/shm."""
    if os.geteuid() != 0:
        raise LimitUnavailable("a private /dev/shm needs root (unshare -m and mount)")
    if shutil.which("unshare") is None:
        raise LimitUnavailable("a private /dev/shm needs util-linux's unshare")
    # unshare without --fork execs the shell, which execs the program: the pid (and so the
    # runner's session) stays the program's
    script = 'mount -t tmpfs -o "size=$0" kvkb-shm /dev/shm && exec "$@"'
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(size_bytes)]


def _memory_hierarchy() -> tuple[str, Path]:
    """('v2', root) when the unified hierarchy has the memory controller, else ('v1', memory root)."""
    controllers = CGROUP_ROOT / "cgroup.controllers"
    if controllers.is_file() and "memory" in controllers.read_text().split():
        return "v2", CGROUP_ROOT
    v1 = CGROUP_ROOT / "memory"
    if (v1 / "memory.limit_in_bytes").is_file():
        return "v1", v1
    raise LimitUnavailable("no cgroup memory controller (neither cgroup v2 memory nor v1 /sys/fs/cgroup/memory)")


class MemoryCgroup:
    """A fresh memory cgroup with a hard limit and no swap, removed on exit."""

    def __init__(self, limit_bytes: int):
        self.limit = limit_bytes
        self.name = f"kvkb-repro-{uuid.uuid4().hex[:12]}"
        self.kind: str | None = None
        self.path: Path | None = None

    def __enter__(self) -> "MemoryCgroup":
        if os.geteuid() != 0:
            raise LimitUnavailable("a memory cgroup needs root")
        self.kind, root = _memory_hierarchy()
        path = root / self.name
        try:
            path.mkdir()
            if self.kind == "v2":
                (path / "memory.max").write_text(str(self.limit))
                if (path / "memory.swap.max").exists():
                    (path / "memory.swap.max").write_text("0")
            else:
                (path / "memory.limit_in_bytes").write_text(str(self.limit))
                if (path / "memory.memsw.limit_in_bytes").exists():  # swap accounting on: no swap either
                    (path / "memory.memsw.limit_in_bytes").write_text(str(self.limit))
        except OSError as exc:
            self.path = path if path.exists() else None
            self.__exit__(None, None, None)
            raise LimitUnavailable(f"cannot set up a memory cgroup at {path}: {exc.strerror or exc}") from None
        self.path = path
        return self

    def prefix(self) -> list[str]:
        """A command prefix that moves the program into this cgroup before it starts."""
        assert self.path is not None
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.path)]

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer killed in this cgroup."""
        if self.path is None:
            return 0
        name = "memory.events" if self.kind == "v2" else "memory.oom_control"
        try:
            text = (self.path / name).read_text()
        except OSError:
            return 0
        m = re.search(r"^oom_kill (\d+)", text, re.MULTILINE)
        return int(m.group(1)) if m else 0

    def kernel_lines(self) -> list[str]:
        """The kernel log's lines about this cgroup: the oom-kill summary and 'Killed process' lines."""
        try:
            out = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            return []
        return cgroup_kernel_lines(out, self.name)

    def __exit__(self, *exc) -> None:
        if self.path is None:
            return
        # the runner killed the whole process tree already; a cgroup with members cannot go
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                import time

                time.sleep(0.1)


def cgroup_kernel_lines(dmesg: str, name: str) -> list[str]:
    """Pure: from `dmesg` output, the lines about cgroup `name`: each 'oom-kill:' summary naming it
    and the 'Killed process PID' line of every pid those summaries name (the victims)."""
    lines = dmesg.splitlines()
    pids = set()
    keep = []
    for line in lines:
        if f"memcg=/{name}," in line or line.rstrip().endswith(f"memcg=/{name}"):
            keep.append(line)
            m = re.search(r"\bpid=(\d+)", line)
            if m:
                pids.add(m.group(1))
    for line in lines:
        m = re.search(r"Killed process (\d+) ", line)
        if m and m.group(1) in pids:
            keep.append(line)
    order = {line: i for i, line in enumerate(lines)}
    return sorted(set(keep), key=lambda line: order[line])
