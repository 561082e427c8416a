"""Split cleaned log lines into error records: exception lines, WARNING/ERROR log lines, wrapped inner errors.

Pure: lines in, records out. Each record keeps the user's numbers (clean text) and carries the
stage cues (load, profiling, CUDA-graph capture, serving) seen in the traceback that led to it,
which tell apart entries whose messages are identical (a CUDA OOM at startup vs while serving).
"""

from __future__ import annotations

import re

from .regex_cache import Lazy, compile as _rx
from .normalize import canonical, clean_line, normalise, numbers_in, same_message, strip_prefixes_shaped

MAX_MESSAGE = 8192  # a message longer than this is noise (a dumped tensor, a config repr)
MAX_JOIN = 8  # continuation lines joined onto one hard-wrapped message

_EXC_RE = _rx(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Warning|Interrupt|Exit|Failure))"
    r"(?::\s?(?P<msg>.*)|\((?P<repr>.*)|(?<=Error)|(?<=Exception)|(?<=Interrupt)|(?<=Exit))$"
)
_FRAME_RE = _rx(r'^\s*File "(?P<path>[^"]*)", line \d+(?:, in (?P<func>[\w<>.]+))?')
_CARET_RE = _rx(r"^\s*[\^~]+\s*$")
_BREAK_RE = _rx(
    r"^(?:Traceback \(most recent call last\):|The above exception was the direct cause|During handling of the above exception"
    r"|Process [\w-]+:$|```)"
)
_OOM_INNER = " out of memory. Tried to allocate"
_INNER_RES = [
    # (only if the message holds, pattern): the gate spares compiling and running the rest
    # V0 multiproc: the worker's own error is on the wrapper line
    ("Exception in worker", Lazy(r"Exception in worker \S+ while processing method (?P<method>\w+):\s*(?P<msg>.*?)(?:,\s*Traceback \(most recent call last\):)?$")),
    ("Worker failed with error", Lazy(r"Worker failed with error '(?P<msg>.*)', please check the stack trace")),
    ("original error: ", Lazy(r"original error: (?P<msg>.*?)\)?$")),
    ("original error: ", Lazy(r"to find the original error: (?P<msg>.*?)\.?$")),
    # PyTorch's allocator message inside vLLM's own words ("Failed to create unquantized linear weights: CUDA out of memory. ...")
    (_OOM_INNER, Lazy(r"[:,] (?P<msg>(?:CUDA|HIP|XPU|NPU) out of memory\. Tried to allocate .*)$")),
    # an exception quoted as inline code in prose or a PR text: `ValueError: max_num_batched_tokens (2048) is smaller ...`
    ("`", Lazy(r"`(?P<msg>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception): [^`]{20,})`")),
]
# An HTTP error body quoted in a client-side traceback or printed raw: the server's message is inside.
#   openai.BadRequestError: Error code: 400 - {'error': {'message': "This model's ...", 'type': ...}}
#   {"object":"error","message":"This model's maximum context length ...","type":"BadRequestError",...}
_EMBEDDED_RE = Lazy(r"""['"]message['"]\s*:\s*(?:"(?P<dq>(?:[^"\\]|\\.)*)"|'(?P<sq>(?:[^'\\]|\\.)*)')""")
_ESCAPE_RE = Lazy(r"\\(u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)")
_ESCAPES = {"n": " ", "t": " ", "r": " "}

# pydantic (vLLM >= 0.9.2 config classes are pydantic dataclasses) prints the real message on the
# lines after "ValidationError: 1 validation error for ModelConfig":
#     Value error, User-specified max_model_len (65536) is greater than ... [type=value_error, input_value=..., input_type=...]
#       For further information visit https://errors.pydantic.dev/2.11/v/value_error
_VALIDATION_HEAD_RE = Lazy(r"^\d+ validation errors? for \S+")
_PYDANTIC_ITEM = ("Value error, ", "Assertion failed, ")
_PYDANTIC_MORE = "For further information visit https://errors.pydantic.dev"
_FIELD_RE = Lazy(r"^[\w.\[\]-]+$")  # the field path line above a field error
PYDANTIC_TYPE = "pydantic_core._pydantic_core.ValidationError"

