"""Signature templates: 'max seq len ({max_model_len})' -> an extraction regex that cannot blow up.

Shared by lint (does each sample match its own template?) and by the matcher (pull the user's
numbers out of their line once fuzzy scoring has picked the signature; it stores to_regex().pattern
in its index, so the pattern itself must be safe to run on any paste).
"""

from __future__ import annotations

import re
from functools import lru_cache

# '{{' / '}}' are literal braces; '{name}' a placeholder; any other brace is an error
_TOKEN_RE = re.compile(r"\{\{|\}\}|\{([a-z_][a-z0-9_]*)\}|[{}]")
MIN_ANCHOR = 8  # a template needs one literal at least this long to anchor a search
# a middle placeholder holds at most this many characters (real values: numbers, names, a path, a
# one-line reason); the bound keeps a search linear in the paste even when it repeats the literals
MAX_VALUE = 1000


class TemplateError(ValueError):
    pass


def split(template: str) -> list[tuple[str, str]]:
    """[('lit', text) | ('ph', name)]: '{{' / '}}' unescaped, neighbouring literals merged."""
    parts: list[tuple[str, str]] = []

    def lit(text: str) -> None:
        if parts and parts[-1][0] == "lit":
            parts[-1] = ("lit", parts[-1][1] + text)
        else:
            parts.append(("lit", text))

    pos = 0
    for m in _TOKEN_RE.finditer(template):
        if m.start() > pos:
            lit(template[pos : m.start()])
        tok = m.group(0)
        if tok in ("{{", "}}"):
            lit(tok[0])
        elif m.group(1):
            parts.append(("ph", m.group(1)))
        else:
            raise TemplateError(
                f"stray '{tok}' at column {m.start() + 1}: placeholders are {{lower_snake}}; "
                f"write '{tok * 2}' for a literal brace"
            )
        pos = m.end()
    if pos < len(template):
        lit(template[pos:])
    return parts


def check(template: str) -> list[tuple[str, str]]:
    """[(code, message)]: KB040 malformed or unanchored, KB041 placeholders that cannot be told apart."""
    try:
        parts = split(template)
        to_regex(template)
    except TemplateError as exc:
        return [("KB040", str(exc))]
    except re.error as exc:  # pragma: no cover - split() only lets through what compiles
        return [("KB040", f"does not compile to a regex: {exc}")]
    problems = []
    for (k1, v1), (k2, v2) in zip(parts, parts[1:]):
        if k1 == "ph" and (k2 == "ph" or not v2.strip()):
            nxt = "{" + v2 + "}" if k2 == "ph" else "only whitespace"
            problems.append(
                ("KB041", f"placeholder {{{v1}}} is followed by {nxt}: no literal text marks where its value ends")
            )
    if not any(k == "lit" and len(v.strip()) >= MIN_ANCHOR for k, v in parts):
        problems.append(("KB040", f"template has no literal text of {MIN_ANCHOR}+ characters to anchor a match"))
    return problems


def _literal(text: str) -> str:
    # flexible whitespace: wrapped or re-indented pastes still match; re.split keeps '' at the edges
    return r"\s+".join(re.escape(w) for w in re.split(r"\s+", text)) if text.strip() else r"\s+"


@lru_cache(maxsize=4096)
def to_regex(template: str) -> re.Pattern[str]:
    """Compile a template; raises TemplateError on a malformed one (lint reports it as KB040).

    Each placeholder takes the shortest text (at most MAX_VALUE characters, never a newline) up to the
    FIRST occurrence of the literal after it, inside an atomic group: once found, that split is final. Without the atomic groups a line that repeats the
    literals but never completes the template made the regex try every combination of splits (minutes
    on a 40 kB line). A leading placeholder is the single token before the first literal (otherwise it
    would swallow the log prefix); a trailing one is the single token after the last literal. A
    placeholder used twice must repeat the same text (a backreference).
    """
    parts = split(template)
    out: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(parts):
        kind, value = parts[i]
        if kind == "lit":
            out.append(_literal(value))
            i += 1
            continue
        nxt = parts[i + 1] if i + 1 < len(parts) else None
        if value in seen:
            capture = f"(?P={value})"
        elif nxt is None:
            capture = f"(?P<{value}>\\S+)"
        elif i == 0:
            capture = f"(?<!\\S)(?P<{value}>\\S+?)"
        elif nxt[0] == "ph":
            capture = f"(?P<{value}>\\S)"  # ambiguous (lint KB041): one character, never a search
        else:
            capture = f"(?P<{value}>.{{1,{MAX_VALUE}}}?)"
        seen.add(value)
        if nxt is not None and nxt[0] == "lit":
            out.append(f"(?>{capture}{_literal(nxt[1])})")
            i += 2
        else:
            out.append(f"(?>{capture})" if nxt is not None else capture)
            i += 1
    return re.compile("".join(out))


def extract(template: str, line: str) -> dict[str, str] | None:
    """The placeholder values in line, or None when the template does not match it (or is malformed)."""
    try:
        m = to_regex(template).search(line)
    except TemplateError:
        return None
    return m.groupdict() if m else None


def placeholders(text: str) -> list[str]:
    """Placeholder names in order of first use, escaped braces ignored; text that is not a valid
    template (a Python dict in a fix, say) yields only its well-formed {names}."""
    try:
        names = [v for k, v in split(text) if k == "ph"]
    except TemplateError:
        names = re.findall(r"(?<!\{)\{([a-z_][a-z0-9_]*)\}(?!\})", text)
    return list(dict.fromkeys(names))
