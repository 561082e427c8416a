"""The match index in a portable form for the browser (Pyodide): JSON, with no absolute paths.

The on-disk index (index.py) is marshal: its format belongs to one Python version and its
freshness key names this machine's kb/ path. The site ships this form instead, built at site-build
time from the same index.build(), and the page's Python reads it back with json (not JavaScript's
JSON.parse: some word masks are wider than JavaScript's 53-bit integers).

JSON has no tuples, sets, bytes or non-string keys; the index may grow them (marshal keeps them),
so each is written as a tagged object and read back as the same type: loads(dumps(x)) == x.
"""

from __future__ import annotations

import json

TAG = "__kvkb_type__"
PORTABLE_FORMAT = 1


def _encode(value):
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and TAG not in value:
            return {k: _encode(v) for k, v in value.items()}
        return {TAG: "dict", "items": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, tuple):
        return {TAG: "tuple", "items": [_encode(v) for v in value]}
    if isinstance(value, (set, frozenset)):
        # sorted by repr: the same index gives the same bytes (builds are reproducible)
        items = sorted((_encode(v) for v in value), key=repr)
        return {TAG: type(value).__name__, "items": items}
    if isinstance(value, (bytes, bytearray)):
        return {TAG: "bytes", "latin1": bytes(value).decode("latin-1")}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"the match index holds a {type(value).__name__}, which the portable form cannot carry")


_DECODE = {
    "tuple": lambda o: tuple(_decode(v) for v in o["items"]),
    "set": lambda o: {_decode(v) for v in o["items"]},
    "frozenset": lambda o: frozenset(_decode(v) for v in o["items"]),
    "bytes": lambda o: o["latin1"].encode("latin-1"),
    "dict": lambda o: {_decode(k): _decode(v) for k, v in o["items"]},
}


def _decode(value):
    if isinstance(value, dict):
        tag = value.get(TAG)
        if tag is not None:
            return _DECODE[tag](value)
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def dumps(index: dict) -> str:
    """The index as portable JSON; its machine-specific freshness key is left out."""
    body = {k: v for k, v in index.items() if k != "key"}
    return json.dumps({"portable_format": PORTABLE_FORMAT, "index": _encode(body)}, ensure_ascii=False,
                      separators=(",", ":"))


def loads(text: str | bytes) -> dict:
    """The index dumps() wrote; ValueError when the text is not one."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("portable_format") != PORTABLE_FORMAT or not isinstance(data.get("index"), dict):
        raise ValueError("not a portable kvkb match index (rebuild the site)")
    return _decode(data["index"])


def build(entries) -> str:
    """Portable JSON of the index for these validated entries (as index.build makes it)."""
    from .index import build as build_index

    return dumps(build_index(list(entries))[0])
