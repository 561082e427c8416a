"""kvkb.matcher.read: streamed, bounded, the same answer on a paste and inside a huge log."""

import io

import pytest

from kvkb.matcher import read

ERR = b"ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n"
INFO = b"INFO 11-20 10:12:01 [loggers.py:123] Engine 000: Avg prompt throughput: 1.0 tokens/s, Running: 1 reqs\n"


def windows(data: bytes):
    stats = read.Stats()
    out = [(first, text) for first, _, text in read.windows(io.BytesIO(data), [b"rror", b"WARN"], stats)]
    return out, stats


def test_small_input_is_one_window():
    out, stats = windows(INFO + ERR)
    assert out == [(1, (INFO + ERR).decode())] and stats.lines == 2


def test_big_input_yields_only_windows_around_candidates_with_line_numbers(monkeypatch):
    monkeypatch.setattr(read, "CHUNK", 1 << 20)
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


def test_every_anchor_line_is_found_with_its_exact_line_number(monkeypatch):
    # small blocks and slices so that anchors straddle slice and block boundaries many times
    monkeypatch.setattr(read, "SMALL", 4096)
    monkeypatch.setattr(read, "CHUNK", 8192)
    monkeypatch.setattr(read, "SLICE", 1000)
    import random

    rng = random.Random(5)
    lines, wanted = [], {}
    for i in range(1, 6000):
        r = rng.random()
        if r < 0.01:
            line = f"ERROR 11-20 10:12:01 [core.py:708] EngineCore failed to start {i}"  # no 'Error' in it
        elif r < 0.02:
            line = f"torch.OutOfMemoryError: CUDA out of memory {i}"
        elif r < 0.025:
            line = f"WARNING 08-20 10:18:39 scheduler.py:1141] Sequence group {i} is preempted"
        else:
            line = f"INFO 11-20 10:12:01 [loggers.py:123] Running: {rng.randint(0, 99)} reqs " + "x" * rng.randint(0, 300)
            lines.append(line)
            continue
        lines.append(line)
        wanted[len(lines)] = line
    data = ("\n".join(lines) + "\n").encode()
    stats = read.Stats()
    found = {}
    for first, _, text in read.windows(io.BytesIO(data), [b"Error", b"RROR", b"WARNING"], stats):
        for k, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")):
            assert found.setdefault(first + k, line) == line  # overlapping windows agree
    assert stats.bytes == len(data) and stats.lines == len(lines)
    for n, line in wanted.items():
        assert found.get(n) == line, n


def test_a_stream_without_readinto_is_read_too(monkeypatch):
    monkeypatch.setattr(read, "SMALL", 4096)
    monkeypatch.setattr(read, "CHUNK", 8192)

    class Pipe:
        def __init__(self, data):
            self.f = io.BytesIO(data)

        def read(self, n=-1):
            return self.f.read(min(n, 777) if n and n > 0 else n)

    data = INFO * 2000 + ERR + INFO * 10
    out = list(read.windows(Pipe(data), [b"Error"]))
    assert any("No available memory" in t for _, _, t in out)


def _big(tmp_path, monkeypatch):
    monkeypatch.setattr(read, "SMALL", 4096)
    monkeypatch.setattr(read, "CHUNK", 64 << 10)
    monkeypatch.setattr(read, "LINE_LIMIT", 512 << 10)
    data = INFO * 3000 + ERR + INFO * 9000 + ERR + INFO * 100 + b"x" * 300_000 + ERR + INFO * 10
    path = tmp_path / "big.log"
    path.write_bytes(data)
    return data, path


def test_past_the_line_limit_windows_carry_byte_offsets(tmp_path, monkeypatch):
    data, _ = _big(tmp_path, monkeypatch)
    found = [(first, off, t) for first, off, t in read.windows(io.BytesIO(data), [b"Error"]) if "No available memory" in t]
    assert len(found) == 3
    assert found[0][0] is not None and found[1][0] is None and found[2][0] is None  # the limit lies between
    for first, off, text in found:
        assert data[off : off + len(text)].decode() == text  # the offset is where the window starts
        if first is not None:
            assert data[:off].count(b"\n") + 1 == first


def test_a_regular_file_is_mapped_and_gives_what_a_pipe_gives(tmp_path, monkeypatch):
    data, path = _big(tmp_path, monkeypatch)
    piped_stats, mapped_stats = read.Stats(), read.Stats()
    piped = list(read.windows(io.BytesIO(data), [b"Error"], piped_stats))
    with open(path, "rb") as f:
        assert read._mappable(f) == 0
        mapped = list(read.windows(f, [b"Error"], mapped_stats))
    text = lambda ws: [t for _, _, t in ws if "No available memory" in t]  # noqa: E731
    assert text(mapped) == text(piped) and len(text(mapped)) == 3
    assert [(a, b) for a, b, t in mapped if "No available" in t] == [(a, b) for a, b, t in piped if "No available" in t]
    assert mapped_stats.bytes == len(data)


