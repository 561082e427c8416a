"""Scenarios: the "machine" each entry's reproduction runs on, per backend.

reproductions/scenarios/<entry-id>.yaml declares what the harness may change (issue 4, rule 1):
which local model directory stands in for a hub id, and the memory budget (LLM keyword defaults,
environment variables, a ballast process) that makes the error happen. The same machine applies
to the broken run, the fixed run and every ineffective-fix run: there is one `machine` per
backend, not one per run, so a scenario cannot give the fixed run more memory by accident.

Format (every key but `entry` is optional unless noted):

    entry: max-model-len-exceeds-kv-cache
    models: {Qwen/Qwen2.5-0.5B-Instruct: qwen2.5-0.5b-instruct}   # dir under reproductions/models
    fix: lower-max-model-len          # the fix fixed_code applies (default: the entry's top fix)
    broken: {expect: error}           # or: {expect: warning, require: [regex, ...]}
                                      # match: the id kbmatch must name (default: entry; a
                                      # wrapper entry names the inner error it wraps)
    fixed: {forbid: [regex, ...]}     # lines that must not appear in the fixed run
    backends:
      cpu:
        why: one sentence: what this machine plays
        llm_kwargs: {kv_cache_memory_bytes: 67108864}
        env: {VLLM_CPU_KVCACHE_SPACE: "0"}
        ballast: {leave_available_fraction: 0.5}
        memory_limit: 3G              # a memory cgroup: the kernel OOM-kills above it (a container limit)
        shm_size: 64M                 # a private tmpfs of this size on /dev/shm (docker's default)
        timeout_s: 300
      cuda:
        skip: "GPU runner only: ..."  # the reason this backend cannot reproduce it
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .limits import parse_size

HERE = Path(__file__).resolve().parent
SCENARIO_DIR = HERE / "scenarios"
MODELS_DIR = HERE / "models"
BACKENDS = ("cpu", "cuda")

# Runner-wide LLM defaults per backend, recorded in the results with each scenario's machine.
# CPU: skip torch.compile. On a 2-core runner compiling Qwen2.5-0.5B takes minutes per config
# and changes nothing the KV-cache checks look at (sizes here come from kv_cache_memory_bytes or
# the worker's RSS). CUDA gets no default: graph capture is part of GPU memory behaviour.
BACKEND_DEFAULTS: dict[str, dict] = {"cpu": {"enforce_eager": True}, "cuda": {}}

# Things the harness is allowed to set; anything else in llm_kwargs would change the program.
MACHINE_KWARGS = {
    "kv_cache_memory_bytes",
    "gpu_memory_utilization",
    "enforce_eager",
    "max_num_seqs",
    "disable_log_stats",
}


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Ballast:
    """A process that holds memory, playing e.g. a forgotten Jupyter kernel.

    It holds enough that only `leave_available_fraction` of the memory node stays available
    (at least `min_bytes`, at most `max_bytes`, so a big machine is never asked for a huge
    allocation: the run is skipped instead).
    """

    leave_available_fraction: float
    min_bytes: int = 256 << 20
    max_bytes: int = 16 << 30


@dataclass(frozen=True)
class Machine:
    backend: str
    llm_kwargs: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    ballast: Ballast | None = None
    memory_limit: int | None = None  # bytes: the run's memory cgroup limit (host RAM a container gets)
    shm_size: int | None = None  # bytes: the size of the run's private /dev/shm
    timeout_s: float = 300.0
    why: str = ""
    skip: str | None = None

    def effective_llm_kwargs(self) -> dict:
        return {**BACKEND_DEFAULTS.get(self.backend, {}), **self.llm_kwargs}

    def describe(self) -> dict:
        out: dict = {"llm_kwargs": self.effective_llm_kwargs(), "env": dict(self.env)}
        if self.ballast:
            out["ballast"] = {"leave_available_fraction": self.ballast.leave_available_fraction}
        if self.memory_limit:
            out["memory_limit_bytes"] = self.memory_limit
        if self.shm_size:
            out["shm_size_bytes"] = self.shm_size
        if self.why:
            out["why"] = self.why
        return out


@dataclass(frozen=True)
class Scenario:
    entry: str
    path: Path
    models: dict[str, str]
    machines: dict[str, Machine]
    fix: str | None = None
    broken_expect: str = "error"
    broken_require: tuple[str, ...] = ()
    broken_match: str | dict = ""
    fixed_forbid: tuple[str, ...] = ()

    def model_dirs(self) -> dict[str, str]:
        return {hub: str(MODELS_DIR / local) for hub, local in self.models.items()}

    def expected_match(self, backend: str) -> str:
        if isinstance(self.broken_match, dict):
            return self.broken_match.get(backend, self.entry)
        return self.broken_match or self.entry

    def machine(self, backend: str) -> Machine | None:
        return self.machines.get(backend)


def _regexes(value, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ScenarioError(f"{where}: expected a list of regular expressions")
    for v in value:
        try:
            re.compile(v)
        except re.error as exc:
            raise ScenarioError(f"{where}: bad regular expression {v!r}: {exc}") from None
    return tuple(value)


def _machine(backend: str, raw, where: str) -> Machine:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: expected a mapping")
    unknown = set(raw) - {"why", "llm_kwargs", "env", "ballast", "memory_limit", "shm_size", "timeout_s", "skip"}
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {sorted(unknown)}")
    kwargs = raw.get("llm_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ScenarioError(f"{where}.llm_kwargs: expected a mapping")
    bad = set(kwargs) - MACHINE_KWARGS
    if bad:
        raise ScenarioError(
            f"{where}.llm_kwargs: {sorted(bad)} would change the program, not the machine "
            f"(allowed: {sorted(MACHINE_KWARGS)})"
        )
    env = raw.get("env") or {}
    if not isinstance(env, dict):
        raise ScenarioError(f"{where}.env: expected a mapping")
    ballast = None
    if raw.get("ballast") is not None:
        b = raw["ballast"]
        if not isinstance(b, dict) or not isinstance(b.get("leave_available_fraction"), (int, float)):
            raise ScenarioError(f"{where}.ballast: expected {{leave_available_fraction: 0..1}}")
        frac = float(b["leave_available_fraction"])
        if not 0 < frac < 1:
            raise ScenarioError(f"{where}.ballast.leave_available_fraction must be between 0 and 1")
        ballast = Ballast(frac, int(b.get("min_bytes", 256 << 20)), int(b.get("max_bytes", 16 << 30)))
    sizes = {}
    for key in ("memory_limit", "shm_size"):
        if raw.get(key) is not None:
            try:
                sizes[key] = parse_size(raw[key])
            except ValueError as exc:
                raise ScenarioError(f"{where}.{key}: {exc}") from None
    timeout = raw.get("timeout_s", 300)
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ScenarioError(f"{where}.timeout_s: expected a positive number of seconds")
    skip = raw.get("skip")
    if skip is not None and not (isinstance(skip, str) and skip.strip()):
        raise ScenarioError(f"{where}.skip: expected the reason as text")
    return Machine(
        backend=backend,
        llm_kwargs=dict(kwargs),
        env={str(k): str(v) for k, v in env.items()},
        ballast=ballast,
        memory_limit=sizes.get("memory_limit"),
        shm_size=sizes.get("shm_size"),
        timeout_s=float(timeout),
        why=str(raw.get("why") or "").strip(),
        skip=skip.strip() if skip else None,
    )


def parse_scenario(data, path: Path) -> Scenario:
    """Validate one parsed YAML document; pure, so tests can feed dicts."""
    where = path.name
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: expected a mapping")
    unknown = set(data) - {"entry", "models", "fix", "broken", "fixed", "backends"}
    for section in ("broken", "fixed"):
        if data.get(section) is not None and not isinstance(data[section], dict):
            raise ScenarioError(f"{where}.{section}: expected a mapping")
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {sorted(unknown)}")
    entry = data.get("entry")
    if entry != path.stem:
        raise ScenarioError(f"{where}: 'entry' must be the file name's id {path.stem!r} (got {entry!r})")
    models = data.get("models") or {"Qwen/Qwen2.5-0.5B-Instruct": "qwen2.5-0.5b-instruct"}
    for hub, local in models.items():
        if not (MODELS_DIR / local / "config.json").is_file():
            raise ScenarioError(f"{where}: model dir for {hub!r} has no config.json: {MODELS_DIR / local}")
    broken = data.get("broken") or {}
    expect = broken.get("expect", "error")
    if expect not in ("error", "warning"):
        raise ScenarioError(f"{where}.broken.expect: 'error' or 'warning' (got {expect!r})")
    require = _regexes(broken.get("require"), f"{where}.broken.require")
    match = broken.get("match", entry)
    if isinstance(match, dict):  # per backend: the inner error a wrapper shows differs by backend
        if not all(k in BACKENDS and isinstance(v, str) for k, v in match.items()):
            raise ScenarioError(f"{where}.broken.match: an entry id or {{cpu: id, cuda: id}}")
    elif not isinstance(match, str) or not match:
        raise ScenarioError(f"{where}.broken.match: an entry id or {{cpu: id, cuda: id}}")
    if expect == "warning" and not require:
        raise ScenarioError(f"{where}.broken: a warning scenario needs 'require' patterns to pass on")
    fixed = data.get("fixed") or {}
    backends = data.get("backends")
    if not isinstance(backends, dict) or not backends:
        raise ScenarioError(f"{where}: 'backends' needs at least one of {list(BACKENDS)}")
    machines = {}
    for name, raw in backends.items():
        if name not in BACKENDS:
            raise ScenarioError(f"{where}.backends: unknown backend {name!r} (known: {list(BACKENDS)})")
        machines[name] = _machine(name, raw, f"{where}.backends.{name}")
    return Scenario(
        entry=entry,
        path=path,
        models=dict(models),
        machines=machines,
        fix=data.get("fix"),
        broken_expect=expect,
        broken_require=require,
        broken_match=match,
        fixed_forbid=_regexes(fixed.get("forbid"), f"{where}.fixed.forbid"),
    )


def load_scenario(path: Path) -> Scenario:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioError(f"{path.name}: cannot read: {exc}") from None
    return parse_scenario(data, path)


def load_scenarios(directory: Path = SCENARIO_DIR) -> dict[str, Scenario]:
    return {p.stem: load_scenario(p) for p in sorted(directory.glob("*.yaml"))}
