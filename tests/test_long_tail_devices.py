"""Issue 11, device and sleep-mode family: the backend values plugin accelerators need, and the
entries that use them say what they are for and why nothing here reproduces them."""

import json

import pytest

from kvkb.entry import Backend, Signature
from kvkb.loader import kb_dir, load_kb
from kvkb.schema import SCHEMA_PATH

DEVICE_ENTRIES = {
    "xpu-out-of-memory": "xpu",
    "npu-out-of-memory": "npu",
    "tpu-hbm-resource-exhausted": "tpu",
    "hpu-devmem-allocation-failed": "hpu",
}
# entries whose error no machine here can raise (no such device, or a race / a bug path)
NOT_REPRODUCIBLE = [*DEVICE_ENTRIES, "nccl-cuda-out-of-memory", "workspace-locked-growth", "sleep-mode-memory-not-released"]


def test_backend_enum_has_the_plugin_accelerators():
    assert {b.value for b in Backend} >= {"cuda", "rocm", "cpu", "xpu", "npu", "tpu", "hpu", "any"}


def test_schema_json_offers_the_new_backends():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    enum = schema["$defs"]["Backend"]["enum"]
    assert {"npu", "tpu", "hpu"} <= set(enum)


def test_an_unknown_backend_is_still_rejected():
    sig = {"id": "npu-oom", "exception": "RuntimeError", "template": "NPU out of memory.", "versions": ">=0.7.1",
           "engine": "any", "backend": "gaudi", "samples": ["NPU out of memory."]}
    assert Signature.model_validate({**sig, "backend": "npu"}).backend is Backend.npu
    with pytest.raises(ValueError, match="backend"):
        Signature.model_validate(sig)


@pytest.fixture(scope="module")
def kb():
    return load_kb(kb_dir())


@pytest.mark.parametrize("eid,backend", sorted(DEVICE_ENTRIES.items()))
def test_device_entries_sign_with_their_backend(kb, eid, backend):
    entry = kb.entries[eid]
    assert {s.backend.value for s in entry.signatures} == {backend}


@pytest.mark.parametrize("eid", NOT_REPRODUCIBLE)
def test_unreproducible_entries_have_no_code_and_say_why(kb, eid):
    entry = kb.entries[eid]
    assert entry.broken_code is None and entry.fixed_code is None
    assert not any(f.code for f in entry.ineffective)
    assert "No program here reproduces it" in entry.meaning or "No program here reproduces this entry" in entry.meaning


def test_sleep_wake_up_reproduction_plays_both_tenants(kb):
    entry = kb.entries["sleep-mode-wake-up-oom"]
    # the broken run must fail because both tenants do not fit, the fixed run because they do
    assert "gpu_memory_utilization=0.6" in entry.broken_code and "total // 2" in entry.broken_code
    assert "gpu_memory_utilization=0.4" in entry.fixed_code and "total // 2" in entry.fixed_code
    assert all("llm.wake_up()" in src for src in (entry.broken_code, entry.fixed_code))
