"""Pure text clean-up for pasted logs: ANSI, transport prefixes, box borders, parameterisation.

Two outputs per message: the *clean* text (prefixes gone, numbers kept: they feed the fix) and
the *normalised* text (variable parts masked, known wording variants canonicalised) that the
scorer compares with signature templates normalised the same way.
"""

from __future__ import annotations

from .regex_cache import Lazy, compile as _rx


ANSI_BYTES_RE = Lazy(rb"\x1b(?:\[[0-9;:?<=>]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
ANSI_RE = Lazy(r"\x1b(?:\[[0-9;:?<=>]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")

# Control characters other than tab; NULs and friends from binary junk must not reach the scorer.
_CONTROL_RE = _rx(r"[\x00-\x08\x0b-\x1f\x7f]")

# One prefix at the start of a line. Applied repeatedly: docker-compose + kubectl + timestamp + process
# tag + vLLM logger prefix can all stack on one line. Each has a kind:
#   "head": a program's own record header (a logger's level and time, the kernel's timestamp): a line
#           with one starts a message of its own;
#   "tag":  a launcher's tag, the same on every line of one process (compose, Ray, vLLM's process tag,
#           torchrun's rank): compared as text;
#   "stamp": a launcher's stamp that changes line by line (docker/kubectl timestamps, CRI's stream):
#           compared by kind.
# A launcher puts its tag or stamp on every line it passes on, the continuation lines of a message
# printed on several lines included, so those lines stay one message as they are without it.
_LEVELS = r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)"
_PREFIXES = [
    # vLLM logger: "ERROR 11-20 10:12:01 [core.py:708] " (>=0.8) or "ERROR 10-16 05:20:48 registry.py:264] " (older)
    ("head", _rx(_LEVELS + r"\s+\d\d-\d\d\s+\d\d:\d\d:\d\d(?:[.,]\d+)?\s+(?:\[[^\]\s]+:\d+\]|[^\]\s]+:\d+\])\s?")),
    # the same with the date and time left out (a log shipper keeps its own time, or the user cut it):
    # "ERROR [core.py:708] ", "ERROR core.py:1138 "; the location must be a Python file:line
    ("head", _rx(_LEVELS + r"\s+(?:\[(?:[\w.-]+/)*[\w.-]+\.py:\d+\]|(?:[\w.-]+/)*[\w.-]+\.py:\d+\]?)\s")),
    # the header alone, the line cut before its location ("ERROR 04-13 02:35:01" as a paste's last line)
    ("head", _rx(_LEVELS + r"\s+\d\d-\d\d\s+\d\d:\d\d:\d\d(?:[.,]\d+)?\s*$")),
    # process tags: (EngineCore_DP0 pid=123), (VllmWorkerProcess pid=…), (RayWorkerWrapper pid=…, ip=…),
    # (VllmWorker rank=5 pid=3073)
    ("tag", _rx(r"\((?:[\w.:-]+(?:=\w+)?\s+){0,3}pid=\d+(?:,\s*ip=[\w.:-]+)?\)\s?")),
    ("tag", _rx(r"\[rank\d+\]:\s?")),
    # ISO / kubectl --timestamps: 2024-06-28T06:11:52.685Z, 2024-06-28 06:11:52,123
    # (one space after it: what follows keeps its own indentation, a traceback's source lines theirs)
    ("stamp", _rx(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s")),
    # the same in brackets, as Buildkite's log view stamps each line: "[2026-04-13T02:35:01Z] "
    ("stamp", _rx(r"\[\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]\s")),
    # a launcher's time of day alone: "18:03:00  (Worker_TP0) INFO [gpu_model_runner.py:5332] ..."
    ("stamp", _rx(r"\d\d:\d\d:\d\d(?:[.,]\d+)?\s+(?=\S)")),
    # kubectl logs --prefix: [pod/vllm-0/vllm]
    ("tag", _rx(r"\[pod/[^\]\s]+\]\s")),
    # Google Cloud Logging export: [resource.labels.containerName: vllm]
    ("tag", _rx(r"\[resource\.labels\.\w+: [^\]]*\]\s")),
    # docker compose: "vllm-1  | "
    ("tag", _rx(r"[\w.-]+\s+\|\s")),
    # uvicorn / python logging: "INFO:     ", "ERROR:vllm...:" is rare, not stripped
    ("head", _rx(_LEVELS + r":\s+")),
    # syslog / journald: "Nov 22 02:05:01 host vllm[123]: "
    ("stamp", _rx(r"[A-Z][a-z]{2}\s+\d+\s\d\d:\d\d:\d\d\s\S+\s[\w.-]+(?:\[\d+\])?:\s")),
    # Hydra / python logging: "[2021-06-06 21:07:33,713][vllm.engine][INFO] - "
    ("head", _rx(r"\[\d{4}-\d\d-\d\d[^\]]*\](?:\[[\w.]+\])?\[" + _LEVELS + r"\]\s-\s")),
    # Kubernetes CRI log files: "stdout F " after the timestamp
    ("stamp", _rx(r"(?:stdout|stderr)\s[FP]\s")),
    # klog (Go controllers): "I0902 00:55:35.305769       1 server.go:2282] "
    # (glog's too: XLA, the TPU runtime, PJRT; its first letter is the severity)
    ("head", _rx(r"(?P<sev>[IWEF])\d{4}\s\d\d:\d\d:\d\d\.\d+\s+\d+\s[\w.-]+:\d+\]\s")),
    # the kernel's log (dmesg): "[ 2448.628970] " (seconds since boot, printk's 6 decimals) or, with
    # dmesg -T, "[Mon Nov 23 10:02:11 2026] ": one per kernel record
    ("head", _rx(r"\[\s*\d+\.\d{6}\]\s")),
    ("head", _rx(r"\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]?\d \d\d:\d\d:\d\d \d{4}\]\s")),
    # launcher tags: "[mineru] ", "[Error] (Process) ", "(Worker_TP0) "; a tag is one token
    ("tag", _rx(r"\[[A-Za-z][\w.-]{0,40}\]:?\s+")),
    ("tag", _rx(r"\([A-Z][\w.-]{0,40}\)\s+")),
    # markdown or e-mail quoting, a REPL prompt
    # (one space after it: a quoted traceback keeps its own indentation)
    ("tag", _rx(r"(?:>+|>>>)(?: ?(?=\S|\s+\S)|\s*$)")),
    # a level word alone ("INFO Started server process", "WARNING something")
    ("head", _rx(_LEVELS + r"\s+(?=\S)")),
]
# glog / klog's first letter. Not "I": another program's INFO line may carry vLLM's error in what it
# reports (a gateway's "HTTP call done" with the error body), and INFO lines are compared with INFO
# wordings only
_SEVERITY = {"I": None, "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
_PREFIX_HINT = _rx(r"[A-Z(\[\d\w>]")

_BOX = "\u2500-\u257f\u2580-\u259f"
_BOX_EDGE_RE = Lazy(rf"^\s*[{_BOX}]+\s?|\s?[{_BOX}]+\s*$")
_BOX_ONLY_RE = Lazy(rf"^[\s{_BOX}+|=-]*[{_BOX}][\s{_BOX}+|=-]*$")


def strip_ansi_bytes(data: bytes) -> bytes:
    return ANSI_BYTES_RE.sub(b"", data) if b"\x1b" in data else data


# ANSI codes pasted as caret text ("^[[0;36m"): a terminal's escape byte copied as two characters;
# or as syslog writes a control byte ("#033[2m": rsyslog escapes ESC as # and its octal code)
_CARET_ANSI_RE = Lazy(r"\^\[\[[0-9;]*[A-Za-z]")
_SYSLOG_ANSI_RE = Lazy(r"#033\[[0-9;]*[A-Za-z]")


def clean_line(line: str) -> str:
    """Remove ANSI, control characters and TUI box borders; keep everything else verbatim."""
    if "\x1b" in line:
        line = ANSI_RE.sub("", line)
    if "^[[" in line:
        line = _CARET_ANSI_RE.sub("", line)
    if "#033[" in line:
        line = _SYSLOG_ANSI_RE.sub("", line)
    line = _CONTROL_RE.sub("", line)
    if not line or max(line) < "\u2500":  # no box-drawing character (the common case, one C call)
        return line
    if _BOX_ONLY_RE.match(line):
        return ""
    return _BOX_EDGE_RE.sub("", line) if any("\u2500" <= c <= "\u259f" for c in line) else line


def strip_prefixes(line: str) -> tuple[str, str | None, bool]:
    """(content, log level or None, had a prefix). Leading indentation of the content is kept."""
    content, level, shape = strip_prefixes_shaped(line)
    return content, level, bool(shape)


def strip_prefixes_shaped(line: str) -> tuple[str, str | None, tuple]:
    """(content, log level or None, shape): shape is () without a prefix, else one part per prefix
    stripped: a tag's own text, "~N" for a stamp of kind N, "!" for a record header (see _PREFIXES)."""
    level = None
    shape: list[str] = []
    if line[:1] in " \t":
        # a log indented as a whole (a markdown list item, a quote, an indented code block): the record
        # header under the indent is still the log's own (a source line never carries "ERROR 06-16 ...")
        bare = line.lstrip(" \t")
        head = bare[:120]
        if bare and _PREFIX_HINT.match(bare) and ("ERROR" in head or "INFO" in head or "WARN" in head
                                                  or "DEBUG" in head or "CRITICAL" in head):
            got = strip_prefixes_shaped(bare)
            if got[1] is not None and "!" in got[2]:
                return got
    while line and _PREFIX_HINT.match(line):
        for k, (kind, rx) in enumerate(_PREFIXES):
            m = rx.match(line)
            if m:
                if "level" in rx.groupindex and m.group("level"):
                    # the innermost level is the program's own (a log shipper's severity wraps vLLM's ERROR)
                    level = "WARNING" if m.group("level").startswith("WARN") else m.group("level")
                elif "sev" in rx.groupindex:
                    level = _SEVERITY[m.group("sev")]
                shape.append("!" if kind == "head" else m.group(0).strip() if kind == "tag" else f"~{k}")
                line = line[m.end():]
                break
        else:
            break
    return line, level, tuple(shape)


def same_message(first: tuple, nxt: tuple) -> bool:
    """Can a line with prefix shape `nxt` continue a message whose first line had shape `first`, as far
    as the prefixes tell? Yes when it has none (a terminal's or an editor's hard wrap adds none) or
    exactly the launcher's tags and stamps of the first line and no record header of its own: the
    launcher prefixed each line of one message. (The text decides the rest, as without a launcher.)"""
    if not nxt:
        return True
    return "!" not in nxt and nxt == tuple(p for p in first if p != "!")


# --- parameterisation -------------------------------------------------------------------------

_CANON = [
    # (only if the text holds, pattern, replacement)
    ("models's", Lazy(r"\bmodels's\b"), "model's"),  # vLLM <=0.21 typo; both wordings stay separate signatures
    ("torch.cuda.", Lazy(r"\btorch\.cuda\.OutOfMemoryError\b"), "torch.OutOfMemoryError"),
    # PyTorch's caching allocator before 2.1 (CUDA, and XPU builds that kept it):
    #   "Tried to allocate 1.50 GiB (GPU 0; 15.11 GiB total capacity; 13.20 GiB already allocated; 1.02 GiB free; ...)"
    # says what the newer layout says: "Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 15.11 GiB of which 1.02 GiB is free."
    ("total capacity;", Lazy(r"Tried to allocate ([\d.]+ ?[KMGT]?i?B) \(GPU (\d+); ([\d.]+) GiB total capacity;[^)]*?"
                             r"([\d.]+ ?(?:[KMGT]i?B|bytes)) free;[^)]*\)\.?"),
     r"Tried to allocate \1. GPU \2 has a total capacity of \3 GiB of which \4 is free."),
]
_MASKS = [
    # (only if the text holds, pattern, mask); the gate spares compiling and running rare patterns
    ("://", Lazy(r"https?://\S+"), "<url>"),
    (None, _rx(r"(?:[A-Za-z]:)?(?:[/\\][\w.@+~-]+){2,}[/\\]?"), "<path>"),
    ("0x", Lazy(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    ("-", Lazy(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (None, _rx(r"\b[0-9a-f]{12,}\b"), "<hex>"),
    # numbers: 16,384 / 5.62 / -0.49 / 1e-5; the unit after them (GiB, MiB) is kept as a word
    (None, _rx(r"(?<![\w.])-?\d[\d,]*(?:\.\d+)?(?:[eE][+-]?\d+)?"), "<n>"),
]
_SPACE_RE = _rx(r"\s+")


def canonical(text: str) -> str:
    for word, rx, repl in _CANON:
        if word in text:
            text = rx.sub(repl, text)
    return text


def normalise(text: str, canon: bool = True) -> str:
    """Masked, canonical, lower-case, single-spaced: what the scorer compares."""
    if canon:
        text = canonical(text)
    for word, rx, repl in _MASKS:
        if word is None or word in text:
            text = rx.sub(repl, text)
    return _SPACE_RE.sub(" ", text).strip().lower()


_NUMBER_RE = _rx(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][+-]?\d+)?")
# the numbers normalise() masks as <n>: 16,384 / 5.62 / -0.49 / 1e-5, not the 1 in "v1"
_MASKED_NUMBER_RE = _MASKS[-1][1]


def numbers_in(text: str) -> set[float]:
    """Every number in text as a value ('16,384' and '16384' are one number)."""
    out = set()
    for m in _MASKED_NUMBER_RE.finditer(text):
        try:
            out.add(float(m.group(0).replace(",", "")))
        except ValueError:
            pass
    return out


def to_number(value: str) -> float | None:
    """'16,384' -> 16384, '5.62' -> 5.62, ' 3984' -> 3984; None when not a number."""
    m = _NUMBER_RE.search(value or "")
    if not m:
        return None
    try:
        return float(m.group(0).replace(",", ""))
    except ValueError:
        return None
