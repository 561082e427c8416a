"""Split cleaned log lines into error records: exception lines, WARNING/ERROR log lines, wrapped inner errors.

Pure: lines in, records out. Each record keeps the user's numbers (clean text) and carries the
stage cues (load, profiling, CUDA-graph capture, serving) seen in the traceback that led to it,
which tell apart entries whose messages are identical (a CUDA OOM at startup vs while serving).
"""

from __future__ import annotations

import re
from .normalize import clean_line, normalise, strip_prefixes

MAX_MESSAGE = 8192  # a message longer than this is noise (a dumped tensor, a config repr)
MAX_JOIN = 8  # continuation lines joined onto one hard-wrapped message

_EXC_RE = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Warning|Interrupt|Exit|Failure))"
    r"(?::\s?(?P<msg>.*)|\((?P<repr>.*))$"
)
_FRAME_RE = re.compile(r'^\s*File "[^"]*", line \d+(?:, in (?P<func>[\w<>.]+))?')
_CARET_RE = re.compile(r"^\s*[\^~]+\s*$")
_BREAK_RE = re.compile(
    r"^(?:Traceback \(most recent call last\):|The above exception was the direct cause|During handling of the above exception"
    r"|Process [\w-]+:$|```)"
)
_INNER_RES = [
    # V0 multiproc: the worker's own error is on the wrapper line
    re.compile(r"Exception in worker \S+ while processing method (?P<method>\w+):\s*(?P<msg>.*?)(?:,\s*Traceback \(most recent call last\):)?$"),
    re.compile(r"Worker failed with error '(?P<msg>.*)', please check the stack trace"),
    re.compile(r"original error: (?P<msg>.*?)\)?$"),
    re.compile(r"to find the original error: (?P<msg>.*?)\.?$"),
]

# Stage cues: function names in frames and phrases vLLM logs around the failure.
CUE_RES = {
    "cudagraph": re.compile(r"capture_model|graph_capture|cuda_?graph|CUDAGraph|[Cc]apturing cudagraphs|Graph capturing", re.I),
    "startup": re.compile(
        r"load_model|load_weights|model_loader|profile_run|_dummy_run|_dummy_sampler_run|determine_num_available_blocks"
        r"|determine_available_memory|initialize_cache|_initialize_kv_caches|init_device|initialize_from_config"
        r"|compile_or_warm_up_model|EngineCore failed to start|Engine core initialization failed|warming up (?:sampler|pooler)"
        r"|Failed to load model|Engine process failed to start|processing method load_model"
    ),
    "serving": re.compile(
        r"execute_model|Error in model execution|output_handler|EngineCore encountered a fatal error|run_busy_loop"
        r"|step_with_batch_queue|_process_engine_step|engine_step|_run_engine|POST /v1/|Background loop has errored"
        r"|EngineDeadError|Engine loop is not running"
    ),
}
STAGE_ORDER = ("cudagraph", "startup", "serving")  # most specific first: capture runs _dummy_run, V0 profiling runs execute_model
_INFO_CUE_REACH = 10  # an INFO line counts as a cue only this close to the error
_FRAME_CUE_REACH = 400


class Record:
    """One error message found in the log. (A plain class: dataclasses would import inspect, ~10 ms.)"""

    __slots__ = ("line", "kind", "type", "level", "message", "cues", "_norm")

    def __init__(self, line: int, kind: str, type: str | None, level: str | None, message: str, cues: frozenset[str] = frozenset()):
        self.line = line  # 1-based line number where the message starts
        self.kind = kind  # exception | log | inner | bare
        self.type = type  # exception class as printed
        self.level = level  # log level of the line it came from
        self.message = message  # clean text, numbers kept, hard-wrapped lines joined
        self.cues = cues
        self._norm: str | None = None

    def __repr__(self) -> str:
        return f"Record({self.line}, {self.kind!r}, {self.type!r}, {self.level!r}, {self.message[:60]!r})"

    @property
    def norm(self) -> str:
        """Normalised message, computed on first use (most INFO lines are never scored)."""
        if self._norm is None:
            self._norm = normalise(self.message)
        return self._norm

    @property
    def text(self) -> str:
        return f"{self.type}: {self.message}" if self.type else self.message

    @property
    def short_type(self) -> str | None:
        return self.type.rsplit(".", 1)[-1] if self.type else None


def cues_of(text: str) -> set[str]:
    return {name for name, rx in CUE_RES.items() if rx.search(text)}


def stage(cues: frozenset[str] | set[str]) -> str | None:
    return next((s for s in STAGE_ORDER if s in cues), None)


