"""Which releases print a given line: a sample is explained by the atlas's literals when, in one release,
the literals found in it (with their formatted-in values) cover the whole message.

Pure functions over an Atlas; the lint rules (kvkb.atlas.check) and `kvkb atlas find` use them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kvkb import template as _template
from kvkb.atlas.extract import WILD
from kvkb.atlas.store import Atlas, StringItem

# "(EngineCore_DP0 pid=112) ", "[rank0]: "
_PROCESS_PREFIX = re.compile(r"^(?:\([A-Za-z_][\w-]* pid=\d+\)\s*|\[rank\d+\]:\s*)+")
# "ERROR 05-01 14:39:06 [core.py:1131] " and the older "WARNING 06-11 14:03:52 cpu.py:104] "
_LOG_PREFIX = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d(?:\.\d+)?\s+(?:\[?[\w./-]+:\d+\]\s*)?")
# "ValueError: ", "torch.OutOfMemoryError: ", "vllm.v1.engine.exceptions.EngineDeadError: "
_EXC_PREFIX = re.compile(r"^(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning)):\s+")
# a literal must cover this share of the message to be one of its pieces (so stray words do not add up)
MIN_PIECE = 0.3
# ... or at least this many characters (" (original error: " of an f"{msg} (original error: {e})")
MIN_PIECE_CHARS = 12
# letters of the message's wording that no literal explains, at most (glue and values are not counted)
MAX_UNEXPLAINED = 0.15


# pydantic's line for an error raised in a validator: "  Value error, MESSAGE [type=value_error, ...]"
_PYDANTIC = re.compile(r"^(?:Value error|Assertion failed), (?P<msg>.*?)(?:\s*\[type=[^\]]*\])?$", re.S)


# an exception shown as its repr: "OutOfMemoryError('Error in model execution ...')"
_REPR = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\((?P<q>['\"])(?P<msg>.*)(?P=q)\)$", re.S)


def message_of(sample: str) -> str:
    """The message part of a printed line: process, log and exception prefixes removed, and pydantic's
    wrapping of a message a validator raised."""
    text = _PROCESS_PREFIX.sub("", sample.strip())
    text = _LOG_PREFIX.sub("", text)
    text = _PROCESS_PREFIX.sub("", text)
    text = _EXC_PREFIX.sub("", text, count=1).strip()
    m = _REPR.match(text)
    if m:
        text = m.group("msg")
    m = _PYDANTIC.match(text)
    return m.group("msg") if m else text


def _span_regex(pattern: str) -> re.Pattern:
    """The item's text as a regex: each literal part a group, in order, anything between them. A
    value at either end is left out: it covers nothing (so "{x} failed: {y}" cannot claim a line)."""
    parts = [p for p in pattern.split(WILD)]
    while parts and not parts[0]:
        parts.pop(0)
    while parts and not parts[-1]:
        parts.pop()
    return re.compile("(?s)" + ".*?".join(f"({re.escape(p)})" for p in parts))


_regex_cache: dict[str, re.Pattern] = {}


def _regex(pattern: str) -> re.Pattern:
    rx = _regex_cache.get(pattern)
    if rx is None:
        rx = _regex_cache[pattern] = _span_regex(pattern)
    return rx


@dataclass(frozen=True)
class Explained:
    """The releases that print a message, and the items that do it."""

    releases: frozenset[int]
    items: tuple[StringItem, ...]  # every piece found in any of those releases, largest first


def _uncovered(text: str, required: list[bool], spans: list[tuple[int, int]]) -> int:
    covered = [False] * len(text)
    for a, b in spans:
        for i in range(a, b):
            covered[i] = True
    return sum(1 for i, c in enumerate(text) if required[i] and not covered[i])


_IDENT = re.compile(r"[A-Za-z0-9]*_[A-Za-z0-9_]*|[A-Za-z]*\d[\w.]*")


def _wording(message: str, required: list[bool]) -> list[bool]:
    """The required characters that carry wording: letters outside identifiers and numbers. Digits,
    punctuation and names such as max_model_len are often values formatted in, or the ", " a list of
    pieces is joined with; a piece's own punctuation is still checked, by its regex."""
    out = [required[i] and c.isalpha() for i, c in enumerate(message)]
    for m in _IDENT.finditer(message):
        for i in range(m.start(), m.end()):
            out[i] = False
    return out


