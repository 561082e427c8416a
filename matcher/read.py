"""Stream a log as bytes and hand back only the windows worth segmenting, in bounded memory.

A paste (up to SMALL bytes) is decoded whole. A bigger input is scanned in CHUNK-sized binary
blocks: a few bytes.find() passes locate candidate lines (anchors such as b"rror", b"WARN"),
and only a window of lines around each candidate is decoded. Lines longer than MAX_LINE keep
their head and their tail (an error printed after a 100 MB progress bar is still seen).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO, Iterator

from .normalize import strip_ansi_bytes

SMALL = 1 << 20
CHUNK = 8 << 20
MAX_LINE = 64 << 10
BEFORE = 40  # lines of context kept before a candidate (the traceback that led to it)
AFTER = 12  # lines after (hard-wrapped continuations, the wrapper that names the stage)
WINDOW_BYTES = 32 << 10  # context cap per side, whatever the line lengths
FORWARD = WINDOW_BYTES + MAX_LINE  # bytes held back so a window never lacks its tail


@dataclass
class Stats:
    bytes: int = 0
    lines: int = 0
    windows: int = 0
    long_lines: int = 0


def decode(data: bytes) -> str:
    return strip_ansi_bytes(data).decode("utf-8", "replace")


def _read_upto(stream: BinaryIO, size: int) -> bytes:
    parts = []
    got = 0
    while got < size:
        part = stream.read(size - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def windows(stream: BinaryIO, anchors: list[bytes], stats: Stats | None = None) -> Iterator[tuple[int, str]]:
    """Yield (first line number, text) windows in log order."""
    stats = stats if stats is not None else Stats()
    head = _read_upto(stream, SMALL + 1)
    stats.bytes = len(head)
    if len(head) <= SMALL:
        stats.lines = head.count(b"\n") + (1 if head and not head.endswith(b"\n") else 0)
        stats.windows = 1 if head else 0
        if head:
            yield 1, decode(head)
        return
    yield from _scan(stream, head, anchors, stats)


def _back(buf: bytes, pos: int, lines: int, floor: int) -> int:
    """Start of the line `lines` lines before the one starting at pos (not below floor)."""
    limit = max(floor, pos - WINDOW_BYTES)
    for _ in range(lines):
        if pos <= limit:
            break
        nl = buf.rfind(b"\n", limit, pos - 1)
        pos = nl + 1 if nl >= 0 else limit
    return max(pos, limit)


def _forward(buf: bytes, pos: int, lines: int) -> int:
    """End (exclusive, after the newline) of the `lines`-th line after pos."""
    limit = min(len(buf), pos + WINDOW_BYTES)
    for _ in range(lines):
        nl = buf.find(b"\n", pos, limit)
        if nl < 0:
            return limit
        pos = nl + 1
    return pos


def _scan(stream: BinaryIO, buf: bytes, anchors: list[bytes], stats: Stats) -> Iterator[tuple[int, str]]:
    region = 0  # buf[:region] is context already processed
    line_base = 1  # line number of buf[0]
    fake = 0  # newlines inserted when cutting overlong lines, not counted as lines
    in_long = False
    eof = False
    while True:
        if not eof:
            chunk = stream.read(CHUNK)
            if chunk:
                stats.bytes += len(chunk)
                buf += chunk
            else:
                eof = True
        end = len(buf) if eof else len(buf) - FORWARD
        cut = buf.rfind(b"\n", region, end) if end > region else -1
        long_next = False
        if cut < 0 and not eof:
            if len(buf) - region <= MAX_LINE + FORWARD:
                continue
            if in_long:  # still inside an overlong line: keep only a rolling tail
                buf = buf[:region] + buf[-MAX_LINE:]
                continue
            # no newline for a long while: the line's head becomes a line of its own
            buf = buf[: region + MAX_LINE] + b"\n" + buf[-MAX_LINE:]
            fake += 1
            stats.long_lines += 1
            cut = region + MAX_LINE
            long_next = True
        elif cut < 0:
            cut = len(buf)  # eof without a final newline
        in_long = long_next
        hits = _candidates(buf, region, cut, anchors)
        if hits:
            spans: list[list[int]] = []
            for ls, le in hits:
                ws = _back(buf, ls, BEFORE, 0)
                we = _forward(buf, le + 1, AFTER) if le < len(buf) else le
                if spans and ws <= spans[-1][1]:
                    spans[-1][1] = max(spans[-1][1], we)
                else:
                    spans.append([ws, we])
            counted, count = 0, 0
            for ws, we in spans:
                count += buf.count(b"\n", counted, ws)
                counted = ws
                stats.windows += 1
                yield line_base + count - fake, decode(buf[ws:we])
        if eof and cut >= len(buf) - 1:
            stats.lines = line_base - 1 + buf.count(b"\n") + (0 if buf.endswith(b"\n") else 1) - fake
            return
        keep = _back(buf, cut + 1, BEFORE, 0)
        line_base += buf.count(b"\n", 0, keep)
        buf = buf[keep:]
        region = cut + 1 - keep


def _candidates(buf: bytes, start: int, stop: int, anchors: list[bytes]) -> list[tuple[int, int]]:
    """(line start, line end) of every line in buf[start:stop] holding an anchor, sorted."""
    found: dict[int, int] = {}
    for anchor in anchors:
        p = buf.find(anchor, start, stop)
        while p >= 0:
            ls = buf.rfind(b"\n", 0, p) + 1
            le = buf.find(b"\n", p, stop)
            le = stop if le < 0 else le
            found[ls] = le
            p = buf.find(anchor, le + 1, stop)
    return sorted(found.items())
