"""Run one entry's broken code, fixed code and every ineffective fix's code under its scenario.

Each program is the entry's code verbatim, started by bootstrap.py in the vLLM interpreter, in its
own session, with a timeout; the whole process tree is killed afterwards and checked for leftovers.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from kvkb.entry import Entry

from . import judge, kbmatch
from .ballast import BallastProcess, BallastTooLarge, ballast_bytes, node_memory
from .limits import KERNEL_MARK, LimitUnavailable, MemoryCgroup, shm_prefix
from .progress import Progress
from .proctree import RunResult, run_isolated
from .results import tail
from .scenario import Machine, Scenario

BOOTSTRAP = Path(__file__).resolve().parent / "bootstrap.py"
REPO_ROOT = Path(__file__).resolve().parent.parent

# Nothing may download; telemetry off. Inherited VLLM_* variables are dropped so a developer's
# shell (e.g. VLLM_CPU_KVCACHE_SPACE) cannot change the machine a scenario declares.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "PYTHONUNBUFFERED": "1",
}


@dataclass(frozen=True)
class RunnerConfig:
    backend: str
    python: str
    workdir: Path
    timeout_s: float | None = None  # overrides the scenario's timeout
    kb_dir: Path | None = None


@dataclass(frozen=True)
class PlannedRun:
    key: str  # "broken", "fixed" or the ineffective fix id
    kind: str  # "broken" | "fixed" | "ineffective"
    code: str


def plan(entry: Entry) -> list[PlannedRun]:
    runs = []
    if entry.broken_code:
        runs.append(PlannedRun("broken", "broken", entry.broken_code))
    if entry.fixed_code:
        runs.append(PlannedRun("fixed", "fixed", entry.fixed_code))
    runs += [PlannedRun(fix.id, "ineffective", fix.code) for fix in entry.ineffective if fix.code]
    return runs


def has_reproduction(entry: Entry) -> bool:
    """Broken code, or at least ineffective advice whose failure can be proven."""
    return bool(entry.broken_code or any(fix.code for fix in entry.ineffective))


def run_env(machine: Machine) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    env.update(OFFLINE_ENV)
    env.update(machine.env)
    return env


def _relative(path: str) -> str:
    try:
        return str(Path(path).relative_to(REPO_ROOT))
    except ValueError:
        return path


def _gpu_refusal() -> str | None:
    from kvkb import gpu

    try:
        gpus = gpu.probe()
    except gpu.NoNvidiaDriver as exc:
        return str(exc)
    reasons = [r for g in gpus for r in gpu.dirty_reasons(g)]
    return "GPU not clean: " + "; ".join(reasons) if reasons else None


def _ballast_size(machine: Machine, backend: str) -> int:
    if backend == "cuda":
        from kvkb import gpu
        from .ballast import NodeMemory

        g = gpu.probe()[0]
        return ballast_bytes(NodeMemory(g.total_bytes, g.free_bytes), machine.ballast)
    return ballast_bytes(node_memory(0), machine.ballast)


def execute(run: PlannedRun, scenario: Scenario, machine: Machine, cfg: RunnerConfig, tick,
            cores: str | None = None, stop: threading.Event | None = None) -> tuple[RunResult, dict]:
    """Run one program; returns the process result and facts about the machine it ran on.

    cores: the CPU cores this run's vLLM worker is bound to when runs share the host (None: vLLM's
    own choice, which on every run is the same first cores)."""
    folder = cfg.workdir / scenario.entry
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / f"{run.key}.py"
    program.write_text(run.code, encoding="utf-8")
    spec = folder / f"{run.key}.spec.json"
    spec.write_text(json.dumps({"models": scenario.model_dirs(), "llm_kwargs": machine.effective_llm_kwargs()}))
    cmd = [cfg.python, str(BOOTSTRAP), str(spec), str(program)]
    timeout = cfg.timeout_s or machine.timeout_s
    facts: dict = {}
    if cfg.backend == "cuda":  # checked before our own ballast takes its share
        refusal = _gpu_refusal()
        if refusal:
            return RunResult(None, f"refused to run: {refusal}\n", 0.0), {"refused": refusal}
    with contextlib.ExitStack() as stack:
        if machine.ballast:
            size = _ballast_size(machine, cfg.backend)
            facts["ballast_bytes"] = size
            # the CUDA ballast needs torch, which only the vLLM interpreter has
            stack.enter_context(BallastProcess(
                size, python=cfg.python if cfg.backend == "cuda" else sys.executable, device=cfg.backend))
        if cfg.backend == "cpu":
            mem = node_memory(0)
            facts["node_available_gib"] = round(mem.available / 2**30, 2)
            facts["node_total_gib"] = round(mem.total / 2**30, 2)
        env = run_env(machine)
        if cores is not None and "VLLM_CPU_OMP_THREADS_BIND" not in machine.env:
            env["VLLM_CPU_OMP_THREADS_BIND"] = cores
            facts["cores"] = cores
        cgroup = None
        try:
            if machine.shm_size:
                cmd = shm_prefix(machine.shm_size) + cmd
            if machine.memory_limit:
                cgroup = stack.enter_context(MemoryCgroup(machine.memory_limit))
                cmd = cgroup.prefix() + cmd
        except LimitUnavailable as exc:
            return RunResult(None, f"refused to run: {exc}\n", 0.0), {"refused": str(exc)}
        log_path = folder / f"{run.key}.log"
        result = run_isolated(cmd, env=env, cwd=folder, timeout_s=timeout, log_path=log_path, tick=tick, stop=stop)
        if cgroup is not None:
            facts["oom_kills"] = cgroup.oom_kills()
            _append_kernel_lines(result, log_path, cgroup.kernel_lines())
    return result, facts


def _append_kernel_lines(result: RunResult, log_path: Path, lines: list[str]) -> None:
    """What `dmesg` says about the run's cgroup goes under the run's own output, marked as such: the
    lines a user pastes after an OOM kill, which vLLM itself never logs."""
    if not lines:
        return
    text = "\n" + KERNEL_MARK + "\n" + "\n".join(lines) + "\n"
    with open(log_path, "a", encoding="utf-8") as fh:
        fh.write(text)
    result.output += text


def _record(run: PlannedRun, result: RunResult, verdict: judge.Verdict, facts: dict, matched=None) -> dict:
    record = {
        "exit_code": result.exit_code,
        "passed": verdict.passed,
        "reason": verdict.reason,
        "duration_s": result.duration_s,
    }
    if run.kind != "fixed":
        record["matched"] = matched
    if result.timed_out:
        record["timed_out"] = True
    if result.leftovers:
        record["leftovers"] = result.leftovers
    record.update(facts)
    record["output"] = tail(result.output)
    return record


def _unrunnable(entry: Entry, scenario: Scenario | None, cfg: RunnerConfig) -> tuple[Machine | None, dict | None]:
    """(machine, None) when the entry can run here, else (None, its result: a failure or a skip)."""
    if scenario is None:
        return None, {"status": "fail", "reason": f"no scenario file reproductions/scenarios/{entry.id}.yaml",
                      "duration_s": 0.0}
    machine = scenario.machine(cfg.backend)
    reason = None
    if machine is None:
        reason = f"no {cfg.backend} machine in {scenario.path.name}"
    elif machine.skip:
        reason = machine.skip
    elif machine.ballast:
        try:
            _ballast_size(machine, cfg.backend)
        except BallastTooLarge as exc:
            reason = f"cannot play this machine here: {exc}"
    if reason is None and machine is not None and (machine.memory_limit or machine.shm_size):
        reason = _limits_refusal(machine)
    if reason:
        return None, {"status": "skip", "reason": reason, "duration_s": 0.0}
    return machine, None


def _limits_refusal(machine: Machine) -> str | None:
    """Why this host cannot play the machine's memory limit or /dev/shm size, or None."""
    try:
        if machine.shm_size:
            shm_prefix(machine.shm_size)
        if machine.memory_limit:
            with MemoryCgroup(machine.memory_limit):
                pass
    except LimitUnavailable as exc:
        return f"cannot play this machine here: {exc}"
    return None


