"""Scoring a record against signatures: exception-type prefilter, token prefilter, rapidfuzz.

partial_ratio on normalised text, not WRatio (which ties on long text) and not token_set_ratio
(a template whose words are nearly a subset of another's scores 100 on both). A line cut short
(a paste that ends mid-message) is scored on the part that is there, discounted when that part
is too short to tell signatures apart.
"""

from __future__ import annotations

from .regex_cache import Lazy, compile as _rx

from .literal import exact, leads

HEAD = 40  # characters of a template's opening compared on their own
MIN_DISTINCT = 40  # characters a fragment needs before its partial score counts in full
INNER_PENALTY = 2.0  # a message found inside a wrapper's text (its type may be lost)
BARE_PENALTY = 4.0  # a line with no exception type and no log level
TOKEN_SHARE = 0.5  # a signature is scored only if the line has this share of its words (or the line's, if shorter)

_WORD_RE = _rx(r"[a-z_`']{4,}")


# Accelerator names in a message: an OOM that names one device is not the same error as one that
# names another ("XPU out of memory" is not "NPU out of memory", whatever the fuzzy score says)
_DEVICE_RE = _rx(r"\b(cuda|hip|xpu|npu|tpu|hpu)\b")


def devices(norm: str) -> frozenset[str]:
    return frozenset(_DEVICE_RE.findall(norm)) if any(d in norm for d in ("cuda", "hip", "pu")) else frozenset()


# One notion of a device out-of-memory error whatever class PyTorch raised it as: torch.OutOfMemoryError
# (torch.cuda.OutOfMemoryError before 2.5), RuntimeError (older torch, XPU and NPU builds, vLLM's own
# wrappers), torch.AcceleratorError (torch 2.8+: "CUDA error: out of memory" from a CUDA call)
OOM_TYPES = ("OutOfMemoryError", "RuntimeError", "AcceleratorError")
_OOM_WORDS = ("out of memory", "Out of memory", "OutOfMemory", "OUT_OF_MEMORY")

# The words that carry an out-of-memory message's meaning. A confident claim needs them to agree:
# one differing word ("smem" for "hbm", "the operation cannot be performed in the present state"
# for "out of memory") makes another error, however close the rest of the text is.
_SPACE_RE = _rx(r"\b(hbm|smem|vmem|cmem|sram)\b")
# (an allocator's refusal says it too: "Failed to allocate memory", "Cannot allocate memory (12)"; a
# runtime's "Memory async failed, ... is invalid" names memory and a failure but no shortage)
_SHORTAGE_RE = _rx(r"out of memory|outofmemory|resource_exhausted|out_of_resources|out of resources"
                   r"|failed to allocate|failed to apply for memory|can(?:no|')t allocate memory"
                   r"|memory is insufficient|memory resources are exhausted|no memory is available")


def meaning(norm: str) -> tuple[frozenset, frozenset, bool]:
    """(devices, memory spaces, says there is a shortage) of a normalised text."""
    spaces = frozenset(_SPACE_RE.findall(norm)) if "mem" in norm or "hbm" in norm or "sram" in norm else frozenset()
    return devices(norm), spaces, bool(_SHORTAGE_RE.search(norm))


