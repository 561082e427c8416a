"""kvkb verify's scheduling: runs share the host N at a time, longest first, each vLLM worker on its
own cores; a machine with a ballast (it measures the host's free memory) runs alone."""

import threading
import time

import pytest

from kvkb.loader import load_kb
from kvkb.reproductions import runner
from kvkb.reproductions.judge import Verdict
from kvkb.reproductions.progress import Progress
from kvkb.reproductions.scenario import load_scenarios


def test_core_slices_are_disjoint_ranges():
    assert runner.core_slices(1, 2) == [None]  # one job: vLLM's own choice
    assert runner.core_slices(2, 2) == ["0", "1"]
    assert runner.core_slices(2, 16) == ["0-7", "8-15"]
    assert runner.core_slices(3, 2) == ["0", "1"]  # never more jobs than cores


def test_expected_seconds_from_a_results_file():
    results = {"entries": {
        "a": {"broken": {"duration_s": 10.0}, "fixed": {"duration_s": 30.0},
              "fixes": {"x": {"kind": "ineffective", "duration_s": 5.0}, "f": {"kind": "fix", "passed": True}}},
        "b": {"status": "skip"},
        "c": "garbage",
    }}
    assert runner.expected_seconds(results) == {("a", "broken"): 10.0, ("a", "fixed"): 30.0, ("a", "x"): 5.0}
    assert runner.expected_seconds(None) == {}


def _fake_runs(monkeypatch, seconds=0.3):
    """Replace the vLLM process by a sleep; returns the (entry, run, core, start, end) log."""
    log = []
    lock = threading.Lock()

    def run_one(entry, run, scenario, machine, cfg, task, cores=None, stop=None):
        start = time.monotonic()
        time.sleep(seconds)
        end = time.monotonic()
        with lock:
            log.append((entry.id, run.key, cores, start, end))
        record = {"exit_code": 0, "passed": True, "reason": "ok", "duration_s": round(end - start, 1), "output": ""}
        return record, Verdict(True, "ok")

    monkeypatch.setattr(runner, "run_one", run_one)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 2)
    return log


def _items(ids):
    kb, scenarios = load_kb(), load_scenarios()
    return [(kb.entries[i], scenarios[i]) for i in ids]


def _overlap(a, b) -> bool:
    return a[3] < b[4] and b[3] < a[4]


def test_two_at_a_time_each_on_its_own_core_longest_first(monkeypatch, tmp_path):
    log = _fake_runs(monkeypatch)
    items = _items(["max-model-len-exceeds-kv-cache", "prompt-exceeds-max-model-len"])
    cfg = runner.RunnerConfig(backend="cpu", python="python", workdir=tmp_path)
    expected = {("prompt-exceeds-max-model-len", "fixed"): 500.0}
    done = []
    out = runner.verify_many(items, cfg, Progress(100, tty=False), jobs=2, expected=expected,
                             on_entry=lambda i, r: done.append(i))
    assert set(out) == set(done) == {"max-model-len-exceeds-kv-cache", "prompt-exceeds-max-model-len"}
    assert all(r["status"] == "pass" for r in out.values())
    assert min(log, key=lambda t: t[3])[:2] == ("prompt-exceeds-max-model-len", "fixed")  # the longest first
    assert any(_overlap(a, b) for a in log for b in log if a is not b)
    for a in log:  # runs that overlap are bound to different cores
        for b in log:
            if a is not b and _overlap(a, b):
                assert {a[2], b[2]} == {"0", "1"}


def test_a_ballast_machine_runs_alone(monkeypatch, tmp_path):
    log = _fake_runs(monkeypatch)
    monkeypatch.setattr(runner, "_ballast_size", lambda machine, backend: 1 << 20)
    items = _items(["insufficient-free-memory-at-startup", "max-model-len-exceeds-kv-cache"])
    cfg = runner.RunnerConfig(backend="cpu", python="python", workdir=tmp_path)
    out = runner.verify_many(items, cfg, Progress(100, tty=False), jobs=2)
    assert list(out) == ["insufficient-free-memory-at-startup", "max-model-len-exceeds-kv-cache"]
    alone = [t for t in log if t[0] == "insufficient-free-memory-at-startup"]
    assert alone and all(t[2] is None for t in alone)  # vLLM's own core choice: the host is its own
    for a in alone:
        assert not any(_overlap(a, b) for b in log if b is not a)


def test_one_job_runs_one_after_another(monkeypatch, tmp_path):
    log = _fake_runs(monkeypatch, seconds=0.05)
    items = _items(["max-model-len-exceeds-kv-cache"])
    cfg = runner.RunnerConfig(backend="cpu", python="python", workdir=tmp_path)
    runner.verify_many(items, cfg, Progress(100, tty=False), jobs=1)
    assert len(log) == 3 and not any(_overlap(a, b) for a in log for b in log if a is not b)
    assert {t[2] for t in log} == {None}


def test_interrupt_stops_the_runs_under_way(monkeypatch, tmp_path):
    """Ctrl-C reaches the main thread only: it sets the stop event that every running program's
    wait loop checks (proctree kills the tree), and the interrupt is not swallowed."""
    seen = []

    def run_one(entry, run, scenario, machine, cfg, task, cores=None, stop=None):
        seen.append(stop)
        stop.wait(10)
        return {"duration_s": 0.0, "output": ""}, Verdict(False, "interrupted")

    def as_completed(futures):
        time.sleep(0.2)  # both runs are under way
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_one", run_one)
    monkeypatch.setattr(runner, "as_completed", as_completed)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 2)
    cfg = runner.RunnerConfig(backend="cpu", python="python", workdir=tmp_path)
    saved = []
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        runner.verify_many(_items(["max-model-len-exceeds-kv-cache"]), cfg, Progress(100, tty=False), jobs=2,
                           on_entry=lambda i, r: saved.append(i))
    assert time.monotonic() - start < 5
    assert len(seen) == 2 and all(s.is_set() for s in seen) and saved == []


def test_an_error_in_on_entry_stops_the_rest(monkeypatch, tmp_path):
    """verify raises from on_entry when the results file cannot be written: nothing more is started."""
    log = _fake_runs(monkeypatch, seconds=0.05)
    items = _items(["max-model-len-exceeds-kv-cache", "prompt-exceeds-max-model-len"])
    cfg = runner.RunnerConfig(backend="cpu", python="python", workdir=tmp_path)

    def fail(entry_id, result):
        raise OSError("disk full")

    with pytest.raises(OSError):
        runner.verify_many(items, cfg, Progress(100, tty=False), jobs=1, on_entry=fail)
    assert len(log) < 6, log  # the second entry's runs were cancelled
