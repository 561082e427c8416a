"""The stage read from vLLM's own logging call site (`ERROR ... [core.py:708] ...`): the table's
derivation from source (matcher/derive_logsites.py), its lookups (matcher/logsites.py) and the matcher
using it as a frame-derived stage (matcher/engine.py)."""

from __future__ import annotations

import json
import os

import pytest

from kvkb.matcher import logsites
from kvkb.matcher.derive_logsites import merge, release_sites, site_stage
from kvkb.matcher.engine import Matcher
from matcher_helpers import matcher

CORE = "vllm/v1/engine/core.py"
RUNNER = "vllm/v1/worker/gpu_model_runner.py"
EXECUTOR = "vllm/v1/executor/multiproc_executor.py"


def core_source(pad: int) -> str:
    """v1/engine/core.py's handler as vLLM writes it, `pad` lines lower in the file."""
    return "\n" * pad + '''import logging
logger = init_logger(__name__)


class EngineCoreProc:
    @staticmethod
    def run_engine_core(*args, **kwargs):
        engine_core = None
        try:
            engine_core = EngineCoreProc(*args, **kwargs)
            engine_core.run_busy_loop()
        except Exception as e:
            if engine_core is None:
                logger.exception("EngineCore failed to start.")
            else:
                logger.exception("EngineCore encountered a fatal error.")
            raise e
'''


RUNNER_SRC = '''import logging
logger = init_logger(__name__)


class GPUModelRunner:
    def capture_model(self) -> None:
        def capture_one(size):
            try:
                self._dummy_run(size)
            except Exception:
                logger.error("Capturing the graph of size %d failed", size)
                raise
        for size in self.sizes:
            capture_one(size)
'''
EXECUTOR_SRC = '''import logging
logger = init_logger(__name__)


class WorkerProc:
    def worker_busy_loop(self):
        while True:
            method, args, kwargs = self.rpc_broadcast_mq.dequeue()
            try:
                func = getattr(self.worker, method)
                output = func(*args, **kwargs)
            except Exception:
                logger.exception("WorkerProc hit an exception.")
                continue
            logger.info("done %s", method)
'''
# release 1.0.0: the handler's lines 14 (start-up) and 16 (serving); 1.1.0: the same two lines moved down
# by two, so line 16 is start-up there and serving in 1.0.0
STARTUP_10, SERVING_10, SERVING_11 = 14, 16, 18


def sources(version: str) -> list[tuple[str, str]]:
    pad = 0 if version == "1.0.0" else 2
    return [(CORE, core_source(pad)), (RUNNER, RUNNER_SRC), (EXECUTOR, EXECUTOR_SRC), ("vllm/empty.py", "x = 1\n")]


@pytest.fixture(scope="module")
def table() -> dict:
    return merge({v: release_sites(sources(v)) for v in ("1.0.0", "1.1.0")}, ["1.0.0", "1.1.0"])


def rows(table: dict, name: str) -> dict[int, list]:
    out: dict[int, list] = {}
    for line, code, fn, rel in table["files"].get(name, []):
        out.setdefault(line, []).append((code, table["functions"][fn], rel))
    return out


def test_release_sites_reads_error_level_logger_calls_only():
    found = release_sites([(CORE, core_source(0)), (EXECUTOR, EXECUTOR_SRC)])
    assert [(os.path.basename(p), ln, funcs[-1], msg, d) for p, ln, funcs, msg, d in found] == [
        ("core.py", STARTUP_10, "run_engine_core", "EngineCore failed to start.", False),
        ("core.py", SERVING_10, "run_engine_core", "EngineCore encountered a fatal error.", False),
        # the RPC loop runs a method named at run time: noted, the INFO call is not recorded
        ("multiproc_executor.py", 13, "worker_busy_loop", "WorkerProc hit an exception.", True),
    ]


def test_site_stage_uses_the_frame_rules():
    # nested function inside capture_model: the enclosing frame shows the capture
    assert site_stage(RUNNER, ["capture_model", "capture_one"], "Capturing the graph of size * failed", False) == "cudagraph"
    assert site_stage(CORE, ["run_engine_core"], "EngineCore failed to start.", False) == "startup"
    assert site_stage(CORE, ["run_engine_core"], "EngineCore encountered a fatal error.", False) == "serving"
    # worker_busy_loop is a serving frame, but an RPC loop also runs start-up's methods: no stage
    assert site_stage(EXECUTOR, ["worker_busy_loop"], "WorkerProc hit an exception.", True) is None
    assert site_stage("vllm/model_executor/model_loader/loader.py", ["helper"], "x", False) == "startup"


