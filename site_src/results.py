"""Read the reproduction runner's results files and turn them into what an entry page shows.

reproductions/results/<backend>.json (cpu.json, cuda.json) is written by the runner; the site only
reads it. A missing file means "not run"; a malformed one stops the build (a verification badge
must never be guessed).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

BACKENDS = ("cpu", "cuda")  # the order badges are shown in
BACKEND_LABEL = {"cpu": "CPU", "cuda": "CUDA"}
ENTRY_STATUSES = ("pass", "fail", "skip")
FIX_STATUSES = ("verified", "ineffective", "unverified")
MAX_OUTPUT_LINES = 80  # the tail carries the error; whole engine logs would drown the page

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class ResultsError(ValueError):
    """A results file that exists but cannot be trusted; the message names the file and the key."""


@dataclass(frozen=True)
class Run:
    """One program run of a reproduction (the broken program, the fixed one, or one fix)."""

    passed: bool
    exit_code: int | None = None
    matched: str | None = None
    duration_s: float | None = None
    kv_tokens: int | None = None
    max_concurrency: float | None = None
    output: str = ""
    status: str | None = None  # fixes only: verified | ineffective


@dataclass(frozen=True)
class EntryResult:
    status: str  # pass | fail | skip
    duration_s: float | None
    broken: Run | None
    fixed: Run | None
    fixes: dict[str, Run]


@dataclass(frozen=True)
class Results:
    """One results file: one backend, one vLLM version, one date."""

    backend: str
    vllm_version: str
    device: str
    date: str  # YYYY-MM-DD
    entries: dict[str, EntryResult]
    path: str = ""


def results_dir(repo_root: Path) -> Path:
    """KVKB_RESULTS_DIR if set, else reproductions/results/ of the checkout being built."""
    env = os.environ.get("KVKB_RESULTS_DIR")
    return Path(env) if env else repo_root / "reproductions" / "results"


def load_results(directory: Path) -> list[Results]:
    """Every results file present in the folder, cpu first; [] when none has been written yet."""
    found = []
    for backend in BACKENDS:
        path = directory / f"{backend}.json"
        if path.is_file():
            found.append(parse_results(path.read_text(encoding="utf-8"), str(path), backend))
    return found


def parse_results(text: str, shown: str, backend: str) -> Results:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{shown}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    obj = _mapping(data, shown, "(top level)")
    version = _str(obj, "vllm_version", shown, "(top level)")
    date = _str(obj, "date", shown, "(top level)")
    if not re.match(r"^\d{4}-\d{2}-\d{2}", date):
        raise ResultsError(f"{shown}: 'date' must be an ISO date such as 2026-11-22T10:00:00Z, got {date!r}")
    declared = obj.get("backend", backend)
    if declared != backend:
        raise ResultsError(f"{shown}: 'backend' is {declared!r} but the file name says {backend!r}")
    entries_raw = _mapping(obj.get("entries", {}), shown, "entries")
    entries = {eid: _entry(raw, shown, f"entries.{eid}") for eid, raw in entries_raw.items()}
    return Results(
        backend=backend,
        vllm_version=version,
        device=str(obj.get("device") or ""),
        date=date[:10],
        entries=entries,
        path=shown,
    )


def _entry(raw, shown: str, where: str) -> EntryResult:
    obj = _mapping(raw, shown, where)
    status = obj.get("status")
    if status not in ENTRY_STATUSES:
        raise ResultsError(f"{shown}: {where}.status must be one of {', '.join(ENTRY_STATUSES)}, got {status!r}")
    fixes_raw = _mapping(obj.get("fixes") or {}, shown, f"{where}.fixes")
    fixes = {}
    for fid, fraw in fixes_raw.items():
        run = _run(fraw, shown, f"{where}.fixes.{fid}")
        if run.status not in FIX_STATUSES:
            raise ResultsError(f"{shown}: {where}.fixes.{fid}.status must be one of {', '.join(FIX_STATUSES)}, got {run.status!r}")
        fixes[fid] = run
    return EntryResult(
        status=status,
        duration_s=_num(obj.get("duration_s")),
        broken=_run(obj["broken"], shown, f"{where}.broken") if obj.get("broken") else None,
        fixed=_run(obj["fixed"], shown, f"{where}.fixed") if obj.get("fixed") else None,
        fixes=fixes,
    )


def _run(raw, shown: str, where: str) -> Run:
    obj = _mapping(raw, shown, where)
    output = obj.get("output") or ""
    if not isinstance(output, str):
        raise ResultsError(f"{shown}: {where}.output must be a string")
    return Run(
        passed=bool(obj.get("passed", False)),
        exit_code=obj.get("exit_code") if isinstance(obj.get("exit_code"), int) else None,
        matched=obj.get("matched") if isinstance(obj.get("matched"), str) else None,
        duration_s=_num(obj.get("duration_s")),
        kv_tokens=obj.get("kv_tokens") if isinstance(obj.get("kv_tokens"), int) else None,
        max_concurrency=_num(obj.get("max_concurrency")),
        output=output,
        status=obj.get("status"),
    )


def _mapping(value, shown: str, where: str) -> dict:
    if not isinstance(value, dict):
        raise ResultsError(f"{shown}: {where} must be a JSON object, found {type(value).__name__}")
    return value


def _str(obj: dict, key: str, shown: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise ResultsError(f"{shown}: {where} needs '{key}' (a string)")
    return value


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# --- what the page shows -------------------------------------------------------------------------


@dataclass(frozen=True)
class Badge:
    state: str  # verified | failed | gpu-only | not-reproduced
    text: str


@dataclass(frozen=True)
class RunView:
    """One backend's result for one entry, ready for the template."""

    label: str  # "vLLM 0.32.0 · CPU backend · 2026-11-22"
    status: str
    device: str
    duration_s: float | None
    broken: Run | None
    fixed: Run | None


