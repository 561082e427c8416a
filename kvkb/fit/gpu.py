"""Total memory of the local NVIDIA GPU via nvidia-ml-py (pynvml), when there is one."""

from __future__ import annotations


def detect_gpu_memory(index: int = 0) -> tuple[int | None, str]:
    """(total bytes or None, what happened in words)."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py (pynvml) is not installed (pip install 'kvkb[gpu]')"
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound / DriverNotLoaded on machines without a GPU
        return None, f"no NVIDIA GPU driver found ({e})"
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count <= index:
            return None, f"NVML sees {count} GPU(s), none at index {index}"
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        name = pynvml.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else str(name)
        total = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
        return total, f"GPU {index}: {name}, {total / (1 << 30):.2f} GiB total (NVML)"
    except Exception as e:
        return None, f"NVML could not read GPU {index} ({e})"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