def test_pipes_and_in_memory_streams_are_not_mapped():
    import subprocess
    import sys

    assert read._mappable(io.BytesIO(b"x")) is None
    proc = subprocess.Popen([sys.executable, "-c", "print('x')"], stdout=subprocess.PIPE)
    try:
        assert read._mappable(proc.stdout) is None
    finally:
        proc.communicate()


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="no fork on this platform")
@pytest.mark.parametrize("cap,forks", [(32 << 20, True), (1, True), (32 << 20, False)])
def test_parallel_parts_give_the_same_windows_in_order(tmp_path, monkeypatch, cap, forks):
    # cap=1: every worker stops after one block and the parent scans the rest; forks=False: no worker starts
    data, path = _big(tmp_path, monkeypatch)
    monkeypatch.setattr(read, "PARALLEL_PART", 100 << 10)
    monkeypatch.setattr(read, "LINE_LIMIT", 100 << 10)
    monkeypatch.setattr(read, "WORKER_CAP", cap)
    monkeypatch.setenv("KVKB_JOBS", "3")
    if not forks:
        monkeypatch.setattr(read, "_fork", lambda *a: None)
    piped = list(read.windows(io.BytesIO(data), [b"Error", b"WARNING"]))
    stats = read.Stats()
    with open(path, "rb") as f:
        assert len(read._parts(__import__("mmap").mmap(f.fileno(), 0, access=__import__("mmap").ACCESS_READ), 0, len(data), 3)) == 4
        mapped = list(read.windows(f, [b"Error", b"WARNING"], stats))
    assert [(o, t) for _, o, t in mapped] == [(o, t) for _, o, t in piped]
    assert [f for f, _, _ in mapped] == [f for f, _, _ in piped]
    assert stats.windows == len(piped)


def test_the_first_part_is_shorter_by_its_extra_work(tmp_path, monkeypatch):
    # the parent's part also runs the cover anchors and counts lines: it gets fewer bytes, so the parts end together
    import mmap

    monkeypatch.setattr(read, "PARALLEL_PART", 100 << 10)
    monkeypatch.setattr(read, "LINE_LIMIT", 100 << 10)
    data = b"".join(b"INFO line %07d of an ordinary log\n" % k for k in range(60000))
    path = tmp_path / "log"
    path.write_bytes(data)
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        even = read._parts(mm, 0, len(data), 2)
        lighter = read._parts(mm, 0, len(data), 2, head_extra=300 << 10)
        floor = read._parts(mm, 0, len(data), 2, head_extra=len(data))
        mm.close()
    assert abs(even[1] - len(data) // 2) < 64
    # (size + extra) / 2 - extra for the first part, at a line start
    assert abs(lighter[1] - ((len(data) + (300 << 10)) // 2 - (300 << 10))) < 64 and data[lighter[1] - 1] == 10
    assert floor[1] >= read.LINE_LIMIT + read.WINDOW_BYTES  # never shorter than the lines it must count


def test_cover_anchors_share_one_budget():
    # each cover anchor is one more pass over the bytes it is searched in: more anchors, shorter stretch
    assert read.cover_limit([b"a"] * 15) == read.COVER_MAX
    assert read.cover_limit([b"a"] * 30) == read.COVER_MAX // 2
    assert read.cover_limit([]) == read.COVER_MAX


@pytest.mark.parametrize("mapped", [True, False])
def test_a_bare_wording_is_found_by_its_cover_anchor_only_within_reach(tmp_path, monkeypatch, mapped):
    monkeypatch.setattr(read, "CHUNK", 1 << 18)
    monkeypatch.setattr(read, "SMALL", 1 << 12)  # scanned as a big log, not read whole
    monkeypatch.setattr(read, "COVER_MAX", 4 << 20)
    monkeypatch.setattr(read, "COVER_BUDGET", 4 << 20)  # one anchor reaches 4 MiB, two reach 2 MiB
    line = b"INFO 11-20 10:11:05 [loggers.py:1] Engine 000: Avg prompt throughput: 0.0 tokens/s\n"
    bare = b"The model's max seq len (29000) is larger than the maximum number of tokens\n"
    data = bare + line * ((3 << 20) // len(line)) + bare  # one at the start, one 3 MiB in
    path = tmp_path / "log"
    path.write_bytes(data)

    def found(cover):
        with open(path, "rb") as f:
            stream = f if mapped else io.BytesIO(data)
            return sum(t.count("max seq len") for _, _, t in read.windows(stream, [b"Error"], None, (), cover))

    assert found([b"larger"]) == 2
    assert found([b"larger", b"Zzzzzz"]) == 1  # the second anchor halves the reach
