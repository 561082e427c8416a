"""kbmatch speed (issue 10): every figure judged as a RATIO against a floor measured in the same run,
or against a bound the issue sets, so that the shared machine's load does not decide the verdict.

    python -m benchmarks               # all figures: medians over --runs (default 7; 5 for the 1 GB log)
    python -m benchmarks --quick       # smaller inputs (256 MB log, 37 KB paste), 3 runs: a smoke test
    python -m benchmarks --only cold   # one figure: cold, big, many, spread or synthetic

cold       100-line paste, median wall <= 1.75 x the floor `python -c "import rapidfuzz.fuzz, re, json"`
           (the two run interleaved, so both see the same load)
big        1 GB server log: >= 600 MB/s, peak RSS <= 150 MB, and the one buried error found (--json root cause)
many       ~150 KB paste of hundreds of distinct error records: < 1 s, the planted error found; the
           same paste on pure-Python rapidfuzz (RAPIDFUZZ_IMPLEMENTATION=python, the browser's) reported
spread     every fixture paste and the adversarial ones (inputs.adversarial): max / median wall <= 20
synthetic  5,000 synthetic entries + the KB on the 100-line paste (not issue 10's; kept from before)

Big inputs are generated under /tmp at run time (KVKB_BENCH_DIR overrides), never in the repo.
Each figure runs the installed `kbmatch` entry point in a fresh process, as a user would.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks import inputs
from benchmarks.harness import kbmatch_cmd, load_average, measure_together, own_rss_mb, run_once

REPO = inputs.REPO
WORK = Path(os.environ.get("KVKB_BENCH_DIR", "/tmp/kvkb-bench"))  # kept between runs: the big logs
RUN = WORK / f"run-{os.getpid()}"  # this run's KB copy and pastes: two runs at once must not share them
FLOOR_CMD = [sys.executable, "-c", "import rapidfuzz.fuzz, re, json"]
READ_FLOOR = "import sys\nf = open(sys.argv[1], 'rb')\nn = 0\nwhile b := f.read(1 << 20):\n    n += b.count(b'rror')"
GOALS = {"cold_ratio": 1.75, "throughput_mb_s": 600, "rss_mb": 150, "many_s": 1.0, "spread_ratio": 20, "synthetic_ms": 250}
FIGURES = ("cold", "big", "many", "spread", "synthetic")
# how each goal is judged: at most (<=, <) or at least (>=)
_AT_MOST = {"cold_ratio": "<=", "rss_mb": "<=", "many_s": "<", "spread_ratio": "<=", "synthetic_ms": "<=", "throughput_mb_s": ">="}


def kb_copy() -> Path:
    """The KB as a valid folder (entries mid-edit by other contributors are skipped) with a built index."""
    sys.path.insert(0, str(REPO / "tests"))
    from matcher_helpers import sane_kb_copy  # same rule the tests use

    dest = RUN / "kb"
    sane_kb_copy(dest)
    env = dict(os.environ, KVKB_KB_DIR=str(dest))
    subprocess.run([sys.executable, "-m", "kvkb.cli.main", "index"], env=env, check=True, capture_output=True)
    return dest


def answer(path: Path, env: dict) -> dict:
    """kbmatch --json's answer for a file, every match kept (one extra run, not timed)."""
    return json.loads(run_once(["--json", "--top", "1000", str(path)], env, capture=True)[3])


def root_cause(path: Path, env: dict) -> str | None:
    return answer(path, env)["root_cause"]


def cold(results: dict, verdict: dict, env: dict, paste: Path, kb: Path, runs: int) -> None:
    n_entries = len(list(kb.glob("*.yaml")))
    results["python"], results["floor"], results["cold"] = measure_together([
        ("baseline: python -c pass", [], env, [sys.executable, "-c", "pass"]),
        ("floor: python -c 'import rapidfuzz.fuzz, re, json'", [], env, FLOOR_CMD),
        (f"cold start, 100-line paste, full KB ({n_entries} entries)", [str(paste)], env, None),
    ], max(runs, 15), warm=2)
    ratio = results["cold"]["median_s"] / results["floor"]["median_s"]
    cpu_ratio = results["cold"]["median_cpu_s"] / max(results["floor"]["median_cpu_s"], 1e-9)
    results["cold"]["floor_ratio"] = ratio
    print(f"  cold start / floor: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU (goal <= {GOALS['cold_ratio']}x)", flush=True)
    verdict["cold_ratio"] = (ratio, ratio <= GOALS["cold_ratio"])


