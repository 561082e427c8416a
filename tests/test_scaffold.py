"""`kvkb new`: the skeleton fails lint while TODOs remain and passes (but for related ids) once filled."""

import re
import subprocess
import sys

import pytest
import yaml

from kvkb.cli.main import main
from kvkb.entry import SHORT_TITLE_MAX, Category, Entry
from kvkb.lint import lint_paths
from kvkb.loader import dotted
from kvkb.scaffold import ID_RULE, skeleton, valid_id

LINE = ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
        "when initializing the engine.")
# what a contributor writes in place of each TODO (keys: the dotted path of the TODO)
FILL = {
    "title": "ValueError: No available memory for the cache blocks",
    "short_title": "No memory left for KV cache blocks",
    "summary": "The weights and activation peak used the whole memory budget, so no KV cache blocks are left.",
    "severity": "fatal",
    "fix_time": "minutes",
    "phase": "startup",
    "category": "kv-capacity",
    "signatures[0].id": "v0-gpu",
    "signatures[0].exception": "ValueError",
    "signatures[0].template": "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
    # every release whose code prints the line (v0 worker and v1 core alike): what `kvkb atlas find` says
    "signatures[0].versions": ">=0.4.0,<=0.12.0",
    "signatures[0].engine": "v0",
    "signatures[0].backend": "cuda",
    "signatures[0].samples[0]": LINE,
    "meaning": "vLLM found no memory left for KV blocks after loading the weights.",
    "causes[0].id": "budget-too-small",
    "causes[0].title": "The memory budget only holds the weights",
    "causes[0].diagnosis": "The log shows the model weights take almost all of total x gpu_memory_utilization.",
    "causes[0].fixes[0].id": "raise-gpu-memory-utilization",
    "causes[0].fixes[0].title": "Give vLLM a larger share of the GPU",
    "causes[0].fixes[0].cli": "vllm serve MODEL --gpu-memory-utilization 0.95",
    "causes[0].fixes[0].python": "LLM(model=MODEL, gpu_memory_utilization=0.95)",
    "causes[0].fixes[0].versions": ">=0.4.1",
    "causes[0].fixes[0].risk_note": "Less headroom for other processes on the GPU.",
    "causes[0].fixes[0].why": "Every extra percent of the budget goes to KV blocks.",
    "broken_code": 'from vllm import LLM\n\nif __name__ == "__main__":\n    LLM(model="m", gpu_memory_utilization=0.1)\n',
    "fixed_code": 'from vllm import LLM\n\nif __name__ == "__main__":\n    LLM(model="m", gpu_memory_utilization=0.95)\n',
    "verify.text": "The log shows a positive number of KV cache blocks.",
    "related[0].id": "some-other-entry",
    "references[0].title": "worker.py: raise_if_cache_size_invalid",
    "references[0].source": "vllm/worker/worker.py",
    "references[0].versions": ">=0.4.1,<=0.10.2",
    "samples.match[0]": f"ERROR 01-01 00:00:00 engine.py:1] {LINE}\n",
    "samples.no_match[0]": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.",
}


def _todo_paths(value, path=()):
    if isinstance(value, str):
        return [path] if "TODO" in value else []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    return [p for k, v in items for p in _todo_paths(v, path + (k,))]


def _set(data, path, value):
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


def test_skeleton_has_schema_line_and_every_required_key_commented():
    text = skeleton("my-entry")
    assert text.startswith("# yaml-language-server: $schema=schema.json\n")
    data = yaml.safe_load(text)
    required = [name for name, f in Entry.model_fields.items() if f.is_required()]
    assert set(required) <= set(data)
    lines = text.splitlines()
    for key in required:
        i = next(n for n, line in enumerate(lines) if line.startswith(f"{key}:"))
        # explained by a comment on the line above or at the end of the line
        assert lines[i - 1].startswith("#") or " # " in lines[i], key


def test_skeleton_comments_list_the_models_choices():
    text = skeleton("my-entry")
    assert "category: TODO  # " + " | ".join(c.value for c in Category) in text and "fatal | error | warning" in text
    assert "kv-capacity | device-memory | host-memory" in text
    assert f"at most {SHORT_TITLE_MAX} characters" in text


def test_skeleton_fails_lint_at_every_todo(tmp_path):
    path = tmp_path / "my-entry.yaml"
    path.write_text(skeleton("my-entry"))
    problems, _ = lint_paths([path], with_matcher=False)
    todo = {p.message.split(":")[0] for p in problems if p.code == "KB014"}
    assert todo == set(FILL)  # every TODO is reported, and the test's FILL covers exactly those
    assert {"KB011", "KB030"} <= {p.code for p in problems}  # most fail the schema as well