# Stage cues: function names in frames and phrases vLLM logs around the failure. Plain substrings,
# checked with `in` on every line: a regex alternation of this size cost ~50 us a line.
# "cudagraph" is compared with the lower-cased line; the others are case-sensitive.
CUES = {
    # capture_begin/capture_end: torch.cuda.graphs.CUDAGraph, only ever called while capturing
    "cudagraph": ("capture_model", "graph_capture", "cudagraph", "cuda_graph", "graph capturing", "capture_begin",
                  "capture_end"),
    "startup": (
        "load_model", "load_weights", "model_loader", "profile_run", "_dummy_run", "_dummy_sampler_run",
        "determine_num_available_blocks", "determine_available_memory", "initialize_cache", "_initialize_kv_caches",
        "init_device", "initialize_from_config", "get_kv_cache_config", "memory_profiling",
        # building the model and its weights
        "create_weights", "process_weights_after_loading", "weight_loader", "initialize_model", "get_model",
        "init_cache_engine", "_init_cache", "profile_num_available_blocks",
        # allocating the KV cache itself (V0's CacheEngine, V1's initialize_kv_cache): only start-up does
        "_allocate_kv_cache", "initialize_kv_cache",
        "compile_or_warm_up_model", "EngineCore failed to start", "Engine core initialization failed", "warming up sampler",
        "warming up pooler", "Failed to load model", "Engine process failed to start",
        "WorkerProc failed to start",  # v1 multiproc worker_main: the worker died building itself
        # any part of the engine that failed building itself ("Engine core", vllm-omni's "Orchestrator"
        # and "Stage", V1's "WorkerProc"): what it wraps happened at start-up
        "initialization failed",
    ),
    "serving": (
        # V0's profile_run runs execute_model too, so "Error in model execution" alone is no stage; but V0's
        # MQLLMEngine logs an exception's repr (OutOfMemoryError('Error in model execution ...')) only from
        # the loops it runs once start-up is over (engine.py start(), client.py _set_errored; 0.6.3.post1, 0.7.1)
        "Error('Error in model execution",
        # V1 dumps the scheduler's output when a model step fails (dump_input.py, from the engine core's
        # step): there is a scheduler output only once requests are being served
        "Dumping scheduler output for model execution",
        "execute_model", "output_handler", "EngineCore encountered a fatal error", "run_busy_loop",
        "step_with_batch_queue", "engine_step", "_run_engine", "POST /v1/", "Background loop has errored",
        "EngineDeadError", "Engine loop is not running", "wake_up", "cumem_allocator",
        # V0 AsyncLLMEngine's background loop (started by the first request) died; its done-callback
        # re-raises what killed the loop (the engine was built, profiled and sized before the loop ran)
        "Engine background task failed", "_raise_exception_on_finish",
        # a request being answered: the V1 worker's RPC loop (start-up RPCs have a start-up frame
        # deeper, which wins), logprobs, the OpenAI server's handlers
        "worker_busy_loop", "get_logprobs", "compute_logprobs", "serving_chat", "serving_completion",
        "create_chat_completion", "create_completion", "chat_completion_stream_generator", "Processed prompts",
        "sample_tokens",
    ),
}
STAGE_ORDER = ("cudagraph", "startup", "serving")  # most specific first: capture runs _dummy_run, V0 profiling runs execute_model
# Start-up milestones, (substring, stage, step): what vLLM logs as it gets further; the last one seen
# before an error says how far start-up got (evidence.Scanner), and none of these lines is ever the rest
# of a cut line above it.
# Stages are the matcher's ("startup", "cudagraph", "serving"); steps are for people.
MILESTONES = (
    # the command that starts the server, echoed or pasted: what follows is its start-up until a later step says otherwise
    ("vllm serve ", "startup", "server launched"),
    ("vllm.entrypoints.openai.api_server", "startup", "server launched"),
    ("Starting to load model", "startup", "loading weights"),
    ("Loading safetensors checkpoint shards", "startup", "loading weights"),
    ("Loading drafter model", "startup", "loading weights"),  # V1's speculative-decoding drafter (gpu_model_runner)
    ("Loading weights took", "startup", "weights loaded"),
    ("Loading model weights took", "startup", "weights loaded"),
    ("Model loading took", "startup", "weights loaded"),
    # the multi-modal profiler's warning, printed while it builds the profile run's dummy batch (its
    # get_*dummy_data, vLLM 0.6.5 to 0.11.0 per the release atlas: "The [encoder] sequence length used for
    # profiling ..." / "The context length ...")
    ("is too short to hold the multi-modal embeddings in the worst case", "startup", "profiling"),
    ("Memory profiling takes", "startup", "memory profiled"),
    ("Memory profiling results", "startup", "memory profiled"),  # 0.6.4
    ("After memory profiling run", "startup", "memory profiled"),  # the XPU worker
    # (not any "memory profiling": the long-context warning says the profiling phase may OOM before any ran)
    ("Available KV cache memory", "startup", "KV cache sizing"),
    ("the rest of the memory reserved for KV Cache", "startup", "KV cache sizing"),
    ("blocks: ", "startup", "KV cache sizing"),
    ("Available memory: ", "startup", "KV cache sizing"),
    ("KV cache size: ", "startup", "KV cache sized"),
    ("Maximum concurrency for", "startup", "KV cache sized"),
    ("Capturing CUDA graph", "cudagraph", "CUDA-graph capture"),
    ("Capturing cudagraphs", "cudagraph", "CUDA-graph capture"),
    ("Capturing the model for CUDA graphs", "cudagraph", "CUDA-graph capture"),
    ("CUDA graphs can take additional", "cudagraph", "CUDA-graph capture"),
    ("to capture ACL graphs", "cudagraph", "graph capture"),
    ("Graph capturing finished", "startup", "CUDA graphs captured"),
    # start-up ends here: what fails after it fails while serving (the API server allocates no GPU memory)
    ("init engine (profile, create kv cache, warmup model) took", "serving", "engine initialised"),
    ("Starting vLLM API server", "serving", "serving"),
    ("Application startup complete", "serving", "serving"),
    ("Uvicorn running on", "serving", "serving"),
    ("Avg prompt throughput", "serving", "serving"),
    ('"POST /v1/', "serving", "serving"),
    ("Added request", "serving", "serving"),
    ("Received request", "serving", "serving"),
    ("Processed prompts", "serving", "serving"),  # offline LLM.generate's progress bar
    ("Adding requests", "serving", "serving"),
)
MILESTONE_WORDS = tuple(m[0] for m in MILESTONES)
_INFO_CUE_REACH = 10  # an INFO line counts as a cue only this close to the error
_FRAME_CUE_REACH = 400


class Record:
    """One error message found in the log. (A plain class: dataclasses would import inspect, ~10 ms.)"""

    __slots__ = ("line", "offset", "kind", "type", "level", "message", "cues", "at", "startup", "stage", "joins",
                 "cue_at", "stage_at", "site", "quoted", "_norm", "_canon", "_numbers")

    def __init__(self, line: int, kind: str, type: str | None, level: str | None, message: str, cues: frozenset[str] = frozenset()):
        self.line = line  # 1-based line number where the message starts (None: not counted, see read.py)
        self.offset: int | None = None  # then: byte offset of the window it came from
        self.kind = kind  # exception | log | inner | bare
        self.type = type  # exception class as printed
        self.level = level  # log level of the line it came from
        self.message = message  # clean text, numbers kept, hard-wrapped lines joined
        self.cues = cues
        self.at = 0  # index of its first line in the parsed lines it came from
        self.joins: tuple = ()  # (offset in message, line number) where each hard-wrapped line starts
        self.startup = 0  # which start-up of the server it belongs to (evidence.Scanner), 0: none seen
        self.stage: str | None = None  # the stage the log had reached (last milestone before it)
        self.cue_at: dict = {}  # cue -> (line, text) of the frame or line that showed it
        self.stage_at: tuple | None = None  # (line, text) of the milestone that set .stage
        self.site: tuple | None = None  # (stage, words) when vLLM's logging call site showed the stage (logsites)
        self.quoted = False  # an inner text a person's sentence quotes (not a wrapper's): an error only if it names one
        self._norm: str | None = None
        self._canon: str | None = None
        self._numbers: set[float] | None = None

    def __repr__(self) -> str:
        return f"Record({self.line}, {self.kind!r}, {self.type!r}, {self.level!r}, {self.message[:60]!r})"

    @property
    def norm(self) -> str:
        """Normalised message, computed on first use (most INFO lines are never scored)."""
        if self._norm is None:
            self._norm = normalise(self.message)
        return self._norm

    @property
    def canon(self) -> str:
        """The message with known wording variants canonicalised ("models's"), numbers kept."""
        if self._canon is None:
            self._canon = canonical(self.message)
        return self._canon

    @property
    def numbers(self) -> set[float]:
        if self._numbers is None:
            self._numbers = numbers_in(self.message)
        return self._numbers

    @property
    def text(self) -> str:
        if not self.type:
            return self.message
        # an exception raised with no arguments carries its class name as its message: shown once
        return self.type if self.message == self.short_type else f"{self.type}: {self.message}"

    def line_at(self, pos: int) -> int | None:
        """The log line holding character `pos` of the message (a hard-wrapped message spans several)."""
        if self.line is None:  # past the line-counted part of a big log
            return None
        line = self.line
        for offset, lineno in self.joins:
            if offset > pos:
                break
            line = lineno
        return line

    @property
    def short_type(self) -> str | None:
        return self.type.rsplit(".", 1)[-1] if self.type else None


