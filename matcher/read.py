"""Stream a log as bytes and hand back only the windows worth segmenting, in bounded memory.

A paste (up to SMALL bytes) is decoded whole. In a bigger input a few bytes.find() passes per
cache-sized slice locate candidate lines (anchors such as b"Error", b"ERROR"); only a window of
lines around each candidate is decoded. A regular file is memory-mapped (no copy into Python;
pages already scanned are released with madvise, so memory stays bounded); a pipe is read in
CHUNK-sized blocks into one reused buffer (readinto: no per-block allocation). Overlong lines keep
their head and their tail (an error printed after a 100 MB progress bar is still seen).

Line numbers are exact for the first LINE_LIMIT bytes. Past that, counting newlines would cost
as much as one more anchor pass (~20% of the time on a 1 GB log), so windows carry their byte
offset instead and line numbers are None.
"""

from __future__ import annotations

import os
from typing import BinaryIO, Iterator

from .normalize import strip_ansi_bytes

SMALL = 1 << 20
CHUNK = 16 << 20
SLICE = 1 << 20  # every anchor is searched in one slice before the next: the slice stays in cache
MAX_LINE = 64 << 10
BEFORE = 40  # lines of context kept before a candidate (the traceback that led to it)
AFTER = 12  # lines after (hard-wrapped continuations, the wrapper that names the stage)
WINDOW_BYTES = 32 << 10  # context cap per side, whatever the line lengths
FORWARD = WINDOW_BYTES + MAX_LINE  # bytes held back so a window never lacks its tail
SPARE = 4 * (FORWARD + MAX_LINE)  # room for what is carried from one block to the next
LINE_LIMIT = 64 << 20  # line numbers are counted this far into a big input
# The cover anchors (words that find a wording pasted bare, with no type or level: see index.cover_anchors)
# are searched only near the start of a big input; past it only the anchors every log needs. Each one
# is one more find pass over those bytes (~20 ms per 64 MiB here), and a 1 GB log must scan at 600 MB/s:
# their passes share a fixed budget (15 anchors over 64 MiB, the cover when that goal was set), so a
# KB that grows a longer cover searches it over a shorter stretch instead of slowing every big scan.
COVER_MAX = 64 << 20
COVER_BUDGET = 15 * COVER_MAX


