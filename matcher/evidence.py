"""What a log states around (or instead of) its error: start-ups, stage milestones, numbers, frames.

Pure: parsed lines in (segment.parse), facts out. A paste cut before its exception line still says
a lot: `# GPU blocks: 0`, `Available KV cache memory: -3.75 GiB`, `Maximum concurrency ...: 0.00x`,
a traceback whose deepest frame is `check_enough_kv_cache_memory` or `wake_up`, the `raise` line vLLM
printed inside a frame. `Scanner` reads those facts in log order (one pass, windows of a big log fed
one after another); `hints()` turns them into ranked "likely" / "possible" entry ids, each with the
lines that support it. Every rule is about how vLLM works (its start-up order and its KV arithmetic),
never about a particular paste.
"""

from __future__ import annotations

import re

from .normalize import Lazy, to_number
from .segment import _FRAME_RE, _PATH_CUES, _exception, MILESTONE_WORDS, MILESTONES, cues_of, stage

# --- start-ups and milestones ------------------------------------------------------------------

# One line per start-up, per kind: the API server prints its version, then the engine its config.
# A kind seen again within the same start-up begins the next one (a crash loop, a restart).
_STARTUP = (
    ("server", "vLLM API server version"),
    ("engine", "Initializing a V1 LLM engine"),
    ("engine", "Initializing an LLM engine"),
)

# --- numbers -------------------------------------------------------------------------------------

