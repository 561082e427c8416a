"""Host limits a scenario can declare (reproductions/limits.py): sizes, the kernel-log filter, the
scenario keys, and, where this host allows it, a real memory cgroup and a private /dev/shm."""

import os
import subprocess
from pathlib import Path

import pytest

from kvkb.reproductions import limits
from kvkb.reproductions.scenario import ScenarioError, parse_scenario

P = Path("host-oom-killer.yaml")

# two runs' kernel lines interleaved, as `dmesg` shows them when runs share a host
DMESG = """\
[  661.557320] Memory cgroup stats for /kvkb-repro-aaa:
[  661.557587] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/kvkb-repro-aaa,task_memcg=/kvkb-repro-aaa,task=VLLM::Worker,pid=22251,uid=0
[  661.557601] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/kvkb-repro-bbb,task_memcg=/kvkb-repro-bbb,task=python3,pid=30000,uid=0
[  661.557653] Memory cgroup out of memory: Killed process 22251 (VLLM::Worker) total-vm:8116456kB, anon-rss:2314280kB, file-rss:258324kB, shmem-rss:0kB, UID:0 pgtables:5868kB oom_score_adj:0
[  661.557700] Memory cgroup out of memory: Killed process 30000 (python3) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0
"""


@pytest.mark.parametrize("value, expected", [
    ("64M", 64 << 20), ("3G", 3 << 30), ("512MiB", 512 << 20), ("1.5G", 3 << 29), (4096, 4096), ("4096", 4096),
])
def test_parse_size(value, expected):
    assert limits.parse_size(value) == expected


@pytest.mark.parametrize("value", ["", "lots", "-1G", "0", 0, True, "3X"])
def test_parse_size_rejects(value):
    with pytest.raises(ValueError):
        limits.parse_size(value)


def test_kernel_lines_keep_only_this_cgroup_and_its_victims():
    lines = limits.cgroup_kernel_lines(DMESG, "kvkb-repro-aaa")
    assert len(lines) == 2
    assert "task_memcg=/kvkb-repro-aaa" in lines[0]
    assert "Killed process 22251 (VLLM::Worker)" in lines[1]
    assert not any("30000" in line for line in lines)
    assert limits.cgroup_kernel_lines(DMESG, "kvkb-repro-zzz") == []


def test_scenario_keys_parse_to_bytes():
    s = parse_scenario({"entry": "host-oom-killer", "backends": {"cpu": {"memory_limit": "4G", "shm_size": "64M"}}}, P)
    m = s.machine("cpu")
    assert (m.memory_limit, m.shm_size) == (4 << 30, 64 << 20)
    assert m.describe()["memory_limit_bytes"] == 4 << 30 and m.describe()["shm_size_bytes"] == 64 << 20


def test_scenario_rejects_a_bad_size():
    with pytest.raises(ScenarioError, match="memory_limit"):
        parse_scenario({"entry": "host-oom-killer", "backends": {"cpu": {"memory_limit": "lots"}}}, P)


def _root_with_unshare() -> bool:
    return os.geteuid() == 0 and subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _root_with_unshare(), reason="needs root and unshare -m")
def test_private_shm_has_the_declared_size():
    out = subprocess.run(limits.shm_prefix(8 << 20) + ["df", "-B1", "--output=size", "/dev/shm"],
                         capture_output=True, text=True, check=True).stdout
    assert int(out.split()[-1]) == 8 << 20


def _cgroup_available() -> bool:
    try:
        with limits.MemoryCgroup(64 << 20):
            return True
    except limits.LimitUnavailable:
        return False


@pytest.mark.skipif(not _cgroup_available(), reason="needs root and a cgroup memory controller")
def test_memory_cgroup_oom_kills_above_its_limit():
    hog = "b = []\nwhile True:\n    b.append(bytearray(8 << 20))"
    with limits.MemoryCgroup(64 << 20) as cg:
        proc = subprocess.run(cg.prefix() + ["python3", "-c", hog], capture_output=True, timeout=60)
        assert proc.returncode == -9 or proc.returncode == 137
        assert cg.oom_kills() == 1
        assert any("Killed process" in line for line in cg.kernel_lines())
    assert not cg.path.exists()


def test_kernel_lines_go_under_the_runs_output(tmp_path):
    from kvkb.reproductions.proctree import RunResult
    from kvkb.reproductions.runner import _append_kernel_lines

    log = tmp_path / "broken.log"
    log.write_text("engine output\n")
    result = RunResult(1, "engine output\n", 1.0)
    lines = limits.cgroup_kernel_lines(DMESG, "kvkb-repro-aaa")
    _append_kernel_lines(result, log, lines)
    text = log.read_text()
    assert text.startswith("engine output\n") and limits.KERNEL_MARK in text and lines[1] in text
    assert result.output == text
    _append_kernel_lines(result, log, [])  # nothing from the kernel: the log stays as the run left it
    assert log.read_text() == text
