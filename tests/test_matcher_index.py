"""kvkb.matcher.index: built once, reused, rebuilt when kb/ changes, never stale, bad entries fail clearly."""

import os
import subprocess
import sys

import pytest

from kvkb.matcher import index
from matcher_helpers import cli_env, sane_kb_copy


@pytest.fixture()
def kb(tmp_path, monkeypatch):
    path = sane_kb_copy(tmp_path / "kb")
    monkeypatch.setenv("KVKB_KB_DIR", str(path))
    return path


def test_index_is_built_then_reused(kb):
    first = index.load()
    path, explain = index.index_paths(kb)
    assert path == kb / ".index.marshal" and path.exists() and explain.exists()
    stamp = path.stat().st_mtime_ns
    assert index.load()["key"] == first["key"]
    assert path.stat().st_mtime_ns == stamp  # not rewritten
    assert {e["id"] for e in first["entries"]} == {p.stem for p in kb.glob("*.yaml")}


def test_editing_an_entry_rebuilds(kb):
    before = index.load()
    victim = sorted(kb.glob("*.yaml"))[0]
    text = victim.read_text()
    victim.write_text(text.replace("title:", "title: ", 1) if "title: " not in text else text + "\n")
    os.utime(victim, ns=(victim.stat().st_atime_ns, victim.stat().st_mtime_ns + 10_000_000))
    after = index.load()
    assert after["key"] != before["key"]


def test_removing_an_entry_removes_it_from_the_index(kb):
    files = sorted(kb.glob("*.yaml"))
    gone = files[-1].stem
    data = index.load()
    assert gone in {e["id"] for e in data["entries"]}
    files[-1].unlink()
    try:
        after = index.load()
    except Exception:  # another entry may point at it in 'related': that is a clear EntryError, fine
        return
    assert gone not in {e["id"] for e in after["entries"]}


def test_bad_entry_fails_with_file_line_code(kb):
    (kb / "broken-entry.yaml").write_text("id: broken-entry\ntitle: [unclosed\n")
    env = cli_env(kb)
    run = subprocess.run([sys.executable, "-m", "kvkb.cli.main", "index"], env=env, capture_output=True, text=True)
    assert run.returncode == 2
    assert "broken-entry.yaml:" in run.stderr and "KB001" in run.stderr and "Traceback" not in run.stderr
    run = subprocess.run([sys.executable, "-m", "kvkb.matcher.cli", "--json", "-"], input="x", env=env, capture_output=True, text=True)
    assert run.returncode == 2 and "KB001" in run.stderr and "Traceback" not in run.stderr


def test_unwritable_kb_uses_the_user_cache(kb, tmp_path, monkeypatch):
    if os.geteuid() == 0:
        # root ignores permissions: simulate the check instead
        monkeypatch.setattr(index.os, "access", lambda p, mode: False)
    else:
        kb.chmod(0o555)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data = index.load()
    path, _ = index.index_paths(kb)
    assert path.parent == tmp_path / "cache" / "kvkb" and path.exists()
    assert index.read_index(path)["key"] == data["key"]
    kb.chmod(0o755)


def test_kvkb_index_command(kb):
    run = subprocess.run([sys.executable, "-m", "kvkb.cli.main", "index"], env=cli_env(kb), capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "indexed" in run.stderr and (kb / ".index.marshal").exists()


@pytest.mark.parametrize("junk", [b"", b"not an index", b"KVKB-INDEX\n\xff\x00garbage", b"KVKB-INDEX\n"])
def test_a_corrupt_or_foreign_index_is_rebuilt(kb, junk):
    good = index.load()
    path, _ = index.index_paths(kb)
    path.write_bytes(junk)
    assert index.read_index(path) is None
    assert index.load()["key"] == good["key"] and index.read_index(path)["key"] == good["key"]


def test_the_key_follows_the_python_version_and_every_entry_file(kb):
    key = index.freshness_key(kb)
    assert key.split("|")[1] == f"{sys.version_info[0]}.{sys.version_info[1]}"  # marshal may change between versions
    assert all(p.name in key for p in kb.glob("*.yaml"))
