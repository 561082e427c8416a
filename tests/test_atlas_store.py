"""kvkb.atlas.store: each fact once with its runs of releases; ranges written as PEP 440; the committed atlas."""

import time

import pytest
from packaging.specifiers import SpecifierSet

from atlas_world import build
from kvkb.atlas.store import ATLAS_PATH, Atlas, AtlasError, spans, versions_string

RELEASES = ["0.4.0", "0.4.0.post1", "0.4.1", "0.5.0", "0.6.0"]


def test_versions_string_is_exact_pep440():
    assert versions_string([0, 1, 2], RELEASES) == ">=0.4.0,<=0.4.1"
    assert versions_string([3, 4], RELEASES) == ">=0.5.0"  # held by the newest: open-ended
    assert versions_string([1, 2, 4], RELEASES) == ">=0.4.0.post1,!=0.5.0"
    for idx in ([0, 1, 2], [1, 2, 4], [2]):
        spec = SpecifierSet(versions_string(idx, RELEASES))
        assert [i for i, v in enumerate(RELEASES) if spec.contains(v)] == idx
    assert spans([0, 1, 2, 4], RELEASES) == "0.4.0–0.4.1, 0.6.0"


def test_round_trip_runs_and_lines(tmp_path):
    atlas = build(tmp_path / "a.json.gz")
    again = Atlas.load(tmp_path / "a.json.gz")
    assert again.releases == ["0.1.0", "0.2.0"]
    warn = [it for it in again.strings() if it.text.startswith("Only")]
    assert len(warn) == 1 and warn[0].indexes == {0, 1} and warn[0].level == "WARNING"
    assert warn[0].line_at(0) == 12 and warn[0].line_at(1) == 14  # the line moved; both ends kept
    assert again.holders("flag", "--swap-space") == {0}
    assert atlas.dumps() == again.dumps()  # deterministic bytes


def test_releases_are_added_oldest_first(tmp_path):
    atlas = build(tmp_path / "a.json.gz", versions=("0.2.0",))
    with pytest.raises(AtlasError, match="older than 0.2.0"):
        atlas.add_release("0.1.0", [])
    with pytest.raises(AtlasError, match="already"):
        atlas.add_release("0.2.0", [])


def test_unreadable_atlas_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(AtlasError, match="not readable"):
        Atlas.load(bad)
    with pytest.raises(AtlasError, match="no atlas"):
        Atlas.load(tmp_path / "missing.json.gz")


def test_committed_atlas_is_small_complete_and_fast():
    assert ATLAS_PATH.stat().st_size < 10_000_000
    t0 = time.perf_counter()
    atlas = Atlas.load(ATLAS_PATH)
    assert time.perf_counter() - t0 < 2.0
    assert atlas.releases[0] == "0.4.0" and len(atlas.releases) >= 72
    # the one the factcheck quotes: --limit-mm-per-prompt exists from 0.5.5, not 0.5.0
    held = atlas.holders("flag", "--limit-mm-per-prompt")
    assert atlas.releases[min(held)] == "0.5.5"
