"""vLLM version strings as tuples. Its own module so budget and capacity both import it one way
(capacity -> budget -> versions), with no import cycle between them."""

from __future__ import annotations

from kvkb.fit.kvspec import FitError


def version_tuple(v: str) -> tuple[int, ...]:
    parts = []
    for p in str(v).lstrip("v").split(".")[:3]:
        digits = "".join(ch for ch in p if ch.isdigit())
        if not digits:
            raise FitError(f"cannot read --vllm-version {v!r} (expected e.g. 0.32.0)")
        parts.append(int(digits))
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)