def test_merge_keeps_stages_per_release(table):
    assert table["releases"] == ["1.0.0", "1.1.0"]
    core = rows(table, "core.py")
    assert core[STARTUP_10] == [("s", "run_engine_core", "0")]
    # line 16: serving in 1.0.0, start-up in 1.1.0 (the code moved): both rows kept, by release
    assert sorted(core[SERVING_10]) == [("s", "run_engine_core", "1"), ("v", "run_engine_core", "0")]
    assert core[SERVING_11] == [("v", "run_engine_core", "1")]
    assert rows(table, "gpu_model_runner.py") == {11: [("c", "capture_one", "0-1")]}
    assert "multiproc_executor.py" not in table["files"]  # no stage in any release
    assert table["ambiguous"] == 1


@pytest.fixture(scope="module")
def site_matcher(table, tmp_path_factory) -> Matcher:
    """The KB's matcher with the synthetic table in its index, as index.build puts the real one."""
    path = tmp_path_factory.mktemp("logsites") / "logsites.json"
    path.write_text(json.dumps(table))
    return Matcher(dict(matcher().index, logsites=logsites.load_table(str(path))))


OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "79.19 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.16 GiB memory in use.")


def at(site: str, error: str = OOM, new: bool = True) -> str:
    if new:
        return f"(EngineCore_DP0 pid=229) ERROR 04-19 12:21:04 [{site}] {error}\n"
    return f"ERROR 06-21 10:00:18 {site}] {error}\n"  # the format before the bracket


def top(m: Matcher, text: str):
    report = m.match(text)
    return report.matches[0] if report.matches else None


@pytest.mark.parametrize("new", [True, False])
def test_startup_site_gives_the_startup_entry_confidently(site_matcher, new):
    m = top(site_matcher, at(f"core.py:{STARTUP_10}", new=new))
    assert (m.id, m.confidence) == ("cuda-oom-during-startup", "confident")
    assert any(f"core.py:{STARTUP_10}" in f.says and "start-up" in f.says and "run_engine_core" in f.says
               for f in m.evidence)


def test_serving_site_gives_the_serving_entry_confidently(site_matcher):
    m = top(site_matcher, at(f"v1/engine/core.py:{SERVING_11}"))
    assert (m.id, m.confidence) == ("cuda-oom-during-serving", "confident")
    assert any("serving" in f.says and f"core.py:{SERVING_11}" in f.says for f in m.evidence)


def test_capture_site(site_matcher):
    m = top(site_matcher, at("gpu_model_runner.py:11"))
    assert (m.id, m.confidence) == ("cuda-oom-during-cudagraph-capture", "confident")


@pytest.mark.parametrize("site", [
    "core.py:15",  # no ERROR-level call there
    f"core.py:{SERVING_10}",  # start-up in one release, serving in another: ambiguous without the release
    "multiproc_executor.py:13",  # the RPC loop: no stage
    "other.py:14",  # a file the table does not know
])
def test_unknown_or_ambiguous_site_stays_likely(site_matcher, site):
    m = top(site_matcher, at(site))
    assert m is not None and m.confidence == "likely"


def test_a_site_needs_vllms_error_prefix(site_matcher):
    # the same file:line in a WARNING line, or in some other program's format, says nothing
    for text in (f"WARNING 04-19 12:21:04 [core.py:{STARTUP_10}] {OOM}\n", f"[core.py:{STARTUP_10}] {OOM}\n"):
        m = top(site_matcher, text)
        assert m is not None and m.confidence == "likely"


def test_stated_release_picks_its_row(site_matcher):
    banner = "INFO 04-19 12:20:00 [api_server.py:1000] vLLM API server version {}\n"
    # line 16: serving in 1.0.0, start-up in 1.1.0
    m = top(site_matcher, banner.format("1.1.0") + at(f"core.py:{SERVING_10}"))
    assert (m.id, m.confidence) == ("cuda-oom-during-startup", "confident")
    m = top(site_matcher, banner.format("1.0.0") + at(f"core.py:{SERVING_10}"))
    assert (m.id, m.confidence) == ("cuda-oom-during-serving", "confident")
    # line 18 exists only in 1.1.0: a 1.0.0 paste cannot have logged from it
    m = top(site_matcher, banner.format("1.0.0") + at(f"core.py:{SERVING_11}"))
    assert m.confidence == "likely"


def test_frames_win_over_the_site(site_matcher):
    p = f"(EngineCore_DP0 pid=229) ERROR 04-19 12:21:04 [core.py:{STARTUP_10}] "
    text = (f"{p}Traceback (most recent call last):\n"
            f'{p}  File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 9, in execute_model\n'
            f"{p}    out = self.model(x)\n{p}{OOM}\n")
    m = top(site_matcher, text)
    assert (m.id, m.confidence) == ("cuda-oom-during-serving", "confident")