def meaning_differs(line: str, sig: dict) -> str | None:
    """Why the line is not the signature's error although the texts are close; None when its words agree.
    The signature's words come from its wording filled with its own sample ("norm"), so a placeholder
    that holds a memory space ("memory space {memory_space}") still names the one its samples show."""
    ldev, lspace, lshort = meaning(line)
    _, _, sshort = meaning(sig["norm"])
    # the devices the wording itself names (a "{device}" placeholder stands for any)
    sdev = frozenset(sig.get("devices", ()))
    sspace = frozenset(sig.get("spaces", ()))
    if not sshort:
        sdev = frozenset()  # "CUDA graph capture" in a capacity message names no device that ran out
    if sdev and not (ldev & sdev):
        return f"it does not name the {'/'.join(sorted(sdev)).upper()} device"
    if ldev and sdev and not ldev <= sdev:
        return f"it names {'/'.join(sorted(ldev - sdev)).upper()}, not {'/'.join(sorted(sdev)).upper()}"
    if lspace and not lspace <= sspace:
        return f"its memory space is {'/'.join(sorted(lspace))}" + (f", not {'/'.join(sorted(sspace))}" if sspace else "")
    if sshort and not lshort:
        return "it does not say that memory ran out"
    # a close text about another subject ("DeepGEMM backend is not available" for "UVA is not available"):
    # one of the words that tell this wording's entry apart must be in the line
    # (a line shorter than the wording may be it cut short, before its subject)
    keys = sig.get("keys")
    if keys and len(line) >= len(sig["norm"]) and not any(k in line for k in keys):
        return f"it does not name {', '.join(keys[:3])}"
    # a wording that reports a failure, in a line as long that reports none ("it allocates memory for
    # the KV cache" is not "Failed to allocate memory for the KV cache"): a description, not the error
    # (a shorter line may be the wording cut before its failure words; one long enough to reach them is not)
    if says_failure(sig["norm"]) and not says_failure(line) and len(line) >= min(len(sig["norm"]), failure_reach(sig["norm"])):
        return "it does not say that anything failed"
    # a signal names what went wrong (SIGBUS: a shared-memory page with no room; SIGSEGV: a bad pointer)
    if "sig" in line:
        lsig, ssig = set(_SIGNAL_RE.findall(line)), set(_SIGNAL_RE.findall(sig["norm"]))
        if ssig and not (lsig & ssig):
            return f"its signal is {'/'.join(sorted(lsig)).upper() or 'none'}, not {'/'.join(sorted(ssig)).upper()}"
    turn = goes_on_otherwise(line, sig["norm"])
    if turn:
        return f"its sentence goes on '{turn[0]} ...' where the wording's goes on '{turn[1]} ...'"
    return None


ALIGN_MARGIN = 10  # characters kept either side of the part of a long line a wording aligned with


def aligned_part(line: str, wording: str) -> str:
    """The part of a line at least twice the wording's length that a fuzzy score aligned the wording
    with, and a few characters either side: whether its words agree (a device, a shortage, a failure) is
    read there, not anywhere in a long text ("it allocates memory for the KV cache" in a paragraph that
    names a failure elsewhere is no "Failed to allocate memory for the KV cache")."""
    if len(line) < 2 * len(wording):
        return line
    from rapidfuzz import fuzz

    at = fuzz.partial_ratio_alignment(wording, line)
    return line[max(0, at.dest_start - ALIGN_MARGIN): at.dest_end + ALIGN_MARGIN]


_HEAD = 3  # words that begin a sentence
_SENTENCE_WORD_RE = _rx(r"[a-z0-9_<>]+")


def _words(sentence: str) -> list[str]:
    """The words, numbers and a possessive's "s" left out (a paste may lack a number, "GPU  has" for
    "GPU 0 has"; another program writes "This model maximum" for vLLM's "This model's maximum")."""
    return [w for w in _SENTENCE_WORD_RE.findall(sentence) if w != "<n>" and w != "s"]


def goes_on_otherwise(line: str, norm: str) -> tuple[str, str] | None:
    """A later sentence the line begins as the wording's does and goes on otherwise, the first sentences
    agreeing ("However, your messages resulted in" for "However, your prompt contains"): another
    program's message in the same mould, not this one. (line's head, wording's head), or None."""
    if ". " not in line or ". " not in norm:
        return None
    lines, words = line.split(". "), norm.split(". ")
    if _words(lines[0])[:_HEAD] != _words(words[0])[:_HEAD]:
        return None
    for ls, ws in zip(lines[1:], words[1:]):
        # words alone: quotes and punctuation vary between releases and pastes ('x' for `x`)
        lw, sw = _words(ls)[:_HEAD], _words(ws)[:_HEAD]
        if len(lw) == len(sw) == _HEAD and lw[0] == sw[0] and lw != sw:
            return " ".join(lw), " ".join(sw)
    return None