def big(results: dict, verdict: dict, env: dict, size: int, runs: int) -> None:
    log = inputs.big_log(WORK, size)
    real_size = log.stat().st_size
    block = RUN / "error-block.txt"
    block.write_bytes(inputs.error_block())
    want = root_cause(block, env)
    from kvkb.matcher.read import _jobs

    # beside it, the least any reader does: one process reading the file and counting an anchor (the
    # verdict is the absolute 600 MB/s; this shows how much of a miss the machine's load explains)
    floor, out = measure_together([
        ("  floor: python reading the log in 1 MiB blocks, counting b'rror'", [str(log)], env, [sys.executable, "-c", READ_FLOOR]),
        (f"{real_size / 1e6:.0f} MB server log ({_jobs()} parallel parts; KVKB_JOBS overrides)", [str(log)], env, None),
    ], runs, warm=1)
    out["read_floor_mb_s"] = real_size / 1e6 / floor["median_s"]
    out["throughput_mb_s"] = real_size / 1e6 / out["median_s"]
    out["throughput_cpu_mb_s"] = real_size / 1e6 / out["median_cpu_s"]
    got = root_cause(log, env)
    out["root_cause"], out["expected"] = got, want
    print(f"  throughput: {out['throughput_mb_s']:.0f} MB/s wall, {out['throughput_cpu_mb_s']:.0f} MB/s CPU (medians; "
          f"the read floor: {out['read_floor_mb_s']:.0f} MB/s wall); "
          f"buried error: {got} (alone: {want})", flush=True)
    results["big_log"] = out
    verdict["throughput_mb_s"] = (out["throughput_mb_s"], out["throughput_mb_s"] >= GOALS["throughput_mb_s"])
    # a child below the harness's own peak is reported at that peak (see harness.summary): still a bound
    rss = max(out["peak_rss_mb"], 0.0)
    verdict["rss_mb"] = (rss, rss <= GOALS["rss_mb"])
    verdict["big_found"] = (got, want is not None and got == want)