@dataclass
class Verification:
    badges: list[Badge] = field(default_factory=list)
    runs: list[RunView] = field(default_factory=list)
    # fix id -> (status, where it was established)
    fix_status: dict[str, tuple[str, str]] = field(default_factory=dict)


def verification(entry, all_results: list[Results]) -> Verification:
    """The badge(s), captured runs and per-fix statuses for one entry.

    pass -> "Verified on ..."; fail -> "Reproduction failed on ..."; a CPU results file that has
    no run for an entry with code -> "GPU runner only" (the CPU backend cannot raise it);
    nothing at all -> "Not yet reproduced".
    """
    view = Verification()
    for res in all_results:
        er = res.entries.get(entry.id)
        if er is None or er.status == "skip":
            continue
        label = f"vLLM {res.vllm_version} · {BACKEND_LABEL.get(res.backend, res.backend)} backend · {res.date}"
        if er.status == "pass":
            view.badges.append(Badge("verified", f"Verified on {label}"))
        else:
            view.badges.append(Badge("failed", f"Reproduction failed on {label}"))
        view.runs.append(RunView(label, er.status, res.device, er.duration_s, er.broken, er.fixed))
        for fid, run in er.fixes.items():
            # the first backend that ran a fix decides its shown status (cpu before cuda)
            view.fix_status.setdefault(fid, (run.status, label))
    has_code = bool(entry.broken_code)
    ran_cpu = any(r.backend == "cpu" for r in all_results)
    if not view.badges:
        if ran_cpu and has_code:
            view.badges.append(Badge("gpu-only", "GPU runner only: the CPU backend cannot reproduce this error"))
        else:
            view.badges.append(Badge("not-reproduced", "Not yet reproduced"))
    return view


def tail(output: str, limit: int = MAX_OUTPUT_LINES) -> tuple[str, int, int]:
    """(last lines of the output without terminal colours, lines shown, lines in all)."""
    lines = _ANSI_RE.sub("", output).rstrip().splitlines()
    return "\n".join(lines[-limit:]), min(limit, len(lines)), len(lines)