def _report_unrunnable(entry: Entry, result: dict, progress: Progress) -> None:
    passed = False if result["status"] == "fail" else None
    for run in plan(entry):
        progress.start(f"{entry.id} {run.key}").finish(passed, 0.0, result["reason"])


def run_one(entry: Entry, run: PlannedRun, scenario: Scenario, machine: Machine, cfg: RunnerConfig, task,
            cores: str | None = None, stop: threading.Event | None = None) -> tuple[dict, judge.Verdict]:
    """Run one program and judge it: (its record for the results file, the verdict)."""
    result, facts = execute(run, scenario, machine, cfg, task, cores, stop)
    matched = match_error = None
    if run.kind != "fixed" and "refused" not in facts:
        matched, match_error = kbmatch.top_match(cfg.workdir / entry.id / f"{run.key}.log", cfg.kb_dir)
    if "refused" in facts:
        verdict = judge.Verdict(False, facts["refused"])
    elif result.interrupted:
        verdict = judge.Verdict(False, "interrupted")
    elif run.kind == "broken":
        verdict = judge.judge_broken(scenario, result.exit_code, result.output, matched, match_error, cfg.backend)
    elif run.kind == "fixed":
        verdict = judge.judge_fixed(scenario, result.exit_code, result.output)
    else:
        verdict = judge.judge_ineffective(scenario, result.exit_code, result.output, matched, match_error,
                                          cfg.backend)
    if result.leftovers:
        verdict = judge.Verdict(False, f"processes left behind: {result.leftovers}")
    record = _record(run, result, verdict, facts, matched)
    if run.kind == "fixed":
        capacity = judge.parse_capacity(result.output)
        record["kv_tokens"] = capacity.kv_tokens if capacity else None
        record["max_concurrency"] = capacity.max_concurrency if capacity else None
        record["max_model_len"] = capacity.max_model_len if capacity else None
        record["generated_tokens"] = judge.generated_tokens(result.output)
    return record, verdict


