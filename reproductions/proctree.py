"""Run a command in its own process group and leave nothing behind.

vLLM's LLM() spawns an EngineCore process and worker processes. When the main program dies they
are not always reaped, and a leftover worker holding memory is exactly the kind of error this
knowledge base documents. So every run gets its own session (start_new_session), the whole
session is killed afterwards (SIGTERM, then SIGKILL), and /proc is checked for survivors.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


@dataclass
class RunResult:
    exit_code: int | None  # None when it timed out
    output: str
    duration_s: float
    timed_out: bool = False
    interrupted: bool = False  # stopped because the whole verify was (Ctrl-C, SIGTERM)
    leftovers: list[str] = field(default_factory=list)  # "pid cmd" still alive after the kill


def _stat_fields(pid: int) -> tuple[str, int] | None:
    """(state, session id) of a process, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name may hold spaces and parentheses: fields start after the last ')'
    rest = raw[raw.rfind(")") + 2 :].split()
    return rest[0], int(rest[3])


def session_members(sid: int) -> list[int]:
    """Live (non-zombie) processes in session `sid`."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if fields and fields[1] == sid and fields[0] not in ("Z", "X"):
            members.append(int(entry))
    return members


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def kill_session(sid: int, grace_s: float = 5.0) -> list[str]:
    """SIGTERM the process group, then SIGKILL; returns what is still alive afterwards."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 3.0)):
        try:
            os.killpg(sid, sig)
        except ProcessLookupError:
            pass
        # children that changed their process group but kept the session are killed one by one
        for pid in session_members(sid):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and session_members(sid):
            time.sleep(0.1)
        if not session_members(sid):
            return []
    return [f"{pid} {_cmdline(pid)[:120]}" for pid in session_members(sid)]


def run_isolated(
    cmd: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    timeout_s: float,
    log_path: Path,
    tick: Callable[[float], None] | None = None,
    stop: threading.Event | None = None,
) -> RunResult:
    """Run cmd with stdout+stderr to log_path; kill its whole session afterwards (also when `stop`
    is set: another thread was interrupted)."""
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        timed_out = interrupted = False
        try:
            while True:
                try:
                    proc.wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    elapsed = time.monotonic() - start
                    if tick:
                        tick(elapsed)
                    if elapsed > timeout_s:
                        timed_out = True
                        break
                    if stop is not None and stop.is_set():
                        interrupted = True
                        break
        finally:  # also on Ctrl-C: an interrupted verify must not leave an engine holding memory
            leftovers = kill_session(proc.pid)
            proc.wait()
    output = log_path.read_bytes().decode("utf-8", errors="replace")
    return RunResult(
        exit_code=None if timed_out or interrupted else proc.returncode,
        output=output,
        duration_s=round(time.monotonic() - start, 1),
        timed_out=timed_out,
        interrupted=interrupted,
        leftovers=leftovers,
    )
