"""The ballast: sizing from the memory node vLLM measures, and a process that really holds it."""

import pytest

from kvkb.reproductions.ballast import (
    BallastProcess, BallastTooLarge, NodeMemory, ballast_bytes, parse_node_meminfo,
)
from kvkb.reproductions.proctree import session_members
from kvkb.reproductions.scenario import Ballast

NODE = """Node 0 MemTotal:        8741444 kB
Node 0 MemFree:         4927448 kB
Node 0 MemUsed:         3814000 kB
Node 0 Active(file):    1158140 kB
Node 0 Inactive(file):  1603380 kB
Node 0 SReclaimable:     297304 kB
"""
GIB = 1 << 30


def test_node_meminfo_uses_vllms_available_formula():
    mem = parse_node_meminfo(NODE)
    assert mem.total == 8741444 * 1024
    assert mem.available == (4927448 + 1158140 + 1603380 + 297304) * 1024


def test_proc_meminfo_fallback():
    mem = parse_node_meminfo("MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 600 kB\n")
    assert mem == NodeMemory(1000 * 1024, 600 * 1024)


def test_ballast_leaves_the_fraction_available():
    mem = NodeMemory(total=16 * GIB, available=14 * GIB)
    size = ballast_bytes(mem, Ballast(0.6))
    assert mem.available - size == pytest.approx(0.6 * mem.total, abs=1)


def test_ballast_has_a_floor_when_memory_is_already_short():
    assert ballast_bytes(NodeMemory(16 * GIB, 5 * GIB), Ballast(0.6, min_bytes=256 << 20)) == 256 << 20


def test_ballast_refuses_beyond_its_cap():
    with pytest.raises(BallastTooLarge, match="cap"):
        ballast_bytes(NodeMemory(512 * GIB, 500 * GIB), Ballast(0.5, max_bytes=16 * GIB))


def _rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def test_ballast_process_holds_memory_and_goes_away():
    size = 64 << 20
    with BallastProcess(size) as b:
        pid = b.pid
        assert _rss(pid) >= size
    assert session_members(pid) == []