def cues_of(text: str) -> set[str]:
    found = set()
    low = text.lower()
    if any(w in low for w in CUES["cudagraph"]):
        found.add("cudagraph")
    for name in ("startup", "serving"):
        if any(w in text for w in CUES[name]):
            found.add(name)
    return found


# a file a message names ("input dumped to /tmp/err_execute_model_input_20241108-023641.pkl", a log's
# path): its name is no step of the run, though it may hold a cue's words
_NAMED_FILE_RE = Lazy(r"(?:[\w.~-]*/)+[\w.-]+\.\w{1,5}\b")


def line_cues(content: str) -> set[str]:
    """cues_of a line, leaving out the files a message names (a frame's path is read as a frame)."""
    found = cues_of(content)
    if found and "/" in content and not _FRAME_RE.match(content):
        found = cues_of(_NAMED_FILE_RE.sub(" ", content))
    return found


def stage(cues: frozenset[str] | set[str]) -> str | None:
    return next((s for s in STAGE_ORDER if s in cues), None)


# Xinference's actors (xoscar) put where the error happened in front of its message:
# "ValueError: [address=0.0.0.0:37591, pid=324770] The decoder prompt ..."
_ACTOR_RE = Lazy(r"^\[address=[^\]\s]*, pid=\d+\]\s*")


def _exception(content: str) -> tuple[str, str] | None:
    m = _EXC_RE.match(content)
    if not m:
        return None
    etype = m.group("type")
    if m.group("repr") is not None:
        msg = m.group("repr").strip()
        if msg and msg[0] in "'\"":  # ("" is in every string: an empty repr has no quote)
            q = msg[0]
            msg = msg[1:]
            end = msg.rfind(q)
            msg = msg[:end] if end > 0 else msg
        elif msg.endswith(")"):
            msg = msg[:-1].strip()  # the repr's own closing parenthesis
    else:
        msg = (m.group("msg") or "").strip()
    if msg.startswith("[address="):
        msg = _ACTOR_RE.sub("", msg, count=1)
    # raised with no arguments ("NoFreeBlocksError()" as repr() logs it, or the class alone as a
    # traceback's last line): the class name is all the error says, so it stands as the message
    return etype, msg or etype.rsplit(".", 1)[-1]


def _continues(prev: str, nxt: str) -> bool:
    """Is `nxt` the rest of `prev`, cut by a terminal or an editor's hard wrap?"""
    if not nxt.strip() or nxt[:1].isspace():
        return False
    if not prev.rstrip().endswith((".", "!", "?", ":", ")", "]", "}")):
        return True
    return nxt[:1].islower() or nxt[:1].isdigit() or nxt[:1] in ")]},;"


# a progress bar ("shards: 100% Completed | 30/30", "45%|####  | 9/20 [00:03<00:04, 2.1it/s]")
_PROGRESS_RE = Lazy(r"\d%\s*(?:\||Completed)|\bit/s\b|s/it\b")


def _own_line(nxt: str) -> bool:
    """A line vLLM prints on its own (a progress bar, a start-up milestone) is never the rest of the
    line above, even when that one was cut mid-word."""
    s = nxt.lstrip()
    return bool(_PROGRESS_RE.search(s)) or s.startswith(MILESTONE_WORDS)


def _join(prev: str, nxt: str) -> str:
    # a wrap inside "(3984)" or a path loses no space; a wrap between words did
    if prev.endswith(("(", "[", "/", "-", "_")) or nxt.startswith((")", "]", ".", ",", ";", ":")):
        return prev + nxt
    return prev.rstrip() + " " + nxt.lstrip()


def parse(lines: list[tuple[int, str]]) -> list[tuple]:
    """(line number, content, log level, had a prefix, is a fence) per line: prefixes and ANSI gone.
    A comment stored as HTML is read as the text it shows: each piece between block tags is a line
    of its own (with the stored line's number); so is each line of a log flattened onto one line."""
    parsed = []
    hunks = False
    for lineno, raw in lines:
        if raw[:1] == "{" or "\\n" in raw:
            inner = unescape_log(raw)
            if inner is not None:
                parsed.extend((lineno,) + p[1:] for p in parse([(lineno, ln) for ln in inner]))
                continue
        if ("<" in raw or "&" in raw) and _HTML_ANY_RE.search(raw):
            for piece in unhtml(raw):
                for part in unflatten(piece):
                    hunks |= _parse_one(parsed, lineno, part)
            continue
        if len(raw) >= UNFLATTEN_MIN and (raw.count(".py") >= 2 or 'File "' in raw):
            if raw.count(".py") >= 2 or raw.lstrip().startswith('File "'):
                parts = unflatten(raw)
            else:
                bare = strip_prefixes_shaped(clean_line(raw))[0]
                if bare == raw:
                    parts = unflatten(raw)  # no prefix: unflatten decides (a sentence, then one frame and its error)
                else:
                    # one frame behind a launcher's prefix (a pod's timestamp, "[rank0]:"): the frame opens the text
                    parts = unflatten(bare) if bare.lstrip().startswith('File "') else [raw]
            if len(parts) > 1:
                for part in parts:
                    hunks |= _parse_one(parsed, lineno, part)
                continue
        # _parse_one written out: a call per line shows on a big log
        content, level, prefixed = strip_prefixes_shaped(clean_line(raw))
        if "```" in content:
            parsed.append((lineno, "", level, prefixed, True))  # a fence ends a message
            content = content.replace("```", "").strip()
        elif content[:3] == "@@ " and _HUNK_RE.match(content):
            hunks = True
        elif (content[:1].isdigit() or content[:8] == "Actions ") and _GUTTER_RE.fullmatch(content):
            continue  # a web log view's line number, copied between the lines it numbers
        parsed.append((lineno, content, level, prefixed, False))
    return _blank_hunks(parsed) if hunks else parsed


