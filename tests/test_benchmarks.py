"""`python -m benchmarks` runs and prints its figures (the figures themselves are not asserted:
tests assert behaviour, benchmarks measure time)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_cold_start_figure_prints_medians_the_floor_and_the_goal(tmp_path):
    env = dict(os.environ, KVKB_BENCH_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-m", "benchmarks", "--only", "cold", "--runs", "5"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout
    assert "baseline: python -c pass: median" in out
    assert "cold start, 100-line paste, full KB" in out and "kbmatch's own share" in out
    goals = out.strip().splitlines()[-1]
    assert goals.startswith("goals: cold_ms <= / >= 60: ") and "cold_share_ms <= / >= 25: " in goals and "throughput" not in goals
    assert not (ROOT / "kb" / "paste-100.txt").exists() and (tmp_path / "paste-100.txt").exists()