def test_stated_release_forms():
    assert logsites.stated_release(["INFO 01-01 00:00:00 api_server.py:1] vLLM API server version 0.6.3.post1"]) == "0.6.3.post1"
    assert logsites.stated_release(["Initializing a V1 LLM engine (v0.10.1.1) with config: model=x"]) == "0.10.1.1"
    assert logsites.stated_release(["pip install vllm==0.9.2"]) == "0.9.2"
    assert logsites.stated_release(["nothing here", "version 3"]) is None


def test_site_of():
    assert logsites.site_of("(VllmWorker rank=0 pid=1) ERROR 04-19 12:21:04 [v1/engine/core.py:708] x") == ("core.py", 708)
    assert logsites.site_of("ERROR 06-21 10:00:18 worker_base.py:620] x") == ("worker_base.py", 620)
    assert logsites.site_of("\x1b[1;36m(EngineCore pid=1)\x1b[0;0m ERROR 04-19 12:21:04.123 [core.py:7] x") == ("core.py", 7)
    assert logsites.site_of("INFO 04-19 12:21:04 [core.py:708] x") is None
    assert logsites.site_of("see core.py:708] for details") is None


# --- the committed table --------------------------------------------------------------------------------


def test_committed_table_is_small_and_loads():
    assert os.path.getsize(logsites.LOGSITES_PATH) < 300_000
    data = json.loads(open(logsites.LOGSITES_PATH, encoding="utf-8").read())
    assert data["releases"][0] == "0.4.0" and len(data["releases"]) >= 20
    loaded = logsites.load_table()
    assert loaded["files"] and loaded["releases"] == data["releases"]


def test_committed_table_holds_v1_engine_core_handlers():
    # vLLM 0.11.0's vllm/v1/engine/core.py: line 708 logs "EngineCore failed to start.", line 710
    # "EngineCore encountered a fatal error." (read from the 0.11.0 wheel)
    sites = logsites.Sites(logsites.load_table())
    if "0.11.0" not in sites.releases:
        pytest.skip("the committed table was derived without 0.11.0")
    assert sites.lookup("core.py", 708, "0.11.0")[0] == "startup"
    assert sites.lookup("core.py", 710, "0.11.0")[0] == "serving"


def test_index_carries_the_table():
    assert matcher().index["logsites"]["files"]


def test_committed_table_decides_a_real_prefix():
    # vLLM 0.20.0-0.20.2 log "EngineCore encountered a fatal error." and its traceback from core.py:1138
    # (read from those wheels); no other release logs at ERROR from a core.py line 1138
    sites = logsites.Sites(logsites.load_table())
    if sites.lookup("core.py", 1138) is None:
        pytest.skip("the committed table does not decide core.py:1138")
    m = top(matcher(), at("core.py:1138"))
    assert (m.id, m.confidence) == ("cuda-oom-during-serving", "confident")
    assert any("core.py:1138" in f.says and "0.20.0" in f.says for f in m.evidence)


def test_a_repeated_copy_lends_its_site_to_the_first(site_matcher):
    # a launcher prints the engine's error bare, then vLLM's logger prints it again with its call site:
    # one error, whose stage the second copy's prefix shows
    bare = f"2026-05-08 11:47:02.257 [Error] (Process) (EngineCore pid=2651) {OOM}\n...\n"
    logged = f"2026-05-08 11:47:02.257 [Error] (Process) (EngineCore pid=2651) " + at(f"core.py:{STARTUP_10}")
    m = top(site_matcher, bare + logged)
    assert (m.id, m.confidence) == ("cuda-oom-during-startup", "confident")
    assert any(f"core.py:{STARTUP_10}" in f.says and f.line == 3 for f in m.evidence)
    m = top(site_matcher, bare + "2026-05-08 11:47:02.257 [Error] (Process) (EngineCore pid=2651) "
            + at(f"core.py:{SERVING_11}"))
    assert (m.id, m.confidence) == ("cuda-oom-during-serving", "confident")
    # a copy with no site of its own lends nothing
    m = top(site_matcher, bare + bare)
    assert m.confidence == "likely"


def test_a_copy_with_its_own_stage_keeps_it(site_matcher):
    # the first copy's frames show serving; a later copy logged from a start-up site does not change it
    p = f"(EngineCore_DP0 pid=229) ERROR 04-19 12:21:04 [core.py:{SERVING_11}] "
    text = (f"{p}Traceback (most recent call last):\n"
            f'{p}  File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 9, in execute_model\n'
            f"{p}    out = self.model(x)\n{p}{OOM}\n" + at(f"core.py:{STARTUP_10}"))
    m = top(site_matcher, text)
    assert (m.id, m.confidence) == ("cuda-oom-during-serving", "confident")
