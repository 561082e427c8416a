"""kvkb.matcher.read: streamed, bounded, the same answer on a paste and inside a huge log."""

import io

from kvkb.matcher import read

ERR = b"ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n"
INFO = b"INFO 11-20 10:12:01 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s, Running: 1 reqs\n"


def windows(data: bytes):
    stats = read.Stats()
    out = list(read.windows(io.BytesIO(data), [b"rror", b"WARN"], stats))
    return out, stats


def test_small_input_is_one_window():
    out, stats = windows(INFO + ERR)
    assert out == [(1, (INFO + ERR).decode())] and stats.lines == 2


def test_big_input_yields_only_windows_around_candidates_with_line_numbers():
    n = (3 * read.CHUNK) // len(INFO)
    data = INFO * n + ERR + INFO * 50 + ERR + INFO * n
    out, stats = windows(data)
    assert stats.bytes == len(data)
    assert stats.lines == 2 * n + 52
    text = "".join(t for _, t in out)
    assert text.count("No available memory") == 2
    first, window = next((f, t) for f, t in out if "No available memory" in t)
    offset = window.splitlines().index(ERR.decode().strip())
    assert first + offset == n + 1
    assert len(text) < 100_000  # only windows were decoded


def test_line_without_newline_is_capped_and_its_tail_kept():
    junk = b"x" * (3 * read.CHUNK)
    out, stats = windows(INFO * 20000 + junk + b"\r" + ERR)
    assert stats.long_lines == 1
    text = "".join(t for _, t in out)
    assert "No available memory for the cache blocks" in text
    assert max(len(line) for line in text.splitlines()) <= read.MAX_LINE + 1


def test_invalid_utf8_and_ansi_are_tolerated():
    out, _ = windows(b"\xff\xfe\x1b[31mValueError\x1b[0m: bad \xc3\x28 bytes\n")
    assert "ValueError: bad" in out[0][1]
