"""Progress lines while reproductions run, and the summary table at the end.

Each run prints one line when it finishes, numbered in finishing order ("[3/50] id fixed  PASS  37.2s").
On a terminal, a last line counts up the elapsed seconds of the runs under way, in place; elsewhere
(CI logs) nothing else is printed, so logs stay readable. Runs may finish from several threads.
"""

from __future__ import annotations

import shutil
import sys
import threading
from typing import TextIO

MARKS = {True: "PASS", False: "FAIL", None: "SKIP"}


class Task:
    """One run under way: call it with the elapsed seconds (the process runner's tick), then finish()."""

    def __init__(self, progress: "Progress", label: str):
        self.progress = progress
        self.label = label
        self.elapsed = 0.0

    def __call__(self, elapsed: float) -> None:
        self.elapsed = elapsed
        self.progress._redraw()

    def finish(self, passed: bool | None, seconds: float, reason: str = "") -> None:
        self.progress._finish(self, passed, seconds, reason)


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None, tty: bool | None = None):
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._running: list[Task] = []
        self._lock = threading.Lock()

    def start(self, label: str) -> Task:
        task = Task(self, label)
        with self._lock:
            self._running.append(task)
            self._status()
        return task

    def _status(self) -> None:
        """The in-place line of runs under way (terminal only; the lock is held)."""
        if not self.tty:
            return
        now = ", ".join(f"{t.label} {t.elapsed:.0f}s" for t in self._running)
        line = f"[{self.done}/{self.total} done] {now}" if now else ""
        # a line wider than the terminal wraps, and \r would then redraw only its last row
        width = shutil.get_terminal_size((120, 24)).columns - 1
        self.stream.write(f"\r\033[K{line[:width]}")
        self.stream.flush()

    def _redraw(self) -> None:
        with self._lock:
            self._status()

    def _finish(self, task: Task, passed: bool | None, seconds: float, reason: str) -> None:
        with self._lock:
            if task in self._running:
                self._running.remove(task)
            self.done += 1
            line = f"[{self.done}/{self.total}] {task.label}  {MARKS[passed]}  {seconds:.1f}s" + (f"  ({reason})" if reason else "")
            self.stream.write(("\r\033[K" if self.tty else "") + line + "\n")
            self._status()
            self.stream.flush()

    def note(self, text: str) -> None:
        with self._lock:
            self.stream.write(("\r\033[K" if self.tty else "") + text + "\n")
            self._status()
            self.stream.flush()


def summary_table(entries: dict[str, dict]) -> str:
    """entry | broken | fixed | ineffective | seconds, one row per entry, plus a total."""
    rows = [("entry", "status", "broken", "fixed", "ineffective", "seconds")]
    total = 0.0
    for entry_id, result in entries.items():
        status = result.get("status", "?")
        if status == "skip":
            rows.append((entry_id, "skip", "-", "-", "-", "0.0"))
            continue
        broken = _mark(result.get("broken"))
        fixed = _mark(result.get("fixed"))
        fixes = [f for f in result.get("fixes", {}).values() if f.get("kind") == "ineffective"]
        ineffective = f"{sum(1 for f in fixes if f.get('passed'))}/{len(fixes)}" if fixes else "-"
        seconds = float(result.get("duration_s", 0.0))
        total += seconds
        rows.append((entry_id, status, broken, fixed, ineffective, f"{seconds:.1f}"))
    rows.append(("total", "", "", "", "", f"{total:.1f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _mark(run: dict | None) -> str:
    if not run:
        return "-"
    return MARKS[bool(run.get("passed"))]
