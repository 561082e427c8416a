"""Run one entry's broken code, fixed code and every ineffective fix's code under its scenario.

Each program is the entry's code verbatim, started by bootstrap.py in the vLLM interpreter, in its
own session, with a timeout; the whole process tree is killed afterwards and checked for leftovers.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from kvkb.entry import Entry

from . import judge, kbmatch
from .ballast import BallastProcess, BallastTooLarge, ballast_bytes, node_memory
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


def execute(run: PlannedRun, scenario: Scenario, machine: Machine, cfg: RunnerConfig, tick) -> tuple[RunResult, dict]:
    """Run one program; returns the process result and facts about the machine it ran on."""
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
        result = run_isolated(cmd, env=run_env(machine), cwd=folder, timeout_s=timeout,
                              log_path=folder / f"{run.key}.log", tick=tick)
    return result, facts


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


def verify_entry(entry: Entry, scenario: Scenario | None, cfg: RunnerConfig, progress: Progress) -> dict:
    runs = plan(entry)
    if scenario is None:
        for run in runs:
            progress.start(f"{entry.id} {run.key}")
            progress.finish(False, 0.0, "no scenario")
        return {"status": "fail", "reason": f"no scenario file reproductions/scenarios/{entry.id}.yaml",
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
    if reason:
        for run in runs:
            progress.start(f"{entry.id} {run.key}")
            progress.finish(None, 0.0, reason)
        return {"status": "skip", "reason": reason, "duration_s": 0.0}

    out: dict = {
        "status": "fail",
        "duration_s": 0.0,
        "machine": machine.describe(),
        "model_dirs": {hub: _relative(d) for hub, d in scenario.model_dirs().items()},
        "fixes": {},
    }
    fix_id = scenario.fix or entry.top_fix.id
    all_passed = bool(runs)
    for run in runs:
        tick = progress.start(f"{entry.id} {run.key}")
        result, facts = execute(run, scenario, machine, cfg, tick)
        matched = match_error = None
        if run.kind != "fixed" and "refused" not in facts:
            matched, match_error = kbmatch.top_match(cfg.workdir / entry.id / f"{run.key}.log", cfg.kb_dir)
        if "refused" in facts:
            verdict = judge.Verdict(False, facts["refused"])
        elif run.kind == "broken":
            verdict = judge.judge_broken(scenario, result.exit_code, result.output, matched, match_error,
                                         cfg.backend)
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
            record["fix"] = fix_id
            out["fixed"] = record
            out["fixes"][fix_id] = {"kind": "fix", "status": "verified" if verdict.passed else "unverified",
                                    "passed": verdict.passed, "reason": verdict.reason, "output": record["output"]}
        elif run.kind == "broken":
            out["broken"] = record
        else:
            out["fixes"][run.key] = {"kind": "ineffective", "status": "ineffective" if verdict.passed else "unverified",
                                     **record}
        out["duration_s"] = round(out["duration_s"] + result.duration_s, 1)
        all_passed = all_passed and verdict.passed
        progress.finish(verdict.passed, result.duration_s, "" if verdict.passed else verdict.reason)
    out["status"] = "pass" if all_passed else "fail"
    return out