def cover_limit(cover) -> int:
    """How far into a big input the cover anchors are searched."""
    return min(COVER_MAX, COVER_BUDGET // max(1, len(cover)))

# (first line number or None, byte offset of the window, text)
Window = tuple


class Stats:
    """What was read. (A plain class: dataclasses would import inspect, ~5 ms of start-up.)"""

    __slots__ = ("bytes", "lines", "windows", "long_lines")

    def __init__(self) -> None:
        self.bytes = 0
        self.lines = 0
        self.windows = 0
        self.long_lines = 0


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


def _fill(stream: BinaryIO, view: memoryview) -> int:
    """Read into view until it is full or the stream ends; the number of bytes read."""
    readinto = getattr(stream, "readinto", None)
    got = 0
    size = len(view)
    while got < size:
        if readinto is not None:
            k = readinto(view[got:])
        else:
            part = stream.read(size - got)
            k = len(part)
            view[got : got + k] = part
        if not k:
            break
        got += k
    return got


def windows(stream: BinaryIO, anchors: list[bytes], stats: Stats | None = None, words: list[bytes] = (),
            cover: list[bytes] = ()) -> Iterator[Window]:
    """Yield (first line number or None, byte offset, text) windows in log order."""
    stats = stats if stats is not None else Stats()
    try:
        start = stream.tell()
    except (AttributeError, OSError, ValueError):
        start = None  # a pipe
    head = _read_upto(stream, SMALL + 1)
    stats.bytes = len(head)
    if len(head) <= SMALL:
        stats.lines = head.count(b"\n") + (1 if head and not head.endswith(b"\n") else 0)
        stats.windows = 1 if head else 0
        if head:
            yield 1, 0, decode(head)
        return
    mapped = _mappable(stream) if start is not None else None
    if mapped is not None:
        yield from _scan_mapped(stream, start, anchors, stats, words, cover)
    else:
        yield from _scan(stream, head, anchors, stats, words, cover)


def _mappable(stream) -> int | None:
    """The stream's position when it is a regular file that can be memory-mapped (and its pages
    released behind the scan); None for pipes, sockets, in-memory streams. (Imports mmap: only
    asked about inputs bigger than a paste.)"""
    import mmap

    if not hasattr(mmap.mmap, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
        return None  # without madvise a mapping would keep the whole file resident
    try:
        fd = stream.fileno()
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return stream.tell()
    except (AttributeError, OSError, ValueError):
        return None


def _back(buf, pos: int, lines: int, floor: int) -> int:
    """Start of the line `lines` lines before the one starting at pos (not below floor)."""
    limit = max(floor, pos - WINDOW_BYTES)
    for _ in range(lines):
        if pos <= limit:
            break
        nl = buf.rfind(b"\n", limit, pos - 1)
        pos = nl + 1 if nl >= 0 else limit
    return max(pos, limit)


def _forward(buf, pos: int, lines: int, stop: int) -> int:
    """End (exclusive, after the newline) of the `lines`-th line after pos."""
    limit = min(stop, pos + WINDOW_BYTES)
    for _ in range(lines):
        nl = buf.find(b"\n", pos, limit)
        if nl < 0:
            return limit
        pos = nl + 1
    return pos


def _scan_mapped(stream: BinaryIO, start: int, anchors: list[bytes], stats: Stats, words=(), cover=()) -> Iterator[Window]:
    """Scan a regular file through a read-only mapping: positions are file offsets, nothing is copied
    but the windows. A big file is split at line ends into parts scanned at the same time by forked
    workers (the scan is CPU-bound: about five bytes.find passes); windows still come in log order."""
    import mmap

    fd = stream.fileno()
    size = os.fstat(fd).st_size
    stats.bytes = size - start
    if size <= start:
        return
    mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    workers: list = []
    try:
        try:
            mm.madvise(mmap.MADV_SEQUENTIAL)
        except (OSError, ValueError):
            pass
        # the first part also runs the cover anchors over cover_limit bytes and counts lines up to
        # LINE_LIMIT: each find pass over a byte costs about the same, so that is extra bytes of scan
        passes = max(1, len(anchors) + len(words))
        reach = min(size - start, cover_limit(cover)) if cover else 0
        head_extra = (len(cover) * reach + min(size - start, LINE_LIMIT)) // passes
        bounds = _parts(mm, start, size, _jobs(), head_extra)
        workers = [_fork(mm, lo, hi, start, size, anchors, words) for lo, hi in zip(bounds[1:-1], bounds[2:])]
        counter = [start, 1]  # newlines before counter[0] are in counter[1] - 1
        for _, wins in _blocks(mm, bounds[0], bounds[1], start, size, anchors, stats, counter, words, cover):
            yield from wins
        for k, worker in enumerate(workers):
            lo, hi = bounds[k + 1], bounds[k + 2]
            got = _collect(worker)
            workers[k] = None
            if got is not None:
                wins, long_lines, lo = got
                stats.long_lines += long_lines
                stats.windows += len(wins)
                yield from ((None, off, text) for off, text in wins)
            for _, wins in _blocks(mm, lo, hi, start, size, anchors, stats, None, words):  # what a worker did not do
                yield from wins
        stats.lines = None  # past LINE_LIMIT nobody counts
    finally:
        for worker in workers:
            if worker is not None:
                _abandon(worker)
        mm.close()


def _blocks(mm, lo: int, hi: int, start: int, size: int, anchors: list[bytes], stats: Stats, counter: list | None,
            words=(), cover=()):
    """(block end, [windows]) for each CHUNK-sized block of [lo, hi); counter ([offset, line]) makes
    line numbers for windows within LINE_LIMIT of the start. Pages behind the scan are released."""
    import mmap

    page = mmap.PAGESIZE
    released = (max(start, lo - 2 * WINDOW_BYTES - MAX_LINE) // page) * page
    reach = cover_limit(cover)
    pos = lo
    while pos < hi:
        stop = min(hi, pos + CHUNK)
        if stop < hi:  # blocks end at a line end, so no line is cut between two blocks
            nl = mm.rfind(b"\n", pos, stop)
            stop = nl + 1 if nl >= 0 else stop
        wins = []
        here = (*words, *cover) if cover and pos - start < reach else words
        for ws, we in _spans(mm, _candidates(mm, pos, stop, anchors, size, stats, here), start, size):
            first = None
            if counter is not None and ws - start <= LINE_LIMIT:
                for a in range(counter[0], ws, SLICE):  # mmap has no count(): count slice copies
                    counter[1] += mm[a : min(ws, a + SLICE)].count(b"\n")
                counter[0] = max(counter[0], ws)
                first = counter[1]
            stats.windows += 1
            wins.append((first, ws - start, decode(mm[ws:we])))
        pos = stop
        # give back the pages scanned, keeping the context a later window may reach back into
        keep_from = (max(start, pos - 2 * WINDOW_BYTES - MAX_LINE) // page) * page
        if keep_from > released:
            try:
                mm.madvise(mmap.MADV_DONTNEED, released, keep_from - released)
            except (OSError, ValueError):
                pass
            released = keep_from
        yield pos, wins


# --- parallel parts -------------------------------------------------------------------------------

PARALLEL_PART = 128 << 20  # a part is at least this big (and the first at least LINE_LIMIT)
WORKER_CAP = 32 << 20  # window text a worker holds; past it, the rest of its part is scanned by the parent


def _jobs() -> int:
    """Parallel parts: KVKB_JOBS, else the CPUs this process may use (at most 4); 1 where fork is missing."""
    if not hasattr(os, "fork"):
        return 1
    env = os.environ.get("KVKB_JOBS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


def _parts(mm, start: int, size: int, jobs: int, head_extra: int = 0) -> list[int]:
    """Part boundaries [start, ..., size], each at a line start. `head_extra`: the first part's extra
    work (cover anchors, line counting) in bytes of a plain scan; the first part is that much
    shorter, so the parts finish together (the first is never shorter than LINE_LIMIT)."""
    jobs = max(1, min(jobs, (size - start) // max(PARALLEL_PART, LINE_LIMIT + WINDOW_BYTES)))
    bounds = [start]
    first = (size - start + head_extra) // jobs - head_extra
    first = max(first, LINE_LIMIT + WINDOW_BYTES)
    for k in range(1, jobs):
        at = start + first + (size - start - first) * (k - 1) // (jobs - 1)
        nl = mm.find(b"\n", at, min(size, at + MAX_LINE))
        at = nl + 1 if nl >= 0 else at
        if bounds[-1] < at < size:
            bounds.append(at)
    bounds.append(size)
    return bounds


def _fork(mm, lo: int, hi: int, start: int, size: int, anchors: list[bytes], words=()):
    """(pid, read end of a pipe) of a worker scanning [lo, hi); None when it cannot be started."""
    import marshal

    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid:
        os.close(w)
        return pid, r
    # the worker: scan, send (windows, long lines, where it stopped), exit without running any cleanup
    # the parent owns (os._exit: no atexit handlers, no flushing of inherited stdio buffers)
    code = 1
    try:
        os.close(r)
        stats = Stats()
        out: list[tuple[int, str]] = []
        held = 0
        upto = lo
        for upto, wins in _blocks(mm, lo, hi, start, size, anchors, stats, None, words):
            out.extend((off, text) for _, off, text in wins)
            held += sum(len(t) for _, _, t in wins)
            if held > WORKER_CAP:
                break
        data = memoryview(marshal.dumps((out, stats.long_lines, upto)))
        while data:
            data = data[os.write(w, data):]
        code = 0
    except BaseException:
        pass
    finally:
        os._exit(code)


def _collect(worker) -> tuple[list, int, int] | None:
    """A worker's (windows, long lines, offset it reached), or None if it failed."""
    import marshal

    if worker is None:
        return None
    pid, r = worker
    chunks = []
    try:
        while True:
            part = os.read(r, 1 << 20)
            if not part:
                break
            chunks.append(part)
    except OSError:
        chunks = []
    finally:
        os.close(r)
    _, status = os.waitpid(pid, 0)
    if status != 0 or not chunks:
        return None
    try:
        wins, long_lines, upto = marshal.loads(b"".join(chunks))
    except (ValueError, EOFError, TypeError):
        return None
    return wins, long_lines, upto


def _abandon(worker) -> None:
    """Stop a worker whose windows are no longer wanted (the caller stopped reading)."""
    import signal

    pid, r = worker
    try:
        os.close(r)
    except OSError:
        pass
    try:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
    except OSError:
        pass


def _spans(buf, hits: list[tuple[int, int]], floor: int, stop: int) -> list[list[int]]:
    """Merged [start, end) windows of context around candidate lines."""
    spans: list[list[int]] = []
    for ls, le in hits:
        ws = _back(buf, ls, BEFORE, floor)
        we = _forward(buf, le + 1, AFTER, stop) if le < stop else le
        if spans and ws <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], we)
        else:
            spans.append([ws, we])
    return spans


def _scan(stream: BinaryIO, head: bytes, anchors: list[bytes], stats: Stats, words=(), cover=()) -> Iterator[Window]:
    buf = bytearray(CHUNK + SPARE)
    view = memoryview(buf)
    n = len(head)  # buf[:n] holds data
    buf[:n] = head
    region = 0  # buf[:region] is context already searched
    line_base = 1  # line number of buf[0]
    counted = 0  # newlines in buf[:counted] are already in line_base + lines_at
    lines_at = 0
    fake = 0  # newlines inserted when cutting overlong lines, not counted as lines
    in_long = False
    reach = cover_limit(cover)
    eof = False
    # (buffer position, input offset there): cutting overlong lines splices the buffer, so offsets
    # are piecewise; positions past the last splice map linearly
    where: list[tuple[int, int]] = [(0, 0)]
    counting = True
    while True:
        if not eof:
            room = len(buf) - n
            got = _fill(stream, view[n : n + min(CHUNK, room)]) if room > 0 else 0
            if got:
                stats.bytes += got
                n += got
            elif room > 0:
                eof = True
        end = n if eof else n - FORWARD
        cut = buf.rfind(b"\n", region, end) if end > region else -1
        long_next = False
        if cut < 0 and not eof:
            if n - region <= MAX_LINE + FORWARD:
                if n < len(buf):
                    continue
                # the buffer is full of one unfinished line: treat it as overlong below
            if in_long:  # still inside an overlong line: keep only a rolling tail
                where = [w for w in where if w[0] < region] + [(region, _input_offset(where, n - MAX_LINE))]
                buf[region : region + MAX_LINE] = buf[n - MAX_LINE : n]
                n = region + MAX_LINE
                continue
            # no newline for a long while: the line's head becomes a line of its own
            where.append((region + MAX_LINE + 1, _input_offset(where, n - MAX_LINE)))
            buf[region + MAX_LINE] = 10
            buf[region + MAX_LINE + 1 : region + 2 * MAX_LINE + 1] = buf[n - MAX_LINE : n]
            n = region + 2 * MAX_LINE + 1
            fake += 1
            stats.long_lines += 1
            cut = region + MAX_LINE
            long_next = True
        elif cut < 0:
            cut = n  # eof without a final newline
        in_long = long_next
        here = (*words, *cover) if cover and where[0][1] < reach else words
        hits = _candidates(buf, region, cut, anchors, n, None, here)
        for ws, we in _spans(buf, hits, 0, n):
            first = None
            if counting:
                if ws >= counted:
                    lines_at += buf.count(b"\n", counted, ws)
                    counted = ws
                    first = line_base + lines_at - fake
                else:  # the window opens in context already counted past
                    first = line_base + lines_at - buf.count(b"\n", ws, counted) - fake
            stats.windows += 1
            yield first, _input_offset(where, ws), decode(bytes(view[ws:we]))
        if eof and cut >= n - 1:
            if counting:
                stats.lines = line_base - 1 + lines_at + buf.count(b"\n", counted, n) + (0 if n and buf[n - 1] == 10 else 1) - fake
            else:
                stats.lines = None
            return
        keep = _back(buf, cut + 1, BEFORE, 0)
        if counting and keep > counted:
            lines_at += buf.count(b"\n", counted, keep)
            counted = keep
        # move what is kept to the front (equal-length slice assignment: the buffer never resizes)
        size = n - keep
        buf[0:size] = buf[keep:n]
        where = [(0, _input_offset(where, keep))] + [(p - keep, o) for p, o in where if p > keep]
        offset = where[0][1]
        if counting:
            line_base += lines_at
            lines_at = buf.count(b"\n", 0, counted - keep) if counted > keep else 0
            line_base -= lines_at
            counted = max(0, counted - keep)
            counting = offset <= LINE_LIMIT
        region = cut + 1 - keep
        n = size


def _input_offset(where: list[tuple[int, int]], pos: int) -> int:
    for p, off in reversed(where):
        if p <= pos:
            return off + pos - p
    return pos


def _candidates(buf, start: int, stop: int, anchors: list[bytes], end: int, stats: Stats | None = None,
                words: list[bytes] = ()) -> list[tuple[int, int]]:
    """(line start, line end) of every line in buf[start:stop] holding an anchor, sorted. A line
    longer than MAX_LINE is cut to MAX_LINE on each side of the anchor (buf[:end] holds data).
    `words` are anchors for messages standing bare or in an error: a hit on an INFO or DEBUG line
    ("'gpu_memory_utilization': 0.9" in a config line) opens no window."""
    found: dict[int, int] = {}
    for s in range(start, stop, SLICE):
        e = min(stop, s + SLICE)
        for anchor in (*anchors, *words):
            word = anchor in words
            # a match may start in this slice and end in the next one
            p = buf.find(anchor, s, min(stop, e + len(anchor) - 1))
            while p >= 0:
                ls = buf.rfind(b"\n", max(0, p - MAX_LINE), p) + 1 or max(0, p - MAX_LINE)
                le = buf.find(b"\n", p, min(end, p + MAX_LINE))
                if le < 0:
                    le = min(end, p + MAX_LINE)
                    if stats is not None and le < end:
                        stats.long_lines += 1
                head = min(p, ls + _LEVEL_HEAD)
                if not (word and (buf.find(b"INFO", ls, head) >= 0 or buf.find(b"DEBUG", ls, head) >= 0)):
                    found[ls] = max(found.get(ls, 0), le)
                if le + 1 >= e:
                    break
                p = buf.find(anchor, le + 1, min(stop, e + len(anchor) - 1))
    return sorted(found.items())


_LEVEL_HEAD = 160  # bytes at a line's start where its prefixes (and so its log level) stand
