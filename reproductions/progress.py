"""Progress lines while reproductions run, and the summary table at the end.

On a terminal the current run's line counts up its elapsed seconds in place; elsewhere (CI logs)
each run prints one plain line when it finishes, so logs stay readable.
"""

from __future__ import annotations

import sys
from typing import TextIO

MARKS = {True: "PASS", False: "FAIL", None: "SKIP"}


class Progress:
    def __init__(self, total: int, stream: TextIO | None = None, tty: bool | None = None):
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self._label = ""

    def start(self, label: str):
        """Begin a run; returns the tick(elapsed_s) callback for the process runner."""
        self._label = f"[{self.done + 1}/{self.total}] {label}"
        if self.tty:
            self.stream.write(f"\r\033[K{self._label} ... 0s")
            self.stream.flush()

        def tick(elapsed: float) -> None:
            if self.tty:
                self.stream.write(f"\r\033[K{self._label} ... {elapsed:.0f}s")
                self.stream.flush()

        return tick

    def finish(self, passed: bool | None, seconds: float, reason: str = "") -> None:
        self.done += 1
        line = f"{self._label}  {MARKS[passed]}  {seconds:.1f}s" + (f"  ({reason})" if reason else "")
        self.stream.write(("\r\033[K" if self.tty else "") + line + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        self.stream.write(("\r\033[K" if self.tty else "") + text + "\n")
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
