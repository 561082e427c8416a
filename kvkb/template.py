"""Signature templates: 'max seq len ({max_model_len})' -> a linear-time extraction regex.

Shared by lint (does each sample match its own template?) and by the matcher (pull the user's
numbers out of their line once fuzzy scoring has picked the signature).
"""

from __future__ import annotations

import re
from functools import lru_cache

from .entry import PLACEHOLDER_RE

_TOKEN_RE = re.compile(r"\{\{|\}\}|\{([a-z_][a-z0-9_]*)\}|[{}]")


class TemplateError(ValueError):
    pass


def split(template: str) -> list[tuple[str, str]]:
    """[('lit', text) | ('ph', name)] with '{{' / '}}' unescaped to literal braces."""
    parts: list[tuple[str, str]] = []
    pos = 0
    for m in _TOKEN_RE.finditer(template):
        if m.start() > pos:
            parts.append(("lit", template[pos : m.start()]))
        tok = m.group(0)
        if tok in ("{{", "}}"):
            parts.append(("lit", tok[0]))
        elif m.group(1):
            parts.append(("ph", m.group(1)))
        else:
            raise TemplateError(
                f"stray '{tok}' at column {m.start() + 1}: placeholders are {{lower_snake}}; write '{tok * 2}' for a literal brace"
            )
        pos = m.end()
    if pos < len(template):
        parts.append(("lit", template[pos:]))
    return parts


def check(template: str) -> list[tuple[str, str]]:
    """[(code, message)] for a template: KB040 malformed, KB041 placeholders with no literal between."""
    try:
        parts = split(template)
    except TemplateError as exc:
        return [("KB040", str(exc))]
    problems = []
    for (k1, v1), (k2, v2) in zip(parts, parts[1:]):
        if k1 == "ph" and (k2 == "ph" or (k2 == "lit" and not v2.strip())):
            nxt = v2 if k2 == "ph" else "(whitespace)"
            problems.append(("KB041", f"placeholder {{{v1}}} is followed by {nxt}: ambiguous split, can backtrack"))
    if not any(k == "lit" and len(v.strip()) >= 8 for k, v in parts):
        problems.append(("KB040", "template has no literal text of 8+ characters to anchor a match"))
    return problems


@lru_cache(maxsize=4096)
def to_regex(template: str) -> re.Pattern[str]:
    """Literal parts match with flexible whitespace; each placeholder captures lazily up to the next literal.

    A placeholder repeated in the template becomes a backreference; a trailing placeholder takes
    one token (numbers, names) so the regex never runs over the rest of the line.
    """
    out: list[str] = []
    seen: set[str] = set()
    parts = split(template)
    for i, (kind, value) in enumerate(parts):
        if kind == "lit":
            # re.split keeps '' at a leading/trailing space, so edges get their \s+ too
            out.append(r"\s+".join(re.escape(w) for w in re.split(r"\s+", value)) if value.strip() else r"\s*")
        elif value in seen:
            out.append(f"(?P={value})")
        else:
            seen.add(value)
            last = i == len(parts) - 1
            out.append(f"(?P<{value}>\\S+)" if last else f"(?P<{value}>.+?)")
    return re.compile("".join(out))


def extract(template: str, line: str) -> dict[str, str] | None:
    m = to_regex(template).search(line)
    return m.groupdict() if m else None


def placeholders(text: str) -> list[str]:
    return PLACEHOLDER_RE.findall(text)
