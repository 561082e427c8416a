"""Results file helpers and the progress/summary output of kvkb verify."""

import io
import json

from kvkb.reproductions import results
from kvkb.reproductions.progress import Progress, summary_table


def test_tail_keeps_the_last_lines():
    text = "\n".join(f"line {i}" for i in range(500)) + "\n"
    kept = results.tail(text, 150).splitlines()
    assert len(kept) == 150 and kept[-1] == "line 499" and kept[0] == "line 350"


def test_partial_run_merges_into_the_same_version_and_backend(tmp_path):
    path = tmp_path / "cpu.json"
    first = {"vllm_version": "0.32.0", "backend": "cpu", "device": "d", "date": "1", "entries": {"a": {"status": "pass"}, "b": {"status": "fail"}}}
    results.write(path, first)
    second = {"vllm_version": "0.32.0", "backend": "cpu", "device": "d", "date": "2", "entries": {"b": {"status": "pass"}}}
    data = results.write(path, second)
    assert data["entries"] == {"a": {"status": "pass"}, "b": {"status": "pass"}} and data["date"] == "2"
    assert json.loads(path.read_text()) == data


def test_a_new_vllm_version_starts_fresh(tmp_path):
    path = tmp_path / "cpu.json"
    results.write(path, {"vllm_version": "0.31.0", "backend": "cpu", "entries": {"a": {}}})
    data = results.write(path, {"vllm_version": "0.32.0", "backend": "cpu", "entries": {"b": {}}})
    assert list(data["entries"]) == ["b"]


def test_corrupt_results_file_is_replaced(tmp_path):
    path = tmp_path / "cpu.json"
    path.write_text("{not json")
    assert results.write(path, {"vllm_version": "0.32.0", "backend": "cpu", "entries": {}})["entries"] == {}


def test_utc_date_form():
    assert results.utc_now().endswith("Z") and "T" in results.utc_now()


def test_plain_progress_prints_one_line_per_run():
    stream = io.StringIO()
    p = Progress(2, stream=stream, tty=False)
    task = p.start("e broken")
    task(3.0)  # no output off a terminal
    task.finish(True, 3.2)
    p.start("e fixed").finish(False, 1.0, "exited 1")
    assert stream.getvalue().splitlines() == ["[1/2] e broken  PASS  3.2s", "[2/2] e fixed  FAIL  1.0s  (exited 1)"]


def test_concurrent_runs_are_numbered_as_they_finish():
    stream = io.StringIO()
    p = Progress(2, stream=stream, tty=False)
    a, b = p.start("a fixed"), p.start("b broken")
    b.finish(True, 1.0)
    a.finish(True, 2.0)
    assert stream.getvalue().splitlines() == ["[1/2] b broken  PASS  1.0s", "[2/2] a fixed  PASS  2.0s"]


def test_tty_progress_counts_up_the_runs_under_way_in_place(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    stream = io.StringIO()
    p = Progress(2, stream=stream, tty=True)
    a, b = p.start("e broken"), p.start("f fixed")
    a(12.4)
    assert stream.getvalue().endswith("\r\033[K[0/2 done] e broken 12s, f fixed 0s")
    a.finish(True, 12.5)
    assert stream.getvalue().endswith("\r\033[K[1/2] e broken  PASS  12.5s\n\r\033[K[1/2 done] f fixed 0s")


def test_tty_status_line_fits_the_terminal(monkeypatch):
    monkeypatch.setenv("COLUMNS", "30")
    stream = io.StringIO()
    p = Progress(2, stream=stream, tty=True)
    p.start("a-very-long-entry-id fixed")
    p.start("another-long-entry-id broken")(5)
    last = stream.getvalue().rsplit("\r\033[K", 1)[1]
    assert last == "[0/2 done] a-very-long-entry-"  # 29 columns: no wrap for \r to trip over


def test_summary_table():
    table = summary_table({
        "a": {"status": "pass", "duration_s": 10.0, "broken": {"passed": True}, "fixed": {"passed": True},
              "fixes": {"x": {"kind": "fix", "passed": True}, "y": {"kind": "ineffective", "passed": True},
                        "z": {"kind": "ineffective", "passed": False}}},
        "b": {"status": "skip", "reason": "GPU runner only"},
    })
    lines = table.splitlines()
    assert lines[0].split() == ["entry", "status", "broken", "fixed", "ineffective", "seconds"]
    assert lines[2].split() == ["a", "pass", "PASS", "PASS", "1/2", "10.0"]
    assert lines[3].split()[:2] == ["b", "skip"]
    assert lines[-1].split() == ["total", "10.0"]
