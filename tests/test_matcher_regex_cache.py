"""matcher/regex_cache.py: a stored regex program behaves as re.compile's, and any doubt about the
file or a program falls back to re.compile."""

import marshal
import re
from pathlib import Path

import pytest

from kvkb.matcher import regex_cache

CORPUS = Path(__file__).parent / "corpus" / "pastes"


@pytest.fixture(autouse=True)
def _keep_declared(monkeypatch):
    """A test's own patterns must not reach the cache file that this process may write at exit."""
    monkeypatch.setattr(regex_cache, "_declared", dict(regex_cache._declared))


def _declared() -> list:
    regex_cache._declare_all()
    return list(regex_cache._declared)


def _sample_lines() -> list:
    """Real log lines (str) to run every pattern over: a slice of the corpus, ANSI and all."""
    lines = []
    for path in sorted(CORPUS.glob("*.txt"))[::12]:
        lines.extend(path.read_text(encoding="utf-8", errors="replace").splitlines()[:60])
    return lines


def _results(rx, lines) -> list:
    out = []
    for line in lines:
        text = line if isinstance(rx.pattern, str) else line.encode("utf-8", "replace")
        m = rx.search(text)
        out.append(None if m is None else (m.span(), m.groups(), m.groupdict()))
    return out


def test_the_matcher_declares_its_patterns():
    keys = _declared()
    assert len(keys) > 100
    # the tables read in loops are declared too, not compiled anew by re's own cache each run
    assert any("Free memory on device" in str(p) for p, _ in keys)


def test_a_stored_program_behaves_as_re_compile():
    lines = _sample_lines()
    assert len(lines) > 1000
    for pattern, flags in _declared():
        ref = re.compile(pattern, flags)
        got = regex_cache._sre.compile(pattern, *regex_cache._program(pattern, flags))
        assert (got.pattern, got.flags, got.groups, got.groupindex) == (ref.pattern, ref.flags, ref.groups, ref.groupindex)
        assert _results(got, lines) == _results(ref, lines), pattern


def test_programs_survive_marshal(tmp_path):
    keys = _declared()[:20]
    path = tmp_path / "regex.marshal"
    path.write_bytes(marshal.dumps((regex_cache._HEADER, {k: regex_cache._program(*k) for k in keys})))
    assert set(regex_cache._read(path)) == set(keys)


@pytest.mark.parametrize("content", [
    b"",
    b"not marshal at all",
    marshal.dumps(((0, "another python", 1, 4), {("x", 0): (32, [1, 2], 0, {}, (None,))})),
    marshal.dumps(["a list, not a header and programs"]),
])
def test_a_file_from_elsewhere_is_ignored(tmp_path, content):
    path = tmp_path / "regex.marshal"
    path.write_bytes(content)
    assert regex_cache._read(path) == {}


def test_a_missing_file_is_no_cache(tmp_path):
    assert regex_cache._read(tmp_path / "absent.marshal") == {}


def test_a_program_the_engine_rejects_falls_back(monkeypatch):
    pattern = r"kvkb-test-(?P<n>\d+) blocks"
    monkeypatch.setitem(regex_cache._programs, (pattern, 0), (32, [999, 999, 999], 1, {"n": 1}, (None, "n")))
    monkeypatch.setattr(regex_cache, "_missed", True)  # no save at exit from a test
    rx = regex_cache.compile(pattern)
    assert rx.search("kvkb-test-12 blocks").group("n") == "12"


def test_a_stored_program_is_used(monkeypatch):
    pattern = r"kvkb-stored (\w+)"
    monkeypatch.setitem(regex_cache._programs, (pattern, 0), regex_cache._program(pattern, 0))

    def refuse(*args, **kwargs):
        raise AssertionError("compiled afresh although a program was stored")

    monkeypatch.setattr(regex_cache.re, "compile", refuse)
    assert regex_cache.compile(pattern).search("a kvkb-stored word").group(1) == "word"


def test_save_writes_every_declared_pattern(tmp_path, monkeypatch):
    keys = _declared()
    monkeypatch.setattr(regex_cache, "_programs", {})
    path = tmp_path / "sub" / "regex.marshal"
    assert regex_cache.save(str(path)) == len(keys)
    assert set(regex_cache._read(path)) == set(keys)
    assert not list(path.parent.glob("*.tmp"))


def test_no_file_is_written_with_bytecode_writing_off(monkeypatch, tmp_path):
    registered = []
    monkeypatch.setattr(regex_cache, "_missed", False)
    monkeypatch.setattr(regex_cache, "_PATH", str(tmp_path / "regex.marshal"))
    monkeypatch.setattr(regex_cache.sys, "dont_write_bytecode", True)
    monkeypatch.setattr("atexit.register", registered.append)
    regex_cache.compile(r"kvkb-unseen-\d+-a")
    assert registered == []
    monkeypatch.setattr(regex_cache, "_missed", False)
    monkeypatch.setattr(regex_cache.sys, "dont_write_bytecode", False)
    regex_cache.compile(r"kvkb-unseen-\d+-b")
    assert registered == [regex_cache._save_quietly]
