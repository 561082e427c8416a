"""`kvkb doctor` and kvkb.gpu, with a fake NVML module injected (no GPU needed)."""

import sys
from types import SimpleNamespace

import pytest

from kvkb import gpu
from kvkb.cli.main import main

GIB = 1 << 30


class FakeNVML:
    """Just enough of pynvml: one or more GPUs, their memory and processes."""

    class NVMLError(Exception):
        pass

    def __init__(self, gpus=None, init_error=None):
        self.gpus = gpus or []
        self.init_error = init_error
        self.shut = False

    def nvmlInit(self):
        if self.init_error:
            raise self.init_error

    def nvmlShutdown(self):
        self.shut = True

    def nvmlSystemGetDriverVersion(self):
        return b"550.54.15"

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return self.gpus[i]

    def nvmlDeviceGetName(self, h):
        return h["name"]

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=h["total"], free=h["total"] - h["used"], used=h["used"])

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in h.get("procs", [])]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        raise self.NVMLError("Not Supported")


def h100(used=0, procs=()):
    return {"name": "NVIDIA H100 80GB HBM3", "total": 80 * GIB, "used": used, "procs": list(procs)}


def test_probe_reads_memory_and_processes():
    nvml = FakeNVML([h100(used=20 * GIB, procs=[(4242, 20 * GIB)])])
    [g] = gpu.probe(nvml)
    assert (g.name, g.total_bytes, g.free_bytes, g.driver) == ("NVIDIA H100 80GB HBM3", 80 * GIB, 60 * GIB, "550.54.15")
    assert g.processes[0].pid == 4242 and g.processes[0].used_bytes == 20 * GIB
    assert nvml.shut


def test_no_driver():
    nvml = FakeNVML(init_error=FakeNVML.NVMLError("NVML Shared Library Not Found"))
    with pytest.raises(gpu.NoNvidiaDriver, match="Shared Library Not Found"):
        gpu.probe(nvml)


def test_budget_is_total_times_util_against_free():
    g = gpu.probe(FakeNVML([h100(used=20 * GIB)]))[0]
    ok = gpu.budget(g, 0.7)
    assert ok.fits and ok.requested_bytes == int(80 * GIB * 0.7)
    bad = gpu.budget(g, 0.92)
    assert not bad.fits and bad.max_utilization == 0.75


def test_dirty_reasons():
    clean = gpu.probe(FakeNVML([h100(used=300 << 20)]))[0]
    assert gpu.dirty_reasons(clean) == []
    held = gpu.probe(FakeNVML([h100(used=20 * GIB, procs=[(4242, 20 * GIB)])]))[0]
    assert "pid 4242" in gpu.dirty_reasons(held)[0]
    assert gpu.dirty_reasons(held, frozenset({4242})) == []
    invisible = gpu.probe(FakeNVML([h100(used=30 * GIB)]))[0]
    assert "no process visible" in gpu.dirty_reasons(invisible)[0]


def test_doctor_without_driver_says_so(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML(init_error=FakeNVML.NVMLError("Driver Not Loaded")))
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "No NVIDIA GPU can be checked here" in out and "Driver Not Loaded" in out
    assert "CPU backend" in out


def test_doctor_on_this_machine_never_tracebacks(capsys):
    code = main(["doctor", "--gpu-memory-utilization", "0.5"])
    assert code in (0, 1)
    assert "Traceback" not in capsys.readouterr().err


def test_doctor_reports_fit_and_processes(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML([h100(used=20 * GIB, procs=[(4242, 20 * GIB)])]))
    assert main(["doctor", "--gpu-memory-utilization", "0.7"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100 80GB HBM3" in out and "pid 4242 holds 20.00 GiB" in out and "fits" in out


def test_doctor_refuses_a_utilization_that_does_not_fit(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNVML([h100(used=20 * GIB, procs=[(4242, 20 * GIB)])]))
    assert main(["doctor"]) == 1  # default 0.92 of 80 GiB = 73.6 GiB > 60 GiB free
    out = capsys.readouterr().out
    assert "refuses to start" in out and "at most 0.75" in out


def test_doctor_bad_utilization(capsys):
    assert main(["doctor", "--gpu-memory-utilization", "1.5"]) == 2
    assert "(0, 1]" in capsys.readouterr().err
