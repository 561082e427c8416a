"""`kvkb verify [ID...] [--backend cpu|cuda] [--python PATH] [--results PATH] [--timeout S] [--jobs N]`

Runs every entry's broken code, fixed code and ineffective fixes' code against real vLLM under the
entry's scenario (reproductions/scenarios/<id>.yaml) and writes the results file the site reads.
Exit 0 when every run passes (entries the backend cannot reproduce are skipped, not failed),
1 when a run fails, 2 on usage errors.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from kvkb.loader import REPO_ROOT, kb_dir, load_kb


def add_parser(sub) -> None:
    p = sub.add_parser("verify", help="run the entries' broken/fixed code against real vLLM and record the results")
    p.add_argument("ids", nargs="*", metavar="ID", help="entry ids (default: every entry with code to run)")
    p.add_argument("--backend", choices=["cpu", "cuda"], default="cpu", help="vLLM backend to run on (default cpu)")
    p.add_argument("--python", metavar="PATH",
                   help="a Python that has vLLM (default: env KVKB_VLLM_PYTHON, else this interpreter)")
    p.add_argument("--results", type=Path, metavar="PATH",
                   help="results file (default reproductions/results/<backend>.json)")
    p.add_argument("--timeout", type=float, metavar="S", help="seconds per run (default: the scenario's)")
    p.add_argument("--jobs", type=int, metavar="N",
                   help="runs at once (default on cpu: 2 when the host has 2 cores or more, each run's "
                        "vLLM worker bound to its own cores; cuda: 1, every run needs the GPU to itself)")
    p.add_argument("--workdir", type=Path, metavar="DIR",
                   help="where programs and full logs go (default .artifacts/reproductions/<backend>)")
    p.set_defaults(run=run)


def _usage(msg: str) -> int:
    print(f"kvkb verify: {msg}", file=sys.stderr)
    return 2


def vllm_version(python: str) -> tuple[str | None, str]:
    """(version, problem): asks the interpreter itself, as the runs will."""
    try:
        proc = subprocess.run([python, "-c", "import vllm, sys; sys.stdout.write(vllm.__version__)"],
                              capture_output=True, text=True, timeout=300)
    except OSError as exc:
        return None, f"cannot run {python}: {exc.strerror or exc}"
    except subprocess.TimeoutExpired:
        return None, f"{python} took more than 300 s to import vllm"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["import failed"])[-1]
        return None, f"{python} cannot import vllm ({last}); set --python or KVKB_VLLM_PYTHON to the vLLM venv"
    return proc.stdout.strip(), ""


def _interrupt_on_term(signum, frame):
    raise KeyboardInterrupt


def _cleanup_on_signals() -> None:
    """SIGTERM (a cancelled CI job) and SIGINT (even when a background shell ignores it) stop the
    run the way Ctrl-C does, so the running program's process tree is killed, not orphaned."""
    signal.signal(signal.SIGTERM, _interrupt_on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def run(args) -> int:
    from kvkb.reproductions import results as results_mod
    from kvkb.reproductions.progress import Progress, summary_table
    from kvkb.reproductions.runner import RunnerConfig, expected_seconds, has_reproduction, plan, verify_many
    from kvkb.reproductions.scenario import ScenarioError, load_scenarios

    if args.timeout is not None and args.timeout <= 0:
        return _usage("--timeout must be a positive number of seconds")
    if args.jobs is not None and args.jobs < 1:
        return _usage("--jobs must be at least 1")
    if args.backend == "cuda" and (args.jobs or 1) > 1:
        return _usage("--jobs must be 1 on cuda: each run needs a clean GPU to itself")
    jobs = args.jobs or (min(2, os.cpu_count() or 1) if args.backend == "cpu" else 1)
    kb = load_kb()
    for problem in kb.problems:
        print(f"kvkb verify: warning: {problem.format()}", file=sys.stderr)
    unknown = [i for i in args.ids if i not in kb.entries]
    if unknown:
        return _usage(f"unknown entry id(s): {', '.join(unknown)} (entries in {kb_dir()}: {len(kb.entries)})")
    if args.ids:
        without = [i for i in args.ids if not has_reproduction(kb.entries[i])]
        if without:
            return _usage(f"no reproduction for {', '.join(without)}: the entry has no broken_code "
                          "and no ineffective fix with code")
        selected = list(dict.fromkeys(args.ids))
    else:
        selected = sorted(i for i, e in kb.entries.items() if has_reproduction(e))
        if not selected:
            return _usage(f"no entry in {kb_dir()} has code to run")
    try:
        scenarios = load_scenarios()
    except ScenarioError as exc:
        return _usage(f"bad scenario: {exc}")

    python = args.python or os.environ.get("KVKB_VLLM_PYTHON") or sys.executable
    # runs start in their own work folders: a relative path ("./.venv-vllm/bin/python") or a bare
    # name on PATH must be made absolute here, or every run would fail to find it
    if os.sep not in python:
        import shutil

        python = shutil.which(python) or python
    python = os.path.abspath(python)
    if not (Path(python).is_file() and os.access(python, os.X_OK)):
        return _usage(f"no such Python interpreter: {python}")
    version, problem = vllm_version(python)
    if version is None:
        return _usage(problem)

    if args.backend == "cuda":
        from kvkb import gpu

        try:
            device = gpu.describe_device(gpu.probe())
        except gpu.NoNvidiaDriver as exc:
            return _usage(f"--backend cuda needs an NVIDIA GPU: {exc}")
    else:
        device = results_mod.cpu_device()

    workdir = (args.workdir or REPO_ROOT / ".artifacts" / "reproductions" / args.backend).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    cfg = RunnerConfig(backend=args.backend, python=python, workdir=workdir, timeout_s=args.timeout,
                       kb_dir=kb_dir())
    total_runs = sum(len(plan(kb.entries[i])) for i in selected)
    progress = Progress(total_runs)
    progress.note(f"kvkb verify: {len(selected)} entries, {total_runs} runs, {jobs} at a time, vLLM {version} "
                  f"({args.backend}) with {python}")
    path = args.results or results_mod.default_path(args.backend)
    # durations of an earlier run (this results file, else the committed one) put the longest runs first
    expected = expected_seconds(results_mod.read(path) or results_mod.read(results_mod.default_path(args.backend)))
    _cleanup_on_signals()
    class WriteFailed(Exception):
        pass

    def save(entry_id: str, result: dict) -> None:
        # written after every entry: an interrupted run keeps what it proved (merged by entry)
        fresh = {"vllm_version": version, "backend": args.backend, "device": device, "jobs": jobs,
                 "date": results_mod.utc_now(), "entries": {entry_id: result}}
        try:
            results_mod.write(path, fresh)
        except OSError as exc:
            # stop at once, as a serial run did: the runs under way are killed, nothing more is started
            raise WriteFailed(f"cannot write {path}: {exc.strerror or exc}") from None

    items = [(kb.entries[i], scenarios.get(i)) for i in selected]
    try:
        entries = verify_many(items, cfg, progress, jobs=jobs, expected=expected, on_entry=save)
    except WriteFailed as exc:
        print(f"kvkb verify: {exc}", file=sys.stderr)
        return 2
    print(summary_table(entries))
    print(f"\nresults: {path}   logs: {workdir}")
    failed = [i for i, r in entries.items() if r["status"] == "fail"]
    if failed:
        print(f"{len(failed)} of {len(entries)} failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0
