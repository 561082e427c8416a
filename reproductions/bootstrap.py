"""Run one entry program under the reproduction "machine"; executed by the vLLM interpreter.

    python bootstrap.py SPEC.json PROGRAM.py

This file is deliberately standalone (stdlib + vllm only): the vLLM interpreter is a separate
venv that does not have kvkb installed. It changes exactly two things before running PROGRAM
unmodified as __main__ (issue 4, rule 1):

  (a) the model: `LLM(model="<hub id>")` is pointed at a local directory holding the real
      config.json and a tiny tokenizer, with `load_format="dummy"` (random weights, no download);
  (b) the machine: keyword arguments such as `kv_cache_memory_bytes` are *defaults* for every
      LLM(...) the program creates. A keyword the program passes itself wins, the way the same
      program would behave on a machine of that size. Environment variables are set by the
      runner, not here.

It also reports, without changing behaviour, how many tokens each generate() produced, so the
runner can check that a fixed program really generated text (dummy weights mostly sample ids
outside the tiny tokenizer, which decode to empty text).
"""

from __future__ import annotations

import json
import runpy
import sys

MARK = "[kvkb-repro]"


def _patch_llm(spec: dict) -> None:
    import vllm

    models: dict = spec.get("models", {})
    machine_kwargs: dict = spec.get("llm_kwargs", {})
    original_init = vllm.LLM.__init__
    original_generate = vllm.LLM.generate

    def init(self, *args, **kwargs):
        model = kwargs.get("model", args[0] if args else None)
        if model in models:
            local = models[model]
            if args:
                args = (local, *args[1:])
            else:
                kwargs["model"] = local
            if kwargs.get("tokenizer") in models:
                kwargs["tokenizer"] = models[kwargs["tokenizer"]]
            kwargs["load_format"] = "dummy"
        for key, value in machine_kwargs.items():
            kwargs.setdefault(key, value)
        shown = {k: v for k, v in kwargs.items() if k in machine_kwargs}
        print(f"{MARK} LLM(model={model!r}) machine defaults in effect: {shown}", flush=True)
        return original_init(self, *args, **kwargs)

    def generate(self, *args, **kwargs):
        outputs = original_generate(self, *args, **kwargs)
        for i, out in enumerate(outputs):
            for completion in getattr(out, "outputs", []):
                ids = list(getattr(completion, "token_ids", []) or [])
                print(f"{MARK} request {i}: generated {len(ids)} tokens: {ids[:16]}", flush=True)
        return outputs

    vllm.LLM.__init__ = init
    vllm.LLM.generate = generate


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: bootstrap.py SPEC.json PROGRAM.py", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as fh:
        spec = json.load(fh)
    _patch_llm(spec)
    sys.argv = [argv[1]]
    runpy.run_path(argv[1], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
