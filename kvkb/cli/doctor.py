"""`kvkb doctor [--gpu-memory-utilization F]`: is this machine ready for vLLM's memory checks?

Lists NVIDIA GPUs (NVML), their memory and the processes holding it, and what the given
gpu_memory_utilization asks for under V1's start-up rule (total x utilization must not exceed the
free memory, vLLM 0.9.1+). Without an NVIDIA driver it says so and reports the CPU backend's view
instead (0.20+: the fraction applies to the memory node). Exit 0 all clear, 1 a problem found,
2 usage error.
"""

from __future__ import annotations

import sys

from kvkb import gpu

GIB = gpu.GIB
DEFAULT_UTIL = 0.92  # vLLM's default from 0.20.0 (0.9 before)


def add_parser(sub) -> None:
    p = sub.add_parser("doctor", help="GPUs, memory, processes holding it, and what a utilization leaves for vLLM")
    p.add_argument("--gpu-memory-utilization", type=float, default=DEFAULT_UTIL, metavar="F",
                   help=f"the fraction you will pass to vLLM (default {DEFAULT_UTIL}, vLLM 0.20+'s default)")
    p.set_defaults(run=run)


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def gpu_report(gpus: list[gpu.Gpu], util: float) -> tuple[list[str], bool]:
    """Lines to print and whether everything is fine; pure, so tests feed it fake GPUs."""
    lines, ok = [], True
    for g in gpus:
        lines.append(f"GPU {g.index}: {g.name}  total {_gib(g.total_bytes)}, used {_gib(g.used_bytes)}, "
                     f"free {_gib(g.free_bytes)}")
        if g.processes:
            for p in g.processes:
                held = _gib(p.used_bytes) if p.used_bytes is not None else "unknown amount"
                lines.append(f"  pid {p.pid} holds {held}: {p.name}")
        else:
            lines.append("  no process holds memory on it")
        b = gpu.budget(g, util)
        if b.fits:
            lines.append(f"  gpu_memory_utilization {util} asks for {_gib(b.requested_bytes)}: fits in the free "
                         f"{_gib(b.free_bytes)}")
        else:
            ok = False
            lines.append(
                f"  gpu_memory_utilization {util} asks for {_gib(b.requested_bytes)} but only {_gib(b.free_bytes)} "
                f"is free: vLLM 0.9.1+ refuses to start (\"Free memory on device ... is less than desired GPU "
                f"memory utilization\"). Use at most {b.max_utilization} or free the GPU."
            )
        for reason in gpu.dirty_reasons(g):
            lines.append(f"  note: {reason}")
    return lines, ok


def cpu_report(util: float) -> list[str]:
    from kvkb.reproductions.ballast import node_memory

    try:
        mem = node_memory(0)
    except (OSError, KeyError, ValueError):
        return ["CPU backend: cannot read the memory node's size"]
    requested = int(mem.total * util)
    verdict = "fits" if requested <= mem.available else "does NOT fit: the CPU worker refuses to start"
    return [
        f"CPU backend (vLLM 0.20+): memory node 0 has {_gib(mem.total)}, {_gib(mem.available)} available; "
        f"gpu_memory_utilization {util} reserves {_gib(requested)} of it: {verdict}.",
    ]


def run(args) -> int:
    util = args.gpu_memory_utilization
    if not 0 < util <= 1:
        print("kvkb doctor: --gpu-memory-utilization must be in (0, 1]", file=sys.stderr)
        return 2
    try:
        gpus = gpu.probe()
    except gpu.NoNvidiaDriver as exc:
        print(f"No NVIDIA GPU can be checked here: {exc}.")
        print("vLLM's CUDA backend needs the NVIDIA driver; the CPU backend does not.")
        for line in cpu_report(util):
            print(line)
        return 1
    if not gpus:
        print("The NVIDIA driver is loaded but reports no GPU.")
        return 1
    lines, ok = gpu_report(gpus, util)
    print(f"NVIDIA driver {gpus[0].driver or '(version unknown)'}, {len(gpus)} GPU(s)")
    for line in lines:
        print(line)
    return 0 if ok else 1
