"""`python -m benchmarks` runs and prints its figures and verdicts (the figures themselves are not
asserted: tests assert behaviour, benchmarks measure time on whatever machine runs them)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench(tmp_path, *args: str) -> str:
    env = dict(os.environ, KVKB_BENCH_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def test_cold_start_is_judged_against_the_floor_measured_beside_it(tmp_path):
    out = _bench(tmp_path, "--only", "cold", "--runs", "5")
    assert "baseline: python -c pass: median" in out
    assert "floor: python -c 'import rapidfuzz.fuzz, re, json': median" in out
    assert "cold start, 100-line paste, full KB" in out
    ratio = re.search(r"cold start / floor: (\d+\.\d+)x wall", out)
    assert ratio and float(ratio.group(1)) > 0.5, out  # a fresh process cannot beat its own interpreter by half
    goals = out.strip().splitlines()[-1]
    assert re.fullmatch(r"goals: cold_ratio \d+\.\d+ <= 1\.75: (met|MISSED)", goals), goals
    # inputs go to the bench dir, never the repo, and the run's own folder is gone afterwards
    assert not (ROOT / "kb" / "paste-100.txt").exists() and not list(tmp_path.glob("run-*"))


def test_many_records_paste_is_timed_on_both_rapidfuzz_implementations_and_checked(tmp_path):
    out = _bench(tmp_path, "--only", "many", "--quick")
    assert re.search(r"\d+ KB paste, \d{2,} distinct error records: median", out), out
    assert "pure-Python rapidfuzz (RAPIDFUZZ_IMPLEMENTATION=python): median" in out
    assert "planted error found: " in out
    goals = out.strip().splitlines()[-1]
    assert goals.startswith("goals: many_s ") and "< 1.0: " in goals and "many_found " in goals


@pytest.mark.skipif(not (ROOT.parent / "shared" / "fixtures").is_dir(), reason="shared fixtures not found")
def test_spread_times_every_fixture_and_the_adversarial_pastes(tmp_path):
    out = _bench(tmp_path, "--only", "spread", "--quick")
    m = re.search(r"(\d+) pastes \((\d+) adversarial\): median", out)
    assert m and int(m.group(1)) >= 54 + 6 and int(m.group(2)) == 6, out
    assert re.search(r"max / median: \d+\.\d+x \(goal <= 20x\)", out)
    assert re.fullmatch(r"goals: spread_ratio \d+\.\d+ <= 20: (met|MISSED)", out.strip().splitlines()[-1])


def test_inputs_are_what_the_figures_say(tmp_path):
    """The generated inputs hold what the verdicts rely on: distinct records and one planted error;
    one buried error in a server log of the requested size."""
    sys.path.insert(0, str(ROOT))
    from benchmarks import inputs

    path, n = inputs.many_records(tmp_path, 150_000)
    text = path.read_text()
    assert 140_000 <= len(text) <= 160_000 and n >= 300
    last_lines = {ln for ln in text.splitlines() if re.match(r"^[\w.]+(Error|Exception): ", ln)}
    assert len(last_lines) >= 0.9 * text.count("Traceback (most recent call last):")  # distinct, not one repeated
    assert text.count(inputs.PLANTED) == 1
    log = inputs.big_log(tmp_path, 4 << 20)
    data = log.read_bytes()
    assert len(data) >= 4 << 20 and data.count(inputs.error_block()) == 1
