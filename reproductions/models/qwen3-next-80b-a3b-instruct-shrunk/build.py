"""Build the tokenizer of the shrunk Qwen3-Next-80B-A3B-Instruct used by the hybrid-model reproductions.

Run with a Python that has the `tokenizers` library (the vLLM venv does):
    .venv-vllm/bin/python reproductions/models/qwen3-next-80b-a3b-instruct-shrunk/build.py

config.json keeps Qwen3-Next-80B-A3B-Instruct's layout (gated delta net layers with a full
attention layer every 4th, MoE MLPs, partial rotary, vocab 151936) shrunk to 4 layers of hidden
256, head dim 64, 4 experts; so each GDN layer's state is small and a 64 MiB KV budget holds a
few hundred state blocks, fewer than max_num_seqs=1024. The tokenizer is the byte-level one of
../build_tokenizer.py plus the chat tokens at their real Qwen ids
(built by ../qwen2-audio-7b-instruct-shrunk/build.py's `build`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_SHARED = HERE.parent / "qwen2-audio-7b-instruct-shrunk" / "build.py"

SPECIAL = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}


def _shared_builder():
    # the builder lives beside the audio model; load it by path (the folder name is not a package)
    spec = importlib.util.spec_from_file_location("kvkb_shrunk_build", _SHARED)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    _shared_builder().build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE, SPECIAL, {})