# a unified diff's hunk header: the lines under it are a file's text (a patch a person pasted), not
# what the run printed: a `raise ValueError("...")` a diff removes was never raised
_HUNK_RE = Lazy(r"@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
# a CI web view's gutter, copied with the log: the line's number alone, or Buildkite's "Actions for L2301"
_GUTTER_RE = Lazy(r"(?:Actions for L)?\d{1,7}")
_COMMENTS = ("#", "//")
_CODE_FILES = (".py", ".pyi", ".c", ".cc", ".cpp", ".cu", ".cuh", ".h", ".hpp", ".rs", ".go", ".js", ".ts", ".java", ".sh")
_HUNK_MARKS = frozenset(" +-\\")  # context, added, removed, "\ No newline at end of file"


def _blank_hunks(parsed: list[tuple]) -> list[tuple]:
    """A patch of a source file: each hunk's code lines (from its @@ header while lines begin with a
    diff's marks) read as blank, and so do the diff's file headers ("diff --git", "--- a/x.py" over
    "+++ b/x.py"). A comment in it is a person's words (the error they hit, noted by the change) and is
    read as text. A hunk of any other file (a log kept in a repository) is what a run printed: kept."""
    out, code, in_hunk = [], False, False
    for k, row in enumerate(parsed):
        content = row[1]
        head = False
        if content[:3] == "@@ " and _HUNK_RE.match(content):
            in_hunk = True
        elif in_hunk and content and content[0] not in _HUNK_MARKS:
            in_hunk = False
        if not in_hunk and (content.startswith("diff --git ") or (content.startswith("--- ") and k + 1 < len(parsed)
                                                                  and parsed[k + 1][1].startswith("+++ "))):
            head, code = True, content.rstrip().endswith(_CODE_FILES)
        elif content.startswith("+++ ") and k and parsed[k - 1][1].startswith("--- "):
            head = True
        if code and (head or in_hunk):
            if head or not content[1:].lstrip().startswith(_COMMENTS):
                row = row[:1] + ("",) + row[2:]
            else:
                row = row[:1] + (content[1:].lstrip(),) + row[2:]  # a comment: a person's words ("# ValueError: ...")
        out.append(row)
    return out


# A log stored as data: a JSON record per line (Docker's json-file driver, Kubernetes' and cloud
# loggers' exports: {"log": "...\\n", ...}), or a log kept as one string with its line breaks escaped
# (a JSON field, a Python repr: "Traceback (most recent call last):\\n  File \\"...). Only a line that
# shows a traceback's or a log's shape is decoded: prose quoting "\\n" stays prose.
_JSON_TEXT_KEYS = ("log", "MESSAGE", "textPayload")  # Docker's json-file, journald's JSON export, Google Cloud
# a JSON logger's record (python-json-logger, structlog, zap) holds the text under "message"/"msg" beside
# its time or level; an HTTP error body's "message" has neither, and is read as the server's message
_JSON_MESSAGE_KEYS = ("message", "msg")
_JSON_RECORD_KEYS = ("time", "timestamp", "ts", "@timestamp", "asctime", "level", "levelname", "severity")
_ESCAPED_LOG_RE = Lazy(r'Traceback \(most recent call last\)|File \\?"[^"\\]+\\?", line \d+|\\n(?:INFO|WARNING|ERROR|DEBUG) '
                       r"|(?:\\n|^\W{0,3})(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): |\\n\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d")
_ESCAPED_CHAR_RE = Lazy(r"\\(u[0-9a-fA-F]{4}|[nrt\"'\\])")
_ESCAPED_CHARS = {"n": "\n", "r": "", "t": "\t"}  # a line break stays one here (see _unescaper)


def unescape_log(raw: str) -> list[str] | None:
    """The lines a JSON log record or an escaped log string holds, or None when the line is neither."""
    s = raw.strip()
    if s[:1] == "{" and s[-1:] == "}" and '":' in s:
        import json

        try:
            obj = json.loads(s)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            keys = _JSON_TEXT_KEYS + (_JSON_MESSAGE_KEYS if any(k in obj for k in _JSON_RECORD_KEYS) else ())
            text = next((obj[k] for k in keys if isinstance(obj.get(k), str)), None)
            if text is not None:
                return text.rstrip("\n").split("\n")
    if raw.count("\\n") >= 2 and _ESCAPED_LOG_RE.search(raw):
        text = _ESCAPED_CHAR_RE.sub(_unescape_log_char, raw)
        return text.split("\n")
    return None


# A log whose line breaks were lost on the way to the paste (a chat message, an issue title, a form
# field): where a line of it began, a vLLM logger header, a traceback's header or frame, or (after a
# frame's source) the exception line. Only a long line with at least two of these is split: one is
# prose quoting a log line. Gated on two ".py" (each header and frame names a file): one C pass.
UNFLATTEN_MIN = 200
_HEAD = (r"(?:\([\w.-]+ pid=\d+(?:, ip=[\d.]+)?\) )?(?:\[rank\d+\]:\s?)?(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\s+"
         r"\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?")
_CHAIN_HEADS = ("Traceback (most recent call last):", "The above exception was the direct cause",
                "During handling of the above exception")
_RECORD_START_RE = Lazy(r"\s(?=" + "|".join([_HEAD] + [re.escape(h) for h in _CHAIN_HEADS]) + ")")
_HEAD_RE = Lazy(r"^" + _HEAD + r"\s+\[?[\w./-]+:\d+\]\s?")
_HEAD_END_RE = Lazy(r":\d+\]\s*$")
_FLAT_FRAME_RE = Lazy(r'\s*(?=File "[^"]+", line \d+, in )')
_FRAME_HEAD_RE = Lazy(r'File "[^"]+", line \d+, in [\w<>.]+')
# after a frame's source line (and its carets): the exception line
_AFTER_FRAME_RE = Lazy(r"\s(?=(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exhausted|Interrupt|Failure):\s)")


def unflatten(line: str) -> list[str]:
    """The lines of a log flattened onto one line, or [line] when it is not one."""
    if len(line) < UNFLATTEN_MIN:
        return [line]
    # a traceback's header right after a logger header is that log line's text, not a line of its own
    starts = [m.start() for m in _RECORD_START_RE.finditer(line, 1)
              if not line.startswith(_CHAIN_HEADS, m.start() + 1)
              or not _HEAD_END_RE.search(line, max(0, m.start() - 8), m.start() + 1)]
    frames = line.count('File "')
    # (one frame, its source and the exception glued after it, as a web page shows "Error Message")
    if len(starts) + frames < 2 and not (frames == 1 and line.lstrip().startswith('File "')):
        return [line]
    out: list[str] = []
    for chunk in _cut(line, starts):
        h = _HEAD_RE.match(chunk)
        head, rest = (chunk[:h.end()], chunk[h.end():]) if h else ("", chunk)
        for piece in _FLAT_FRAME_RE.split(rest):
            if not piece.strip():
                continue
            fh = _FRAME_HEAD_RE.match(piece)
            if fh is None:
                out.append(head + piece.rstrip())  # its own indentation: a source line stays one
                continue
            out.append(head + "  " + piece[:fh.end()])  # the frame, then its source line below it
            source = piece[fh.end():].strip()
            exc = _AFTER_FRAME_RE.search(source) if source else None
            if exc:
                source, error = source[:exc.start()].strip(), source[exc.start():].strip()
            else:
                error = ""
            if source:
                out.append(head + "    " + source)
            if error:
                out.append(head + error)
    return out if len(out) > 1 else [line]


def _cut(line: str, at: list[int]) -> list[str]:
    pieces, start = [], 0
    for pos in at + [len(line)]:
        piece = line[start:pos].strip()
        start = pos
        if piece:
            pieces.append(piece)
    return pieces


def _parse_one(parsed: list, lineno: int, raw: str) -> bool:
    """Appends the line's row (none for a web view's line number); True when it is a diff hunk's header."""
    content, level, prefixed = strip_prefixes_shaped(clean_line(raw))
    hunk = False
    if "```" in content:
        parsed.append((lineno, "", level, prefixed, True))  # a fence ends a message
        content = content.replace("```", "").strip()
    elif content[:3] == "@@ " and _HUNK_RE.match(content):
        hunk = True
    elif (content[:1].isdigit() or content[:8] == "Actions ") and _GUTTER_RE.fullmatch(content):
        return False  # a web log view's line number, copied between the lines it numbers
    parsed.append((lineno, content, level, prefixed, False))
    return hunk


# Log lines at these levels report, they do not raise: "INFO: 127.0.0.1 - ..." is no exception
_REPORT_LEVELS = ("INFO", "DEBUG", "WARNING")


def segment(lines: list[tuple[int, str]]) -> tuple[list[Record], frozenset[str]]:
    """Records in log order, plus the stage cues seen anywhere outside INFO lines."""
    return segment_parsed(parse(lines))


def segment_parsed(parsed: list[tuple]) -> tuple[list[Record], frozenset[str]]:
    """segment() on lines already parsed (the engine parses once for records and evidence)."""
    records: list[Record] = []
    global_cues: set[str] = set()
    pending: list[tuple[int, str, str]] = []  # (line, cue, the line's text) since the previous record
    validation: Record | None = None  # the "N validation errors for X" record whose items follow
    i = 0
    n = len(parsed)
    in_tb = False  # inside a traceback (after its header or a frame, before its exception line)
    field: str | None = None  # the pydantic field path line just seen
    while i < n:
        lineno, content, level, prefixed, fence = parsed[i]
        start = i
        i += 1
        if fence or not content.strip():
            continue
        stripped = content.strip()
        if validation is not None and level != validation.level:
            validation = None
        item = _pydantic_item(stripped, validation is not None and content[:1].isspace())
        if validation is not None and item is None and not (
            content[:1].isspace() or _FIELD_RE.match(stripped) or stripped.startswith(_PYDANTIC_MORE)
        ):
            validation = None
        if validation is not None and item is None and _FIELD_RE.match(stripped):
            field = stripped  # the field path above a pydantic field error ("gpu_memory_utilization")
            continue
        cues_here = line_cues(content)
        if item is not None:
            message, i = _join_item(item, parsed, i)
            if field and not stripped.startswith(_PYDANTIC_ITEM):
                # a constraint error ("Input should be less than or equal to 1") says nothing without
                # its field: keep the two lines pydantic printed together, as it printed them
                message = f"{field} {message}"
            field = None
            cues = set(validation.cues) if validation is not None else set()
            near, at = _near(pending, lineno)
            cues |= near | cues_here
            pending = []
            if validation is not None and records and records[-1] is validation:
                records.pop()  # its items say more than "1 validation error for ModelConfig"
            records.append(Record(lineno, "exception", validation.type if validation else PYDANTIC_TYPE, level, message, frozenset(cues)))
            records[-1].at = start
            continue
        frame = _FRAME_RE.match(content)
        # an indented line is a traceback's source line only inside a traceback; elsewhere it is
        # text a person indented (a quoted message in a numbered list)
        source = content[:1].isspace() and (in_tb or _source_ahead(parsed, i))
        if not level and not in_tb and "raise" in stripped and _RAISE_STMT_RE.match(stripped) \
                and "Error: " not in stripped:  # (a flattened traceback goes on to the error it raised)
            # a `raise X(` statement outside a traceback is code a person pasted (a patch, a review's view
            # of a file), not a line a run printed: it and the string literals it goes on with never ran
            while i < n and _LITERAL_LINE_RE.match(parsed[i][1]):
                i += 1
            continue
        if frame or source or _CARET_RE.match(content) or _BREAK_RE.match(content) or stripped.startswith(_PYDANTIC_MORE):
            # frames, source lines, carets: context for the record that follows
            found = _frame_cues(frame) if frame else cues_here
            pending.extend((lineno, cue, stripped) for cue in found)
            global_cues |= found
            in_tb = True
            continue
        in_tb = False
        if level == "INFO" or level == "DEBUG":
            for cue in cues_here:
                pending.append((-lineno, cue, stripped))  # negative: INFO reach applies
            rec_kind = "log"
        elif level:
            rec_kind = "log"
            global_cues |= cues_here
        else:
            rec_kind = "bare"
            global_cues |= cues_here
        exc = _exception(stripped) if level not in _REPORT_LEVELS else None
        if exc:
            rec_kind = "exception"
        # join hard-wrapped continuation lines
        message = exc[1] if exc else stripped
        joined = 0
        joins: list[tuple[int, int]] = []
        # pydantic's "1 validation error for X" is followed by its field path, not by more of it
        head = bool(exc) and exc[0].endswith("ValidationError") and _VALIDATION_HEAD_RE.match(message) is not None
        # an exception raised with no arguments (its message is its class name) has no more text
        argless = bool(exc) and exc[1] == exc[0].rsplit(".", 1)[-1]
        while not (head or argless) and i < n and joined < MAX_JOIN and len(message) < MAX_MESSAGE:
            nl, nxt, nlevel, nprefixed, nfence = parsed[i]
            # a line with a record header of its own, or other launcher prefixes than the message's
            # first line, is a line of its own; the same launcher's prefix on each line of a message
            # keeps it one message, as without the launcher (normalize.same_message)
            if nfence or nlevel or not same_message(prefixed, nprefixed) or _FRAME_RE.match(nxt) or _BREAK_RE.match(nxt):
                break
            if level in ("INFO", "DEBUG") and not (nxt[:1].islower() or nxt[:1].isdigit()):
                break
            if _exception(nxt.strip()) or not _continues(message, nxt) or _own_line(nxt):
                break
            message = _join(message, nxt)
            joins.append((len(message) - len(nxt), nl))  # nxt starts with no space (_continues): it ends message
            i += 1
            joined += 1
        message = message[:MAX_MESSAGE]
        near, at = _near(pending, lineno)
        cues = near | cues_here
        for cue in cues_here:
            at.setdefault(cue, (lineno, stripped))
        pending = []
        if rec_kind == "bare" and (len(message) < 20 or not re.search(r"[A-Za-z]{3}", message)):
            continue
        record = Record(lineno, rec_kind, exc[0] if exc else None, level, message, frozenset(cues))
        record.at = start
        record.joins = tuple(joins)
        record.cue_at = at
        records.append(record)
        if joins and level in ("INFO", "DEBUG"):
            # an INFO line is scored against INFO wordings only: the lines joined onto it (a wrapped
            # stats line, or a paste's own line glued under a healthy one) are read again on their own
            i = start + 1
        if head:
            validation = record
            continue
        # wrappers that carry the real error inside their text
        quoted = False
        for word, rx in _INNER_RES:
            if word == _OOM_INNER and exc:
                continue  # an exception's own text is scored as it stands
            m = rx.search(message) if word in message else None
            if not m or not m.group("msg").strip():
                continue
            inner = m.group("msg").strip()
            break
        else:
            inner = _embedded(message)
            quoted = inner is None and rec_kind == "bare"
            if quoted:
                inner = quoted_in_prose(message) or quoted_exception(message)
        # a sentence may quote several messages between quotation marks: each is scored on its own (the
        # longest last, so that its record stays the line's last, as when it was the only one read)
        texts = [inner] if inner or not quoted else quoted_texts(message)
        for inner in texts[1:] + texts[:1]:
            if not inner:
                continue
            inner_exc = _exception(inner)
            if inner_exc:
                records.append(Record(lineno, "inner", inner_exc[0], level, inner_exc[1], frozenset(cues)))
            elif len(inner) >= 20:
                records.append(Record(lineno, "inner", None, level, inner, frozenset(cues)))
                records[-1].quoted = quoted
            records[-1].at = start
            records[-1].cue_at = at
    return records, frozenset(global_cues)


# a Python raise statement (a diff's "+" or "-" may mark it) and the string literals that continue it
_RAISE_STMT_RE = Lazy(r"[+-]?\s*raise\s+[A-Za-z_][\w.]*\(")
_LITERAL_LINE_RE = Lazy(r"[+-]?\s*[rRfFbBuU]{0,2}[\"']")


def _source_ahead(parsed: list[tuple], i: int) -> bool:
    """An indented line followed by a caret line or a frame is a traceback's source line, even when
    the paste starts below the traceback's header ("    out = self._prefill(" then "    ^^^^")."""
    for _, nxt, _, _, fence in parsed[i:i + 2]:
        if fence:
            return False
        if nxt.strip():
            return bool(_CARET_RE.match(nxt) or _FRAME_RE.match(nxt))
    return False


def _near(pending: list[tuple[int, str, str]], lineno: int) -> tuple[set[str], dict[str, tuple[int, str]]]:
    """Cues close enough to the record on lineno (INFO lines, stored negative, reach less far), and
    for each the line that showed it (the deepest frame: the last one seen)."""
    cues: set[str] = set()
    at: dict[str, tuple[int, str]] = {}
    for ln, c, text in pending:
        if (ln >= 0 and lineno - ln <= _FRAME_CUE_REACH) or (ln < 0 and lineno + ln <= _INFO_CUE_REACH):
            cues.add(c)
            at[c] = (abs(ln), text)
    return cues, at


# Frames whose file, not function, says the stage: the OpenAI server's request handlers, weight loading
_PATH_CUES = (("entrypoints/openai/serving_", "serving"), ("/model_loader/", "startup"),
              # PyTorch's CUDA-graph module (torch.cuda.graph's __enter__/__exit__: capture_begin/capture_end)
              ("/torch/cuda/graphs.py", "cudagraph"),
              # an HTTP request being answered
              ("/uvicorn/", "serving"), ("/starlette/", "serving"), ("/fastapi/", "serving"))
# A model's or a layer's constructor builds its weights: that is loading, whatever called it
_BUILD_PATHS = ("/model_executor/models/", "/model_executor/layers/")


def _frame_cues(frame: re.Match) -> set[str]:
    return frame_cues(frame.group("path"), frame.group("func") or "")


def frame_cues(path: str, func: str) -> set[str]:
    """The stage cues a traceback frame `File "path", line N, in func` shows (also used by
    derive_logsites.py, which classifies vLLM's logging call sites by the functions around them)."""
    found = cues_of(func)
    for part, cue in _PATH_CUES:
        if part in path:
            found.add(cue)
    if func in ("__init__", "<listcomp>") and any(p in path for p in _BUILD_PATHS):
        found.add("startup")
    return found


def _pydantic_item(stripped: str, in_block: bool) -> str | None:
    """The message of a pydantic error line ("Value error, <message> [type=...]"), else None.

    Outside a "validation error for X" block only the "Value error, " form counts: a bare
    "[type=" is too weak a sign on its own."""
    for head in _PYDANTIC_ITEM:
        if stripped.startswith(head):
            return stripped[len(head):]
    if in_block and "[type=" in stripped:
        return stripped
    return None


def _join_item(message: str, parsed: list, i: int) -> tuple[str, int]:
    """A pydantic item with its hard-wrapped continuation joined, pydantic's tail removed."""
    joined = 0
    while "[type=" not in message and i < len(parsed) and joined < MAX_JOIN and len(message) < MAX_MESSAGE:
        _, nxt, nlevel, nprefixed, nfence = parsed[i]
        ns = nxt.strip()
        if (nfence or nlevel or not ns or nxt[:1].isspace() or ns.startswith(_PYDANTIC_MORE) or ns.startswith(_PYDANTIC_ITEM)
                or _FRAME_RE.match(nxt) or _BREAK_RE.match(nxt) or _exception(ns)):
            break
        message = _join(message, nxt)
        i += 1
        joined += 1
    # "... [type=value_error, input_value=ArgsKwargs((), {...}), input_type=ArgsKwargs]": pydantic's, not vLLM's
    cut = message.rfind("[type=")
    if cut >= 0:
        message = message[:cut]
    return message.strip()[:MAX_MESSAGE], i


# Han, kana, Hangul, CJK punctuation and full-width forms: text in a language that writes no spaces
_CJK_RUN_RE = Lazy(r"[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]+")
QUOTE_MIN = 40  # characters a Latin-script run needs to be read as a quoted message on its own


# an exception quoted in the middle of a sentence ("... initialization: ValueError: max_num_seqs (1024)
# exceeds ..."): a qualified class name ending in Error/Exception, after a space, colon or bracket
_MIDLINE_EXC_RE = Lazy(r"(?:(?<=[\s:(\[>*_`'\"\u201c\u2018])|^)(?P<msg>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S.{19,})$")


def quoted_exception(message: str) -> str | None:
    """The exception a line of prose quotes mid-sentence, to the end of the line (the prose after it
    is scored with it: a wording is found inside a longer text)."""
    if "Error: " not in message and "Exception: " not in message:
        return None
    m = _MIDLINE_EXC_RE.search(message, 1)
    return m.group("msg") if m else None


# a message a sentence quotes between quotation marks or backticks: "…", `…`, “…”, ‘…’ (a straight
# single quote is also an apostrophe, so it is left out)
_QUOTED_RE = Lazy(r'"([^"]{%d,})"|`([^`]{%d,})`|\u201c([^\u201d]{%d,})\u201d|\u2018([^\u2019]{%d,})\u2019'
                  % ((QUOTE_MIN // 2,) * 4))


QUOTES_READ = 3  # quoted stretches of one sentence scored on their own, longest first


def quoted_texts(message: str) -> list[str]:
    """The stretches of a sentence between quotation marks that read as messages (words with spaces,
    not a path or an identifier), longest first: the person quotes what the program printed, and each
    quote is scored on its own (inside the whole sentence its words are a small part of a long line;
    a title quoting two errors, "`No available memory for the cache blocks` & `Error executing method
    ...`", names the shortage in the shorter one)."""
    if '"' not in message and "`" not in message and "\u201c" not in message and "\u2018" not in message:
        return []
    found = []
    for m in _QUOTED_RE.finditer(message):
        text = next(g for g in m.groups() if g is not None).strip()
        if text.count(" ") >= 3 and len(text) < len(message) - 2 and text not in found:
            found.append(text)
    return sorted(found, key=len, reverse=True)[:QUOTES_READ]


def quoted_in_prose(message: str) -> str | None:
    """A program's message quoted inside a sentence of Chinese, Japanese or Korean prose ("调用api接口解析时
    就报错：Free memory on device (...) ... (0.4,5.83GiB).我监控nvidia-smi"): the longest stretch of the line
    written without those scripts, which is where the quote is, when it is long enough to be a message.
    Such prose glues the quote to its own words with no space, so the whole line never reads as the
    message; None for a line with no such script."""
    # an ASCII line holds none of those scripts: no need to compile (about 1 ms at each start) or run the regex
    if message.isascii() or not _CJK_RUN_RE.search(message):
        return None
    best = max((part.strip() for part in _CJK_RUN_RE.split(message)), key=len)
    return best if len(best) >= QUOTE_MIN and re.search(r"[A-Za-z]{3}", best) else None


def _embedded(message: str) -> str | None:
    """The server's message inside a quoted HTTP error body (JSON or a Python dict repr)."""
    if "message" not in message:
        return None
    m = _EMBEDDED_RE.search(message)
    if not m:
        return None
    raw = m.group("dq") if m.group("dq") is not None else m.group("sq")
    text = _ESCAPE_RE.sub(_unescape, raw).strip() if "\\" in raw else raw.strip()
    return text or None


def _unescaper(table: dict[str, str]):
    """A re.sub function decoding a backslash escape (\\uXXXX, \\xXX, or one character: the table's
    meaning, else the character itself)."""
    def sub(m: re.Match) -> str:
        code = m.group(1)
        if len(code) > 1:
            try:
                return chr(int(code[1:], 16))
            except ValueError:
                return ""
        return table.get(code, code)
    return sub


_unescape = _unescaper(_ESCAPES)  # a quoted HTTP body's message is read as one line
_unescape_log_char = _unescaper(_ESCAPED_CHARS)  # an escaped log keeps its line breaks


_FENCE_RE = Lazy(r"^([ \t]*)(?:```|~~~)")


def dedent_blocks(lines: list[str]) -> list[str]:
    """A paste indented as a whole (a markdown indented code block, a log under a list item) read as
    the log it holds: a fenced block loses its fence's indentation, and a paste with no fence the
    indentation every line shares. A traceback's own indentation (frames, source lines) is what tells
    its lines apart, so an indentation added over all of them must go."""
    fenced = [i for i, ln in enumerate(lines) if "```" in ln or "~~~" in ln]
    out = list(lines)
    if fenced:
        for k in range(0, len(fenced), 2):  # opening fences; each block runs to the next fence
            m = _FENCE_RE.match(lines[fenced[k]])
            indent = m.group(1) if m else ""
            end = fenced[k + 1] if k + 1 < len(fenced) else len(lines)
            if indent:
                for i in range(fenced[k] + 1, end):
                    if out[i].startswith(indent):
                        out[i] = out[i][len(indent):]
        return out
    body = [ln for ln in lines if ln.strip()]
    if not body or body[0][:1] not in " \t":
        return out
    indent = body[0][:len(body[0]) - len(body[0].lstrip(" \t"))]
    for ln in body:
        while indent and not ln.startswith(indent):
            indent = indent[:-1]
        if not indent:
            return out
    return [ln[len(indent):] if ln.startswith(indent) else ln for ln in lines]


# (a page stored as HTML escapes the quote: "File &quot;/usr/...")
_TB_START_RE = Lazy(r'^\s*(?:File (?:"|&quot;|&#34;)|Traceback \(most recent call last\))')
_STAMP_RE = Lazy(r"\d\d:\d\d")
LEARNED_MIN = 3  # lines that must share a launcher's prefix before it is learned from the paste
LEARNED_SHARE = 0.3  # ... and the share of the paste's lines they must be


def strip_learned_prefix(lines: list[str]) -> list[str]:
    """A launcher's prefix that no known shape describes (DJL Serving's "WARN  PyProcess W-252-model-
    stderr: ", a supervisor's "[program:vllm] stdout: "), learned from the paste itself: the same
    text up to its first ': ' or '| ' in front of many lines. Taken off only where that shows a
    traceback the prefix hid (a frame or a traceback header at the line's start), keeping what follows
    its one space, so the traceback's own indentation tells frames and source lines apart."""
    counts: dict[str, int] = {}
    body = 0
    for ln in lines[:2000]:
        if not ln.strip():
            continue
        body += 1
        cut = min((i for i in (ln.find(": ", 0, 80), ln.find("| ", 0, 80)) if i > 0), default=-1)
        if cut > 0:
            head = ln[:cut + 1]
            counts[head] = counts.get(head, 0) + 1
    if not counts:
        return lines
    head, n = max(counts.items(), key=lambda kv: kv[1])
    # (a bar alone, indented, quotes a block as Python's exception groups print theirs: "  | ")
    if n < LEARNED_MIN or n < LEARNED_SHARE * body or _STAMP_RE.search(head) \
            or (len(head.split()) < 2 and head.strip() != "|") \
            or "Error" in head or "Exception" in head or "Traceback" in head:
        return lines
    out = [ln[len(head) + (ln[len(head):len(head) + 1] == " "):] if ln.startswith(head) else ln for ln in lines]
    shown = any(_TB_START_RE.match(new) and not _TB_START_RE.match(old) for old, new in zip(lines, out))
    return out if shown else lines


# timestamps that open a log line, one pattern per layout (compared only within a layout: a web console's
# local time and vLLM's UTC can differ): ISO date and time, vLLM's level then month-day and time
# (behind a launcher's own prefix, the same on each line: "[rank0]:", a compose service's "name  | ",
# a quote's "> ", a Ray worker's "(pid=...)")
_LAUNCHER = r"^\s*(?:\[rank\d+\]:\s*|[\w.-]+\s+\|\s+|>\s+|\([\w.-]+ pid=\d+\)\s*)*"
_STAMP_RES = (
    Lazy(_LAUNCHER + r"\[?(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?"),
    Lazy(_LAUNCHER + r"(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?"),
)
NEWEST_FIRST_MIN = 3  # steps back in time, with none forward, that make a paste newest-first


def newest_first(numbered: list[tuple[int, str]]) -> list[tuple[int, str]] | None:
    """A log pasted newest first (a web console's view: RunPod, some Kubernetes and cloud log UIs): its
    line-opening timestamps only ever go back in time. The same lines oldest first, each timestamped
    line with the untimed lines under it kept as one block (line numbers stay the paste's); None when
    the paste is in time order, or says too little to tell."""
    for rx in _STAMP_RES:
        stamped = []
        for k, (_, text) in enumerate(numbered):
            m = rx.search(text) if text[:40].strip() else None
            if m:
                stamped.append((k, tuple(int(g.ljust(9, "0")) if j == len(m.groups()) - 1 else int(g)
                                          for j, g in enumerate(m.groups()) if g is not None)))
        if len(stamped) <= NEWEST_FIRST_MIN:
            continue
        back = sum(1 for (_, a), (_, b) in zip(stamped, stamped[1:]) if b < a)
        forward = sum(1 for (_, a), (_, b) in zip(stamped, stamped[1:]) if b > a)
        if forward or back < NEWEST_FIRST_MIN:
            continue
        starts = [k for k, _ in stamped]
        head = numbered[: starts[0]]
        blocks = [numbered[a:b] for a, b in zip(starts, starts[1:] + [len(numbered)])]
        return head + [line for block in reversed(blocks) for line in block]
    return None


def split_lines(text: str, max_line: int = 65536) -> list[str]:
    """CRLF, lone CR (progress bars redraw the line) and LF all end a line; very long lines are capped."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return [ln if len(ln) <= max_line else ln[:max_line] for ln in lines]


# Comments stored as HTML (GitHub's rendered body): block tags end a line, inline tags are dropped,
# character references are decoded. Only these tags: a log's own "<n>" or "List[int]>" is left alone.
_HTML_BLOCK = r"</?(?:pre|p|br|div|li|ul|ol|blockquote|details|summary|h[1-6]|tr|table)\b[^<>]*>"
_HTML_INLINE = r"</?(?:code|span|em|strong|b|i|a|kbd|samp|tt|sup|sub)\b[^<>]*>"
_HTML_ENTITY = r"&(?:gt|lt|amp|quot|apos|nbsp|#\d{1,6}|#[xX][0-9a-fA-F]{1,6});"
_HTML_BLOCK_RE = Lazy(_HTML_BLOCK, re.I)
_HTML_INLINE_RE = Lazy(_HTML_INLINE, re.I)
_HTML_ENTITY_RE = Lazy(_HTML_ENTITY)
_HTML_ANY_RE = Lazy("|".join((_HTML_BLOCK, _HTML_INLINE, _HTML_ENTITY)), re.I)  # one search per line with < or &


def unhtml(line: str) -> list[str]:
    """The lines an HTML-stored line shows (the line itself when it holds no HTML)."""
    block = "<" in line and _HTML_BLOCK_RE.search(line) is not None
    inline = "<" in line and _HTML_INLINE_RE.search(line) is not None
    entity = "&" in line and _HTML_ENTITY_RE.search(line) is not None
    if not (block or inline or entity):
        return [line]
    import html

    pieces = _HTML_BLOCK_RE.split(line) if block else [line]
    out = []
    for piece in pieces:
        if inline:
            piece = _HTML_INLINE_RE.sub("", piece)
        if entity:
            piece = html.unescape(piece).replace("\xa0", " ")
        out.append(piece)
    # a line that was only tags stays one (empty) line; empty pieces between tags are dropped
    return [pc for pc in out if pc.strip()] or [""]