def _required(message: str, template: str | None) -> list[bool]:
    """Which characters of the message the atlas must explain: the template's literal text where the
    signature's template matches (its placeholders are values, and text after it is not claimed),
    else every character."""
    if template:
        try:
            m = _template.to_regex(template).search(message)
        except _template.TemplateError:
            m = None
        if m:
            req = [False] * len(message)
            for i in range(m.start(), m.end()):
                req[i] = True
            for name in m.groupdict():
                a, b = m.span(name)
                for i in range(max(a, 0), b):
                    req[i] = False
            return req
    return [True] * len(message)


def _strict(message: str, template: str | None) -> list[int]:
    """Punctuation of the template right beside a placeholder (the quotes of "error '{error}'"): a
    release whose literal lacks it prints the value bare, which the template does not match."""
    if not template:
        return []
    try:
        m = _template.to_regex(template).search(message)
    except _template.TemplateError:
        return []
    if not m:
        return []
    spans = [m.span(name) for name in m.groupdict() if m.span(name)[0] >= 0]
    inside = {i for a, b in spans for i in range(a, b)}
    out = []
    for a, b in spans:
        for i in (a - 1, b):
            # quotes, brackets and "=" wrap a value in its own literal; a comma or period beside a
            # value may be the glue between pieces (", ".join of a stats line's parts)
            if m.start() <= i < m.end() and i not in inside and message[i] in "'\"`()[]{}<>=":
                out.append(i)
    return out


def explain(atlas: Atlas, sample: str, template: str | None = None,
            keep: Callable[[StringItem], bool] | None = None) -> Explained:
    """Releases in which the atlas's literals explain the message of `sample` (with a signature's
    template: the template's literal text in it); keep filters the literals that may."""
    message = message_of(sample)
    strict = _strict(message, template)
    required = _wording(message, _required(message, template))
    size = sum(required)
    if not size:
        return Explained(frozenset(), ())
    pieces: list[tuple[StringItem, tuple[int, int]]] = []
    floor = min(MIN_PIECE * len(message.strip()), MIN_PIECE_CHARS)
    for item, covered in atlas.find_text(message, min_cover=0):
        if covered < floor or (keep is not None and not keep(item)):
            continue
        m = _regex(item.text).search(message)
        if m:
            # with a template, a piece covers its literal text only: the values between its parts are
            # the template's placeholders or another piece's text (a wrapper's "'{error}'" must not
            # vouch for the message inside it); a bare line counts its values as covered
            spans = [m.span(g) for g in range(1, (m.lastindex or 0) + 1)] if template else [m.span()]
            pieces.append((item, spans))
    releases: set[int] = set()
    by_release: dict[int, list[tuple[int, int]]] = {}
    for item, spans in pieces:
        for r in item.indexes:
            by_release.setdefault(r, []).extend(spans)
    for r, spans in by_release.items():
        if strict and not all(any(a <= i < b for a, b in spans) for i in strict):
            continue
        if _uncovered(message, required, spans) <= MAX_UNEXPLAINED * size:
            releases.add(r)
    # a piece found only inside a value (the message within "Worker failed with error '{error}'") explains
    # none of the wording: it is not one of the literals that print it
    used = tuple(sorted({it for it, spans in pieces if it.indexes & releases
                         and any(required[i] for a, b in spans for i in range(a, b))},
                        key=lambda it: -len(it.text.replace(WILD, ""))))
    return Explained(frozenset(releases), used)
