"""`kvkb atlas find` and `kvkb atlas add` (on the synthetic releases: no download)."""

import pytest

import atlas_world
from atlas_world import build
from kvkb.cli.main import main


@pytest.fixture
def atlas_file(tmp_path):
    path = tmp_path / "atlas.json.gz"
    build(path)
    return path


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_find_text_prints_releases_where_how_and_the_range(atlas_file, capsys):
    rc, out, _ = run(capsys, "atlas", "--atlas", str(atlas_file), "find", "No available memory for the cache blocks")
    assert rc == 0
    assert "raised as ValueError in raise_if_cache_size_invalid" in out
    assert "first: 0.1.0 vllm/worker/worker.py:9" in out and 'versions: ">=0.1.0,<=0.1.0"' in out
    # a whole line with values: explained whole, placeholders and all
    rc, out, _ = run(capsys, "atlas", "--atlas", str(atlas_file), "find", "WARNING 01-01 00:00:00 [worker.py:12] Only 7 GPU blocks: expect preemption")
    assert rc == 0 and 'printed whole by 0.1.0–0.2.0\n  versions: ">=0.1.0"' in out


def test_find_flag_env_arg(atlas_file, capsys):
    rc, out, _ = run(capsys, "atlas", "--atlas", str(atlas_file), "find", "--flag", "swap-space")
    assert rc == 0 and "flag --swap-space: 0.1.0" in out and 'versions: ">=0.1.0,<=0.1.0"' in out
    rc, out, _ = run(capsys, "atlas", "--atlas", str(atlas_file), "find", "--env", "VLLM_CPU_KVCACHE_SPACE")
    assert rc == 0 and "default '4': 0.1.0" in out and "default '0': 0.2.0" in out
    rc, out, _ = run(capsys, "atlas", "--atlas", str(atlas_file), "find", "--arg", "kv_cache_memory_bytes")
    assert rc == 0 and "through **kwargs by 0.2.0" in out


def test_find_nothing_and_bad_input_exit_cleanly(atlas_file, tmp_path, capsys):
    rc, _, err = run(capsys, "atlas", "--atlas", str(atlas_file), "find", "--flag", "no-such-flag")
    assert rc == 1 and "no vLLM release 0.1.0–0.2.0 has" in err
    rc, _, err = run(capsys, "atlas", "--atlas", str(tmp_path / "none.json.gz"), "find", "x")
    assert rc == 2 and "no atlas at" in err
    rc, _, err = run(capsys, "atlas", "--atlas", str(atlas_file), "find")
    assert rc == 2 and "give a TEXT" in err
    rc, _, err = run(capsys, "atlas", "--atlas", str(atlas_file), "add", "not-a-version")
    assert rc == 2 and "is not a version" in err
    rc, _, err = run(capsys, "atlas", "--atlas", str(atlas_file), "add", "0.0.1")
    assert rc == 2 and "older than 0.2.0" in err


def test_add_prints_the_drift_report_and_writes_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("kvkb.atlas.wheels.release_sources", atlas_world.fetch)
    path = tmp_path / "atlas.json.gz"
    build(path, versions=("0.1.0",))
    report = tmp_path / "drift.md"
    rc, out, err = run(capsys, "atlas", "--atlas", str(path), "add", "0.2.0", "--report", str(report))
    assert rc == 0, err
    assert out.startswith("# vLLM 0.2.0: drift against 0.1.0") and "- flag --swap-space" in out
    assert report.read_text() == out
    assert "added 1 release(s)" in err and "the atlas holds 2 (0.1.0–0.2.0)" in err


def test_cut_then_add_rehearses_a_release_and_rebuilds_the_same_atlas(atlas_file, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("kvkb.atlas.wheels.release_sources", atlas_world.fetch)
    cut = tmp_path / "cut.json.gz"
    rc, _, err = run(capsys, "atlas", "--atlas", str(atlas_file), "cut", "0.1.0", "--out", str(cut))
    assert rc == 0 and "1 releases (0.1.0–0.1.0)" in err
    rc, out, err = run(capsys, "atlas", "--atlas", str(cut), "add", "0.2.0")
    assert rc == 0, err
    assert out.startswith("# vLLM 0.2.0: drift against 0.1.0") and "- flag --swap-space" in out
    assert cut.read_bytes() == atlas_file.read_bytes()
    rc, _, err = run(capsys, "atlas", "--atlas", str(atlas_file), "cut", "0.1.0", "--out", str(atlas_file))
    assert rc == 2 and "is the atlas being cut" in err
    rc, _, err = run(capsys, "atlas", "--atlas", str(atlas_file), "cut", "9.9.9", "--out", str(tmp_path / "x.gz"))
    assert rc == 2 and "9.9.9 is not in the atlas" in err


def test_drift_prints_a_held_release_report_again_offline(atlas_file, tmp_path, capsys):
    rc, out, _ = run(capsys, "atlas", "--atlas", str(atlas_file), "drift")
    assert rc == 0 and out.startswith("# vLLM 0.2.0: drift against 0.1.0") and "- flag --swap-space" in out
    report = tmp_path / "r.md"
    rc, out2, _ = run(capsys, "atlas", "--atlas", str(atlas_file), "drift", "0.2.0", "--report", str(report))
    assert rc == 0 and out2 == out == report.read_text()
    rc, _, err = run(capsys, "atlas", "--atlas", str(atlas_file), "drift", "0.3.0")
    assert rc == 2 and "0.3.0 is not in the atlas" in err
