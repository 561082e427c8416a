"""Ask kbmatch which entry a captured output belongs to (the same command users run on a paste)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

# Run the matcher as a separate process, exactly like `kbmatch --json FILE` (no shared state
# with the runner, and the kb/ folder it reads is the one KVKB_KB_DIR or the checkout names).
_CMD = "import sys; from kvkb.matcher.cli import main; sys.exit(main())"


def top_match(log_path: Path, kb_dir: Path | None = None, attempts: int = 2) -> tuple[str | None, str | None]:
    """(root_cause id or None, error text or None) for the log at log_path.

    A failed call is tried once more: kbmatch rebuilds its index when kb/ changes, and a kb/ being
    edited while a long verify runs must not fail a reproduction that did reproduce."""
    for attempt in range(attempts):
        root, error = _call(log_path, kb_dir)
        if error is None:
            return root, None
        if attempt + 1 < attempts:
            time.sleep(2)
    return None, error


def _call(log_path: Path, kb_dir: Path | None) -> tuple[str | None, str | None]:
    env = dict(os.environ)
    if kb_dir is not None:
        env["KVKB_KB_DIR"] = str(kb_dir)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CMD, "--json", str(log_path)],
            capture_output=True, text=True, timeout=120, env=env,
        )
    except subprocess.TimeoutExpired:
        return None, "kbmatch took longer than 120 s"
    if proc.returncode not in (0, 1):
        detail = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        return None, f"kbmatch exited {proc.returncode}: {detail}"
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        said = (proc.stdout.strip() or proc.stderr.strip() or "nothing")[:200]
        return None, f"kbmatch --json printed something that is not JSON: {said!r}"
    root = report.get("root_cause") if isinstance(report, dict) else None
    return (root if isinstance(root, str) else None), None
