"""A ballast process: holds memory so a reproduction sees a machine that is already partly used.

It plays the forgotten Jupyter kernel or second vLLM instance behind
insufficient-free-memory-at-startup. Its size is computed from the memory node vLLM's CPU worker
measures (/sys/devices/system/node/node0/meminfo, the same "available" formula), so the broken
and the fixed run start from the same available memory.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .proctree import kill_session
from .scenario import Ballast

# The child fills the memory (bytes * n commits every page), says so, then waits to be killed.
_CHILD = (
    "import sys, time\n"
    "hold = b'\\x01' * int(sys.argv[1])\n"
    "print('ready', flush=True)\n"
    "while True: time.sleep(3600)\n"
)
# On the GPU runner the ballast is a CUDA tensor in the vLLM interpreter (which has torch).
_CUDA_CHILD = (
    "import sys, time, torch\n"
    "hold = torch.ones(int(sys.argv[1]), dtype=torch.uint8, device='cuda')\n"
    "torch.cuda.synchronize()\n"
    "print('ready', flush=True)\n"
    "while True: time.sleep(3600)\n"
)


class BallastTooLarge(RuntimeError):
    """The machine has so much free memory that the ballast would exceed its cap."""


@dataclass(frozen=True)
class NodeMemory:
    total: int
    available: int


def parse_node_meminfo(text: str) -> NodeMemory:
    """vLLM 0.32's formula: available = MemFree + Active(file) + Inactive(file) + SReclaimable."""
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] == "Node":
            values[parts[2].rstrip(":")] = int(parts[3]) * 1024
        elif len(parts) >= 2 and parts[0].endswith(":"):  # /proc/meminfo form
            values[parts[0].rstrip(":")] = int(parts[1]) * 1024
    if "MemAvailable" in values and "Active(file)" not in values:
        return NodeMemory(values["MemTotal"], values["MemAvailable"])
    available = values["MemFree"] + values.get("Active(file)", 0) + values.get("Inactive(file)", 0)
    return NodeMemory(values["MemTotal"], available + values.get("SReclaimable", 0))


def node_memory(node: int = 0) -> NodeMemory:
    path = Path(f"/sys/devices/system/node/node{node}/meminfo")
    return parse_node_meminfo((path if path.exists() else Path("/proc/meminfo")).read_text())


def ballast_bytes(memory: NodeMemory, spec: Ballast) -> int:
    """How much to hold so that about `leave_available_fraction` of the node stays available."""
    wanted = memory.available - int(spec.leave_available_fraction * memory.total)
    size = max(wanted, spec.min_bytes)
    if size > spec.max_bytes:
        raise BallastTooLarge(
            f"the ballast would need {size / 2**30:.1f} GiB (cap {spec.max_bytes / 2**30:.1f} GiB) "
            f"to leave {spec.leave_available_fraction:.0%} of {memory.total / 2**30:.1f} GiB available"
        )
    return size


class BallastProcess:
    """Context manager: start the ballast, wait until its memory is committed, kill it on exit."""

    def __init__(self, size: int, python: str = sys.executable, device: str = "cpu"):
        self.size = size
        self.python = python
        self.device = device
        self.proc: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def __enter__(self) -> "BallastProcess":
        self.proc = subprocess.Popen(
            [self.python, "-c", _CUDA_CHILD if self.device == "cuda" else _CHILD, str(self.size)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True, text=True,
        )
        line = self.proc.stdout.readline()  # blocks until the memory is held
        if line.strip() != "ready":
            self.__exit__(None, None, None)
            raise RuntimeError(f"ballast process failed to hold {self.size} bytes")
        time.sleep(0.5)  # let the kernel's per-node counters catch up
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            kill_session(self.proc.pid, grace_s=2.0)
            self.proc.wait()
            self.proc = None

