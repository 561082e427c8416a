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
from .segment import _FRAME_RE, _exception, MILESTONE_WORDS, MILESTONES

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
)
_NUMBER_GATES = tuple({n[1] for n in _NUMBERS})
_NUMBER_RES = [(name, gate, Lazy(rx)) for name, gate, rx in _NUMBERS]

# --- frames ------------------------------------------------------------------------------------

_RAISE_RE = Lazy(r"^\s*raise (?P<type>[A-Z]\w*(?:Error|Exception))\((?P<rest>.*)$")
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

    def __init__(self) -> None:
        self.startups: list[Startup] = [Startup(None)]  # index 0: before any start-up line
        self.marked = 0  # start-up lines seen
        self.stage: str | None = None
        self.step: str | None = None
        self.frames: list[tuple[int, str, str]] = []  # the open traceback's frames (line, func, path)
        self.raise_line: tuple[int, str, str] | None = None  # (line, type, literal) in the deepest frame
        self.open_tb: Fact | None = None  # a traceback whose exception line has not come yet
        self.last_tb: list[tuple[int, str, str]] = []  # frames of the last traceback, open or closed
        self.last_raise: tuple[int, str, str] | None = None
        self.failure: Fact | None = None  # the last ERROR line or exception seen

    @property
    def current(self) -> Startup:
        return self.startups[-1]

    @property
    def restarts(self) -> int:
        return max(0, self.marked - 1)

    def feed(self, parsed: list[tuple]) -> list[tuple[int, str | None, str | None]]:
        out = []
        for lineno, content, level, _prefixed, fence in parsed:
            if not fence and content:
                self._line(lineno, content, level)
            out.append((len(self.startups) - 1, self.stage, self.step))
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
                if func in _HINT_FUNCS:
                    self.frames.append((lineno, func, "called from the line above"))
            if "raise " in stripped:
                m = _RAISE_RE.match(stripped)
                if m:
                    literal = " ".join(a or b for a, b in _STRING_RE.findall(m.group("rest")))
                    self.raise_line = self.last_raise = (lineno, m.group("type"), literal)
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
                    self.stage = self.step = None
                    self.open_tb = None
                self.current.kinds.add(kind)
                break
        cur = self.current
        if any(w in text for w in MILESTONE_WORDS):
            for words, stage, step in MILESTONES:
                if words in text:
                    self.stage, self.step = stage, step
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
                if name == "concurrency":
                    second = to_number(m.group(2))
                    if second is not None:
                        cur.extra["concurrency_x"] = (second, fact)
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
            if frame[1] in _HINT_FUNCS:
                return frame
        return None


def _fmt(x: float) -> str:
    return f"{x:g}"


def hints(sc: Scanner, visible_error: bool) -> list[Hint]:
    """Entries the last start-up's facts point to, best first. `visible_error`: an error line is in
    the log (then only numbers count: they say why the error happened; frames add nothing)."""
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
    w = val("weights_gib")
    if w is not None and w <= 0 and not visible_error:
        out.append(Hint("memory-profiling-error", "likely",
                        [fact("weights_gib", "vLLM measured 0 GB for the weights: GPU memory changed under it "
                              "while it measured (another process), which breaks its memory profiling")], 2.0))
    if visible_error or not sc.truncated:
        return out
    cut = Fact(sc.open_tb.line if sc.open_tb else None, sc.open_tb.text if sc.open_tb else "",
               "the paste ends inside this traceback, before its exception line")
    if sc.last_raise is not None:
        line, typ, literal = sc.last_raise
        out.append(Hint("raise:" + typ + ":" + literal, "likely",
                        [Fact(line, f"raise {typ}({literal!r})", "the traceback stops at this raise in vLLM's source"), cut], 4.0))
    frame = sc.deepest()
    if frame is not None:
        funcs, tier, ids, says = _HINT_FUNCS[frame[1]]
        where = frame[2].rsplit("/", 1)[-1] if "/" in frame[2] else frame[2]
        facts = [Fact(frame[0], f"in {frame[1]} ({where})", says), cut]
        if tier == "possible" and st.says_oom is not None:
            tier = "likely"
            facts.append(st.says_oom)
        rank = 1.5 if tier == "likely" else 0.5
        for k, eid in enumerate(ids):
            out.append(Hint(eid, tier, facts, rank - 0.1 * k))
    out.sort(key=lambda h: -h.rank)
    return out