def assemble(entry: Entry, scenario: Scenario, machine: Machine,
             outcomes: list[tuple[PlannedRun, dict, judge.Verdict]]) -> dict:
    """The entry's result from its runs' outcomes (in plan order)."""
    out: dict = {
        "status": "fail",
        "duration_s": 0.0,
        "machine": machine.describe(),
        "model_dirs": {hub: _relative(d) for hub, d in scenario.model_dirs().items()},
        "fixes": {},
    }
    fix_id = scenario.fix or entry.top_fix.id
    all_passed = bool(outcomes)
    for run, record, verdict in outcomes:
        if run.kind == "fixed":
            record["fix"] = fix_id
            out["fixed"] = record
            out["fixes"][fix_id] = {"kind": "fix", "status": "verified" if verdict.passed else "unverified",
                                    "passed": verdict.passed, "reason": verdict.reason, "output": record["output"]}
        elif run.kind == "broken":
            out["broken"] = record
        else:
            out["fixes"][run.key] = {"kind": "ineffective", "status": "ineffective" if verdict.passed else "unverified",
                                     **record}
        out["duration_s"] = round(out["duration_s"] + record["duration_s"], 1)
        all_passed = all_passed and verdict.passed
    out["status"] = "pass" if all_passed else "fail"
    return out


def core_slices(jobs: int, cpus: int | None = None) -> list[str | None]:
    """VLLM_CPU_OMP_THREADS_BIND for each of `jobs` concurrent runs: disjoint core ranges, so two
    workers do not both pin themselves to core 0 (vLLM's automatic choice for every run).
    One job keeps vLLM's own choice."""
    cpus = cpus or os.cpu_count() or 1
    if jobs <= 1:
        return [None]
    jobs = min(jobs, cpus)
    out = []
    for k in range(jobs):
        lo, hi = k * cpus // jobs, (k + 1) * cpus // jobs - 1
        out.append(str(lo) if lo == hi else f"{lo}-{hi}")
    return out


