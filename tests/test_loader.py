"""kvkb.loader: load_entry never raises on bad content; load_kb / load_valid_kb / kb_dir behave."""

import shutil
from pathlib import Path

import pytest

from kvkb.codes import EntryError
from kvkb.loader import REPO_ROOT, dotted, kb_dir, load_entry, load_kb
from kvkb.validate import load_valid_kb

FIXTURES = Path(__file__).parent / "data" / "broken-entries"
BASELINE = FIXTURES / "ok-baseline.yaml"


def _copy(tmp_path, name="ok-baseline", text=None):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text if text is not None else BASELINE.read_text().replace("id: ok-baseline", f"id: {name}"))
    return path


def test_kb_dir_defaults_to_repo_kb_and_env_overrides(monkeypatch, tmp_path):
    monkeypatch.delenv("KVKB_KB_DIR", raising=False)
    assert kb_dir() == REPO_ROOT / "kb"
    monkeypatch.setenv("KVKB_KB_DIR", str(tmp_path))
    assert kb_dir() == tmp_path


def test_dotted_paths():
    assert dotted(("causes", 0, "fixes", 1, "cli")) == "causes[0].fixes[1].cli"
    assert dotted(()) == ""


def test_load_entry_returns_entry_and_positions(tmp_path):
    path = _copy(tmp_path)
    entry, problems, located = load_entry(path)
    assert entry is not None and problems == []
    cli_line = path.read_text().splitlines().index('        cli: "vllm serve MODEL --max-model-len {max_model_len_fit}"') + 1
    assert located.where(("causes", 0, "fixes", 0, "cli")) == (cli_line, 9)


@pytest.mark.parametrize(
    "content, code",
    [
        (b"", "KB002"),
        (b"- a\n- b\n", "KB002"),
        (b"just a string\n", "KB002"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "KB003"),
        (b"id: ok\x00\n", "KB003"),
        (b"id: caf\xe9\n", "KB003"),
        (b"a: [1, 2\n", "KB001"),
        (b"a: &x [*x]\n", "KB012"),
    ],
)
def test_bad_content_becomes_problems_not_exceptions(tmp_path, content, code):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    entry, problems, _ = load_entry(path)
    assert entry is None
    assert code in {p.code for p in problems}


def test_a_folder_named_like_an_entry_is_unreadable_not_a_crash(tmp_path):
    (tmp_path / "dir.yaml").mkdir()
    entry, problems, _ = load_entry(tmp_path / "dir.yaml")
    assert entry is None and [p.code for p in problems] == ["KB003"]


def test_not_utf8_names_the_byte_position(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_bytes(b"id: x\ntitle: caf\xe9\n")
    (problem,) = load_entry(path)[1]
    assert (problem.line, problem.column) == (2, 11)


def test_load_kb_collects_duplicates_and_misnamed_files(tmp_path):
    _copy(tmp_path, "first-entry")
    _copy(tmp_path, "second-entry", BASELINE.read_text().replace("id: ok-baseline", "id: first-entry"))
    shutil.copy(tmp_path / "first-entry.yaml", tmp_path / "third-entry.yml")
    kb = load_kb(tmp_path)
    assert list(kb.entries) == ["first-entry"]
    codes = sorted((Path(p.path).name, p.code) for p in kb.problems)
    assert codes == [("second-entry.yaml", "KB020"), ("second-entry.yaml", "KB021"), ("third-entry.yml", "KB020"),
                     ("third-entry.yml", "KB020")]


def test_load_kb_skips_hidden_files(tmp_path):
    _copy(tmp_path)
    (tmp_path / ".draft.yaml").write_text("- not an entry\n")
    kb = load_kb(tmp_path)
    assert list(kb.entries) == ["ok-baseline"] and kb.problems == []


def test_load_valid_kb_raises_with_every_problem(tmp_path):
    _copy(tmp_path)
    (tmp_path / "broken.yaml").write_text("- a list\n")
    with pytest.raises(EntryError) as info:
        load_valid_kb(tmp_path)
    assert [p.code for p in info.value.problems] == ["KB002"]
    assert "broken.yaml:1:1: KB002" in str(info.value)


def test_load_valid_kb_runs_semantic_checks(tmp_path):
    _copy(tmp_path, text=(FIXTURES / "kb022-dangling-related.yaml").read_text().replace("id: kb022-dangling-related", "id: ok-baseline"))
    with pytest.raises(EntryError) as info:
        load_valid_kb(tmp_path)
    assert [p.code for p in info.value.problems] == ["KB022"]


def test_load_valid_kb_refuses_an_empty_folder(tmp_path):
    with pytest.raises(EntryError, match="no entries"):
        load_valid_kb(tmp_path)


def test_load_valid_kb_returns_entries(tmp_path):
    _copy(tmp_path)
    assert list(load_valid_kb(tmp_path)) == ["ok-baseline"]
