"""`kvkb fit`: will a model and context fit in vLLM's KV cache? Exact by vLLM 0.32.0's own rules.

capacity.fit() is the entry point (stdlib only); hfconfig reads config.json, kvspec builds per-layer
KV specs, budget/weights estimate non-KV memory, report/sitepage render, capture.py records vLLM's
own numbers for the tests.
"""