# the words of a failure: substrings, since one regex alternating them all costs over 1 ms to compile at
# each start-up (which is measured) and they are literal but for the two a word boundary needs
_FAILURE_WORDS = ("fail", "cannot", "can't", "can not", "could not", "could n't", "could nt", "couldnot", "couldn't",
                  "couldnt", "unable", "not enough", "insufficient", "exceed", "error", "no available", "too large",
                  "too small", "too long", "too many", "too big", "out of", "exhaust", "not possible", "larger", "greater",
                  "less than", "smaller", "bigger", "kill", "abort", "invalid", "must", "crash", "no free", "no space",
                  "no memory", "denied", "refus", "not supported", "not divisible", "still in use", "is full", "ran out",
                  "running low", "low on", "above", "over ", "overflow", "bus ", "fatal", "panic", "preempt", "reject",
                  "lower", "reduce", "increase", "decrease", "only", "did not", "didn't", "no longer", "unavailable", "zero")
_FAILURE_RE = Lazy(r"\boom|sig[a-z]")


def says_failure(text: str) -> bool:
    """The text reports a failure: a word of one ("failed", "cannot", "out of", "too large", "OOM", "SIGBUS")."""
    return any(w in text for w in _FAILURE_WORDS) or (("oom" in text or "sig" in text) and _FAILURE_RE.search(text) is not None)


def failure_reach(text: str) -> int:
    """Where the text's first word of failure ends (its length when it has none)."""
    low = text.lower()
    ends = [i + len(w) for w in _FAILURE_WORDS if (i := low.find(w)) >= 0]
    m = _FAILURE_RE.search(low) if ("oom" in low or "sig" in low) else None
    if m:
        ends.append(m.end())
    return min(ends, default=len(text))


_SIGNAL_RE = Lazy(r"\bsig(?:bus|segv|kill|term|abrt|ill|fpe|int|hup|pipe|usr1|usr2)\b")


