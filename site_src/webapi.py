"""What the site's Web Worker calls inside Pyodide: no logic of its own, only the CLI's functions.

diagnose() is kvkb.matcher.api.diagnose_json (what `kbmatch --json` prints); fit() parses its
arguments with `kvkb fit`'s own argparse definition and runs `kvkb fit --json`'s own run(), so the
page and the terminal cannot disagree. Stdlib only (the browser has no pydantic).
"""

from __future__ import annotations

import contextlib
import io
import os

_state: dict = {}


def load(index_json: str, base_url: str) -> int:
    """Build the Matcher from the site's portable index; the number of entries it knows."""
    os.environ.setdefault("RAPIDFUZZ_IMPLEMENTATION", "python")  # no WebAssembly build of its C++ core
    from kvkb.matcher.engine import Matcher
    from kvkb.matcher.portable import loads

    _state["matcher"] = Matcher(loads(index_json), base_url)
    return len(_state["matcher"].entries)


def diagnose(data, top: int = 3) -> str:
    """`kbmatch --json` for a paste (str) or a dropped file's raw bytes (a JS Uint8Array)."""
    from kvkb.matcher.api import diagnose_json

    if hasattr(data, "to_bytes"):  # a JsProxy of a Uint8Array: the file's bytes, undecoded
        data = data.to_bytes()
    return diagnose_json(data, _state["matcher"], top)


def shipped_models() -> list[str]:
    from kvkb.fit import shipped_configs

    return [name for name, _ in shipped_configs()]


def fit(argv: list[str], config_json: str | None = None) -> dict:
    """`kvkb fit ARGV --json`: {"rc", "stdout", "stderr"}. A pasted config.json is written to a
    file and its path goes first in argv, as a user would pass it."""
    import argparse

    from kvkb.cli import fit as fit_cli

    argv = [str(a) for a in argv]
    if isinstance(config_json, str):  # anything else (None, a JS null) means: no pasted config
        path = "/tmp/kvkb-pasted/config.json"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(config_json)
        argv = [path, *argv]
    parser = argparse.ArgumentParser(prog="kvkb", exit_on_error=False)
    fit_cli.add_parser(parser.add_subparsers(dest="command"))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            args = parser.parse_args(["fit", *argv, "--json"])
            rc = args.run(args)
        except SystemExit as exc:  # argparse reports bad input by exiting 2
            rc = exc.code if isinstance(exc.code, int) else 2
        except argparse.ArgumentError as exc:
            print(f"kvkb fit: {exc}", file=err)
            rc = 2
    return {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue()}


def fit_choices() -> dict:
    """What the calculator offers: the shipped models, the fit page's GPU sizes (as CUDA reports
    them) and the KV dtypes vLLM accepts, all from kvkb.fit itself."""
    from kvkb.fit.kvspec import VLLM_KV_CACHE_DTYPES
    from kvkb.fit.sitepage import GPUS

    return {"models": shipped_models(), "gpus": [[label, gib] for label, gib in GPUS],
            "kv_cache_dtypes": ["auto", *[d for d in VLLM_KV_CACHE_DTYPES if d != "auto"]]}
