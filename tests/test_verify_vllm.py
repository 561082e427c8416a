"""`kvkb verify` against real vLLM (CPU): the exemplar's broken/fixed pair, end to end.

Needs KVKB_VLLM_PYTHON (a Python with vLLM, e.g. the venv reproductions/setup-cpu-venv.sh makes);
skipped without it. Takes one to three minutes on two cores.
"""

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml

from kvkb.cli.main import main
from kvkb.loader import REPO_ROOT

PYTHON = os.environ.get("KVKB_VLLM_PYTHON", "")
ENTRY = "max-model-len-exceeds-kv-cache"

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.skipif(not PYTHON or not Path(PYTHON).exists(), reason="KVKB_VLLM_PYTHON not set or missing"),
]


def test_exemplar_reproduces_on_cpu(tmp_path, monkeypatch, capsys):
    kb = tmp_path / "kb"
    kb.mkdir()
    data = yaml.safe_load((REPO_ROOT / "kb" / f"{ENTRY}.yaml").read_text())
    data.pop("related", None)  # its targets are not in this one-entry kb
    (kb / f"{ENTRY}.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    shutil.copy(REPO_ROOT / "kb" / "schema.json", kb)
    monkeypatch.setenv("KVKB_KB_DIR", str(kb))
    results = tmp_path / "cpu.json"
    code = main(["verify", ENTRY, "--python", PYTHON, "--results", str(results), "--workdir", str(tmp_path / "w")])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    r = json.loads(results.read_text())["entries"][ENTRY]
    assert r["broken"]["matched"] == ENTRY and r["broken"]["exit_code"] != 0
    assert "estimated maximum model length is 5248" in r["broken"]["output"]
    # 64 MiB of KV at 12,288 bytes per token in 128-token blocks: 42 blocks
    assert r["fixed"]["kv_tokens"] == 5376 and r["fixed"]["max_concurrency"] == 1.31
    assert r["fixes"]["max-seq-len-kwarg"]["status"] == "ineffective"
    for run in (r["broken"], r["fixed"]):
        assert "leftovers" not in run
        pid = int(next(l for l in run["output"].splitlines() if "EngineCore pid=" in l)
                  .split("EngineCore pid=")[1].split(")")[0])
        assert not _alive(pid), f"EngineCore {pid} survived its run"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")
