"""The diagnose page's Python side, without a browser: the portable index, the zip the page runs,
and webapi (what the Web Worker calls). The zip is run here by a bare CPython (-I -S: stdlib
only, no site-packages), with rapidfuzz forced to its pure-Python implementation, exactly as
Pyodide runs it; its JSON must be kbmatch's, byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvkb.validate import load_valid_kb
from kvkb.loader import REPO_ROOT, kb_dir
from kvkb.matcher import index as match_index
from kvkb.matcher import portable
from kvkb.site_src import webapi, webbuild

SHARED = REPO_ROOT.parent / "shared" / "fixtures"
PASTES = sorted(p for d in ("real-pastes", "real-pastes-2") for p in (SHARED / d).glob("*.txt"))


@pytest.fixture(scope="module")
def entries():
    return list(load_valid_kb(kb_dir()).values())


# --- portable index ----------------------------------------------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
hashables = st.recursive(scalars | st.binary(max_size=4), lambda c: st.tuples(c, c) | st.frozensets(c, max_size=3), max_leaves=6)
values = st.recursive(
    scalars | st.binary(max_size=4),
    lambda c: st.lists(c, max_size=3) | st.tuples(c, c) | st.sets(hashables, max_size=3)
    | st.dictionaries(st.text(max_size=4) | st.integers(), c, max_size=3),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=6), values, max_size=4))
def test_portable_form_gives_back_the_same_types_and_values(index):
    back = portable.loads(portable.dumps(index))
    assert back == {k: v for k, v in index.items() if k != "key"}
    assert [type(v) for v in back.values()] == [type(v) for k, v in index.items() if k != "key"]


def test_portable_index_equals_the_cli_index_and_names_no_path(entries):
    built = match_index.build(entries)[0]
    text = portable.build(entries)
    assert portable.loads(text) == built
    assert str(REPO_ROOT) not in text and "/home/" not in text  # nothing machine-specific


def test_word_masks_wider_than_javascript_integers_survive(entries):
    # why the page parses the index with Python's json: JSON.parse would round these
    wide = {"mask": (1 << 80) + 1, "masks": [(1 << 60) + 3]}
    assert portable.loads(portable.dumps(wide)) == wide


def test_a_text_that_is_not_a_portable_index_is_refused():
    for bad in ('{"index": {}}', "[]", '{"portable_format": 99, "index": {}}'):
        with pytest.raises(ValueError, match="not a portable kvkb match index"):
            portable.loads(bad)


# --- the zip the page runs ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle(tmp_path_factory, entries):
    tmp = tmp_path_factory.mktemp("bundle")
    (tmp / "kvkb.zip").write_bytes(webbuild.python_bundle())
    # unpacked, as the worker's pyodide.unpackArchive does (kvkb.fit lists its models folder)
    zipfile.ZipFile(tmp / "kvkb.zip").extractall(tmp / "unpacked")
    (tmp / "index.json").write_text(portable.build(entries), encoding="utf-8")
    return tmp


def test_the_zip_holds_the_clis_own_modules_and_pure_python_rapidfuzz(bundle):
    names = set(zipfile.ZipFile(bundle / "kvkb.zip").namelist())
    for module in ("api", "engine", "read", "portable", "fill", "segment", "score"):
        assert f"kvkb/matcher/{module}.py" in names
    assert zipfile.ZipFile(bundle / "kvkb.zip").read("kvkb/matcher/engine.py") == (REPO_ROOT / "matcher" / "engine.py").read_bytes()
    assert {"kvkb/cli/fit.py", "kvkb/fit/capacity.py", "kvkb/site_src/webapi.py", "rapidfuzz/fuzz_py.py"} <= names
    assert any(n.startswith("kvkb/fit/models/") and n.endswith("config.json") for n in names)
    assert not [n for n in names if n.endswith((".so", ".pyd", ".pyc"))]  # nothing native or Python-version specific


def test_the_zip_is_reproducible():
    assert webbuild.python_bundle() == webbuild.python_bundle()


DRIVER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from kvkb.site_src import webapi
webapi.load(open(sys.argv[2], encoding="utf-8").read(), "https://kvkb.github.io/kvkb/")
out = {}
for path in sys.argv[3:]:
    out[path] = webapi.diagnose(open(path, "rb").read())
assert not [m for m in sys.modules if m.split(".")[0] in ("pydantic", "yaml", "jinja2")], "the page has no such packages"
assert "rapidfuzz.fuzz_cpp" not in sys.modules
print(json.dumps(out))
"""