def expected_seconds(results: dict | None) -> dict[tuple[str, str], float]:
    """Per-run durations from an earlier results file, to start the longest runs first."""
    out: dict[tuple[str, str], float] = {}
    for entry_id, r in ((results or {}).get("entries") or {}).items():
        if not isinstance(r, dict):
            continue
        for key in ("broken", "fixed"):
            if isinstance(r.get(key), dict) and isinstance(r[key].get("duration_s"), (int, float)):
                out[(entry_id, key)] = float(r[key]["duration_s"])
        for key, f in (r.get("fixes") or {}).items():
            if isinstance(f, dict) and f.get("kind") == "ineffective" and isinstance(f.get("duration_s"), (int, float)):
                out[(entry_id, key)] = float(f["duration_s"])
    return out


DEFAULT_EXPECTED_S = 60.0


def verify_many(items: list[tuple[Entry, Scenario | None]], cfg: RunnerConfig, progress: Progress, jobs: int = 1,
                expected: dict[tuple[str, str], float] | None = None, on_entry=None) -> dict[str, dict]:
    """Every entry's runs, `jobs` at a time, longest first. A machine with a ballast (it measures
    the host's free memory) runs alone, after the others. on_entry(id, result) is called, in this
    thread, as soon as an entry's last run is judged."""
    expected = expected or {}
    results: dict[str, dict] = {}
    pending: dict[str, dict] = {}  # entry id -> its entry, scenario, machine, runs and {run key: outcome}
    shared, alone = [], []
    for entry, scenario in items:
        machine, unrunnable = _unrunnable(entry, scenario, cfg)
        if unrunnable:
            _report_unrunnable(entry, unrunnable, progress)
            results[entry.id] = unrunnable
            if on_entry:
                on_entry(entry.id, unrunnable)
            continue
        runs = plan(entry)
        pending[entry.id] = {"entry": entry, "scenario": scenario, "machine": machine, "runs": runs, "outcomes": {}}
        for run in runs:
            (alone if machine.ballast else shared).append((entry.id, run))
    shared.sort(key=lambda t: -expected.get((t[0], t[1].key), DEFAULT_EXPECTED_S))

    def complete(entry_id: str, run: PlannedRun, outcome) -> None:
        state = pending[entry_id]
        state["outcomes"][run.key] = outcome
        if len(state["outcomes"]) == len(state["runs"]):
            outcomes = [(r, *state["outcomes"][r.key]) for r in state["runs"]]
            result = assemble(state["entry"], state["scenario"], state["machine"], outcomes)
            results[entry_id] = result
            if on_entry:
                on_entry(entry_id, result)

    stop = threading.Event()
    slots: queue.SimpleQueue = queue.SimpleQueue()
    cores = core_slices(jobs) if cfg.backend == "cpu" else [None] * max(1, jobs)
    for c in cores:
        slots.put(c)

    def work(entry_id: str, run: PlannedRun, bind: bool = True):
        state = pending[entry_id]
        task = progress.start(f"{entry_id} {run.key}")
        core = slots.get() if bind else None
        try:
            record, verdict = run_one(state["entry"], run, state["scenario"], state["machine"], cfg, task, core, stop)
        finally:
            if bind:
                slots.put(core)
        task.finish(verdict.passed, record["duration_s"], "" if verdict.passed else verdict.reason)
        return record, verdict

    pool = ThreadPoolExecutor(max_workers=len(cores), thread_name_prefix="verify")
    try:
        futures = {pool.submit(work, entry_id, run): (entry_id, run) for entry_id, run in shared}
        for fut in as_completed(futures):
            entry_id, run = futures[fut]
            complete(entry_id, run, fut.result())
        for entry_id, run in alone:  # nothing else runs meanwhile
            complete(entry_id, run, work(entry_id, run, bind=False))
    except BaseException:
        stop.set()  # running programs' process trees are killed within about a second
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return {e.id: results[e.id] for e, _ in items if e.id in results}
