"""Run kbmatch in fresh processes and take medians; commands compared are interleaved (a, b, a, b, ...)
so that a change in the shared machine's load weighs on all of them alike."""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def kbmatch_cmd() -> list[str]:
    """The console script next to this interpreter (a pyenv shim would add a bash start-up)."""
    script = Path(sys.executable).with_name("kbmatch")
    if script.exists():
        return [str(script)]
    found = shutil.which("kbmatch")
    return [found] if found else [sys.executable, "-m", "kvkb.matcher.cli"]


def run_once(args: list[str], env: dict, cmd: list[str] | None = None, capture: bool = False) -> tuple[float, float, float, bytes]:
    """(wall seconds, CPU seconds user+sys, peak RSS MiB, stdout if captured) of one process.

    CPU time is reported beside wall time because a shared machine's load inflates wall time."""
    t0 = time.perf_counter()
    proc = subprocess.Popen((cmd or kbmatch_cmd()) + args, env=env, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    out = proc.stdout.read() if capture else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read()
    proc.stderr.close()
    if capture:
        proc.stdout.close()
    if rc not in (0, 1):
        raise SystemExit(f"{' '.join((cmd or kbmatch_cmd()) + args)[:200]} failed ({rc}): {err.decode(errors='replace')[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def own_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def summary(label: str, got: list[tuple], runs: int, quiet: bool = False) -> dict:
    walls = [g[0] for g in got]
    cpus = [g[1] for g in got]
    out = {"median_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls),
           "median_cpu_s": statistics.median(cpus), "peak_rss_mb": max(g[2] for g in got), "runs": runs}
    if not quiet:
        # Linux carries the parent's peak into a child's ru_maxrss across fork+exec: a child that stays
        # below this harness's own peak cannot be told apart from it
        own = own_rss_mb()
        rss = f"{out['peak_rss_mb']:.1f} MiB" if out["peak_rss_mb"] > own + 1 else f"<= {own:.0f} MiB (this harness's own)"
        print(f"{label}: median {out['median_s'] * 1000:.1f} ms wall (min {out['min_s'] * 1000:.1f}, max {out['max_s'] * 1000:.1f}), "
              f"median {out['median_cpu_s'] * 1000:.1f} ms CPU, {runs} runs, peak RSS {rss}", flush=True)
    return out


def measure_together(specs: list[tuple], runs: int, warm: int = 1, quiet: bool = False) -> list[dict]:
    """specs: (label, args, env, cmd or None). Medians per spec, the specs run in turn."""
    for _ in range(warm):
        for _, args, env, cmd in specs:
            run_once(args, env, cmd)
    samples: list[list[tuple]] = [[] for _ in specs]
    for _ in range(runs):
        for k, (_, args, env, cmd) in enumerate(specs):
            samples[k].append(run_once(args, env, cmd))
    return [summary(label, got, runs, quiet) for (label, *_), got in zip(specs, samples)]


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"