# (name, gate substring, regex with one group per value, unit scale to GiB or None)
_NUMBERS = (
    ("available_kv_gib", "Available KV cache memory", r"Available KV cache memory: (-?[\d.]+) ?GiB"),
    ("available_kv_gib", "reserved for KV Cache is", r"reserved for KV Cache is (-?[\d.]+) ?GiB"),
    ("device_blocks", "blocks: ", r"# (?:GPU|cuda|CUDA|NPU|npu|XPU|xpu|HPU|hpu|TPU|tpu) blocks: (-?\d+)"),
    ("available_bytes", "Available memory: ", r"Available memory: (-?\d+)\b"),
    ("kv_tokens", "KV cache size: ", r"(?:GPU|CPU|NPU|XPU|TPU|HPU) KV cache size: ([\d,]+) tokens"),
    ("concurrency", "Maximum concurrency for", r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x"),
    ("max_model_len", "max_seq_len=", r"\bmax_seq_len=(\d+)"),
    ("max_model_len", "max_model_len", r"\bmax_model_len['\"]?[=:] ?(\d[\d,]*)"),
    ("max_model_len", "--max-model-len", r"--max-model-len[= ](\d+)"),
    ("block_size", "block_size", r"\bblock_size['\"]?[=:] ?(\d+)"),
    ("block_size", "--block-size", r"--block-size[= ](\d+)"),
    ("weights_gib", "weights took", r"Loading model weights took (-?[\d.]+) ?(?:GB|GiB)"),
    ("weights_gib", "Model loading took", r"Model loading took (-?[\d.]+) ?(?:GB|GiB)"),
    ("gpu_memory_utilization", "memory_utilization", r"gpu_memory_utilization['\"]?[=:] ?([01]?\.\d+|1(?:\.0+)?)\b"),
    ("gpu_memory_utilization", "memory-utilization", r"--gpu-memory-utilization[= ]([01]?\.\d+|1(?:\.0+)?)\b"),
    ("total_gib", "total capacity of", r"total capacity of ([\d.]+) GiB"),
    # sleep mode's own report (gpu_worker.py sleep()): a level-1 sleep that frees nothing left the memory held
    ("sleep_freed_gib", "Sleep mode freed", r"Sleep mode freed (-?[\d.]+) ?GiB memory, ([\d.]+) ?GiB memory is still in use"),
)
_NUMBER_GATES = tuple({n[1] for n in _NUMBERS})
_NUMBER_RES = [(name, gate, Lazy(rx)) for name, gate, rx in _NUMBERS]

# --- frames ------------------------------------------------------------------------------------

_RAISE_RE = Lazy(r"^\s*raise (?P<type>[A-Z]\w*(?:Error|Exception))\((?P<rest>.*)$")
_ASSERT_RE = Lazy(r"""^assert .+?,\s*(?P<rest>(?:f|r|fr|rf)?["'].*)$""")
_STRING_RE = Lazy(r"""(?:f|r|fr|rf)?(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')""")
_CALL_RE = re.compile(r"(\w+)\(")

# The deepest vLLM function a cut traceback reached, and what it can raise. "likely": the function
# exists to check or allocate that memory, so it raises little else; "possible": a stage where
# memory errors are common but others happen too (a kernel built for another GPU fails there as well).
FRAME_HINTS = (
    # (function names, tier, entry ids best first, what it means)
    (("check_enough_kv_cache_memory", "_check_enough_kv_cache_memory"), "likely",
     ("no-memory-for-cache-blocks", "max-model-len-exceeds-kv-cache"),
     "vLLM's KV-capacity check raised: it raises only when the KV cache is empty or smaller than max_model_len"),
    (("wake_up",), "likely", ("sleep-mode-wake-up-oom",),
     "the traceback is inside wake_up(): sleep mode putting the weights and KV cache back on the GPU"),
    (("capture_model", "_capture_cudagraphs", "capture_graphs", "graph_capture"), "likely",
     ("cuda-oom-during-cudagraph-capture",), "the traceback is inside CUDA-graph capture"),
    (("initialize_kv_cache", "_allocate_kv_cache_tensors", "_allocate_kv_cache", "allocate_kv_cache",
      "initialize_kv_cache_tensors", "_init_cache_engine"), "likely",
     ("kv-cache-allocation-failed",), "the traceback is inside the KV cache allocation"),
    (("determine_num_available_blocks", "determine_available_memory", "profile_run", "_dummy_run",
      "_dummy_sampler_run", "load_model", "load_weights"), "possible",
     ("cuda-oom-during-startup",), "the traceback is inside start-up (loading or profiling)"),
    (("execute_model", "_run_engine", "step", "execute_model_spmd"), "possible",
     ("cuda-oom-during-serving",), "the traceback is inside a model step while serving"),
    (("_schedule", "_schedule_running", "_preempt", "_swap_out", "_schedule_default"), "possible",
     ("cpu-swap-space-exhausted", "no-free-blocks-internal"), "the traceback is inside the V0 scheduler"),
)
_HINT_FUNCS = {f: h for h in FRAME_HINTS for f in h[0]}
# Host RAM ran out and something killed the engine or a worker: the kernel's OOM killer, Kubernetes,
# Ray's memory monitor (strong), or a bare SIGKILL (weak: a person can kill -9 too; it counts only
# under a wrapper that says the engine or a worker died). (pattern, strong, what it says), tried only
# on lines holding one of the gate words
_HOST_GATES = ("ill", "137", "OOM", "oom", "Out of memory", "memory pressure", "low on memory", "usage threshold", "-9")
_HOST_RES = (
    (Lazy(r"Out of memory: Kill(?:ed)? process|\boom-kill(?:er)?\b|oom_reaper|invoked oom-killer"), True,
     "the kernel's OOM killer killed a process: the host ran out of RAM"),
    (Lazy(r"\bOOMKilled\b"), True, "Kubernetes killed the container for exceeding its memory limit (OOMKilled)"),
    (Lazy(r"(?i)exit(?:ed)?(?: with)? (?:code|status)[:= ]*137\b|\bcode 137\b"), True,
     "exit code 137: the process was killed with SIGKILL, what the OOM killer sends"),
    (Lazy(r"memory usage threshold|killed due to memory pressure|running low on memory"), True,
     "Ray's memory monitor killed a worker: the node's RAM was above its threshold"),
    (Lazy(r"^(?:\S+: line \d+: +\d+ )?Killed\b(?: +\S.*)?$|\bSIGKILL\b|signal 9\b|[Ee]xit ?[Cc]ode[:= ]*-9\b|exitcode[=: ]*-9\b"),
     False, "the process was killed with SIGKILL (signal 9), what the OOM killer sends"),
)
# A wrapper saying the engine, a worker or a Ray actor died (never an answer on its own)
_DIED_RE = Lazy(r"EngineDeadError|RayActorError|ActorDiedError|WorkerProc\w* died|Worker proc \S+ died|died unexpectedly"
                r"|Engine core proc \S+ died|The actor died")

# the person's own words: "I get OOM", "runs out of memory"
_SAYS_OOM_RE = Lazy(r"(?i)\bOOMs?\b|out of memory|OutOfMemory")


def _raises(line: str) -> bool:
    """An exception line (a warning category is not one: it ends no traceback)."""
    exc = _exception(line)
    return exc is not None and not exc[0].endswith("Warning")


class Fact:
    """One piece of evidence: a line of the log and what it says."""

    __slots__ = ("line", "text", "says")

    def __init__(self, line: int | None, text: str, says: str):
        self.line, self.text, self.says = line, text, says

    def to_dict(self) -> dict:
        return {"line": self.line, "text": self.text[:300], "says": self.says}

    def __repr__(self) -> str:
        return f"Fact({self.line}, {self.says!r})"


class Hint:
    """An entry the evidence points to, with its tier and the facts behind it."""

    __slots__ = ("entry", "tier", "facts", "rank")

    def __init__(self, entry: str, tier: str, facts: list[Fact], rank: float):
        self.entry, self.tier, self.facts, self.rank = entry, tier, facts, rank

    def __repr__(self) -> str:
        return f"Hint({self.entry!r}, {self.tier!r}, {self.rank})"


class Startup:
    """What one start-up of the server showed, in log order."""

    def __init__(self, line: int | None):
        self.line = line
        self.kinds: set[str] = set()
        self.numbers: dict[str, tuple[float, Fact]] = {}
        self.extra: dict[str, tuple[float, Fact]] = {}  # second values (concurrency's token count)
        self.kv_sizing: Fact | None = None  # the last KV-sizing milestone seen
        self.kv_sized = False  # vLLM printed the KV cache size: its capacity checks passed
        self.weights: Fact | None = None
        self.says_oom: Fact | None = None


class Scanner:
    """Reads parsed lines (segment.parse) in log order; feed() returns each line's (startup, stage, step)."""

    def __init__(self, callees: dict | None = None) -> None:
        # {"functions": {name: {entry: [releases]}}, "weights": {entry: corpus count}} (derive_callees.py)
        self.callees = callees or {}
        self._called = self.callees.get("functions", {})
        self.startups: list[Startup] = [Startup(None)]  # index 0: before any start-up line
        self.marked = 0  # start-up lines seen
        self.stage: str | None = None
        self.step: str | None = None
        self.stage_at: tuple[int, str] | None = None  # (line, text) of the milestone that set stage
        self.frames: list[tuple[int, str, str]] = []  # the open traceback's frames (line, func, path)
        self.raise_line: tuple[int, str, str] | None = None  # (line, type, literal) in the deepest frame
        self.open_tb: Fact | None = None  # a traceback whose exception line has not come yet
        self.last_tb: list[tuple[int, str, str]] = []  # frames of the last traceback, open or closed
        self.last_raise: tuple[int, str, str] | None = None
        self.failure: Fact | None = None  # the last ERROR line or exception seen
        self.host: list[tuple[Fact, bool]] = []  # host-RAM kills seen (fact, strong)
        self.died: Fact | None = None  # a wrapper saying the engine, a worker or an actor died

    @property
    def current(self) -> Startup:
        return self.startups[-1]

    @property
    def restarts(self) -> int:
        return max(0, self.marked - 1)

    def feed(self, parsed: list[tuple]) -> list[tuple]:
        """Per line: (start-up, stage, step, (line, text) of the milestone that set the stage)."""
        out = []
        for lineno, content, level, _prefixed, fence in parsed:
            if not fence and content:
                self._line(lineno, content, level)
            out.append((len(self.startups) - 1, self.stage, self.step, self.stage_at))
        return out

    def _line(self, lineno: int, content: str, level: str | None) -> None:
        stripped = content.strip()
        if not stripped:
            return
        frame = _FRAME_RE.match(content)
        if frame:
            if self.open_tb is None:
                self.open_tb = Fact(lineno, stripped, "a traceback starts here")
                self.frames = []
            self.frames.append((lineno, frame.group("func") or "", frame.group("path")))
            self.raise_line = None
            self.last_tb = self.frames
            self.last_raise = None
            return
        if content[:1].isspace() and self.open_tb is not None:
            # the source line under a frame: the function it calls was running too (a paste cut
            # right after it still says where the failure was)
            for func in _CALL_RE.findall(stripped):
                if func in _HINT_FUNCS or func in self._called:
                    self.frames.append((lineno, func, "called from the line above"))
            if "raise " in stripped:
                m = _RAISE_RE.match(stripped)
                if m:
                    literal = " ".join(a or b for a, b in _STRING_RE.findall(m.group("rest")))
                    self.raise_line = self.last_raise = (lineno, m.group("type"), literal)
            elif stripped.startswith("assert ") and "," in stripped:
                # `assert cond, "message"`: what AssertionError would say
                m = _ASSERT_RE.match(stripped)
                if m:
                    literal = " ".join(a or b for a, b in _STRING_RE.findall(m.group("rest")))
                    self.raise_line = self.last_raise = (lineno, "AssertionError", literal)
            return
        if stripped.startswith("Traceback (most recent call last)"):
            self.open_tb = Fact(lineno, stripped, "a traceback starts here")
            self.frames = []
            self.last_tb = self.frames
            self.last_raise = None
            return
        if stripped[:1] in "^~" and not stripped.strip("^~ "):
            return  # carets under a source line
        if level not in ("INFO", "DEBUG", "WARNING") and _raises(stripped):
            self.open_tb = None  # the traceback ended with its exception
            self.failure = Fact(lineno, stripped, "error")
        elif level in ("ERROR", "CRITICAL"):
            self.failure = Fact(lineno, stripped, "error")
        self._startup_and_milestones(lineno, stripped, level)

    def _startup_and_milestones(self, lineno: int, text: str, level: str | None) -> None:
        for kind, words in _STARTUP:
            if words in text:
                if kind in self.current.kinds or self.marked == 0:
                    self.startups.append(Startup(lineno))
                    self.marked += 1
                    self.stage = self.step = self.stage_at = None
                    self.open_tb = None
                self.current.kinds.add(kind)
                break
        cur = self.current
        if any(w in text for w in MILESTONE_WORDS):
            for words, stage, step in MILESTONES:
                if words in text:
                    self.stage, self.step, self.stage_at = stage, step, (lineno, text)
                    if step == "KV cache sizing":
                        cur.kv_sizing = Fact(lineno, text, "vLLM measured the memory left for the KV cache")
                        cur.kv_sized = False
                    elif step == "KV cache sized":
                        cur.kv_sized = True
                    break
        if any(g in text for g in _NUMBER_GATES):
            for name, gate, rx in _NUMBER_RES:
                if gate not in text:
                    continue
                m = rx.search(text)
                if not m:
                    continue
                value = to_number(m.group(1))
                if value is None:
                    continue
                fact = Fact(lineno, text, "")
                cur.numbers[name] = (value, fact)
                if name in ("concurrency", "sleep_freed_gib"):
                    second = to_number(m.group(2))
                    if second is not None:
                        cur.extra[name + "_x"] = (second, fact)
        if any(g in text for g in _HOST_GATES):
            for rx, strong, says in _HOST_RES:
                if rx.search(text):
                    if len(self.host) < 8:
                        self.host.append((Fact(lineno, text, says), strong))
                    break
        if ("died" in text or "Dead" in text) and _DIED_RE.search(text):
            self.died = Fact(lineno, text, "a wrapper says the engine, a worker or a Ray actor died: it reports the kill, not why")
        if level is None and _SAYS_OOM_RE.search(text) and not _raises(text):
            cur.says_oom = Fact(lineno, text, "the person who pasted this says it ran out of memory")

    # --- what the facts say ---------------------------------------------------------------------

    @property
    def truncated(self) -> bool:
        """The input ends inside a traceback: its exception line was cut off."""
        return self.open_tb is not None

    def values(self) -> dict[str, float]:
        """The last start-up's numbers under the names fix templates use (kvkb.params)."""
        num = {k: v for k, (v, _) in self.current.numbers.items()}
        out = {k: num[k] for k in ("max_model_len", "available_kv_gib", "gpu_memory_utilization", "total_gib") if k in num}
        if "kv_tokens" in num:
            out["kv_tokens"] = num["kv_tokens"]
        elif num.get("device_blocks", 0) > 0:
            out["kv_tokens"] = num["device_blocks"] * (num.get("block_size") or 16)
        return out

    def deepest(self) -> tuple[int, str, str] | None:
        """The deepest frame of the last traceback that names a function we know something about."""
        for frame in reversed(self.last_tb):
            if frame[1] in _HINT_FUNCS or (frame[1] in self._called and _vllm_frame(frame[2])):
                return frame
        return None

    def frame_device(self) -> str | None:
        """The accelerator the last traceback's files name (vllm_ascend, xpu_worker.py, torch_npu), if any."""
        for _, _, path in reversed(self.last_tb):
            low = path.lower()
            for words, device in _DEVICE_PATHS:
                if any(w in low for w in words):
                    return device
        return None

    def frame_stage(self) -> str | None:
        """The stage the last traceback's frames show (segment's cues, most specific first), else the
        stage the log had reached."""
        found: set[str] = set()
        for _, func, path in self.last_tb:
            found |= cues_of(func) | {cue for part, cue in _PATH_CUES if part in path}
        return stage(found) or self.stage


SLEEP_FREED_NOTHING = 0.01  # GiB: "freed 0.00 GiB" as vLLM rounds it


def _fmt(x: float) -> str:
    return f"{x:g}"


# files that run on one accelerator only
_DEVICE_PATHS = ((("vllm_ascend", "torch_npu", "npu_worker", "npu_model_runner"), "npu"),
                 (("xpu_worker", "xpu_model_runner", "intel_extension_for_pytorch", "/xpu/"), "xpu"),
                 (("habana", "hpu_worker", "hpu_model_runner", "vllm_gaudi"), "hpu"),
                 (("torch_xla", "tpu_worker", "tpu_model_runner", "tpu_inference"), "tpu"))
HOST_MEMORY = "category:host-memory"  # resolved by the engine to the host-memory entries that fit best


def host_facts(sc: Scanner) -> list[Fact]:
    """The host-RAM kill facts, when they say enough: a strong one (the OOM killer, OOMKilled, exit 137,
    Ray's memory monitor), or a bare SIGKILL under a wrapper saying the engine or a worker died, or
    with no error after it."""
    if not sc.host:
        return []
    strong = [f for f, s in sc.host if s]
    if strong:
        return strong[:3] + ([sc.died] if sc.died else [])
    weak = sc.host[-1][0]
    if sc.died is not None:
        return [weak, sc.died]
    if sc.failure is None or (sc.failure.line or 0) <= (weak.line or 0):
        return [weak]  # the shell's "Killed" is how the log ends: nothing else failed after it
    return []


def _vllm_frame(path: str) -> bool:
    """A frame in vLLM's own code (the table is read from vLLM's code), or a call on a source line."""
    return "vllm" in path or path == "called from the line above"


def _callee_hints(sc: Scanner, frame: tuple, where: str, cut: Fact, stage_entries: dict) -> list[Hint]:
    """A paste cut inside a vLLM function: the entries whose messages that function's callees raise
    (matcher/callees.json, read from vLLM's code), plus the device OOM of the stage the frames show
    (PyTorch raises it in any allocation, which no vLLM source line names), ranked by how often the
    corpus shows each."""
    table = sc._called[frame[1]]
    weights = sc.callees.get("weights", {})
    ids = dict(table)
    device = sc.frame_device()
    frames = sc.frame_stage()
    # the code below this function allocates device memory when it raises a device OOM entry's message;
    # that entry then stands for PyTorch's OOM of this traceback's stage and device (the wording vLLM
    # wraps, as in the sampler warm-up, is one stage's; PyTorch's own is raised in any)
    # a function below which vLLM only checks the KV capacity (check_enough_kv_cache_memory) allocates
    # nothing on the device: PyTorch's OOM is no answer there
    cats = sc.callees.get("categories", {})
    allocates = not ids or any(cats.get(e) != "kv-capacity" for e in ids)
    for e in set(stage_entries.values()):
        ids.pop(e, None)
    oom = stage_entries.get("device:" + device) if device else None
    oom = oom or stage_entries.get(frames or "startup")
    if oom and allocates:
        ids[oom] = list(table.get(oom, []))
    ranked = sorted(ids, key=lambda e: (-weights.get(e, 0), -len(ids[e]), e))
    if not ranked:
        return []

    def releases(e: str) -> str:
        rel = ids[e]
        return f"in vLLM {', '.join(rel)}" if rel else "PyTorch's own allocation error"

    names = "; ".join(f"{e} ({releases(e)})" for e in ranked)
    says = (f"the paste stops inside {frame[1]}: the code it calls can raise only these entries' errors: {names}"
            " (ranked by how often real pastes show each); paste the lines after the cut to tell")
    facts = [Fact(frame[0], f"in {frame[1]} ({where})", says), cut]
    return [Hint(e, "likely", facts, 1.5 - 0.1 * k) for k, e in enumerate(ranked)]


def hints(sc: Scanner, visible_error: bool, stage_entries: dict | None = None) -> list[Hint]:
    """Entries the last start-up's facts point to, best first. `visible_error`: an error line is in
    the log (then only numbers count: they say why the error happened; frames add nothing).
    `stage_entries`: stage -> the device out-of-memory entry for that stage (engine.Matcher)."""
    stage_entries = stage_entries or {}
    st = sc.current
    out: list[Hint] = []
    num = st.numbers

    def val(name: str) -> float | None:
        return num[name][0] if name in num else None

    def fact(name: str, says: str) -> Fact:
        f = num[name][1]
        return Fact(f.line, f.text, says)

    empty: list[Fact] = []
    kv = val("available_kv_gib")
    if kv is not None and kv <= 0:
        empty.append(fact("available_kv_gib", f"no memory is left for the KV cache ({_fmt(kv)} GiB)"))
    blocks = val("device_blocks")
    if blocks is not None and blocks <= 0:
        empty.append(fact("device_blocks", f"vLLM found room for {_fmt(blocks)} KV cache blocks"))
    tokens0 = val("kv_tokens")
    if tokens0 is not None and tokens0 <= 0:
        empty.append(fact("kv_tokens", "the KV cache holds no tokens at all"))
    raw = val("available_bytes")
    if raw is not None and raw <= 0:
        empty.append(fact("available_bytes", "the device reported no memory available for the KV cache"))
    conc = st.extra.get("concurrency_x")
    if empty:
        out.append(Hint("no-memory-for-cache-blocks", "likely", empty, 3.0))
    else:
        short: list[Fact] = []
        mml = val("max_model_len")
        tokens = val("kv_tokens")
        if tokens is None and blocks is not None and mml is not None:
            bs = val("block_size") or 16
            if blocks * bs < mml:
                short.append(fact("device_blocks", f"{_fmt(blocks)} blocks x {_fmt(bs)} tokens = {_fmt(blocks * bs)} tokens of KV cache"))
                short.append(fact("max_model_len", f"max_model_len is {_fmt(mml)}: one full-length request does not fit"))
        elif tokens is not None and mml is not None and tokens < mml:
            short.append(fact("kv_tokens", f"the KV cache holds {_fmt(tokens)} tokens"))
            short.append(fact("max_model_len", f"max_model_len is {_fmt(mml)}: one full-length request does not fit"))
        if conc is not None and conc[0] < 1:
            f = conc[1]
            short.append(Fact(f.line, f.text, f"maximum concurrency {_fmt(conc[0])}x: not one full-length request fits"))
        if not short and kv is not None and st.kv_sizing is not None and not st.kv_sized and sc.failure is not None \
                and (sc.failure.line or 0) >= (st.kv_sizing.line or 0) and not visible_error:
            # V1 prints the available memory, checks it against max_model_len, then prints the
            # cache size; a failure between the two is that check
            short.append(fact("available_kv_gib", f"{_fmt(kv)} GiB was left for the KV cache"))
            short.append(Fact(sc.failure.line, sc.failure.text,
                              "start-up failed right after, before vLLM printed the KV cache size"))
        if short:
            out.append(Hint("max-model-len-exceeds-kv-cache", "likely", short, 2.5))
    freed = val("sleep_freed_gib")
    held = st.extra.get("sleep_freed_gib_x")
    if freed is not None and freed < SLEEP_FREED_NOTHING and held is not None and held[0] > 0:
        out.append(Hint("sleep-mode-memory-not-released", "likely",
                        [fact("sleep_freed_gib", f"sleep mode freed {_fmt(freed)} GiB while {_fmt(held[0])} GiB stayed in use: "
                              "the memory vLLM holds was not released to the GPU")], 2.0))
    w = val("weights_gib")
    if w is not None and w <= 0 and not visible_error:
        out.append(Hint("memory-profiling-error", "likely",
                        [fact("weights_gib", "vLLM measured 0 GB for the weights: GPU memory changed under it "
                              "while it measured (another process), which breaks its memory profiling")], 2.0))
    host = host_facts(sc)
    if host and not visible_error:
        if sc.stage_at is not None:  # what was running when it was killed (loading weights, serving)
            host = host + [Fact(sc.stage_at[0], sc.stage_at[1], f"the last step the log reached: {sc.step}")]
        out.append(Hint(HOST_MEMORY, "likely", host, 2.2))
    if visible_error or not sc.truncated:
        out.sort(key=lambda h: -h.rank)
        return out
    cut = Fact(sc.open_tb.line if sc.open_tb else None, sc.open_tb.text if sc.open_tb else "",
               "the paste ends inside this traceback, before its exception line")
    if sc.last_raise is not None:
        line, typ, literal = sc.last_raise
        out.append(Hint("raise:" + typ + ":" + literal, "likely",
                        [Fact(line, f"raise {typ}({literal!r})", "the traceback stops at this raise in vLLM's source"), cut], 4.0))
    frame = sc.deepest()
    if frame is not None:
        where = frame[2].rsplit("/", 1)[-1] if "/" in frame[2] else frame[2]
        hint = _HINT_FUNCS.get(frame[1])
        if (hint is None or hint[1] != "likely") and frame[1] in sc._called:
            out.extend(_callee_hints(sc, frame, where, cut, stage_entries))
            out.sort(key=lambda h: -h.rank)
            return out
        funcs, tier, ids, says = hint
        facts = [Fact(frame[0], f"in {frame[1]} ({where})", says), cut]
        if tier == "possible" and st.says_oom is not None:
            tier = "likely"
            facts.append(st.says_oom)
        rank = 1.5 if tier == "likely" else 0.5
        for k, eid in enumerate(ids):
            out.append(Hint(eid, tier, facts, rank - 0.1 * k))
    out.sort(key=lambda h: -h.rank)
    return out
