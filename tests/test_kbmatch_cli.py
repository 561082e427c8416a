"""The kbmatch command: exit codes, --json shape, --explain, hostile input never gives a traceback."""

import json
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from matcher_helpers import PASTES, VLLM_LOGS, cli_env, sane_kb_copy

KV_LOG = VLLM_LOGS / "kv-too-small.log"


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    path = sane_kb_copy(tmp_path_factory.mktemp("kb") / "kb")
    subprocess.run([sys.executable, "-m", "kvkb.cli.main", "index"], env=cli_env(path), check=True, capture_output=True)
    return path


def kbmatch(kb, *args, stdin: bytes | None = None, **env):
    return subprocess.run(
        [sys.executable, "-m", "kvkb.matcher.cli", *map(str, args)],
        input=stdin if stdin is not None else b"", env=cli_env(kb, **env), capture_output=True,
    )


def test_confident_match_exits_0_with_fix_and_link(kb):
    run = kbmatch(kb, KV_LOG)
    out = run.stdout.decode()
    assert run.returncode == 0, run.stderr
    assert "max-model-len-exceeds-kv-cache" in out and "--max-model-len 1792" in out
    assert "https://kvkb.github.io/kvkb/errors/max-model-len-exceeds-kv-cache/" in out
    assert "v1-0.22" in out and "runner-up" in out  # why it matched
    assert "\x1b[" not in out  # not a TTY: no colour


def test_stdin_and_json_shape(kb):
    run = kbmatch(kb, "--json", stdin=KV_LOG.read_bytes())
    assert run.returncode == 0
    data = json.loads(run.stdout)
    assert data["root_cause"] == "max-model-len-exceeds-kv-cache"
    m = data["matches"][0]
    assert {"id", "score", "confident", "signature", "line", "params", "fix", "url"} <= set(m)
    assert m["params"]["estimated_max_len"] == "1792" and m["signature"]["versions"] == ">=0.22.0"
    # the capture ran on a temporary model dir, which vLLM's log names: the fix uses it
    model = re.search(r"model='([^']+)'", KV_LOG.read_text()).group(1)
    assert m["fix"] == f"vllm serve {model} --max-model-len 1792"


def test_base_url_flag(kb):
    run = kbmatch(kb, "--json", "--base-url", "http://127.0.0.1:8000/", KV_LOG)
    assert json.loads(run.stdout)["matches"][0]["url"] == "http://127.0.0.1:8000/errors/max-model-len-exceeds-kv-cache/"


def test_no_confident_match_exits_1_with_issue_link(kb):
    run = kbmatch(kb, stdin=b"Traceback (most recent call last):\nModuleNotFoundError: No module named 'vllm._C'\n")
    assert run.returncode == 1
    out = run.stdout.decode()
    assert "No confident match" in out and "issues/new?template=new-entry.yml" in out
    data = json.loads(kbmatch(kb, "--json", stdin=b"ModuleNotFoundError: No module named 'x'\n").stdout)
    assert data["root_cause"] is None


@pytest.mark.parametrize("args,needle", [
    (["/nonexistent/log.txt"], "cannot read"),
    ([str(VLLM_LOGS)], "directory"),
    (["--top", "0", str(KV_LOG)], "--top"),
    (["--bogus"], "usage"),
])
def test_usage_and_unreadable_input_exit_2(kb, args, needle):
    run = kbmatch(kb, *args)
    assert run.returncode == 2
    assert needle in run.stderr.decode() and b"Traceback" not in run.stderr


def test_empty_and_binary_input(kb):
    assert kbmatch(kb, stdin=b"").returncode == 1
    run = kbmatch(kb, stdin=bytes(range(256)) * 1000)
    assert run.returncode == 1 and b"Traceback" not in run.stderr


def test_explain_prints_the_entry_offline(kb):
    run = kbmatch(kb, "--explain", "max-model-len-exceeds-kv-cache")
    out = run.stdout.decode()
    assert run.returncode == 0
    assert "What it means" in out and "v1-0.9-to-0.21" in out and "max_seq_len" in out  # ineffective advice shown
    run = kbmatch(kb, "--explain", "max-model-len-exceeds-kv")
    assert run.returncode == 2 and b"did you mean max-model-len-exceeds-kv-cache" in run.stderr


@pytest.mark.skipif(not PASTES.is_dir(), reason="shared fixtures absent")
def test_real_paste_via_cli(kb):
    run = kbmatch(kb, "--json", PASTES / "051.txt")
    data = json.loads(run.stdout)
    assert data["root_cause"] == "max-model-len-exceeds-kv-cache"
    assert data["matches"][0]["fix"].endswith("--max-model-len 3984")


# --- property tests: in-process, hostile input, exit 0/1/2 and never a traceback ---------------

@pytest.fixture(scope="module")
def in_process(kb):
    import os

    old = os.environ.get("KVKB_KB_DIR")
    os.environ["KVKB_KB_DIR"] = str(kb)
    yield
    if old is None:
        os.environ.pop("KVKB_KB_DIR", None)
    else:
        os.environ["KVKB_KB_DIR"] = old


PIECES = st.sampled_from([
    b"\x00", b"\r", b"\r\n", b"\n", b"\xff\xfe", b"\xc3\x28", b"\x1b[31m", b"(EngineCore_DP0 pid=1) ",
    b"ERROR 11-20 10:12:01 [core.py:708] ", b"ValueError: ", b"torch.OutOfMemoryError: CUDA out of memory. ",
    b"No available memory for the cache blocks.", b"max seq len (16,384)", b"\xe2\x94\x82 ", b"Traceback (most recent call last):\n",
])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.one_of(st.binary(max_size=4000), st.lists(st.one_of(PIECES, st.binary(max_size=40)), max_size=80).map(b"".join)))
def test_any_bytes_never_crash(in_process, tmp_path_factory, data):
    from kvkb.matcher.cli import main

    path = tmp_path_factory.mktemp("in") / "log"
    path.write_bytes(data)
    assert main(["--json", str(path)]) in (0, 1)
    assert main([str(path), "--no-color"]) in (0, 1)


def test_one_huge_line_without_newline(in_process, tmp_path, capsys):
    from kvkb.matcher.cli import main

    path = tmp_path / "huge"
    path.write_bytes(b"A" * (20 << 20) + b"\rValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.")
    rc = main(["--json", str(path)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["root_cause"] == "no-memory-for-cache-blocks"


@pytest.mark.parametrize("argv", [
    [], ["-"], ["log.txt"], ["--json", "log.txt"], ["log.txt", "--json", "--no-color"], ["--top", "5", "x"], ["--top=2"],
    ["--explain", "max-model-len-exceeds-kv-cache"], ["--explain=abc"], ["--base-url", "http://h/", "f"], ["--base-url=http://h/"],
])
def test_fast_argument_parsing_agrees_with_argparse(argv):
    from kvkb.matcher.cli import _fast_args, _parser

    fast, full = _fast_args(argv), _parser().parse_args(argv)
    assert fast is not None
    assert {k: getattr(fast, k) for k in vars(full)} == vars(full)


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["--js"], ["--top", "x"], ["--top"], ["a", "b"], ["--bogus"], ["--explain"]])
def test_anything_unusual_goes_to_argparse(argv):
    from kvkb.matcher.cli import _fast_args

    assert _fast_args(argv) is None
