"""A signature template as literal text and gaps: exact matching and value extraction with str.find.

kvkb.template.to_regex is the reference (lint runs it on every sample); this walks the same
template without a regex, because compiling one costs ~0.5 ms and kbmatch's start-up is measured.
Semantics follow to_regex: whitespace is flexible; a middle placeholder takes 1..MAX_VALUE
characters up to the FIRST occurrence of the literal after it; a leading placeholder is the token
just before the first literal, a trailing one the token just after the last.
"""

from __future__ import annotations

from .normalize import numbers_in

MAX_VALUE = 1000  # kvkb.template.MAX_VALUE (not imported: kvkb.template is for build time)


def literal_form(parts: list[tuple[str, str]]) -> dict:
    """{lits, gaps, nums} from kvkb.template.split(): the literals whitespace-collapsed, the
    placeholder names before, between and after them (len(gaps) == len(lits) + 1), and the
    numbers the template writes out literally ("KV cache usage: 100.0%")."""
    lits: list[str] = []
    gaps: list[list[str]] = [[]]
    for kind, value in parts:
        if kind == "ph":
            gaps[-1].append(value)
            continue
        core = " ".join(value.split())
        if value[:1].isspace():
            core = " " + core
        if value[-1:].isspace() and core != " ":
            core += " "
        lits.append(core)
        gaps.append([])
    nums = sorted({n for kind, value in parts if kind == "lit" for n in numbers_in(value)})
    return {"lits": lits, "gaps": gaps, "nums": nums}


def collapse(text: str) -> str:
    return " ".join(text.split())


def walk(text: str, sig: dict) -> tuple[dict[str, str], bool]:
    """(placeholder values, whether the whole template matched). Short of a whole match, the values
    of the longest run of literals found from the first one (a line cut mid-message)."""
    lits = sig.get("lits")
    if not lits:
        return {}, False
    t = collapse(text)
    best: dict[str, str] = {}
    start = t.find(lits[0])
    while start >= 0:
        values, done = _from(t, start, lits, sig["gaps"])
        if done:
            return values, True
        if len(values) > len(best):
            best = values
        start = t.find(lits[0], start + 1)
    return best, False


def exact(text: str, sig: dict) -> bool:
    return walk(text, sig)[1]


def _token_after(t: str, pos: int) -> str:
    return t[pos:].split(" ", 1)[0] if pos < len(t) and t[pos] != " " else ""


def _from(t: str, start: int, lits: list[str], gaps: list[list[str]]) -> tuple[dict[str, str], bool]:
    values: dict[str, str] = {}
    if gaps[0]:
        before = t[:start].rsplit(" ", 1)[-1] if start and t[start - 1] != " " else ""
        if not before:
            return values, False
        values[gaps[0][0]] = before
    pos = start + len(lits[0])
    for lit, names in zip(lits[1:], gaps[1:-1]):
        nxt = t.find(lit, pos + 1, pos + MAX_VALUE + len(lit))
        if nxt < 0:
            token = _token_after(t, pos)  # what a prefix of the template ending in this placeholder takes
            if names and token:
                values[names[0]] = token
            return values, False
        if names:
            values[names[0]] = t[pos:nxt]
        pos = nxt + len(lit)
    if gaps[-1]:
        token = _token_after(t, pos)
        if not token:
            return values, False
        values[gaps[-1][0]] = token
    return values, True


def cut_point(text: str, sig: dict) -> tuple[int, bool]:
    """How many of the template's literal characters a text holds in order when the text stops partway
    through the wording (a paste cut mid-line: "...: Cannot allocate memory ("), else 0. The text must
    end inside the template: in a placeholder's value or partway into a literal; a whole match is no cut.
    With it, whether the text stops where one of the wording's sentences ends: right before its ". ", or
    after a "." that a space follows in the wording. (0, False) when no cut."""
    lits = sig.get("lits")
    if not lits:
        return 0, False
    t = collapse(text)
    start = t.find(lits[0])
    if start < 0:
        return 0, False
    got, pos = len(lits[0]), start + len(lits[0])
    for lit in lits[1:]:
        nxt = t.find(lit, pos)
        if nxt >= 0:
            got, pos = got + len(lit), nxt + len(lit)
            continue
        rest = t[pos:]
        # the text ends with the first j characters of this literal, after a value of the placeholder
        # (one token: a value running on over several words is another sentence, not a cut one)
        j = next((j for j in range(min(len(lit) - 1, len(rest)), 0, -1) if rest.endswith(lit[:j])), 0)
        if " " in rest[:len(rest) - j].strip():
            return 0, False
        return got + j, sentence_ends(lit[:j], lit[j:])
    return 0, False  # every literal found: a whole wording (or more after it), no cut


def sentence_ends(before: str, after: str) -> bool:
    """A wording cut between `before` and `after` stops where one of its sentences ends."""
    return after.strip() == "." or after.startswith((". ", "; ")) or (before.endswith(".") and after[:1] == " ")


LEAD_MIN = 30  # literal characters a wording's opening sentences need before the text may go on otherwise
LEAD_HEAD = 40  # characters of a status before the wording ("RESOURCE_EXHAUSTED:")


def leads(text: str, sig: dict) -> bool:
    """The text opens with the wording, word for word, through the end of one of its sentences, and then
    goes on with a sentence of its own (a paste flattened onto one line, where the prose or the next log
    line runs on after the message; a writer who kept only the first sentence and went on writing). The
    opening must hold at least LEAD_MIN literal characters, each placeholder one token, and the text
    must go on as a new sentence does (a capital, a digit, a bracket, not a lower-case word: "out of
    memory while ..." goes on with the same sentence, which may be another error's)."""
    lits = sig.get("lits")
    if not lits:
        return False
    t = collapse(text)
    gaps = sig["gaps"]
    # (the first literal may itself be where the text goes on otherwise: found by its opening)
    start = t.find(lits[0][:LEAD_MIN])
    # the wording opens the text: after its leading placeholder's token, a status a runtime puts
    # before the message ("RESOURCE_EXHAUSTED: ", "[Error]: "), or pydantic's heading of a config's
    # validator error flattened onto its line ("1 validation error for SchedulerConfig Value error, ")
    head = t[:start].rstrip()
    if start < 0 or (start and not ((gaps[0] and " " not in head) or (head.endswith(":") and len(head) <= LEAD_HEAD)
                                    or (head.endswith("Value error,") and len(head) <= 2 * LEAD_HEAD))):
        return False
    got, pos = 0, start
    for k, lit in enumerate(lits + [""]):
        if k and gaps[k]:
            token = _token_after(t, pos)
            if not token:
                return False
            # the value is one token; the literal after it may begin inside that token (") This" after "524")
            end = pos + len(token)
            pos = next((i for i in range(pos + 1, end + 1) if lit and t.startswith(lit[: end - i], i)), end) if lit else end
        if not lit:
            return False  # the whole wording: a whole match (exact), not a lead
        j = 0
        while j < len(lit) and pos + j < len(t) and t[pos + j] == lit[j]:
            j += 1
        got += j
        if j == len(lit):
            pos += j
            continue
        before, after = lit[:j], lit[j:]
        if got < LEAD_MIN or not (sentence_ends(before, after) or before.endswith((". ", "; "))):
            return False
        rest = t[pos + j:].lstrip(" .;")
        return bool(rest) and not rest[:1].islower() and rest[:1] not in ",:)]}"
    return False