def test_filled_skeleton_lints_clean_but_for_the_related_id(tmp_path):
    data = yaml.safe_load(skeleton("my-entry"))
    paths = _todo_paths(data)
    assert {dotted(p) for p in paths} == set(FILL)
    for p in paths:
        _set(data, p, FILL[dotted(p)])
    path = tmp_path / "my-entry.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    problems, _ = lint_paths([path])  # the matcher included: the sample must name the entry
    assert [(p.code, p.message) for p in problems] == [("KB022", "related id 'some-other-entry' is not an entry in kb/")]


@pytest.mark.parametrize("good", ["abc", "cuda-oom-during-serving", "a1-b2", "x" * 64])
def test_valid_ids(good):
    assert valid_id(good)
    skeleton(good)


@pytest.mark.parametrize("bad", ["ab", "x" * 65, "Caps", "under_score", "-lead", "trail-", "double--hyphen", "dot.ted", "", "../escape"])
def test_invalid_ids(bad):
    assert not valid_id(bad)
    with pytest.raises(ValueError, match=re.escape(ID_RULE)):
        skeleton(bad)


def test_cli_new_writes_refuses_and_forces(tmp_path, capsys):
    assert main(["new", "my-entry", "--kb", str(tmp_path)]) == 0
    path = tmp_path / "my-entry.yaml"
    assert path.read_text() == skeleton("my-entry")
    path.write_text("edited\n")
    assert main(["new", "my-entry", "--kb", str(tmp_path)]) == 1
    assert "exists" in capsys.readouterr().err and path.read_text() == "edited\n"
    assert main(["new", "my-entry", "--kb", str(tmp_path), "--force"]) == 0
    assert path.read_text() == skeleton("my-entry")


def test_cli_new_bad_id_exits_2_with_the_rule(tmp_path, capsys):
    assert main(["new", "Bad_Id", "--kb", str(tmp_path)]) == 2
    assert ID_RULE in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_cli_new_missing_folder_exits_2(tmp_path, capsys):
    assert main(["new", "my-entry", "--kb", str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_cli_new_defaults_to_kb_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("KVKB_KB_DIR", str(tmp_path))
    assert main(["new", "my-entry"]) == 0
    assert (tmp_path / "my-entry.yaml").exists()


def test_cli_new_without_id_is_a_usage_error():
    proc = subprocess.run([sys.executable, "-m", "kvkb.cli.main", "new"], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "id" in proc.stderr


# --- the rest of the contributor path: CONTRIBUTING.md, the PR template, the new-entry issue form ----------

from pathlib import Path  # noqa: E402
from urllib.parse import parse_qs, urlsplit  # noqa: E402

from kvkb.cli.lint import codes_table  # noqa: E402
from kvkb.codes import CODES  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def test_contributing_code_table_equals_codes_py():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    table = text.split("<!-- lint-codes:start -->\n")[1].split("<!-- lint-codes:end -->")[0]
    assert table == codes_table(), "regenerate the table with `kvkb lint --codes`"
    assert all(f"| {code} |" in table for code in CODES)


def test_contributing_walks_through_the_commands():
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    for command in ("kvkb new <id>", "kvkb atlas find", "kvkb lint kb/<id>.yaml", "kvkb verify <id>", "python -m kvkb.schema", ".ci/run"):
        assert command in text


def test_pr_template_has_the_checklist():
    text = (ROOT / ".github" / "PULL_REQUEST_TEMPLATE.md").read_text(encoding="utf-8")
    boxes = [line for line in text.splitlines() if line.startswith("- [ ] ")]
    assert len(boxes) >= 8
    for must in ("verbatim", "exists in the versions", "ineffective", "kvkb lint", "kvkb verify", "copied"):
        assert any(must in box for box in boxes), must


def test_issue_form_is_well_formed():
    form = yaml.safe_load((ROOT / ".github" / "ISSUE_TEMPLATE" / "new-entry.yml").read_text(encoding="utf-8"))
    assert {"name", "description", "body"} <= set(form)
    ids = [item["id"] for item in form["body"] if "id" in item]
    assert len(ids) == len(set(ids)) and all(re.fullmatch(r"[A-Za-z0-9_-]+", i) for i in ids)
    for item in form["body"]:
        assert item["type"] in {"markdown", "textarea", "input", "dropdown", "checkboxes"}
        assert "label" in item["attributes"] or item["type"] == "markdown"


def test_kbmatch_new_issue_link_fills_the_forms_fields():
    engine = pytest.importorskip("kvkb.matcher.engine")
    form = yaml.safe_load((ROOT / ".github" / "ISSUE_TEMPLATE" / "new-entry.yml").read_text(encoding="utf-8"))
    ids = {item["id"] for item in form["body"] if "id" in item}
    query = parse_qs(urlsplit(engine.new_issue_url("no available memory for the cache blocks", "ValueError: x")).query)
    assert query.pop("template") == ["new-entry.yml"]
    assert query.pop("title")[0].startswith(form["title"])
    assert set(query) <= ids, f"the link sets {sorted(query)} but the form's field ids are {sorted(ids)}"