@pytest.mark.skipif(not PASTES, reason="../shared/fixtures/real-pastes*/ not present")
def test_the_zip_alone_answers_every_real_paste_as_kbmatch_does(bundle, tmp_path):
    """Stdlib + the zip, pure-Python rapidfuzz: what Pyodide runs. Same JSON as `kbmatch --json`."""
    env = {"PATH": os.environ.get("PATH", ""), "RAPIDFUZZ_IMPLEMENTATION": "python", "KVKB_KB_DIR": str(kb_dir())}
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", DRIVER, str(bundle / "unpacked"), str(bundle / "index.json"),
                           *map(str, PASTES)], capture_output=True, text=True, env=env, timeout=900, cwd=bundle)
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = json.loads(proc.stdout)
    wrong = []
    for path in PASTES:
        cli = subprocess.run([str(Path(sys.executable).parent / "kbmatch"), "--json", "--base-url", "https://kvkb.github.io/kvkb/",
                              str(path)], capture_output=True, text=True, env={**os.environ, "KVKB_KB_DIR": str(kb_dir())})
        assert cli.returncode in (0, 1), cli.stderr
        if page[str(path)] + "\n" != cli.stdout:
            wrong.append(path.name)
    assert not wrong, wrong


# --- webapi: the calculator's path -------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory", "79.18GiB"],
    ["Qwen/Qwen2.5-7B-Instruct", "--gpu-memory", "23.99GiB", "--max-model-len", "32768", "--kv-cache-dtype", "fp8"],
    ["deepseek-ai/DeepSeek-V3", "--gpu-memory", "139.8GiB", "--tensor-parallel-size", "8", "--block-size", "64"],
])
def test_webapi_fit_prints_what_kvkb_fit_json_prints(argv):
    got = webapi.fit(argv)
    cli = subprocess.run([str(Path(sys.executable).parent / "kvkb"), "fit", *argv, "--json"], capture_output=True, text=True)
    assert (got["rc"], got["stdout"]) == (cli.returncode, cli.stdout)


def test_webapi_fit_reports_bad_input_like_the_cli():
    got = webapi.fit(["meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory", "24 bananas"])
    assert got["rc"] == 2 and got["stdout"] == "" and "kvkb fit:" in got["stderr"]
    got = webapi.fit(["--gpu-memory", "24GiB"], config_json="{not json")
    assert got["rc"] == 2 and "kvkb fit:" in got["stderr"]
    got = webapi.fit(["meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "two"])
    assert got["rc"] == 2 and "invalid int value" in got["stderr"]


def test_a_pasted_config_is_sized_like_the_same_file_on_disk(tmp_path):
    config = (REPO_ROOT / "kvkb" / "fit" / "models" / "Qwen--Qwen2.5-0.5B-Instruct" / "config.json").read_text()
    got = webapi.fit(["--gpu-memory", "23.99GiB"], config_json=config)
    assert got["rc"] == 0, got["stderr"]
    (tmp_path / "config.json").write_text(config)
    cli = json.loads(subprocess.run([str(Path(sys.executable).parent / "kvkb"), "fit", str(tmp_path / "config.json"),
                                     "--gpu-memory", "23.99GiB", "--json"], capture_output=True, text=True).stdout)
    page = json.loads(got["stdout"])
    # the model name is the file's path, which differs; every number is the same
    assert {k: v for k, v in page.items() if k != "model"} == {k: v for k, v in cli.items() if k != "model"}


def test_fit_choices_come_from_kvkb_fit():
    from kvkb.fit import shipped_configs
    from kvkb.fit.sitepage import GPUS

    choices = webapi.fit_choices()
    assert choices["models"] == [name for name, _ in shipped_configs()]
    assert choices["gpus"] == [[label, gib] for label, gib in GPUS]
    assert choices["kv_cache_dtypes"][0] == "auto"


# --- the build's assets ------------------------------------------------------------------------------


def test_pyodide_is_pinned_in_package_json_and_the_lock():
    pinned = webbuild.pinned_pyodide()
    lock = json.loads((REPO_ROOT / "site_src" / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/pyodide"]["version"] == pinned
    assert lock["packages"][""]["dependencies"]["pyodide"] == pinned
