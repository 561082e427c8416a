"""site_src.codecheck: each signature row says which releases' code prints it and links the raising
line of the newest one at its tag on GitHub."""

from collections import defaultdict

import pytest

from atlas_world import build
from kvkb.entry import Entry
from kvkb.loader import REPO_ROOT
from kvkb.site_src import render
from kvkb.site_src.codecheck import signature_check, signature_checks, source_url
from kvkb.yamlpos import load as load_yaml
from test_atlas_check import NEW, OLD, make, sig


@pytest.fixture(scope="module")
def atlas(tmp_path_factory):
    return build(tmp_path_factory.mktemp("atlas") / "atlas.json.gz")


def test_row_names_the_releases_and_links_the_newest_raising_line(atlas):
    entry = make([sig(OLD, "==0.1.0"), {**sig(NEW, ">=0.2.0", exception="RuntimeError"), "id": "s2"}])
    old, new = signature_checks(entry, atlas)
    assert old == ("checked against vLLM's code, releases 0.1.0: [vllm/worker/worker.py:9 at v0.1.0]"
                   "(https://github.com/vllm-project/vllm/blob/v0.1.0/vllm/worker/worker.py#L9)")
    assert new.endswith("(https://github.com/vllm-project/vllm/blob/v0.2.0/vllm/worker/worker.py#L11)")
    warn = make([sig("Only 3 GPU blocks: expect preemption", ">=0.1.0", exception=None, level="WARNING")])
    assert "releases 0.1.0–0.2.0: [vllm/worker/worker.py:14 at v0.2.0]" in signature_checks(warn, atlas)[0]


def test_foreign_unknown_and_unbuilt(atlas):
    torch = make([sig("CUDA out of memory. Tried to allocate 2.00 GiB.", ">=0.1.0", origin="torch")])
    assert signature_check(torch.signatures[0], atlas) == \
        "printed by PyTorch, not by vLLM; checked absent from vLLM's code, releases 0.1.0–0.2.0"
    assert signature_check(torch.signatures[0], None) == "printed by PyTorch, not by vLLM"
    invented = make([sig("KV cache allocation failed", ">=0.0.0", exception="RuntimeError", origin="invented")])
    assert signature_check(invented.signatures[0], atlas) == \
        "no vLLM release prints it: checked against vLLM's code, releases 0.1.0–0.2.0"
    # a declared-foreign text vLLM does print (lint's KB073): the page does not vouch for its absence
    stale = make([sig(OLD, "==0.1.0", origin="torch")])
    assert signature_check(stale.signatures[0], atlas) == "printed by PyTorch, not by vLLM"
    nowhere = make([sig("Something vLLM never said at all.", ">=0.1.0")])
    assert signature_check(nowhere.signatures[0], atlas) == "not found in vLLM's code"
    assert signature_check(nowhere.signatures[0], None).startswith("not checked")


def test_source_url_refuses_odd_paths():
    assert source_url("0.10.1.1", "vllm/config.py", None) == "https://github.com/vllm-project/vllm/blob/v0.10.1.1/vllm/config.py"
    with pytest.raises(ValueError):
        source_url("0.1.0", "vllm/x.py) [evil](javascript:alert(1)", 3)


def test_entry_page_table_has_the_checked_column():
    entry = Entry.model_validate(load_yaml((REPO_ROOT / "kb" / "max-model-len-exceeds-kv-cache.yaml").read_text()).data)
    md = render.render_entry(entry, defaultdict(lambda: "Title"), [])
    header = next(line for line in md.splitlines() if line.startswith("| vLLM | Engine"))
    assert header.endswith("| Checked against vLLM's code |")
    rows = [line for line in md.splitlines() if "checked against vLLM's code, releases" in line]
    assert rows and all("https://github.com/vllm-project/vllm/blob/v" in row for row in rows)
