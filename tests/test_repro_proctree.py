"""Process-tree control: every run's session is killed, grandchildren included, and checked."""

import os
import sys
import threading
import time

from kvkb.reproductions.proctree import kill_session, run_isolated, session_members

# The program starts a grandchild that would outlive it (like vLLM's EngineCore), then exits.
LEAVER = (
    "import subprocess, sys\n"
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
    "print('child', p.pid, flush=True)\n"
    "sys.exit(3)\n"
)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_grandchild_left_behind_is_killed(tmp_path):
    result = run_isolated([sys.executable, "-c", LEAVER], env=dict(os.environ), cwd=tmp_path,
                          timeout_s=30, log_path=tmp_path / "out.log")
    assert result.exit_code == 3
    assert result.leftovers == []
    child = int(result.output.split()[1])
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child)


def test_timeout_kills_and_reports(tmp_path):
    ticks = []
    result = run_isolated([sys.executable, "-c", "import time; print('start', flush=True); time.sleep(60)"],
                          env=dict(os.environ), cwd=tmp_path, timeout_s=1.5, log_path=tmp_path / "o.log",
                          tick=ticks.append)
    assert result.timed_out and result.exit_code is None
    assert "start" in result.output
    assert ticks and result.duration_s < 20


def test_stop_event_kills_the_tree_and_reports_an_interruption(tmp_path):
    """Another thread's Ctrl-C (verify runs several programs at once) stops this run too."""
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    start = time.monotonic()
    result = run_isolated([sys.executable, "-c", LEAVER.replace("sys.exit(3)", "import time; time.sleep(60)")],
                          env=dict(os.environ), cwd=tmp_path, timeout_s=60, log_path=tmp_path / "o.log", stop=stop)
    assert result.interrupted and not result.timed_out and result.exit_code is None
    assert result.leftovers == [] and time.monotonic() - start < 15
    assert not _alive(int(result.output.split()[1]))


def test_output_is_captured_with_stderr(tmp_path):
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(0)"
    result = run_isolated([sys.executable, "-c", code], env=dict(os.environ), cwd=tmp_path, timeout_s=30,
                          log_path=tmp_path / "o.log")
    assert result.exit_code == 0 and "out" in result.output and "err" in result.output


def test_kill_session_of_nothing_is_quiet():
    assert kill_session(2**22 + 12345, grace_s=0.1) == []
    assert session_members(2**22 + 12345) == []
