"""kvkb.yamlpos: positions of keys and items, duplicate keys, and hostile YAML that must not crash."""

import subprocess
import sys

import pytest
import yaml

from kvkb import yamlpos
from kvkb.loader import load_entry

DOC = """\
# comment
id: x
causes:
  - id: a
    fixes:
      - id: f
        cli: "vllm serve"
"""


def test_positions_are_one_based_and_point_at_keys_and_items():
    loc = yamlpos.load(DOC)
    assert loc.marks[("id",)] == (2, 1)
    assert loc.marks[("causes", 0)] == (4, 5)
    assert loc.marks[("causes", 0, "fixes", 0, "cli")] == (7, 9)


def test_where_falls_back_to_the_deepest_known_prefix():
    loc = yamlpos.load(DOC)
    # a missing key inside causes[0].fixes[0] points at that fix
    assert loc.where(("causes", 0, "fixes", 0, "title")) == (6, 9)
    assert loc.where(("nowhere", 3)) == loc.marks[()]


def test_duplicate_keys_are_reported_and_the_last_one_wins_like_pyyaml():
    loc = yamlpos.load("a: 1\nb: 2\na: 3\n")
    assert loc.data == {"a": 3, "b": 2}
    assert loc.duplicate_keys == [(("a",), (3, 1))]
    assert loc.marks[("a",)] == (3, 1)


@pytest.mark.parametrize(
    "text, line",
    [
        ("a: b: c\n", 1),  # mapping values not allowed
        ("a: 1\n\tb: 2\n", 2),  # tab indentation
        ('a: "open\nb: 2\n', 3),  # unclosed quote: found at the end
        ("a: 1\n---\nb: 2\n", 2),  # two documents
    ],
)
def test_syntax_errors_carry_a_position(text, line):
    with pytest.raises(yamlpos.YamlSyntaxError) as info:
        yamlpos.load(text)
    assert info.value.line == line and info.value.column >= 1


def test_self_referencing_alias_does_not_recurse_forever():
    loc = yamlpos.load("a: &x [*x]\n")
    assert ("a",) in loc.marks


def test_nested_aliases_are_walked_once_not_exponentially():
    lines = ["l0: &l0 [x, x]"] + [f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}]" for i in range(1, 40)]
    loc = yamlpos.load("\n".join(lines) + "\n")
    assert len(loc.marks) < 500


# Deep nesting is stopped by whichever layer meets it first: libyaml's own limit (PyYAML >= 6.0.4
# refuses ~1000 flow levels in its scanner), or yamlpos' depth check (block nesting below that
# limit, and the pure-Python loader, which has none). Either way the author gets a KB001 at the line
# where the nesting runs away, with its remedy; never a traceback, a RecursionError or a segfault.
DEEP_FLOW = "id: deep\ntitle: a deep entry\nsignatures: " + "[" * 100_000 + "\n"
DEEP_BLOCK = "id: deep\n" + "".join(f"{'  ' * i}k{i}:\n" for i in range(yamlpos.MAX_DEPTH + 10)) + "  x\n"
# level d (the root mapping is level 1) starts on line d + 1: the first level past the limit, on MAX_DEPTH + 2
LOADERS = [pytest.param(yaml.SafeLoader, id="pure-python")]
if hasattr(yaml, "CSafeLoader"):
    LOADERS.append(pytest.param(yaml.CSafeLoader, id="libyaml"))


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("text,line", [(DEEP_FLOW, 3), (DEEP_BLOCK, yamlpos.MAX_DEPTH + 2)], ids=["flow", "block"])
def test_deep_nesting_is_a_kb001_at_its_line(tmp_path, monkeypatch, loader, text, line):
    monkeypatch.setattr(yamlpos, "SafeLoader", loader)
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    entry, problems, _ = load_entry(path, shown="kb/deep.yaml")
    assert entry is None
    assert [(p.code, p.line) for p in problems] == [("KB001", line)]
    assert "nest" in problems[0].message and problems[0].remedy
    assert problems[0].format().startswith(f"kb/deep.yaml:{line}:")


def test_deep_nesting_lints_with_exit_1_not_a_traceback(tmp_path):
    (tmp_path / "deep.yaml").write_text(DEEP_FLOW)
    done = subprocess.run([sys.executable, "-m", "kvkb.cli.main", "lint", str(tmp_path / "deep.yaml")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "KB001" in done.stdout + done.stderr and "Traceback" not in done.stderr


def test_unbuildable_scalar_is_a_syntax_error():
    with pytest.raises(yamlpos.YamlSyntaxError, match="month must be in 1..12"):
        yamlpos.load("date: 2024-13-45\n")


def test_empty_document_has_no_data():
    assert yamlpos.load("").data is None
    assert yamlpos.load("# only a comment\n").data is None
