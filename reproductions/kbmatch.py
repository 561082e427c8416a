"""Ask kbmatch which entry a captured output belongs to (the same command users run on a paste)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# Run the matcher as a separate process, exactly like `kbmatch --json FILE` (no shared state
# with the runner, and the kb/ folder it reads is the one KVKB_KB_DIR or the checkout names).
_CMD = "import sys; from kvkb.matcher.cli import main; sys.exit(main())"


def top_match(log_path: Path, kb_dir: Path | None = None) -> tuple[str | None, str | None]:
    """(root_cause id or None, error text or None) for the log at log_path."""
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
        return None, "kbmatch --json printed something that is not JSON"
    root = report.get("root_cause") if isinstance(report, dict) else None
    return (root if isinstance(root, str) else None), None