def _exception(content: str) -> tuple[str, str] | None:
    m = _EXC_RE.match(content)
    if not m:
        return None
    if m.group("repr") is not None:
        msg = m.group("repr").strip()
        if msg[:1] in "'\"":
            q = msg[0]
            msg = msg[1:]
            end = msg.rfind(q)
            msg = msg[:end] if end > 0 else msg
        return m.group("type"), msg
    return m.group("type"), (m.group("msg") or "").strip()


def _continues(prev: str, nxt: str) -> bool:
    """Is `nxt` the rest of `prev`, cut by a terminal or an editor's hard wrap?"""
    if not nxt.strip() or nxt[:1].isspace():
        return False
    if not prev.rstrip().endswith((".", "!", "?", ":")):
        return True
    return nxt[:1].islower() or nxt[:1].isdigit() or nxt[:1] in ")]},;"


def _join(prev: str, nxt: str) -> str:
    # a wrap inside "(3984)" or a path loses no space; a wrap between words did
    if prev.endswith(("(", "[", "/", "-", "_")) or nxt.startswith((")", "]", ".", ",", ";", ":")):
        return prev + nxt
    return prev.rstrip() + " " + nxt.lstrip()


def segment(lines: list[tuple[int, str]]) -> tuple[list[Record], frozenset[str]]:
    """Records in log order, plus the stage cues seen anywhere outside INFO lines."""
    parsed = []
    for lineno, raw in lines:
        content, level, prefixed = strip_prefixes(clean_line(raw))
        if "```" in content:
            parsed.append((lineno, "", level, prefixed, True))  # a fence ends a message
            content = content.replace("```", "").strip()
        parsed.append((lineno, content, level, prefixed, False))

    records: list[Record] = []
    global_cues: set[str] = set()
    pending: list[tuple[int, str]] = []  # (line, cue) since the previous record
    i = 0
    n = len(parsed)
    while i < n:
        lineno, content, level, prefixed, fence = parsed[i]
        i += 1
        if fence or not content.strip():
            continue
        cues_here = cues_of(content)
        frame = _FRAME_RE.match(content)
        if frame or content[:1].isspace() or _CARET_RE.match(content) or _BREAK_RE.match(content):
            # frames, source lines, carets: context for the record that follows
            found = cues_of(frame.group("func") or "") if frame else cues_here
            pending.extend((lineno, cue) for cue in found)
            global_cues |= found
            continue
        if level == "INFO" or level == "DEBUG":
            for cue in cues_here:
                pending.append((-lineno, cue))  # negative: INFO reach applies
            rec_kind = "log"
        elif level:
            rec_kind = "log"
            global_cues |= cues_here
        else:
            rec_kind = "bare"
            global_cues |= cues_here
        exc = _exception(content.strip())
        if exc:
            rec_kind = "exception"
        # join hard-wrapped continuation lines
        message = exc[1] if exc else content.strip()
        joined = 0
        while i < n and joined < MAX_JOIN and len(message) < MAX_MESSAGE:
            nl, nxt, nlevel, nprefixed, nfence = parsed[i]
            if nfence or nlevel or (nprefixed and not prefixed) or _FRAME_RE.match(nxt) or _BREAK_RE.match(nxt):
                break
            if _exception(nxt.strip()) or not _continues(message, nxt):
                break
            message = _join(message, nxt)
            i += 1
            joined += 1
        message = message[:MAX_MESSAGE]
        cues = {c for ln, c in pending if (ln >= 0 and lineno - ln <= _FRAME_CUE_REACH) or (ln < 0 and lineno + ln <= _INFO_CUE_REACH)}
        cues |= cues_here
        pending = []
        if rec_kind == "bare" and (len(message) < 20 or not re.search(r"[A-Za-z]{3}", message)):
            continue
        records.append(Record(lineno, rec_kind, exc[0] if exc else None, level, message, frozenset(cues)))
        # wrappers that carry the real error inside their text
        for rx in _INNER_RES:
            m = rx.search(message)
            if not m or not m.group("msg").strip():
                continue
            inner = m.group("msg").strip()
            inner_exc = _exception(inner)
            if inner_exc:
                records.append(Record(lineno, "inner", inner_exc[0], level, inner_exc[1], frozenset(cues)))
            elif len(inner) >= 20:
                records.append(Record(lineno, "inner", None, level, inner, frozenset(cues)))
            break
    return records, frozenset(global_cues)


def split_lines(text: str, max_line: int = 65536) -> list[str]:
    """CRLF, lone CR (progress bars redraw the line) and LF all end a line; very long lines are capped."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [ln if len(ln) <= max_line else ln[:max_line] for ln in lines]
