"""Scoring a record against signatures: exception-type prefilter, token prefilter, rapidfuzz.

partial_ratio on normalised text, not WRatio (which ties on long text) and not token_set_ratio
(a template whose words are nearly a subset of another's scores 100 on both). A line cut short
(a paste that ends mid-message) is scored on the part that is there, discounted when that part
is too short to tell signatures apart.
"""

from __future__ import annotations

import re

from rapidfuzz import fuzz, process

from .normalize import numbers_in

HEAD = 40  # characters of a template's opening compared on their own
MIN_DISTINCT = 40  # characters a fragment needs before its partial score counts in full
INNER_PENALTY = 2.0  # a message found inside a wrapper's text (its type may be lost)
BARE_PENALTY = 4.0  # a line with no exception type and no log level
TOKEN_PREFILTER_ABOVE = 200  # below this many candidates rapidfuzz is cheaper than the token index

_WORD_RE = re.compile(r"[a-z_`']{4,}")
MAX_VALUE = 1000  # kvkb.template.MAX_VALUE: the most characters a middle placeholder holds


def pair_score(line: str, sig: str) -> float:
    """Mean of the whole-template score and the score of its opening words.

    vLLM messages share their tails ("Try increasing `gpu_memory_utilization` ... when initializing
    the engine"), so a short template can align with the end of a longer, different message; the
    opening words are what tell them apart, and they must be found in the line too.
    """
    if not line or not sig:
        return 0.0
    if len(line) >= len(sig):
        full = fuzz.partial_ratio(sig, line)
    else:
        full = fuzz.partial_ratio(line, sig) * min(1.0, len(line) / min(len(sig), MIN_DISTINCT))
    head = sig[:HEAD]
    opening = fuzz.partial_ratio(head, line) if len(line) >= len(head) else fuzz.ratio(line, head[: len(line)])
    return (full + opening) / 2


def literal_form(parts: list[tuple[str, str]]) -> dict:
    """A template's literal text, for exact(): its literals whitespace-collapsed, whether it opens or
    closes on a placeholder, and the numbers written literally in it (build time, stored in the index)."""
    lits = []
    for kind, value in parts:
        if kind == "lit":
            core = " ".join(value.split())
            if value[:1].isspace():
                core = " " + core
            if value[-1:].isspace() and core != " ":
                core += " "
            lits.append(core)
    nums = sorted({n for kind, value in parts if kind == "lit" for n in numbers_in(value)})
    return {"lits": lits, "lead": bool(parts) and parts[0][0] == "ph", "trail": bool(parts) and parts[-1][0] == "ph", "nums": nums}


def exact(text: str, sig: dict) -> bool:
    """Does text hold the template word for word, placeholders aside? (What kvkb.template.to_regex
    matches, checked with str.find: compiling the regexes would cost ~0.5 ms each per run.)

    Each placeholder takes 1..MAX_VALUE characters up to the first occurrence of the literal after
    it; a leading placeholder is the token just before the first literal, a trailing one the token
    just after the last."""
    lits = sig.get("lits")
    if not lits:
        return False
    t = " ".join(text.split())
    first = lits[0]
    start = t.find(first)
    while start >= 0:
        if _rest(t, start, sig):
            return True
        start = t.find(first, start + 1)
    return False


def _rest(t: str, start: int, sig: dict) -> bool:
    lits = sig["lits"]
    if sig.get("lead") and (start == 0 or t[start - 1] == " "):
        return False
    pos = start + len(lits[0])
    for lit in lits[1:]:
        nxt = t.find(lit, pos + 1, pos + MAX_VALUE + len(lit) + 1)
        if nxt < 0:
            return False
        pos = nxt + len(lit)
    return not sig.get("trail") or (pos < len(t) and t[pos] != " ")


def tokens(text: str) -> set[str]:
    return {w.strip("`'") for w in _WORD_RE.findall(text)} - {""}


class Table:
    """Signatures grouped for prefiltering; built once per Matcher."""

    def __init__(self, signatures: list[dict]):
        self.sigs = signatures
        self.by_type: dict[str, list[int]] = {}
        self.level_sigs: list[int] = []
        self.exc_sigs: list[int] = []
        for i, s in enumerate(signatures):
            if s.get("exception"):
                self.by_type.setdefault(s["exception"].rsplit(".", 1)[-1], []).append(i)
                self.exc_sigs.append(i)
            else:
                self.level_sigs.append(i)
        self.info_sigs = [i for i in self.level_sigs if signatures[i].get("level") in ("INFO", "DEBUG")]
        self.literal_numbers = {n for s in signatures for n in s.get("nums", ())}
        self._inverted: dict[str, list[int]] | None = None
        self._sig_tokens: list[set[str]] | None = None

    def candidates(self, record) -> tuple[list[int], float]:
        """Signature indices this record may match, and the penalty its kind carries."""
        if record.kind == "exception":
            return self.by_type.get(record.short_type, []), 0.0
        if record.kind == "inner":
            if record.type:
                return self.by_type.get(record.short_type, []), INNER_PENALTY
            return self.exc_sigs + self.level_sigs, INNER_PENALTY
        if record.kind == "log":
            # a log line is compared with log-line signatures only; an exception's text comes with its type
            if record.level in ("INFO", "DEBUG"):
                return self.info_sigs, 0.0
            return self.level_sigs, 0.0
        return self.level_sigs + self.exc_sigs, BARE_PENALTY

    def _token_filter(self, norm: str, ids: list[int]) -> list[int]:
        if self._inverted is None:
            self._sig_tokens = [tokens(s["norm"]) for s in self.sigs]
            inverted: dict[str, list[int]] = {}
            for i, toks in enumerate(self._sig_tokens):
                for t in toks:
                    inverted.setdefault(t, []).append(i)
            self._inverted = inverted
        rec = tokens(norm)
        counts: dict[int, int] = {}
        for t in rec:
            for i in self._inverted.get(t, ()):
                counts[i] = counts.get(i, 0) + 1
        allowed = set(ids)
        keep = []
        for i, c in counts.items():
            need = max(2, 0.5 * min(len(rec), len(self._sig_tokens[i])))
            if c >= need and i in allowed:
                keep.append(i)
        return keep

    def score(self, record, floor: float) -> list[tuple[float, int, bool]]:
        """[(score, signature index, exact)] at or above floor, best first (exact first among equals)."""
        ids, penalty = self.candidates(record)
        if not ids or not record.message.strip():
            return []
        if len(ids) > TOKEN_PREFILTER_ABOVE:
            ids = self._token_filter(record.norm, ids)
            if not ids:
                return []
        line = record.norm
        out = []
        # the C++ loop gives the raw partial score; the length discount is applied to survivors
        choices = [self.sigs[i]["norm"] for i in ids]
        for _, raw, k in process.extract(line, choices, scorer=fuzz.partial_ratio, score_cutoff=floor, limit=None):
            sig = self.sigs[ids[k]]
            if exact(record.message, sig) or (record.canon != record.message and exact(record.canon, sig)):
                # the template word for word: placeholders hold anything (a request id, not only numbers)
                out.append((100.0 - penalty, ids[k], True))
                continue
            # fuzzy: masking makes every number alike, so a number the template spells out
            # ("KV cache usage: 100.0%") must be in the line as written, or this is another message
            if sig.get("nums") and not record.numbers.issuperset(sig["nums"]):
                continue
            s = pair_score(line, choices[k]) - penalty
            if s >= floor:
                out.append((s, ids[k], False))
        out.sort(key=lambda t: (-t[0], not t[2]))
        return out