_IDENT_RE = _rx(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")  # snake_case names: settings, fields, functions
PHRASE_WORDS = 4  # a run of this many words found in one entry's wordings only...
PHRASE_HITS = 2  # ...this many times (overlapping: a 5-word run) names that entry in a reworded message
PHRASE_SCORE = 82.0  # just above the confident cut-off: a typed exception with the entry's own words
_PHRASE_TOKEN_RE = _rx(r"[a-z_`']+")


def phrases_of(norm: str) -> set[str]:
    """Runs of PHRASE_WORDS words with no masked value in them ("kv cache is needed")."""
    out = set()
    run: list[str] = []
    for tok in norm.split():
        word = tok.strip(".,;:()[]{}\"'`!?")
        if not word or "<" in tok or not _PHRASE_TOKEN_RE.fullmatch(word):
            run = []
            continue
        run.append(word)
        if len(run) >= PHRASE_WORDS:
            out.add(" ".join(run[-PHRASE_WORDS:]))
    return out


def unique_phrases(signatures: list[dict]) -> dict[str, int]:
    """phrase -> entry index, for phrases that occur in one entry's wordings only (build time)."""
    owner: dict[str, int] = {}
    for s in signatures:
        for ph in phrases_of(s["norm"]):
            owner[ph] = s["entry"] if owner.get(ph, s["entry"]) == s["entry"] else -1
    return {ph: e for ph, e in owner.items() if e >= 0}


def pair_score(line: str, sig: str, full: float | None = None) -> float:
    """Mean of the whole-template score and the score of its opening words.

    vLLM messages share their tails ("Try increasing `gpu_memory_utilization` ... when initializing
    the engine"), so a short template can align with the end of a longer, different message; the
    opening words are what tell them apart, and they must be found in the line too.
    """
    if not line or not sig:
        return 0.0
    from rapidfuzz import fuzz  # imported when first needed: a paste with no candidate never pays for it

    if full is None:  # process.extract has usually computed it already: the costly half on long lines
        full = fuzz.partial_ratio(line, sig)
    if len(line) < len(sig):
        full *= min(1.0, len(line) / min(len(sig), MIN_DISTINCT))
    head = sig[:HEAD]
    opening = fuzz.partial_ratio(head, line) if len(line) >= len(head) else fuzz.ratio(line, head[: len(line)])
    return (full + opening) / 2


def tokens(text: str) -> set[str]:
    return {w.strip("`'") for w in _WORD_RE.findall(text)} - {""}


def token_masks(signatures: list[dict]) -> dict[str, int]:
    """Give each signature a bit mask of its words ("mask", "ntok"); returns the word -> bit vocabulary.
    Run at index build time: the prefilter is then one AND and a popcount per signature."""
    vocab: dict[str, int] = {}
    for s in signatures:
        mask = 0
        toks = tokens(s["norm"])
        for t in toks:
            mask |= 1 << vocab.setdefault(t, len(vocab))
        s["mask"], s["ntok"] = mask, len(toks)
    return vocab


_SUBJECT_RE = _rx(r"[a-z][a-z0-9_]{2,}")
SUBJECT_ENTRIES = 2  # a word of at most this many entries' wordings is one that tells its entries apart


def subject_words(signatures: list[dict]) -> None:
    """Give each signature its "keys": the words of its literal text that at most SUBJECT_ENTRIES entries'
    wordings use (uva, shm, mmap, oom-killer's gfp_mask): the subject the message is about. Common words ("is not
    available", "memory") say what happened, not to what. Run at index build time."""
    from .normalize import normalise

    by_word: dict[str, set[int]] = {}
    own = []
    for s in signatures:
        # the literal text normalised as a line is (paths, numbers masked): what a line can hold
        words = set(_SUBJECT_RE.findall(normalise(" ".join(s.get("lits") or ()))))
        own.append(words)
        for w in words:
            by_word.setdefault(w, set()).add(s["entry"])
    for s, words in zip(signatures, own):
        s["keys"] = sorted(w for w in words if len(by_word[w]) <= SUBJECT_ENTRIES)


def groups(signatures: list[dict]) -> dict:
    """The prefilter's signature groups (by exception type, log-line ones, INFO ones) and the numbers
    templates spell out; computed at index build time so that loading a big index does no work."""
    by_type: dict[str, list[int]] = {}
    level: list[int] = []
    exc: list[int] = []
    for i, s in enumerate(signatures):
        if s.get("exception"):
            by_type.setdefault(s["exception"].rsplit(".", 1)[-1], []).append(i)
            exc.append(i)
        else:
            level.append(i)
    return {
        "phrases": unique_phrases(signatures),
        "by_type": by_type,
        "level": level,
        "exc": exc,
        "info": [i for i in level if signatures[i].get("level") in ("INFO", "DEBUG")],
        "literal_numbers": sorted({n for s in signatures for n in s.get("nums", ())}),
    }


class Table:
    """Signatures grouped for prefiltering; built once per Matcher (from the index when it has them)."""

    def __init__(self, signatures: list[dict], vocab: dict[str, int] | None = None, grouped: dict | None = None):
        self.sigs = signatures
        if vocab is None or (signatures and "mask" not in signatures[0]):
            vocab = token_masks(signatures)
        self.vocab = vocab
        g = grouped or groups(signatures)
        self.by_type: dict[str, list[int]] = g["by_type"]
        self.level_sigs: list[int] = g["level"]
        self.exc_sigs: list[int] = g["exc"]
        self.all_sigs = self.exc_sigs + self.level_sigs
        self.info_sigs = g["info"]
        self.literal_numbers = set(g["literal_numbers"])
        self.phrases: dict[str, int] = g.get("phrases") or {}
        self._idents: dict[int, set[str]] = {}
        seen: set[int] = set()
        self.oom_sigs = [i for t in OOM_TYPES for i in self.by_type.get(t, ()) if not (i in seen or seen.add(i))]

    def candidates(self, record) -> tuple[list[int], float]:
        """Signature indices this record may match, and the penalty its kind carries."""
        if record.kind == "exception":
            return self._typed(record), 0.0
        if record.kind == "inner":
            return (self._typed(record) if record.type else self.all_sigs), INNER_PENALTY
        if record.kind == "log":
            # a log line is compared with log-line signatures only; an exception's text comes with its type
            if record.level in ("INFO", "DEBUG"):
                return self.info_sigs, 0.0
            return self.level_sigs, 0.0
        return self.all_sigs, BARE_PENALTY

    def _typed(self, record) -> list[int]:
        """The signatures of a record's exception class (the same whether the line begins with it or
        a wrapper's text or a sentence quotes it)."""
        short = record.short_type
        if short in OOM_TYPES and any(w in record.message for w in _OOM_WORDS):
            return self.oom_sigs
        if short not in self.by_type and short.endswith("RuntimeError"):
            # a library's own RuntimeError (XlaRuntimeError, JaxRuntimeError) carries the same text
            return self.by_type.get("RuntimeError", [])
        return self.by_type.get(short, [])

    def _token_filter(self, norm: str, ids: list[int]) -> list[int]:
        """Signatures that share enough words with the line to be worth a fuzzy score (rapidfuzz's
        partial_ratio costs ~0.2 ms on a 400-character line; this costs well under a microsecond)."""
        vocab = self.vocab
        rec = 0
        n = 0
        for t in tokens(norm):
            n += 1
            bit = vocab.get(t)
            if bit is not None:
                rec |= 1 << bit
        sigs = self.sigs
        keep = []
        for i in ids:
            s = sigs[i]
            ntok = s["ntok"]
            need = TOKEN_SHARE * (ntok if ntok < n else n)
            if need < 2 and ntok >= 2:
                need = 2
            if (rec & s["mask"]).bit_count() >= need:
                keep.append(i)
        return keep

    def score(self, record, floor: float, fuzzy: bool = True) -> list[tuple[float, int, bool]]:
        """[(score, signature index, exact)] at or above floor, best first (exact first among equals).
        fuzzy=False: word-for-word matches only (the cheap half; the caller bounds the costly one)."""
        return self.finish(record, self.prepare(record), floor, fuzzy)

    def prepare(self, record) -> tuple | None:
        """The cheap half: (exact matches, signatures left for a fuzzy score, penalty, candidates);
        None when no signature shares enough words with the record."""
        ids, penalty = self.candidates(record)
        if not ids or not record.message.strip():
            return None
        line = record.norm
        # an error's text that holds the wording's opening sentences word for word and then goes on with
        # a sentence of its own (flattened onto one line with what followed it): those sentences are it,
        # however few of the wording's words the rest shares (so before the word filter)
        lead = [i for i in ids if leads(record.message, self.sigs[i])] \
            if record.kind in ("exception", "inner") and record.type is not None else []
        ids = self._token_filter(line, ids)
        ids += [i for i in lead if i not in ids]
        logged = record.kind == "log" and record.level in ("ERROR", "CRITICAL")
        if not ids and not logged:
            return None
        named = devices(line)

        def same_device(i: int) -> bool:
            return not named or not (d := self.sigs[i].get("devices")) or bool(named.intersection(d))

        message, canon = record.message, record.canon

        def word_for_word(sig: dict) -> bool:
            return exact(message, sig) or (canon != message and exact(canon, sig))

        if named:
            ids = [i for i in ids if same_device(i)]
        out = []
        fuzzy_ids = []
        for i in ids:
            sig = self.sigs[i]
            if word_for_word(sig) or i in lead:
                # the template word for word: placeholders hold anything (a request id, not only numbers)
                out.append((100.0 - penalty, i, True))
            elif sig.get("level") in ("INFO", "DEBUG"):
                # an INFO line is vLLM's own text, never reworded; healthy stats lines all look
                # alike, so only the wording itself (with its spelled-out numbers) counts
                continue
            elif not sig.get("nums") or record.numbers.issuperset(sig["nums"]):
                # fuzzy: masking makes every number alike, so a number the template spells out
                # ("KV cache usage: 100.0%") must be in the line as written, or this is another message
                fuzzy_ids.append(i)
        if logged and not out:
            # an exception's text logged without its class (`logger.exception(e)` prints str(e): V0's
            # engine logs "CUDA out of memory. Tried to allocate ..." so): word for word only
            out = [(100.0 - INNER_PENALTY, i, True) for i in self._token_filter(line, self.exc_sigs)
                   if same_device(i) and word_for_word(self.sigs[i])]
        if not out and not fuzzy_ids:
            return None
        return out, fuzzy_ids, penalty, ids

    def finish(self, record, prepared: tuple | None, floor: float, fuzzy: bool = True) -> list[tuple[float, int, bool]]:
        """The costly half (rapidfuzz) on what prepare() left, then the ranking."""
        if prepared is None:
            return []
        exact_out, fuzzy_ids, penalty, ids = prepared
        out = list(exact_out)
        line = record.norm
        if fuzzy and fuzzy_ids:
            from rapidfuzz import fuzz, process

            # the C++ loop gives the raw partial score; the length discount is applied to survivors
            choices = [self.sigs[i]["norm"] for i in fuzzy_ids]
            for _, raw, k in process.extract(line, choices, scorer=fuzz.partial_ratio, score_cutoff=floor, limit=None):
                s = pair_score(line, choices[k], raw) - penalty
                if record.kind == "bare" and len(choices[k]) < MIN_DISTINCT:
                    # a short wording found approximately inside prose ("KV-cache allocation fails")
                    # is a resemblance, not a quote
                    s *= len(choices[k]) / MIN_DISTINCT
                if s >= floor:
                    out.append((s, fuzzy_ids[k], False))
        if record.type is not None and record.kind in ("exception", "inner") and self.phrases:
            self._phrase_scores(line, ids, out)
        out.sort(key=lambda t: (-t[0], not t[2]))
        return out

    def _entry_idents(self, entry: int) -> set[str]:
        got = self._idents.get(entry)
        if got is None:
            got = self._idents[entry] = {w for sg in self.sigs if sg["entry"] == entry for w in _IDENT_RE.findall(sg["norm"])}
        return got

    def _phrase_scores(self, line: str, ids: list[int], out: list) -> None:
        """A reworded message ("1.75 GiB KV cache is needed, available 0.13 GiB") of the right
        exception type that keeps a run of one entry's own words counts as that entry's."""
        hits: dict[int, int] = {}
        for ph in phrases_of(line):
            e = self.phrases.get(ph)
            if e is not None:
                hits[e] = hits.get(e, 0) + 1
        if not hits:
            return
        # a message naming a setting the entry never names ("kv_cache_metrics_sample Input should
        # be less than or equal to 1") is another setting's error, however many words it shares
        named = set(_IDENT_RE.findall(line))
        if named:
            hits = {e: n for e, n in hits.items() if named <= self._entry_idents(e)}
        best = {}
        for score, i, _ in out:
            best[i] = max(best.get(i, 0.0), score)
        for i in ids:
            e = self.sigs[i]["entry"]
            if hits.get(e, 0) >= PHRASE_HITS and best.get(i, 0.0) < PHRASE_SCORE:
                out.append((PHRASE_SCORE, i, False))
