"""The runner asks the real kbmatch (`kbmatch --json FILE`) which entry a captured output is."""

import shutil

import yaml

from kvkb.loader import REPO_ROOT
from kvkb.reproductions.kbmatch import top_match

ENTRY = "max-model-len-exceeds-kv-cache"
E02 = ("(EngineCore pid=1) ERROR 11-22 02:25:12 [core.py:1510] ValueError: To serve at least one request with the "
       "model's max seq len (32768), (0.38 GiB KV cache is needed, which is larger than the available KV cache "
       "memory (0.06 GiB). Based on the available memory, the estimated maximum model length is 5248.\n")


def one_entry_kb(tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    data = yaml.safe_load((REPO_ROOT / "kb" / f"{ENTRY}.yaml").read_text())
    data.pop("related", None)
    (kb / f"{ENTRY}.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    shutil.copy(REPO_ROOT / "kb" / "schema.json", kb)
    return kb


def test_names_the_entry(tmp_path):
    log = tmp_path / "broken.log"
    log.write_text(E02)
    assert top_match(log, one_entry_kb(tmp_path)) == (ENTRY, None)


def test_no_confident_match_is_none_not_an_error(tmp_path):
    log = tmp_path / "ok.log"
    log.write_text("INFO everything is fine\n")
    assert top_match(log, one_entry_kb(tmp_path)) == (None, None)


def test_a_broken_kb_is_reported_after_a_retry(tmp_path):
    kb = one_entry_kb(tmp_path)
    (kb / "broken.yaml").write_text("id: [unclosed\n")
    log = tmp_path / "broken.log"
    log.write_text(E02)
    root, error = top_match(log, kb)
    assert root is None and "kbmatch exited 2" in error
