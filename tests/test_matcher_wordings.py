"""Wordings of non-vLLM programs (libtpu, Ray's raylet, the Linux kernel) and of argless exceptions,
as real pastes show them: each is named with confidence, and a near miss is not."""

from __future__ import annotations

import pytest

from matcher_helpers import matcher


def _root(text: str):
    return matcher().match(text).root_cause


@pytest.mark.parametrize("text,entry", [
    # libtpu: a kernel's on-stack scratch does not fit in VMEM
    ("RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem while allocating "
     "on stack for %name.3 = bf16[8,128]{1,0} custom-call(%a), custom_call_target=\"tpu_custom_call\"",
     "tpu-smem-vmem-exhausted"),
    # the same, quoted only up to the memory space
    ("jaxlib._jax.XlaRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem",
     "tpu-smem-vmem-exhausted"),
    # libtpu: an HBM buffer does not fit
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
     "allocate 1.50G. That was not possible. There are 1.02G free.; (0x0x0_HBM0)", "tpu-hbm-resource-exhausted"),
    # Ray's advice after a memory-monitor kill, on its own
    ("(MyActor pid=81) Refer to the documentation on how to address the out of memory issue: "
     "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory "
     "on this node or reducing task parallelism by requesting more CPUs per task. To adjust the kill threshold, set "
     "the environment variable `RAY_memory_usage_threshold` when starting Ray.", "ray-memory-monitor-kill"),
    # the kernel's OOM-killer line quoted without its counters
    ("Out of memory: Killed process 4242 (VLLM::Worker_TP)", "host-oom-killer"),
    # V0 block manager v2, logged as repr(e)
    ("ERROR 12-13 08:58:11 engine.py:165] NoFreeBlocksError()", "no-free-blocks-internal"),
])
def test_wording_is_named(text, entry):
    assert _root(text) == entry


@pytest.mark.parametrize("text", [
    # the HBM variant of the stack wording is not the VMEM entry's
    "jaxlib._jax.XlaRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm",
    # another argless exception is not NoFreeBlocksError
    "ERROR 12-13 08:58:11 engine.py:165] NoFreeSlotsError()",
    # the kernel killing a process for another reason
    "Killed process 4242 (python3) because it exceeded its CPU time limit",
])
def test_near_miss_is_not_claimed(text):
    assert _root(text) not in ("tpu-smem-vmem-exhausted", "no-free-blocks-internal", "host-oom-killer")


def test_older_kernels_oom_killer_line_is_named():
    # older kernels (4.x) name the victim first ("Kill process ... or sacrifice child")
    assert _root("[ 5123.001] Out of memory: Kill process 4242 (python3) score 912 or sacrifice child") == "host-oom-killer"


def test_ray_255_kill_wording_is_named():
    # Ray 2.55+ counts the workers it killed
    assert _root("ray.exceptions.OutOfMemoryError: 3 worker(s) were killed due to the node running low on memory.") \
        == "ray-memory-monitor-kill"