def many(results: dict, verdict: dict, env: dict, kb: Path, quick: bool, runs: int) -> None:
    paste, n = inputs.many_records(RUN, 37_000 if quick else 150_000, kb=kb)
    size = paste.stat().st_size
    pure_env = dict(env, RAPIDFUZZ_IMPLEMENTATION="python")
    native, pure = measure_together([
        (f"{size / 1000:.0f} KB paste, {n} distinct error records", [str(paste)], env, None),
        ("  the same on pure-Python rapidfuzz (RAPIDFUZZ_IMPLEMENTATION=python)", [str(paste)], pure_env, None),
    ], max(1, runs // 2 if not quick else 1), warm=0)
    data = answer(paste, env)
    # the reworded KB messages may be claimed too (some stay close): the planted error must be among the claims
    claimed = [m["id"] for m in data["matches"] if m.get("confidence", "confident" if m["confident"] else "") == "confident"]
    found = inputs.PLANTED_ID in claimed
    native.update(records=n, bytes=size, root_cause=data["root_cause"], confident=claimed)
    pure["vs_native"] = pure["median_s"] / native["median_s"]
    print(f"  planted error found: {found} ({len(claimed)} confident claims; root cause {data['root_cause']}); "
          f"pure Python / compiled: {pure['vs_native']:.1f}x", flush=True)
    results["many"], results["many_pure_python"] = native, pure
    verdict["many_s"] = (native["median_s"], native["median_s"] < GOALS["many_s"])
    verdict["many_found"] = (found, found)


def spread(results: dict, verdict: dict, env: dict, kb: Path, quick: bool, runs: int) -> None:
    pastes = {p.parent.name + "/" + p.name: p for p in inputs.fixture_pastes()}
    adv = inputs.adversarial(RUN, quick, kb)
    pastes.update({f"adversarial/{k}": v for k, v in adv.items()})
    specs = [(name, [str(p)], env, None) for name, p in pastes.items()]
    got = measure_together(specs, 1 if quick else max(3, runs // 2), warm=0, quiet=True)
    times = {name: g["median_s"] for (name, *_), g in zip(specs, got)}
    typical = statistics.median(times.values())
    worst = sorted(times.items(), key=lambda kv: -kv[1])
    ratio = worst[0][1] / typical
    print(f"{len(times)} pastes ({len(adv)} adversarial): median {typical * 1000:.1f} ms wall; slowest:", flush=True)
    for name, t in worst[:8]:
        print(f"  {t * 1000:8.1f} ms  {t / typical:5.1f}x  {name} ({pastes[name].stat().st_size / 1000:.0f} KB)")
    print(f"  max / median: {ratio:.1f}x (goal <= {GOALS['spread_ratio']}x)", flush=True)
    results["spread"] = {"median_s": typical, "max_s": worst[0][1], "max_paste": worst[0][0], "ratio": ratio, "times_s": times}
    verdict["spread_ratio"] = (ratio, ratio <= GOALS["spread_ratio"])


def synthetic(results: dict, verdict: dict, env: dict, paste: Path, kb: Path, entries: int, runs: int) -> None:
    syn = inputs.synthetic_kb(RUN, entries, kb)
    out = measure_together([(f"{entries} synthetic entries + the KB, 100-line paste", [str(paste)],
                             dict(env, KVKB_KB_DIR=str(syn)), None)], runs)[0]
    results["synthetic"] = out
    verdict["synthetic_ms"] = (out["median_s"] * 1000, out["median_s"] * 1000 <= GOALS["synthetic_ms"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="smaller inputs and 3 runs each (a smoke test, not the figures)")
    ap.add_argument("--size-mb", type=int, default=1024, help="size of the generated server log")
    ap.add_argument("--entries", type=int, default=5000, help="synthetic entries")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--only", choices=FIGURES, help="run one of the figures")
    args = ap.parse_args(argv)
    runs = 3 if args.quick else max(5, args.runs)
    size = (256 if args.quick else args.size_mb) << 20
    RUN.mkdir(parents=True, exist_ok=True)
    print(f"kbmatch: {' '.join(kbmatch_cmd())}; work dir {WORK}; load average {load_average()}", flush=True)
    try:
        return _run(args, runs, size)
    finally:
        shutil.rmtree(RUN, ignore_errors=True)


def _run(args, runs: int, size: int) -> int:
    # byte-compile once, as an installed package is: with PYTHONDONTWRITEBYTECODE set, every run would
    # otherwise recompile the sources (the .pyc files are read whatever that variable says). The floor's
    # own package too (rapidfuzz): uv installs without .pyc files, and a floor that compiles its sources
    # on every run is slower than any user's and would flatter the ratio
    import importlib.util

    floor_pkgs = [p for name in ("rapidfuzz",) for p in (importlib.util.find_spec(name).submodule_search_locations or [])]
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "kvkb"), str(REPO / "matcher"), *floor_pkgs],
                   check=False, capture_output=True)
    # and the compiled regexes kept beside that bytecode (matcher/regex_cache.py), written the same way
    subprocess.run([sys.executable, "-m", "kvkb.matcher.regex_cache"], check=False, capture_output=True, cwd=REPO)
    kb = kb_copy()
    env = dict(os.environ, KVKB_KB_DIR=str(kb), NO_COLOR="1")
    env.pop("RAPIDFUZZ_IMPLEMENTATION", None)
    paste = inputs.paste_100(RUN)
    want = [args.only] if args.only else list(FIGURES)
    results: dict = {}
    verdict: dict = {}
    if "cold" in want:
        cold(results, verdict, env, paste, kb, runs)
    if "big" in want:
        big(results, verdict, env, size, runs if args.quick else 5)
    if "many" in want:
        many(results, verdict, env, kb, args.quick, runs)
    if "spread" in want:
        spread(results, verdict, env, kb, args.quick, runs)
    if "synthetic" in want:
        synthetic(results, verdict, env, paste, kb, args.entries, runs)
    print(f"load average at the end: {load_average()} (other processes inflate wall and CPU times alike); "
          f"harness peak RSS {own_rss_mb():.0f} MiB")
    parts = []
    for k, (value, ok) in verdict.items():
        bound = f" {_AT_MOST[k]} {GOALS[k]}" if k in GOALS else ""
        shown = f"{value:.2f}" if isinstance(value, float) else str(value)
        parts.append(f"{k} {shown}{bound}: {'met' if ok else 'MISSED'}")
    print("goals: " + "; ".join(parts))
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "goals": GOALS,
                                               "met": {k: ok for k, (_, ok) in verdict.items()}}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
