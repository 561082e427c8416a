"""`kvkb fit`: will a model and context fit in vLLM's KV cache? Exact by vLLM 0.32.0's own rules.

capacity.fit() is the entry point (stdlib only); hfconfig reads config.json, kvspec builds per-layer
KV specs, draft adds a speculative-decoding drafter's layers to the pool, budget/weights estimate
non-KV memory, report/sitepage render, capture.py records vLLM's own numbers for the tests.
Imports run one way: capacity -> budget -> weights/versions -> kvspec -> hfconfig.
"""

import os

# Shipped real configs live in models/<org>--<name>/config.json. os, not pathlib: kbmatch looks here
# on its hot path (kvkb.matcher.fill), where every import shows in the cold-start time.
MODELS_PATH = os.path.join(os.path.dirname(__file__), "models")


def shipped_configs() -> list[tuple[str, str]]:
    """(repo id 'org/name', path of its config.json) for every shipped model, sorted by folder."""
    out = []
    for folder in sorted(os.listdir(MODELS_PATH)):
        path = os.path.join(MODELS_PATH, folder, "config.json")
        if os.path.isfile(path):
            out.append((folder.replace("--", "/", 1), path))
    return out
