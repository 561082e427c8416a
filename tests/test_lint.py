"""kvkb lint: one fixture per problem code fails with that code at that line; the CLI never tracebacks."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kvkb.cli.main import main
from kvkb.codes import CODES, Problem
from kvkb.lint import lint_paths
from kvkb.validate import code_problem

FIXTURES = Path(__file__).parent / "data" / "broken-entries"

# (fixture, code, line, column, text on that line): the position is the offending key or item
EXPECTED = [
    ("kb001-yaml-syntax", "KB001", 7, 15, "phase: startup: now"),
    ("kb002-not-a-mapping", "KB002", 2, 1, "- id: kb002-not-a-mapping"),
    ("kb003-not-utf8", "KB003", 3, 12, None),  # the undecodable byte itself
    ("kb010-missing-key", "KB010", 20, 5, "- id: context-too-long"),  # the cause lacking 'diagnosis'
    ("kb011-invalid-value", "KB011", 5, 1, "severity: deadly"),
    ("kb012-unknown-nested-key", "KB012", 26, 9, 'clii: "vllm serve'),
    ("kb013-duplicate-key", "KB013", 8, 1, "phase: serving"),
    ("kb014-todo-left", "KB014", 18, 1, "meaning: TODO"),
    ("kb020-id-not-file-name", "KB020", 2, 1, "id: some-other-name"),
    ("kb021-duplicate-fix-id", "KB021", 29, 5, "- id: lower-max-model-len"),
    ("kb022-dangling-related", "KB022", 47, 5, "- id: no-such-entry"),
    ("kb025-short-title-too-long", "KB025", 53, 1, "short_title: "),
    ("kb030-not-a-range", "KB030", 27, 9, 'versions: "0.4.1"'),
    ("kb030-reversed-version-range", "KB030", 13, 5, 'versions: ">=0.9.2,<=0.4.1"'),
    ("kb040-stray-brace", "KB040", 12, 5, "template: "),
    ("kb041-adjacent-placeholders", "KB041", 12, 5, "template: "),
    ("kb042-sample-mismatch", "KB042", 17, 9, "max sequence len"),
    ("kb050-unknown-fix-placeholder", "KB050", 26, 9, "{max_model_len_fits}"),
    ("kb051-ineffective-without-code", "KB051", 29, 5, "- id: max-seq-len-kwarg"),
    # inside the code: the engine call that runs on import, at its own line and column
    ("kb052-code-without-main-guard", "KB052", 42, 3, '  LLM(model="MODEL")'),
    ("kb060-raw-html", "KB060", 4, 1, "summary: The V0 CPU backend checks at startup <script>"),
]
REQUIRED = {"KB001", "KB002", "KB003", "KB010", "KB011", "KB012", "KB013", "KB020", "KB021", "KB022", "KB025", "KB030",
            "KB040", "KB041", "KB042", "KB050", "KB051", "KB052", "KB060"}


def test_fixtures_cover_every_required_code_and_exist():
    assert REQUIRED <= {code for _, code, *_ in EXPECTED}
    on_disk = {p.stem for p in FIXTURES.glob("*.yaml")} - {"ok-baseline"}
    assert on_disk == {name for name, *_ in EXPECTED}


def test_baseline_is_clean():
    # every fixture is this entry with one defect, so each problem below comes from that defect alone
    assert lint_paths([FIXTURES / "ok-baseline.yaml"], with_matcher=False) == ([], 1)


@pytest.mark.parametrize("name, code, line, column, text", EXPECTED, ids=[e[0] for e in EXPECTED])
def test_each_broken_entry_fails_with_its_code_at_its_line(name, code, line, column, text):
    path = FIXTURES / f"{name}.yaml"
    # the fixtures are near-copies of one another, so kbmatch cannot tell them apart: skip KB043/KB044
    problems, checked = lint_paths([path], with_matcher=False)
    assert checked == 1
    assert [(p.code, p.line, p.column) for p in problems] == [(code, line, column)]
    if text is not None:
        assert text in path.read_text().splitlines()[line - 1]


@pytest.mark.parametrize(
    "program, line, column, message",
    [
        # the engine starts at import time: the call itself, at its line and column in the file
        ['from vllm import LLM\nif __name__ == "__main__":\n    pass\nllm = LLM(model="m")\n', 43, 9, "outside"],
        # a syntax error: where Python stops (the unclosed parenthesis)
        ['if __name__ == "__main__":\n    print(1\n', 41, 12, "not valid Python"],
        # no guard and no engine call to blame: the key itself
        ['print("hello")\n', 39, 1, "guard"],
    ],
)
def test_code_problems_point_inside_the_block(tmp_path, program, line, column, message):
    base = (FIXTURES / "ok-baseline.yaml").read_text()
    head, rest = base.split("broken_code: |\n", 1)
    indented = "".join("  " + l if l.strip() else l for l in program.splitlines(keepends=True))
    path = tmp_path / "ok-baseline.yaml"
    path.write_text(head + "broken_code: |\n" + indented + rest[rest.index("verify:"):])
    (problem,), _ = lint_paths([path], with_matcher=False)
    assert problem.code == "KB052" and message in problem.message
    assert (problem.line, problem.column) == (line, column)


def test_ineffective_fix_code_points_inside_its_block(tmp_path):
    base = (FIXTURES / "ok-baseline.yaml").read_text()
    path = tmp_path / "ok-baseline.yaml"
    path.write_text(base.replace('          LLM(model="MODEL", max_seq_len=8192)\n', '          LLM(model="MODEL", max_seq_len=8192\n'))
    (problem,), _ = lint_paths([path], with_matcher=False)
    assert problem.code == "KB052" and "ineffective fix 'max-seq-len-kwarg'" in problem.message
    assert problem.line == 38 and path.read_text().splitlines()[37][problem.column - 1] == "("


def test_unknown_key_suggests_the_known_one():
    (problem,), _ = lint_paths([FIXTURES / "kb012-unknown-nested-key.yaml"], with_matcher=False)
    assert problem.message == "unknown key 'causes[0].fixes[0].clii' (did you mean 'cli'?)"


def test_unknown_top_level_key_suggests_too(tmp_path):
    path = tmp_path / "ok-baseline.yaml"
    path.write_text((FIXTURES / "ok-baseline.yaml").read_text().replace("causes:", "causess:"))
    problems, _ = lint_paths([path], with_matcher=False)
    assert "unknown key 'causess' (did you mean 'causes'?)" in [p.message for p in problems]


def test_problem_format_has_position_code_and_remedy():
    text = Problem("kb/foo.yaml", 12, 5, "KB012", "unknown key 'fixes_cli' (did you mean 'fixes'?)").format()
    assert text.splitlines()[0] == "kb/foo.yaml:12:5: KB012 unknown key 'fixes_cli' (did you mean 'fixes'?)"
    assert text.splitlines()[1].strip() == f"remedy: {CODES['KB012'].remedy}"


def test_lone_file_catches_an_id_another_file_uses(tmp_path):
    base = (FIXTURES / "ok-baseline.yaml").read_text()
    (tmp_path / "ok-baseline.yaml").write_text(base)
    (tmp_path / "copy.yaml").write_text(base)
    problems, _ = lint_paths([tmp_path / "copy.yaml"], with_matcher=False)
    assert sorted(p.code for p in problems) == ["KB020", "KB021"]


def test_lone_file_resolves_related_ids_against_its_folder(tmp_path):
    base = (FIXTURES / "ok-baseline.yaml").read_text()
    (tmp_path / "ok-baseline.yaml").write_text(base.replace("references:\n", "related:\n  - id: other-entry\nreferences:\n"))
    assert [p.code for p in lint_paths([tmp_path / "ok-baseline.yaml"], with_matcher=False)[0]] == ["KB022"]
    (tmp_path / "other-entry.yaml").write_text(base.replace("id: ok-baseline", "id: other-entry")
                                               .replace('short_title: "', 'short_title: "Other: '))
    assert lint_paths([tmp_path / "ok-baseline.yaml"], with_matcher=False)[0] == []


def test_short_titles_are_unique_across_the_folder(tmp_path):
    """KB026 on each entry whose short_title another entry has too (case and spacing aside), at the key."""
    base = (FIXTURES / "ok-baseline.yaml").read_text()
    (tmp_path / "ok-baseline.yaml").write_text(base)
    twin = base.replace("id: ok-baseline", "id: twin").replace('short_title: "Max seq len', 'short_title: "max  seq len')
    (tmp_path / "twin.yaml").write_text(twin)
    problems, _ = lint_paths([tmp_path / "twin.yaml"], with_matcher=False)  # a lone file, against its folder
    line = twin.splitlines().index(next(l for l in twin.splitlines() if l.startswith("short_title:"))) + 1
    assert [(p.code, p.line, p.column) for p in problems] == [("KB026", line, 1)]
    assert "ok-baseline.yaml" in problems[0].message
    problems, _ = lint_paths([tmp_path], with_matcher=False)  # the folder: both entries are named
    assert sorted((Path(p.path).name, p.code) for p in problems) == [("ok-baseline.yaml", "KB026"), ("twin.yaml", "KB026")]
    (tmp_path / "twin.yaml").write_text(twin.replace('short_title: "max  seq len', 'short_title: "Twin: max seq len'))
    assert lint_paths([tmp_path], with_matcher=False)[0] == []


def test_short_title_limit_is_the_one_the_schema_and_remedy_state():
    from kvkb.entry import SHORT_TITLE_MAX, Entry

    assert Entry.model_json_schema()["properties"]["short_title"]["maxLength"] == SHORT_TITLE_MAX
    assert f"{SHORT_TITLE_MAX} characters" in CODES["KB025"].remedy


@pytest.mark.parametrize(
    "src, expect",
    [
        ('from vllm import LLM\n\nif __name__ == "__main__":\n    LLM(model="m")\n', None),
        ("from vllm import LLM\n\nif '__main__' == __name__:\n    LLM(model='m')\n", None),
        ('from vllm import LLM\n\ndef run():\n    LLM(model="m")\n\nif __name__ == "__main__":\n    run()\n', None),
        ('from vllm import LLM\nLLM(model="m")\n', "guard"),
        ('import vllm\nif __name__ == "__main__":\n    pass\nengine = vllm.LLM(model="m")\n', "outside"),
        ('if __name__ == "__main__":\n    print(1\n', "not valid Python"),
        ('if __name__ != "__main__":\n    pass\n', "guard"),
    ],
)
def test_code_problem(src, expect):
    got = code_problem(src)
    assert (got is None) if expect is None else (expect in got)


# --- the command line -------------------------------------------------------------------------------


def _cli(*args, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "kvkb.cli.main", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=120)
    assert "Traceback" not in proc.stderr + proc.stdout
    return proc


def test_cli_clean_entry_exits_0(tmp_path):
    shutil.copy(FIXTURES / "ok-baseline.yaml", tmp_path)
    proc = _cli("lint", tmp_path)
    assert proc.returncode == 0 and "1 entry checked, no problems" in proc.stderr


def test_cli_problem_exits_1_with_file_line_code(tmp_path):
    proc = _cli("lint", "--no-matcher", FIXTURES / "kb012-unknown-nested-key.yaml")
    assert proc.returncode == 1
    assert ":26:9: KB012 unknown key 'causes[0].fixes[0].clii' (did you mean 'cli'?)" in proc.stdout
    assert "remedy:" in proc.stdout


def test_cli_whole_fixture_folder_reports_every_fixture():
    proc = _cli("lint", "--no-matcher", FIXTURES)
    assert proc.returncode == 1
    for name, code, line, column, _ in EXPECTED:
        assert f"{name}.yaml:{line}:{column}: {code} " in proc.stdout


@pytest.mark.parametrize(
    "setup, message",
    [
        (lambda d: d / "missing", "no such file or folder"),
        (lambda d: d, "no entries"),
    ],
)
def test_cli_usage_errors_exit_2(tmp_path, setup, message):
    proc = _cli("lint", setup(tmp_path))
    assert proc.returncode == 2 and message in proc.stderr


def test_cli_unknown_option_exits_2():
    proc = _cli("lint", "--bogus")
    assert proc.returncode == 2 and "unrecognized arguments: --bogus" in proc.stderr


def test_cli_junk_folder_is_problems_not_a_traceback(tmp_path):
    (tmp_path / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "empty.yaml").write_bytes(b"")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    (tmp_path / "latin1.yaml").write_bytes(b"id: caf\xe9\n")
    (tmp_path / "deep.yaml").write_text("[" * 50_000)
    (tmp_path / "loop.yaml").write_text("a: &x [*x]\n")
    (tmp_path / "dir.yaml").mkdir()
    (tmp_path / "notes.txt").write_text("ignored: only *.yaml and *.yml are entries\n")
    proc = _cli("lint", tmp_path)
    assert proc.returncode == 1
    codes = {line.split(": ")[1].split()[0] for line in proc.stdout.splitlines() if ": KB" in line}
    assert {"KB001", "KB002", "KB003"} <= codes
    assert "notes.txt" not in proc.stdout


def test_cli_codes_table_lists_every_code():
    proc = _cli("lint", "--codes")
    assert proc.returncode == 0
    assert [line.split(" | ")[0].lstrip("| ") for line in proc.stdout.splitlines()[2:]] == list(CODES)


def test_cli_default_is_the_kb_folder(monkeypatch, tmp_path, capsys):
    shutil.copy(FIXTURES / "kb011-invalid-value.yaml", tmp_path)
    monkeypatch.setenv("KVKB_KB_DIR", str(tmp_path))
    assert main(["lint", "--no-matcher"]) == 1
    assert "KB011" in capsys.readouterr().out


def test_cli_internal_error_is_a_message_not_a_traceback(monkeypatch, capsys, tmp_path):
    import kvkb.cli.lint as cli_lint

    def boom(paths, with_matcher=True):
        raise RuntimeError("matcher exploded")

    shutil.copy(FIXTURES / "ok-baseline.yaml", tmp_path)
    monkeypatch.delenv("KVKB_DEBUG", raising=False)
    monkeypatch.setattr(cli_lint, "lint_paths", boom)
    assert main(["lint", str(tmp_path)]) == 3
    assert "internal error, please report it: RuntimeError: matcher exploded" in capsys.readouterr().err


# --- against the committed atlas: the real KB with one fact planted wrong ------------------------------

def _planted(tmp_path, name: str, old: str, new: str) -> Path:
    kb = tmp_path / "kb"
    shutil.copytree(Path(__file__).resolve().parent.parent / "kb", kb)
    path = kb / f"{name}.yaml"
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not once in {name}.yaml"
    path.write_text(text.replace(old, new))
    return kb


def test_real_kb_with_a_planted_wrong_range_fails_naming_the_range_to_write(tmp_path, capsys):
    # the 0.13.0-0.21.0 wording claimed from 0.9.0: lint names the releases that print it and the range
    kb = _planted(tmp_path, "no-memory-for-cache-blocks", 'versions: ">=0.13.0,<=0.21.0"', 'versions: ">=0.9.0,<=0.21.0"')
    assert main(["lint", "--no-matcher", str(kb)]) == 1
    out = capsys.readouterr().out
    [line] = [ln for ln in out.splitlines() if "KB070" in ln]
    assert "no-memory-for-cache-blocks.yaml:28:" in line and "not printed by 0.9.0" in line
    assert "first 0.13.0 vllm/v1/core/kv_cache_utils.py:" in line and "last 0.21.0 vllm/v1/core/kv_cache_utils.py:" in line
    assert 'write versions: ">=0.13.0,<=0.21.0"' in line


def test_real_kb_with_a_planted_missing_flag_fails(tmp_path, capsys):
    # finding A4 of the fact-check: --limit-mm-per-prompt and the EngineArgs field only exist from 0.5.5
    kb = _planted(tmp_path, "cuda-oom-during-startup", 'versions: ">=0.5.5,<=0.8.4"', 'versions: ">=0.5.0,<=0.8.4"')
    assert main(["lint", "--no-matcher", str(kb)]) == 1
    out = capsys.readouterr().out
    flag = [ln for ln in out.splitlines() if "KB074" in ln]
    arg = [ln for ln in out.splitlines() if "KB075" in ln]
    assert len(flag) == 1 and "--limit-mm-per-prompt, which 0.5.0–0.5.4 lack" in flag[0]
    assert 'versions to write: ">=0.5.5,<=0.8.4"' in flag[0]
    assert len(arg) == 1 and "limit_mm_per_prompt" in arg[0]


def test_real_kb_with_a_planted_wrong_default_fails(tmp_path, capsys):
    kb = _planted(tmp_path, "cpu-kv-cache-space", "RAM (default 0.92)", "RAM (default 0.8)")
    assert main(["lint", "--no-matcher", str(kb)]) == 1
    out = capsys.readouterr().out
    [line] = [ln for ln in out.splitlines() if "KB077" in ln]
    assert "0.9 in 0.4.0–0.19.1" in line and "0.92 in 0.20.0–0.33.0" in line


def test_whole_kb_lint_with_the_atlas_stays_under_3_s_of_cpu():
    # CPU time of the child, not wall time: other jobs on a shared runner do not make it flaky
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-m", "kvkb.cli.main", "lint", "kb"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parent.parent)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "KB070-KB079 not checked" not in proc.stderr
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu < 3.0, f"kvkb lint kb/ took {cpu:.2f} s of CPU"
