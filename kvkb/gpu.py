"""NVIDIA GPU probing through NVML (the nvidia-ml-py package, imported as `pynvml`).

Used by `kvkb doctor` and by `kvkb verify --backend cuda`, which refuses to run a reproduction on
a GPU that another process is using: memory held by a stranger is the very error several entries
document, so a reproduction on such a GPU proves nothing. The NVML module can be injected, so the
logic is tested without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

GIB = 1 << 30
# An idle GPU reports a little memory used by the driver; more than this with no visible process
# means something invisible from here (another container) holds memory.
IDLE_USED_BYTES = 1 * GIB


class NoNvidiaDriver(RuntimeError):
    """NVML is missing or no NVIDIA driver is loaded: there is no GPU to probe."""


@dataclass(frozen=True)
class GpuProcess:
    pid: int
    name: str
    used_bytes: int | None  # None when the driver does not say (e.g. no permission)


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    total_bytes: int
    free_bytes: int
    used_bytes: int
    processes: list[GpuProcess] = field(default_factory=list)
    driver: str = ""


@dataclass(frozen=True)
class Budget:
    """What `gpu_memory_utilization` asks for on one GPU under V1's rule: total x util <= free."""

    utilization: float
    requested_bytes: int
    free_bytes: int
    fits: bool
    max_utilization: float  # the largest utilization that free memory allows now (2 decimals, rounded down)


def _text(value) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _load_nvml(nvml):
    if nvml is not None:
        return nvml
    try:
        import pynvml
    except ImportError:
        raise NoNvidiaDriver("nvidia-ml-py is not installed (pip install 'kvkb[gpu]')") from None
    return pynvml


def _process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()[:120] or "?"
    except OSError:
        return "? (not visible from here)"


def probe(nvml=None) -> list[Gpu]:
    """Every NVIDIA GPU with its memory and the processes holding memory on it."""
    nvml = _load_nvml(nvml)
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise NoNvidiaDriver(f"no NVIDIA driver: {_text(exc) or type(exc).__name__}") from None
    try:
        driver = _text(nvml.nvmlSystemGetDriverVersion()) if hasattr(nvml, "nvmlSystemGetDriverVersion") else ""
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            mem = nvml.nvmlDeviceGetMemoryInfo(handle)
            procs: dict[int, GpuProcess] = {}
            for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                try:
                    running = getattr(nvml, getter)(handle)
                except (AttributeError, nvml.NVMLError):
                    continue
                for p in running:
                    used = getattr(p, "usedGpuMemory", None)
                    procs[p.pid] = GpuProcess(p.pid, _process_name(p.pid), int(used) if used is not None else None)
            gpus.append(
                Gpu(index, _text(nvml.nvmlDeviceGetName(handle)), int(mem.total), int(mem.free), int(mem.used),
                    sorted(procs.values(), key=lambda p: p.pid), driver)
            )
        return gpus
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # shutting down a half-initialised NVML must not hide the real result
            pass


def budget(gpu: Gpu, utilization: float) -> Budget:
    """V1 (0.9.1+) refuses to start when total x utilization exceeds the free memory at startup."""
    requested = int(gpu.total_bytes * utilization)
    max_util = int(gpu.free_bytes / gpu.total_bytes * 100) / 100 if gpu.total_bytes else 0.0
    return Budget(utilization, requested, gpu.free_bytes, requested <= gpu.free_bytes, max_util)


def dirty_reasons(gpu: Gpu, allowed_pids: frozenset[int] = frozenset()) -> list[str]:
    """Why this GPU is not clean enough for a reproduction (empty when it is)."""
    reasons = []
    for p in gpu.processes:
        if p.pid in allowed_pids:
            continue
        held = f"{p.used_bytes / GIB:.2f} GiB" if p.used_bytes is not None else "memory"
        reasons.append(f"GPU {gpu.index}: pid {p.pid} ({p.name}) holds {held}")
    # memory no visible process accounts for (e.g. a process in another container)
    unexplained = gpu.used_bytes - sum(p.used_bytes or 0 for p in gpu.processes)
    if not any(p.used_bytes is None for p in gpu.processes) and unexplained > IDLE_USED_BYTES:
        reasons.append(
            f"GPU {gpu.index}: {unexplained / GIB:.2f} GiB in use by no process visible from here "
            "(another container?)"
        )
    return reasons


def describe_device(gpus: list[Gpu]) -> str:
    if not gpus:
        return "no NVIDIA GPU"
    names = sorted({g.name for g in gpus})
    return f"{len(gpus)}x {', '.join(names)} ({gpus[0].total_bytes / GIB:.0f} GiB)"
