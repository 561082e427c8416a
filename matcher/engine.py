"""Matcher: paste in, Report out (root cause, matches best first, each with its filled fix and why).

    from kvkb.matcher.engine import Matcher
    report = Matcher.load().match(text)      # kbmatch: precompiled index, no pydantic
    report = Matcher.from_entries(entries).match(text)   # kvkb lint: entries already validated
"""

from __future__ import annotations

import io
import os
from contextvars import ContextVar
from typing import BinaryIO

from . import fill, read
from .evidence import (RUNTIME_PACKAGES, VLLM_WORDS, Fact, Hint, Scanner, frames_owner, frames_stage, hints, host_facts,
                       pool_gib, room_left)
from .literal import cut_point, sentence_ends, walk
from .logsites import Sites, site_of, stated_release
from .normalize import normalise
from .regex_cache import Lazy
from .score import MIN_DISTINCT, Table, aligned_part, meaning_differs, says_failure
from .segment import (Record, cues_of, dedent_blocks, newest_first, parse, segment, segment_parsed, split_lines, stage,
                      strip_learned_prefix)

DEFAULT_BASE_URL = "https://kvkb.github.io/kvkb/"
NEW_ISSUE_URL = "https://github.com/kvkb/kvkb/issues/new"
CUTOFF = 80.0  # a confident match scores at least this...
MARGIN = 8.0  # ...and beats the best other entry for the same line by this much
POSSIBLE = 55.0  # shown as "possible" when nothing is confident
STAGE_BONUS = 10.0  # the traceback shows the stage (load, CUDA-graph capture, serving) an entry is about
EXACT_BONUS = 10.0  # the line holds this wording word for word; another entry's only resembles it
MAX_RECORDS = 5000  # distinct records kept from one input (bounded memory on huge logs)
MAX_CONTEXT = 4 << 20  # characters of text kept for reading numbers off other lines
MAX_SCORED = 400  # distinct records given a fuzzy score (see Matcher._bounded)
_SEVERITY = {"fatal": 3, "error": 2, "warning": 1}


class Match:
    """One entry found in the log. Plain class: dataclasses would import inspect (~10 ms of start-up)."""

    def __init__(self, **kw):
        self.id: str = kw["id"]
        self.title: str = kw["title"]
        self.score: float = kw["score"]
        self.confident: bool = kw["confident"]
        self.signature: dict = kw["signature"]  # id, versions, engine, backend
        self.line: str = kw["line"]  # the normalised line that matched
        self.text: str = kw["text"]  # the same line as the log has it (prefixes stripped)
        self.line_no: int | None = kw["line_no"]  # None past the part of a huge log that is line-counted
        self.offset: int | None = kw.get("offset")  # then: byte offset of the window it was found in
        self.params: dict = kw["params"]
        self.fix: str | None = kw["fix"]
        self.fix_forms: dict = kw["fix_forms"]
        self.fix_title: str = kw["fix_title"]
        self.url: str = kw["url"]
        self.runner_up: dict | None = kw.get("runner_up")
        self.stage: str | None = kw.get("stage")
        self.notes: dict = kw.get("notes") or {}
        self.category: str = kw.get("category", "")
        self.severity: str = kw.get("severity", "")
        # confident: the error line is there and matches; likely: no error line, the evidence points
        # here; possible: a weak resemblance
        self.confidence: str = kw.get("confidence") or ("confident" if self.confident else "possible")
        self.evidence: list[Fact] = kw.get("evidence") or []
        self.startup: int = kw.get("startup", 0)

    def __repr__(self) -> str:
        return f"Match({self.id!r}, {self.score:.1f}, {self.confidence})"

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "score": round(self.score, 1),
            "confident": self.confident,
            "signature": self.signature,
            "line": self.line,
            "params": self.params,
            "fix": self.fix,
            "url": self.url,
            "title": self.title,
            "line_no": self.line_no,
            "offset": self.offset,
            "fix_title": self.fix_title,
            "fix_forms": self.fix_forms,
            "runner_up": self.runner_up,
            "notes": self.notes,
            "confidence": self.confidence,
            "evidence": [f.to_dict() for f in self.evidence],
            "stage": self.stage,
        }


class Report:
    def __init__(self, root_cause: str | None, matches: list[Match]):
        self.root_cause = root_cause
        self.matches = matches
        self.records = 0
        self.bytes = 0
        self.lines = 0
        self.new_issue_url: str | None = None
        self.first_error: str | None = None
        self.restarts = 0  # start-ups seen in the log, less one
        self.truncated = False  # the input ends inside a traceback, before its exception line
        self.not_memory: dict | None = None  # the visible root error, when it is not a memory error
        self.reached: str | None = None  # the last milestone of the last start-up ("KV cache sizing"), in words
        self.newest_first = False  # the paste's timestamps ran backwards (a web console's view): read oldest first
        # a paste with no error in it at all (no exception, no traceback, no ERROR line): where it ends, so
        # the answer can ask for what came after instead of guessing from an ordinary line
        self.no_error: dict | None = None

    @property
    def confident(self) -> list[Match]:
        return [m for m in self.matches if m.confident]

    def to_dict(self) -> dict:
        return {
            "matches": [m.to_dict() for m in self.matches],
            "root_cause": self.root_cause,
            "restarts": self.restarts,
            "truncated": self.truncated,
            "not_memory": self.not_memory,
            "reached": self.reached,
            "newest_first": self.newest_first,
            "first_error": self.first_error,
            "no_error": self.no_error,
            "new_issue_url": self.new_issue_url,
        }


class Matcher:
    def __init__(self, index: dict, base_url: str | None = None):
        self.index = index
        self.entries = index["entries"]
        self.table = Table(index["signatures"], index.get("vocab"), index.get("groups"))
        self.anchors = [a.encode() for a in index.get("anchors", ["rror", "WARN"])]
        self.words = [a.encode() for a in index.get("words", ())]
        self.cover = [a.encode() for a in index.get("cover", ())]
        base = base_url or os.environ.get("KVKB_BASE_URL") or DEFAULT_BASE_URL
        self.base_url = base.rstrip("/") + "/"
        self._stage_ooms: dict[str, str] | None = None
        self._meta: dict[str, tuple[bool, frozenset]] | None = None
        self._logsites: Sites | None = None
        self._types: frozenset[str] | None = None
        self._firsts: list[tuple[str, int]] | None = None  # wordings' first sentences (_paraphrased)
        self._by_class: dict[str, list[int]] | None = None  # exception class's last name -> its signatures
        # every cause sign of the KB: looked for in each window read, so a fix can follow what the log shows
        self.signs = sorted({sg for e in self.entries for c in e.get("signed", ()) for sg in c["signs"]})

    @classmethod
    def from_entries(cls, entries: list, base_url: str | None = None) -> "Matcher":
        from .index import build

        return cls(build(list(entries))[0], base_url)

    @classmethod
    def load(cls, directory=None, base_url: str | None = None) -> "Matcher":
        from .index import load

        return cls(load(directory), base_url)

    def _stage_oom_entries(self) -> dict[str, str]:
        """stage -> the device-memory entry for that stage among those sharing one wording (PyTorch's OOM
        text is the same at start-up, in CUDA-graph capture and while serving; the stage splits them)."""
        if self._stage_ooms is None:
            by_norm: dict[str, set[int]] = {}
            for sg in self.table.sigs:
                by_norm.setdefault(sg["norm"], set()).add(sg["entry"])
            shared: dict[int, int] = {}
            for es in by_norm.values():
                if len(es) > 1:
                    for e in es:
                        shared[e] = shared.get(e, 0) + 1
            out: dict[str, tuple[int, str]] = {}
            for e, n in shared.items():
                entry = self.entries[e]
                if entry["category"] == "device-memory":
                    st = self._entry_stage(entry)
                    if st not in out or n > out[st][0]:
                        out[st] = (n, entry["id"])
            self._stage_ooms = {st: eid for st, (_, eid) in out.items()}
            # the out-of-memory entry of each accelerator that is not CUDA/ROCm (PyTorch's NPU, XPU,
            # HPU and TPU builds word it their own way): the device-memory entry naming it most
            named: dict[str, dict[str, int]] = {}
            for sg in self.table.sigs:
                entry = self.entries[sg["entry"]]
                if entry["category"] == "device-memory":
                    for d in sg.get("devices", ()):
                        if d not in ("cuda", "hip"):
                            named.setdefault(d, {}).setdefault(entry["id"], 0)
                            named[d][entry["id"]] += 1
            for d, ids in named.items():
                self._stage_ooms["device:" + d] = max(sorted(ids), key=lambda e: ids[e])
        return self._stage_ooms

    def _entry_meta(self) -> dict[str, tuple[bool, frozenset]]:
        """entry -> (any of its wordings is an exception (or a line that is no log record), the engines
        its wordings are for): what a cut traceback's callee table keeps (evidence._cannot_end)."""
        if self._meta is None:
            raises: dict[str, bool] = {}
            engines: dict[str, set] = {}
            for sg in self.table.sigs:
                eid = self.entries[sg["entry"]]["id"]
                logged = not sg.get("exception") and sg.get("level") in ("INFO", "WARNING", "DEBUG")
                raises[eid] = raises.get(eid, False) or not logged
                engines.setdefault(eid, set()).add(sg.get("engine") or "any")
            self._meta = {e: (raises[e], frozenset(engines[e])) for e in raises}
        return self._meta

    def url(self, entry_id: str) -> str:
        return f"{self.base_url}errors/{entry_id}/"

    # --- matching ------------------------------------------------------------------------------

    def match(self, text: str | bytes) -> Report:
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        return self.match_stream(io.BytesIO(data))

    def match_stream(self, stream: BinaryIO) -> Report:
        stats = read.Stats()
        records: list[Record] = []
        seen: dict[tuple, int] = {}  # record key -> its place in records
        cues: set[str] = set()
        context: list[tuple[int, str]] = []  # (start-up, text): numbers for the fix come from the root's start-up
        kept = 0
        literal = self.table.literal_numbers
        scanner = Scanner(self.index.get("callees"))
        scanner.entry_meta = self._entry_meta()
        scanner.ctor_sites = self.index.get("raise_sites", {}).get("constructors", {})
        release: list = [None]  # the vLLM release the paste states, once a log site needs it
        found: dict[str, int | None] = {}
        said_error = False  # a word of failure anywhere: an error the segmenter does not read as one is still one
        newest = False  # the paste was newest first and is read oldest first
        for first, offset, window in read.windows(stream, self.anchors, stats, self.words, self.cover):
            lines = split_lines(window)
            # whole-window searches, for a paste's size only: a big log is vLLM's and holds an error
            small = len(window) <= _PASTE_SCAN
            if small and (window.lstrip("\r\n")[:1] in " \t" or "```" in window or "~~~" in window):
                lines = dedent_blocks(lines)
            if small and ('File "' in window or "File &quot;" in window or "File &#34;" in window):
                lines = strip_learned_prefix(lines)
            if not said_error:
                said_error = not small or any(w in window for w in _ERROR_WORDS)
            if not scanner.vllm_seen:
                scanner.vllm_seen = not small or any(w in window for w in VLLM_WORDS)
                if not scanner.vllm_seen and scanner.other_program is None:
                    low = window.lower()
                    scanner.other_program = next((w for w in _OTHER_PROGRAMS if w in low), None)
                    if scanner.other_program is None and "flax" in low:
                        hf = _HF_FLAX_RE.search(low)
                        scanner.other_program = hf.group(0) if hf else None
                    if scanner.other_program is None and "Killed process" in window:
                        # the kernel names the process it killed: a program of its own name ran out, not vLLM
                        comm = next((m.group(1) for m in _KILLED_RE.finditer(window)
                                     if not m.group(1).startswith(_VLLM_COMMS)), None)
                        scanner.other_program = comm
                    if scanner.other_program is None and ":" in window:
                        # a log line's logger, as Python's logging names it ("[axolotl.utils.models.load_model:1273]"):
                        # the program that printed it, when it is not a runtime's module
                        scanner.other_program = next((m.group(1) for m in _LOGGER_RE.finditer(window)
                                                      if m.group(1) not in RUNTIME_PACKAGES), None)
            for sign in self.signs:
                if sign not in found and sign in window:
                    at = next((k for k, ln in enumerate(lines) if sign in ln), None)
                    found[sign] = (first + at) if first is not None and at is not None else None
            # past read.LINE_LIMIT a big log is not line-counted: number the window's lines from 1
            # for segmenting, then the records carry the window's byte offset instead
            numbered = [((first or 1) + k, ln) for k, ln in enumerate(lines)]
            # a paste newest first (a web console's view) is read oldest first: the timeline needs time order
            ordered = newest_first(numbered) if small else None
            in_order = lines
            if ordered is not None:
                numbered, newest = ordered, True
                in_order = [ln for _, ln in numbered]
            parsed = parse(numbered)
            timeline = scanner.feed(parsed)
            recs, window_cues = segment_parsed(parsed)
            for r in recs:
                if r.type is not None and r.type not in self._known_types:
                    r.type = self._restored_type(r.type)
                if r.kind == "exception" and r.type and r.message.endswith((".", "!", "?")):
                    self._rejoin_wording(r, parsed)
            self._site_stages(recs, parsed, lines, first or 1, release)
            for r in recs:
                r.startup, r.stage, _, r.stage_at = timeline[r.at]
                if first is None:
                    r.line, r.offset = None, offset
            cues |= window_cues
            if kept < MAX_CONTEXT:
                kept += _context_chunks(in_order, timeline, context, MAX_CONTEXT - kept)
            for r in recs:
                # numbers are masked in norm; a line holding a number some template spells out
                # ("usage: 100.0%") is kept by its own text, since where that number stands matters
                # ("hit rate: 100.0%" is not "usage: 100.0%"). The same error again in a later
                # start-up of a crash loop takes the earlier one's place (the last failure is reported).
                key = (r.kind, r.type, r.message if literal and not r.numbers.isdisjoint(literal) else r.norm)
                at = seen.get(key)
                if at is not None:
                    if r.startup > records[at].startup:
                        records[at] = r
                    elif r.startup == records[at].startup:
                        _merge_stage(records[at], r)
                    continue
                # past the cap only errors and warnings are kept: ordinary lines cannot crowd them out
                if len(seen) >= MAX_RECORDS and (len(seen) >= 2 * MAX_RECORDS or (
                        r.kind not in ("exception", "inner") and r.level not in ("ERROR", "CRITICAL", "WARNING"))):
                    continue
                seen[key] = len(records)
                records.append(r)
        _lead_stage(records, scanner)
        _lead_traceback(records, scanner)
        _abort_stage(records, scanner)
        if not scanner.vllm_seen and scanner.other_program is None:
            # vLLM named nowhere, and the traceback runs through another program's package (bitsandbytes
            # under Unsloth, a trainer's): that program's run, whatever runtime text it ends in
            # (a framework that runs vLLM owns only the error its frames raised: a traceback cut before its
            # exception line, through verl's driver, may be reporting vLLM's rollout)
            scanner.other_program = frames_owner(scanner.last_tb, embedders=scanner.open_tb is None)
        scanner.said_error = said_error
        token = _SIGNS_FOUND.set(found)
        try:
            report = self._decide(records, frozenset(cues), context, scanner)
        finally:
            _SIGNS_FOUND.reset(token)
        report.bytes, report.lines, report.records = stats.bytes, stats.lines, len(records)
        report.newest_first = newest
        return report

    @property
    def _known_types(self) -> frozenset[str]:
        if self._types is None:
            self._types = frozenset(sg["exception"] for sg in self.table.sigs if sg.get("exception")) | _COMMON_TYPES
        return self._types

    def _rejoin_wording(self, rec: Record, parsed: list) -> None:
        """An exception whose message a writer hard-wrapped at a sentence's end ("...with memory pool." then
        "Please track https://... for the" then "latest updates."): the segmenter cannot tell such a line
        from a new one, so the lines below are joined on when, word for word, they go on with exactly
        the wording (one signature's text of the same class) the message began. Literal, so a line of
        the writer's own never joins."""
        # the wordings the message begins and that go on past it
        sigs = [self.table.sigs[k]["norm"] for k in self._begun(rec.type, rec.norm.strip())]
        i = rec.at + len(rec.joins)
        message, joins = rec.message, list(rec.joins)
        while sigs and i + 1 < len(parsed):
            lineno, nxt, _, _, fence = parsed[i + 1]
            nxt = nxt.strip()
            if fence or len(nxt) < 8:
                break
            longer = message.rstrip() + " " + nxt
            norm = normalise(longer)
            # the joined text must still be the wording's start (or all of it)
            sigs = [sg for sg in sigs if sg.startswith(norm) or norm.startswith(sg)]
            if not sigs:
                break
            joins.append((len(message.rstrip()) + 1, lineno))
            message, i = longer, i + 1
            # a wording the text now holds whole has no more lines to join
            sigs = [sg for sg in sigs if len(sg) > len(norm)]
        if len(message) > len(rec.message):
            rec.message, rec.joins, rec._norm, rec._canon, rec._numbers = message, tuple(joins), None, None, None

    def _begun(self, typ: str, head: str) -> list[int]:
        """The signatures of exception class `typ` (by its last name, as a traceback may print it qualified
        or not) whose normalised wording begins with `head` and goes on past it."""
        if self._by_class is None:
            self._by_class = {}
            for k, sg in enumerate(self.table.sigs):
                if sg.get("exception"):
                    self._by_class.setdefault(sg["exception"].rsplit(".", 1)[-1], []).append(k)
        sigs = self.table.sigs
        return [k for k in self._by_class.get(typ.rsplit(".", 1)[-1], ())
                if len(sigs[k]["norm"]) > len(head) and sigs[k]["norm"].startswith(head)]

    def _restored_type(self, typ: str) -> str:
        """An exception class with its first letter or two lost in the copy ("untimeError", "orch.cuda.
        OutOfMemoryError": a terminal selection started one character late): the known class it is the end
        of, when exactly one is; else the class as pasted."""
        hits = {k for k in self._known_types if len(k) - 2 <= len(typ) < len(k) and k.endswith(typ)}
        return hits.pop() if len(hits) == 1 and len(typ) >= 8 else typ

    def _site_stages(self, recs: list[Record], parsed: list, lines: list[str], base: int, release: list) -> None:
        """A record whose traceback shows no stage takes the stage of vLLM's logging call site on its
        line (`ERROR ... [core.py:712]`, logsites.json), as a frame would give it; frames win.
        `release`: [the release the paste states, once a window showed it]."""
        scanned = False
        for r in recs:
            if r.kind == "bare" or stage(r.cues) is not None:
                continue
            lineno = parsed[r.at][0]
            raw = lines[lineno - base] if 0 <= lineno - base < len(lines) else ""
            site = site_of(raw)
            if site is None:
                continue
            if self._logsites is None:
                self._logsites = Sites(self.index.get("logsites"))
            if release[0] is None and not scanned:
                release[0] = stated_release(lines)
                scanned = True
            found = self._logsites.lookup(site[0], site[1], release[0])
            if found is None:
                continue
            st = found[0]
            r.cues = r.cues | {st}
            r.cue_at = {**r.cue_at, st: (lineno, raw.strip())}
            r.site = (st, self._logsites.describe(site[0], site[1], found))

    def scores(self, line: str) -> dict[str, float]:
        """Best base score per entry for one line (no stage bonus): how close each entry comes."""
        recs, _ = segment([(1, line)])
        out: dict[str, float] = {}
        for rec in recs:
            for base, si, _ in self.table.score(rec, 0.0):
                eid = self.entries[self.table.sigs[si]["entry"]]["id"]
                out[eid] = max(out.get(eid, 0.0), base)
        return out

    def _entry_bonus(self, entry: dict, record_stage: str | None) -> float:
        if entry["category"] == "engine-wrapper":
            return 0.0
        graph = "graph" in entry["id"] or any("graph" in t for t in entry.get("tags", ()))
        if record_stage == "cudagraph":
            return STAGE_BONUS if graph else 0.0
        if record_stage == "serving":
            return STAGE_BONUS if entry["phase"] == "serving" else 0.0
        # startup, or no sign of serving at all: a failure before the server came up
        return STAGE_BONUS if entry["phase"] == "startup" and not graph else 0.0

    @staticmethod
    def _entry_stage(entry: dict) -> str:
        if "graph" in entry["id"] or any("graph" in t for t in entry.get("tags", ())):
            return "cudagraph"
        return entry["phase"]

    def _stage_contradicts(self, entry: dict, rec: Record) -> str | None:
        """The traceback's own frames show another stage than the one this entry is about: the words
        fit but the place does not (a CUDA OOM in weight repacking is no CUDA-graph capture OOM).
        Only for the out-of-memory-by-stage entries, and only from frames, never from the log's
        general progress. Returns the stage the frames show."""
        if entry["category"] != "device-memory":
            return None
        # a device with one out-of-memory entry at every stage (NPU, XPU, HPU, TPU) has no stage to contradict
        if entry["id"] not in {e for k, e in self._stage_oom_entries().items() if not k.startswith("device:")}:
            return None
        frames = stage(rec.cues)
        if frames is None:
            return None
        return frames if frames != self._entry_stage(entry) else None

    def _oom_by_class(self, rec: Record, global_stage: str | None, contexts: dict, context,
                      device: str | None = None, global_at: tuple | None = None) -> Match | None:
        """torch's OutOfMemoryError whose message no wording matches (cut: "Error in model executi"): the
        class is PyTorch's device out-of-memory error, so the answer is the device OOM of the stage (on an
        accelerator the log names, that device's entry). Confident when the traceback or the log shows
        the stage, likely otherwise."""
        rstage = stage(rec.cues) or rec.stage or global_stage
        eid = (self._stage_oom_entries().get("device:" + device) if device else None) \
            or self._stage_oom_entries().get(rstage or "startup")
        if eid is None:
            return None
        ei = next(i for i, e in enumerate(self.entries) if e["id"] == eid)
        sigs = [i for i, sg in enumerate(self.table.sigs) if sg["entry"] == ei]
        si = next((i for i in sigs if self.table.sigs[i].get("exception") == rec.type), sigs[0])
        conf = rstage is not None
        if conf and rec.startup not in contexts:
            contexts[rec.startup] = fill.context_values(_context_text(context, rec.startup))
        m = self._build(rec, self.entries[ei], si, CUTOFF, conf, None, rstage, contexts.get(rec.startup) if conf else None)
        m.startup = rec.startup
        m.evidence = [Fact(rec.line, rec.text, f"{rec.type} is PyTorch's device out-of-memory error (its message is "
                           "cut or reworded here)")]
        if conf:
            m.evidence.append(self._stage_fact(rec, rstage, global_stage, global_at))
        else:
            m.confidence = "likely"
            m.evidence.append(Fact(None, "", "no frame or log line shows the stage (start-up, CUDA-graph capture or "
                                   "serving): paste the traceback and the log lines before it to tell"))
        return m

    def _stage_decided(self, entry: dict, base: float, exact: bool, runner) -> bool:
        """The runner-up has the same wording (as close a score, as exact) for another stage: only the
        stage tells the two apart."""
        other = self.entries[self.table.sigs[runner[2]]["entry"]]
        return (runner[4] == exact and base - runner[1] < MARGIN and other["category"] == entry["category"]
                and self._entry_stage(other) != self._entry_stage(entry))

    def _unstaged(self, entry: dict, base: float, exact: bool, rstage: str | None, si: int, ranked: list) -> str | None:
        """'A and B' when the claim rests on a stage the log does not show; None otherwise. The sibling
        of another stage may rank below an unrelated entry (the start-up bonus lifts every start-up entry
        when nothing shows serving): any ranked sibling counts, not only the runner-up."""
        if rstage is not None:
            return None
        sibling = next((r for r in ranked[1:] if self._stage_decided(entry, base, exact, r)), None)
        if sibling is None:
            return None
        ids = {entry["id"], self.entries[self.table.sigs[sibling[2]]["entry"]]["id"]}
        ids |= {other["id"] for _, other in self._same_wording(si)}
        names = sorted(ids)
        return ", ".join(names[:-1]) + " and " + names[-1]

    def _said_sibling(self, entry: dict, si: int, scanner: Scanner) -> tuple[dict, int, Fact] | None:
        """The entry of the stage the person names ("under load", "during warm-up") among those sharing
        this wording, with its own signature of the same wording; None when they name none or this one."""
        if scanner.prose_stage is None:
            return None
        at, fact = scanner.prose_stage
        if self._entry_stage(entry) == at or (at == "startup" and self._entry_stage(entry) == "cudagraph"):
            return None
        return next(((other, sj, fact) for sj, other in self._same_wording(si)
                     if other["category"] == entry["category"] and self._entry_stage(other) == at), None)

    def _pooled_sibling(self, rec: Record, entry: dict, si: int, scanner: Scanner) -> tuple[dict, int, Fact] | None:
        """The serving entry among those sharing this wording when PyTorch's own numbers say CUDA graphs
        hold memory ("with 46.00 MiB allocated in private pools (e.g., CUDA Graphs)"): graph capture had
        begun, so loading and profiling were over (V1 still warms the sampler up after it: likely, not
        sure). None otherwise, and where the pool may be sleep mode's (the paste names a wake-up, or the
        pool holds weights' worth: >= 8 GiB)."""
        if self._entry_stage(entry) == "serving" or scanner.wake_named:
            return None
        pool = pool_gib(rec.message)
        if pool is None or not 0 < pool[0] < 8:
            return None
        fact = Fact(rec.line, rec.text, f"PyTorch counts {pool[1]} in private pools (CUDA graphs' memory): graph "
                    "capture, near start-up's end, had begun, so the likelier stage is serving")
        return next(((other, sj, fact) for sj, other in self._same_wording(si)
                     if other["category"] == entry["category"] and self._entry_stage(other) == "serving"), None)

    def _same_wording(self, si: int) -> list[tuple[int, dict]]:
        """(signature index, entry) of every signature with signature si's very wording."""
        norm = self.table.sigs[si]["norm"]
        return [(sj, self.entries[sg["entry"]]) for sj, sg in enumerate(self.table.sigs) if sg["norm"] == norm]

    @staticmethod
    def _stage_fact(rec: Record, rstage: str, global_stage: str | None, global_at: tuple | None = None) -> Fact:
        """The line that decided the stage: the traceback's own frame, else the last milestone before the error,
        else the line elsewhere in the log that shows the stage (`global_at`, when the log's stage is this one)."""
        if stage(rec.cues) == rstage and rstage in rec.cue_at:
            line, text = rec.cue_at[rstage]
            if rec.site is not None and rec.site[0] == rstage:
                return Fact(line, text, rec.site[1])
            return Fact(line, text, f"stage {_STAGE_WORDS[rstage]}: this frame of the traceback shows it")
        if rec.stage == rstage and rec.stage_at:
            line, text = rec.stage_at
            if rec.line is not None and line > rec.line:
                return Fact(line, text, f"stage {_STAGE_WORDS[rstage]}: the last step this start-up reached; the error "
                                        "is pasted above the log lines that led to it, and start-up went no further")
            return Fact(line, text, f"stage {_STAGE_WORDS[rstage]}: the last step the log reached before the error")
        if global_at is not None and rstage == global_stage:
            return Fact(global_at[0], global_at[1], f"stage {_STAGE_WORDS[rstage]}: this line elsewhere in the log shows it")
        return Fact(None, "", f"stage {_STAGE_WORDS[rstage]}: lines elsewhere in the log show it")

    def _score_record(self, record: Record, global_stage: str | None, fuzzy: bool = True, prepared=False):
        """[(final, base, sig index, record stage, exact)] per entry (best signature each), best first."""
        if prepared is False:
            prepared = self.table.prepare(record)
        scored = self.table.finish(record, prepared, POSSIBLE - STAGE_BONUS, fuzzy)
        if not scored:
            return []
        record_stage = stage(record.cues) or record.stage or global_stage
        best: dict[int, tuple[bool, float, float, bool, int, str | None]] = {}
        for base, si, is_exact in scored:
            ei = self.table.sigs[si]["entry"]
            final = base + self._entry_bonus(self.entries[ei], record_stage) + (EXACT_BONUS if is_exact else 0.0)
            # a close text whose meaning words differ (smem for hbm) ranks below every text whose words agree
            # (a fuzzy score on a long line: read where the wording aligned)
            sig = self.table.sigs[si]
            differs = meaning_differs(record.norm if is_exact else aligned_part(record.norm, sig["norm"]), sig) \
                if base >= CUTOFF else None
            agree = differs is None
            cur = best.get(ei)
            # among one entry's wordings: the higher score, then the one the line holds word for word
            if cur is None or (agree, final, base, is_exact) > cur[:4] or (
                (agree, final, base, is_exact) == cur[:4] and self._variant_better(record, si, cur[4])
            ):
                best[ei] = (agree, final, base, is_exact, si, differs)
        ranked = sorted(best.values(), key=lambda t: (not t[0], -t[1], -t[2], not t[3]))
        return [(f, b, si, record_stage, x, d) for _, f, b, x, si, d in ranked]

    def _doubt(self, rec: Record, entry: dict, si: int, exact: bool, scanner: Scanner,
               other: tuple[Record, str] | None = None) -> str | None:
        """Why a claim the words support is still only likely (said to the user), or None: in order, whose
        traceback or paste it is, a person's sentence, an OOM with room to spare, frames of another stage."""
        shared = self.table.sigs[si].get("shared")
        # raised in a whole traceback none of whose frames is vLLM's (a trainer beside it)
        raised_by = scanner.foreign_tb.get(rec.line) if shared else None
        if raised_by:
            return (f"but the traceback above it is whole and none of its frames is vLLM's: {raised_by!r} raised it, "
                    "so vLLM's advice may not apply; if vLLM's own process failed too, paste its traceback")
        # a runtime's text (torch, NCCL, XLA, ...) in a paste that never shows vLLM: other programs
        # (SGLang, TensorRT-LLM, Ollama, a JAX trainer) print it too, and this entry's advice is vLLM's
        if shared and not scanner.vllm_seen and scanner.other_program:
            return (f"but this is {shared}'s text, which other programs print too, and the paste shows "
                    f"{scanner.other_program!r}, never vLLM: if vLLM did run, paste its log to confirm")
        # a runtime's generic refusal ("Failed to apply for memory.") whose own trace names a resource
        # that is not memory (CANN's "Alloc sq cq fail": the stream queues, a count that runs out before
        # memory does) and never a memory code: the words say memory, the runtime's reason may not
        # (other: _other_resource of the paste's records, read once per paste)
        if shared and other:
            return (f"but the runtime's own reason on line {other[0].line} is {other[1]!r}, "
                    "a resource other than memory (too many streams or graphs can exhaust it first); "
                    "if lowering memory use does not help, lower the number of captured graphs or streams")
        # a value written as a placeholder ("Tried to allocate xxx GiB", "(IP: <ip address>)"): a manual's
        # or a FAQ's description of the error, not a line a run printed (a run prints the value)
        held = _PLACEHOLDER_RE.search(rec.message) if ("xx" in rec.message or "XX" in rec.message or "<" in rec.message) else None
        if held:
            return (f"but {held.group(0)!r} stands where a run prints a value: this describes the error (a manual, a "
                    "FAQ), it is not a line a run printed; paste your run's own line to confirm")
        # a short wording met word for word inside a person's sentence ("I'm experiencing an XPU out of
        # memory error when fine-tuning ..."): their words naming the error, not the line a program printed
        if rec.kind == "bare" and exact and _in_passing(rec.message, self.table.sigs[si]["norm"]):
            return ("but this is a sentence that names the error in passing, not the line the program printed: "
                    "paste that line (and the traceback above it) to confirm")
        # an out-of-memory error on a device with far more free than was asked: memory did not run out
        roomy = room_left(rec.message)
        if roomy:
            asked = f"{roomy[0]:.2f} GiB" if roomy[0] >= 1 else f"{roomy[0] * 1024:.2f} MiB"
            return (f"but the device had {roomy[1]:.2f} GiB free when {asked} was asked: memory did not run out. "
                    "Something refused the allocation: a per-process memory limit, sleep mode's allocator "
                    "(CuMemAllocator), or a driver error reported as out of memory; look for the error logged just before it")
        against = self._stage_contradicts(entry, rec)
        if against:
            return f"but the traceback's frames show {against}, not {self._entry_stage(entry)}: the wording fits, the stage does not"
        return None

    @staticmethod
    def _other_resource(records: list[Record]) -> tuple[Record, str] | None:
        """(record, its words) naming a runtime resource other than memory that ran out, unless another
        record names a memory allocation's own failure code."""
        other = None
        for r in records:
            msg = r.message
            if "207001" in msg or "alloc device memory failed" in msg or "out of memory" in msg:
                return None
            found = _OTHER_RESOURCE_RE.search(msg) if other is None and ("sq cq" in msg or "resource" in msg) else None
            if found:
                other = (r, found.group(0))
        return other

    def _whole_sentence(self, rec: Record, si: int) -> bool:
        """The record's words are the wording's first sentences, word for word, to a sentence's end (a
        writer kept "max_num_seqs (1024) exceeds available Mamba cache blocks (512)." of a longer message)."""
        head, norm = rec.norm.strip(), self.table.sigs[si]["norm"]
        return len(head) >= 2 * CUT_ANCHOR and norm.startswith(head) and sentence_ends(head, norm[len(head):])

    def _rewrapped(self, rec: Record, global_stage: str | None) -> list:
        """A RuntimeError whose text is another class's wording: vLLM's executors re-raise a worker's error
        as RuntimeError ('Worker failed with error ...'), and a paste may keep that class with the worker's
        text. The ranking of its text against the wordings of other classes (at most likely: the class
        differs), when no RuntimeError wording fits it."""
        if rec.kind != "exception" or rec.type != "RuntimeError":
            return []
        alt = Record(rec.line, "inner", None, rec.level, rec.message, rec.cues)
        for k in ("offset", "at", "startup", "stage", "cue_at", "stage_at", "site", "joins"):
            setattr(alt, k, getattr(rec, k))
        sigs = self.table.sigs
        return [r for r in self._score_record(alt, global_stage)
                if r[1] >= CUTOFF and sigs[r[2]].get("exception") not in (None, "RuntimeError")]

    def _variant_better(self, record: Record, si: int, sj: int) -> bool:
        """Two wordings of one entry tie after canonicalisation ("models's"): prefer the one the log really has."""
        from rapidfuzz import fuzz

        from .normalize import normalise

        # the class the log printed first (torch.OutOfMemoryError is not torch.cuda.OutOfMemoryError's era)
        same_i = self.table.sigs[si].get("exception") == record.type
        same_j = self.table.sigs[sj].get("exception") == record.type
        if same_i != same_j:
            return same_i
        raw = normalise(record.message, canon=False)
        a, b = self.table.sigs[si].get("norm_raw", ""), self.table.sigs[sj].get("norm_raw", "")
        return fuzz.partial_ratio(a, raw) > fuzz.partial_ratio(b, raw)

    def _decide(self, records: list[Record], cues: frozenset[str], context: list[tuple[int, str]], scanner: Scanner) -> Report:
        global_stage = stage(cues)
        # the first line that shows the log's stage, to name where an error with no stage of its own takes it from
        global_at = (next((r.cue_at[global_stage] for r in records if global_stage in r.cue_at), None)
                     or _frame_showing(scanner.last_tb, global_stage)) if global_stage else None
        confident: dict[str, Match] = {}
        possible: dict[str, Match] = {}
        contexts: dict[int, dict] = {}
        first_error = None
        unmatched: list[Record] = []  # exceptions no entry resembles: candidates for a non-memory root cause
        uncovered: list[Record] = []  # memory errors in view that no entry names (none is, or only a near miss)
        prepared = {id(r): self.table.prepare(r) for r in records}
        other_resource = self._other_resource(records)
        fuzzy = self._fuzzy_budget([r for r in records if prepared[id(r)] and prepared[id(r)][1]])
        for rec in records:
            # (a text a person's sentence quotes, with no class, is shown as the error only if it is one)
            if first_error is None and (rec.kind in ("exception", "inner") or rec.level in ("ERROR", "CRITICAL")) \
                    and not rec.quoted:
                first_error = rec
            ranked = self._score_record(rec, global_stage, id(rec) in fuzzy, prepared[id(rec)])
            rewrapped = None
            if not ranked or ranked[0][1] < CUTOFF:
                rewrapped = self._rewrapped(rec, global_stage)
                if rewrapped:
                    ranked = rewrapped
            if rec.kind in ("exception", "inner") and rec.type and (not ranked or ranked[0][1] < CUTOFF):
                unmatched.append(rec)  # no entry's wording is in it (a resemblance at most)
                if any(w in rec.message for w in _MEMORY_WORDS):
                    uncovered.append(rec)
            if (rec.kind in ("exception", "inner") and (rec.type or "").startswith("torch.")
                    and rec.short_type == "OutOfMemoryError" and (not ranked or ranked[0][1] < CUTOFF)):
                m = self._oom_by_class(rec, global_stage, contexts, context, scanner.device(layout=False), global_at)
                if m is not None:
                    if m.confident:
                        confident.setdefault(m.id, m)
                    elif m.id not in possible:
                        possible[m.id] = m
                continue
            if not ranked:
                continue
            final, base, si, rstage, exact, differs = ranked[0]
            runner = ranked[1] if len(ranked) > 1 else None
            if runner is not None and runner[5] and not differs:
                runner = None  # another entry's close text with other meaning words does not compete
            # a word-for-word wording beats another entry's resemblance however close; between two
            # exact wordings (or two resemblances) the margin decides
            is_conf = base >= CUTOFF and (runner is None or final - runner[0] >= MARGIN or (exact and not runner[4]))
            entry = self.entries[self.table.sigs[si]["entry"]]
            eid = entry["id"]
            # why the words alone do not make the claim: the answer stays likely and says so
            doubt = None
            # the words that carry the meaning (device, memory space, "out of memory", the class) must agree
            # vLLM's own wording word for word (no runtime's text other programs print too): whichever
            # process raised it, the error is this entry's, and the class is the executor's re-raise
            if rewrapped and not ((exact or self._whole_sentence(rec, si)) and not self.table.sigs[si].get("shared")):
                is_conf = False
                doubt = (f"but vLLM raises these words as {self.table.sigs[si]['exception']}, not RuntimeError: "
                         "RuntimeError is the class its executors re-raise a worker's error under ('Worker failed with "
                         "error ...'); paste the worker's own error line to be sure")
            if differs:
                is_conf = False
                if rec.kind in ("exception", "inner"):
                    uncovered.append(rec)
            # a line healthy runs print too (kb signatures[].advisory) hints, it never shows a failure
            advisory = bool(self.table.sigs[si].get("advisory"))
            if advisory:
                is_conf = False
            if is_conf:
                doubt = self._doubt(rec, entry, si, exact, scanner, other_resource)
                if doubt:
                    is_conf = False
            # the wording is shared by entries that differ only in their stage, and nothing shows the stage
            unstaged = self._unstaged(entry, base, exact, rstage, si, ranked) if is_conf else None
            said_stage = None
            if unstaged:
                is_conf = False
                uncovered.append(rec)  # a wrapper above it must not stand in for the answer either
                # the step the person names picks which of the siblings comes first (still only likely)
                said_stage = self._said_sibling(entry, si, scanner) or self._pooled_sibling(rec, entry, si, scanner)
                if said_stage is not None:
                    entry, si = said_stage[0], said_stage[1]
                    eid = entry["id"]
            # one match per entry: the latest start-up's (a crash loop reports its last failure)
            if is_conf and eid in confident and confident[eid].startup >= rec.startup:
                continue
            if not is_conf and (eid in confident or (eid in possible and possible[eid].score >= base)):
                continue
            if is_conf and rec.startup not in contexts:
                contexts[rec.startup] = fill.context_values(_context_text(context, rec.startup))
            m = self._build(rec, entry, si, base, is_conf, runner, rstage, contexts.get(rec.startup))
            m.startup = rec.startup
            if unstaged:
                m.confidence = "likely"
                if said_stage is not None:
                    m.evidence.append(said_stage[2])
                m.evidence.append(Fact(rec.line, rec.text, f"but {unstaged} share this wording and no frame or log line "
                                       "shows the stage (start-up, CUDA-graph capture or serving): paste the traceback "
                                       "and the log lines before it to tell"))
            elif differs:
                m.evidence.append(Fact(rec.line, rec.text, f"close to {eid}'s wording, but {differs}: another error"))
            elif advisory:
                who = self.table.sigs[si].get("shared") or "vLLM"
                m.notes = {**m.notes, "advisory": f"{who} prints this line on healthy runs too: it is a hint, not the failure"}
            elif doubt:
                m.confidence = "likely"
                m.evidence.append(Fact(rec.line, rec.text, doubt))
            elif is_conf and rstage and runner is not None and self._stage_decided(entry, base, exact, runner):
                m.evidence.append(self._stage_fact(rec, rstage, global_stage, global_at))
            (confident if is_conf else possible)[eid] = m
        for eid in confident:
            possible.pop(eid, None)
        conf = sorted(confident.values(), key=lambda m: (m.line_no or 0, m.offset or 0))  # log order
        primary = [m for m in conf if m.category != "engine-wrapper"]
        last = max((r.startup for r in records), default=0)
        not_memory = None
        other_error = False  # an error in view that no entry claims: the engine died of that
        if not primary:
            not_memory = _non_memory_root(unmatched, last)
            other_error = not_memory is not None or any(r.startup == last for r in uncovered)
            # a wrapper ("EngineCore failed to start") says the engine died, not why: it is claimed
            # only when the log shows a memory error, and never over a visible non-memory one
            # nor over a memory error in view that no entry covers (the wrapper would stand in for it)
            # nor over a host-RAM kill, which the host-memory entries explain (the wrapper only reports it)
            if other_error or not _memory_words(records) or host_facts(scanner):
                for m in [m for m in conf if m.category == "engine-wrapper"]:
                    _demote(m, "possible")
                    possible[m.id] = m
                conf = [m for m in conf if m.confident]
        root = None
        if primary or conf:
            pool = primary or conf
            # the last start-up first; then the most severe; among equals the first in the log
            root = max(pool, key=lambda m: (m.startup, _SEVERITY.get(m.severity, 0), -conf.index(m)))
        for m in conf:
            if root is not None and m is not root and m.category == "engine-wrapper":
                # the engine dying of the root cause: its own fix would compete with the root's
                m.fix, m.fix_forms, m.notes = None, {}, {}
        likely: list[Match] = []
        # errors in view that no entry claims: a cut line other than theirs names no error whole
        in_view = ([not_memory] if not_memory is not None else []) + [r for r in uncovered if r.startup == last]
        cut_line = self._cut_line(records, scanner, in_view, other_resource) if root is None else None
        if cut_line is not None and not_memory is not None and not_memory.line == cut_line.line_no:
            not_memory = None  # the error the paste stops in is this entry's, not another one
        if cut_line is not None and cut_line.confident:
            root, cut_line = cut_line, None
        if root is None and cut_line is None and not_memory is None:
            cut_line = self._elided(records)  # (an error no entry claims in view: that is what failed)
        if root is None:
            values = scanner.values() | fill.context_values(_context_text(context, last))
            likely = self._from_evidence(scanner, not_memory is not None, global_stage, values)
            if cut_line is None and not_memory is None and not any(m.confidence == "likely" for m in likely):
                # nothing in the log tells it: a person's sentence may tell the error in its words
                told = self._paraphrased(records)
                likely = ([told] if told else []) + [m for m in likely if not told or m.id != told.id]
            if cut_line is not None and cut_line.category == "engine-wrapper" and other_error:
                _demote(cut_line, "possible")  # a cut wrapper line below an error no entry claims: it died of that
            if cut_line is not None:
                likely = [cut_line] + [m for m in likely if m.id != cut_line.id]
            for m in likely:
                if m.confidence == "possible":
                    if m.id not in possible or possible[m.id].score < m.score:
                        possible[m.id] = m
            likely = [m for m in likely if m.confidence == "likely"]
            for m in likely:
                possible.pop(m.id, None)
        ordered = ([root] if root else []) + [m for m in conf if m is not root]
        ordered += likely
        ordered += sorted(possible.values(), key=lambda m: (m.confidence != "likely", -m.score))
        report = Report(root.id if root else None, ordered)
        report.restarts = scanner.restarts
        report.truncated = scanner.truncated
        report.reached = scanner.step
        if not_memory is not None:
            report.not_memory = {"line": not_memory.line, "text": not_memory.text[:500], "type": not_memory.type}
        if root is None:
            # only an error is shown as the error (never an INFO line or a person's prose); the
            # new-entry link still quotes the first line worth quoting
            shown = not_memory or first_error
            report.first_error = shown.text if shown else None
            if (shown is None and scanner.failure is None and not scanner.truncated and not scanner.last_tb
                    and not scanner.said_error):
                # nothing failed in view: the paste stops before the failure (or is prose about it); a
                # new-entry proposal would quote an ordinary line, so ask for the lines after the last one
                report.no_error = {"line": scanner.last_at if records and records[-1].line is not None else None,
                                   "text": scanner.last_text[:300]}
            else:
                # the line to quote: an exception or an ERROR line, else the first that reports a failure
                # (a person's "Hi, I'm using X" above the error they quote is no error)
                loud = [r for r in records if r.level not in ("INFO", "DEBUG")]
                shown = shown or next((r for r in loud if (r.kind == "exception" and r.type) or r.level in ("ERROR", "CRITICAL")),
                                      None) or next((r for r in loud if says_failure(r.norm) and not r.message.rstrip().endswith(":")),
                                                    None) or next(iter(loud), None)
                if shown is not None:  # a cut traceback alone, or a patch, has no line to propose
                    report.new_issue_url = new_issue_url(shown.norm, shown.text)
        return report

    def _cut_line(self, records: list[Record], scanner: Scanner, in_view: list[Record],
                  other: tuple[Record, str] | None = None) -> Match | None:
        """The paste stops in the middle of its error line ("RuntimeError: UVA is", "ray.exceptions.OutOfMe"):
        the words it got to are how exactly one entry's wording begins (the class and the start of the
        message, or the start of a qualified class name). Likely: the rest of the line could still say
        something else. Confident only when the paste stops where a sentence of that wording ends (a
        writer hard-wraps or trims the message there): the sentence names the error whole, and no other
        entry's wording begins with it, and no other error is in view (`in_view`: errors no entry claims;
        the engine may have died of one of those), and no doubt stands (`other`: the runtime's reason naming
        another resource, _other_resource, read once per paste)."""
        rec = next((r for r in reversed(records) if r.line is not None), None)
        if rec is None or scanner.last_at != (rec.joins[-1][1] if rec.joins else rec.line):
            return None
        if rec.kind in ("exception", "inner") and rec.type:
            head = rec.norm.strip()
            if len(head) < CUT_LINE_MIN or not any(len(w) >= 3 and w.isalpha() for w in head.split()):
                return None
            hits = self._begun(rec.type, head)
            ends = {i for i in hits if sentence_ends(head, self.table.sigs[i]["norm"][len(head):])}
            says = f"the paste stops inside this line: '{rec.type}: {rec.message.strip()}' is how this entry's wording begins"
        elif _CUT_CLASS_RE.match(rec.message.strip()):
            head = rec.message.strip()
            hits = [i for i, sg in enumerate(self.table.sigs) if sg.get("exception") and
                    len(sg["exception"]) > len(head) and sg["exception"].startswith(head)]
            says = f"the paste stops inside this line: '{head}' is how this entry's exception class begins"
            ends = set()
        else:
            hits, ends = [], set()
        if not hits:
            # the wording itself, after whatever the line says first ("Failed to load model with Error: "),
            # runs to the paste's end and stops before the wording does: at least half of it is there
            for i, sg in enumerate(self.table.sigs):
                total = sum(len(lit) for lit in sg.get("lits") or ())
                got, at_end = cut_point(rec.message, sg) if total >= 2 * CUT_ANCHOR else (0, False)
                if got >= CUT_ANCHOR and 2 * got >= total and not meaning_differs(rec.norm, sg):
                    hits.append(i)
                    if at_end:
                        ends.add(i)
            says = "the paste stops inside this line, partway through this entry's wording"
        entries = {self.table.sigs[i]["entry"] for i in hits}
        if len(entries) != 1:
            return None  # no entry's wording begins so, or several do: the cut says nothing
        si = next((i for i in hits if i in ends), hits[0])
        entry = self.entries[self.table.sigs[si]["entry"]]
        m = self._build(rec, entry, si, POSSIBLE, False, None, stage(rec.cues) or rec.stage, None)
        m.startup = rec.startup
        if si in ends and all(r.line == rec.line for r in in_view) \
                and self._doubt(rec, entry, si, False, scanner, other) is None:
            m.confident, m.confidence = True, "confident"
            # the score the line's words get against the whole wording (shown; the cut explains the rest)
            ei = self.table.sigs[si]["entry"]
            m.score = next((b for _, b, i, *_ in self._score_record(rec, None) if self.table.sigs[i]["entry"] == ei), m.score)
            m.evidence = [Fact(rec.line, rec.text, says + ", and no other entry's does; it stops where a sentence of "
                               "that wording ends, so the error is named whole (the rest of the wording is its detail)")]
            return m
        m.confidence = "likely"
        m.evidence = [Fact(rec.line, rec.text, says + ", and no other entry's does"),
                      Fact(None, "", "the line is cut: paste the whole error line to tell")]
        return m

    def _elided(self, records: list[Record]) -> Match | None:
        """A wording quoted with parts left out ("Free memory ... less than desired GPU memory utilization"):
        every piece between the ellipses is, word for word and in order, in the wordings of exactly one
        entry. Likely, never confident: the writer chose what to keep, and the parts left out could have
        said something else."""
        for rec in reversed(records):
            if rec.level in ("INFO", "DEBUG") or ("..." not in rec.message and "\u2026" not in rec.message):
                continue
            pieces = [normalise(p) for p in _ELLIPSIS_RE.split(rec.message)]
            pieces = [p for p in pieces if p]
            if len(pieces) < 2 or max(map(len, pieces)) < CUT_ANCHOR or sum(map(len, pieces)) < 2 * CUT_ANCHOR \
                    or not all(any(len(w) >= 3 and w.isalpha() for w in p.split()) for p in pieces):
                continue
            hits = [i for i, sg in enumerate(self.table.sigs) if _in_order(pieces, sg["norm"])]
            entries = {self.table.sigs[i]["entry"] for i in hits}
            if len(entries) != 1:
                continue
            si = hits[0]
            entry = self.entries[self.table.sigs[si]["entry"]]
            m = self._build(rec, entry, si, POSSIBLE, False, None, stage(rec.cues) or rec.stage, None)
            m.startup, m.confidence = rec.startup, "likely"
            m.evidence = [Fact(rec.line, rec.text, "the pieces of this quote, with parts left out ('...'), are word for "
                                                   "word and in order this entry's wording, and no other entry's"),
                          Fact(None, "", "parts are left out: paste the whole error line to tell")]
            return m
        return None

    def _first_sentences(self) -> list[tuple[str, int]]:
        """(first sentence, signature index) of each wording whose first sentence says enough on its own:
        long enough, and reporting a failure."""
        if self._firsts is None:
            out = []
            for i, sg in enumerate(self.table.sigs):
                if sg.get("level") in ("INFO", "DEBUG"):
                    continue
                first = sg["norm"].split(". ", 1)[0]
                # (a first sentence that reports no failure, "This model's maximum context length is X
                # tokens", is said of healthy runs and other programs alike: the error is in what follows)
                if len(first.replace("<n>", "")) >= PARAPHRASE_MIN and says_failure(first):
                    out.append((first, i))
            self._firsts = out
        return self._firsts

    def _paraphrased(self, records: list[Record]) -> Match | None:
        """A person's sentence that says a wording's first sentence all but word for word ("the default
        `max_num_seqs=1024` exceeds the available Mamba cache blocks"), with no error line in the paste:
        likely, never confident (the person tells of the error; the error line would tell it whole).
        Exactly one entry's first sentence must be that close, and its meaning words agree."""
        prose = [r for r in records if r.kind in ("bare", "inner") and r.type is None and r.level not in ("INFO", "DEBUG")]
        if not prose or len(prose) > PARAPHRASE_RECORDS:
            return None
        from rapidfuzz import fuzz

        firsts = self._first_sentences()
        for rec in reversed(prose):
            line = rec.norm
            best: dict[int, tuple[float, int]] = {}
            for first, i in firsts:
                if len(line) < len(first) * 0.8:
                    continue
                score = fuzz.partial_ratio(first, line, score_cutoff=PARAPHRASE_SCORE)
                # (its words judged against that sentence: "less than" must be there as the wording says it)
                if score and meaning_differs(aligned_part(line, first), {**self.table.sigs[i], "norm": first}) is None:
                    ei = self.table.sigs[i]["entry"]
                    if score > best.get(ei, (0.0, 0))[0]:
                        best[ei] = (score, i)
            if len(best) != 1:
                continue  # none, or several entries' sentences alike: the prose says no one error
            score, si = next(iter(best.values()))
            entry = self.entries[self.table.sigs[si]["entry"]]
            m = self._build(rec, entry, si, POSSIBLE, False, None, stage(rec.cues) or rec.stage, None)
            m.startup, m.confidence = rec.startup, "likely"
            m.evidence = [Fact(rec.line, rec.text, f"the person's sentence says this entry's wording all but word for "
                                                   f"word (its first sentence, score {score:.0f}), and no other entry's"),
                          Fact(None, "", "no error line is in the paste: paste the lines where it failed to tell")]
            return m
        return None

    @staticmethod
    def _fuzzy_budget(records: list[Record]) -> set[int]:
        """ids of the records (those the cheap prefilter left a fuzzy candidate for) that get a fuzzy
        score: at most MAX_SCORED, errors before log lines and prose, the last start-up first, later
        lines first. Every record still gets the cheap word-for-word check, so an exact line is never
        lost; a paste of thousands of distinct lines costs a bounded time, also on pure-Python rapidfuzz."""
        if len(records) <= MAX_SCORED:
            return {id(r) for r in records}
        rank = {"exception": 0, "inner": 0, "log": 1, "bare": 2}

        def key(ir):
            i, r = ir
            level = 0 if r.level in ("ERROR", "CRITICAL", "WARNING") else 1
            return (rank.get(r.kind, 2) + (level if r.kind == "log" else 0), -r.startup, -i)

        return {id(r) for _, r in sorted(enumerate(records), key=key)[:MAX_SCORED]}

    def _from_evidence(self, scanner: Scanner, not_memory: bool, global_stage, values: dict) -> list[Match]:
        """Matches for what the log states when no error line matched: likely or possible."""
        out: list[Match] = []
        seen: set[str] = set()
        by_id = {e["id"]: i for i, e in enumerate(self.entries)}
        expanded = []
        for h in hints(scanner, visible_error=not_memory, stage_entries=self._stage_oom_entries()):
            if h.entry.startswith("category:"):
                expanded += [Hint(eid, h.tier, h.facts, h.rank - 0.05 * k)
                             for k, eid in enumerate(self._category_fit(h.entry.split(":", 1)[1], h.facts, scanner.stage))]
            else:
                expanded.append(h)
        for h in expanded:
            tier = "possible" if not_memory else h.tier
            eid = h.entry
            si = None
            if eid.startswith("raise:"):
                _, typ, literal = eid.split(":", 2)
                rec = Record(h.facts[0].line, "exception", typ, None, literal)
                ranked = self._score_record(rec, global_stage) if len(literal) >= 12 else []
                if not ranked:
                    continue
                final, base, si, _, _, _ = ranked[0]
                eid = self.entries[self.table.sigs[si]["entry"]]["id"]
                if base < CUTOFF:
                    tier = "possible"
            if eid in seen or eid not in by_id:
                continue
            seen.add(eid)
            entry = self.entries[by_id[eid]]
            if si is None:
                si = next(i for i, sg in enumerate(self.table.sigs) if sg["entry"] == by_id[eid])
            fix, forms, notes = self._fix_and_forms(entry, {}, values if tier == "likely" else None)
            line = h.facts[0]
            out.append(Match(
                id=eid, title=entry["title"], score=round(min(79.0, 60.0 + 6 * h.rank), 1), confident=False,
                confidence=tier, evidence=h.facts,
                signature=None,  # no wording of the entry is in the log: the evidence is
                line=line.text, text=line.text, line_no=line.line, params={}, fix=next(iter(forms.values()), None),
                fix_forms=forms, fix_title=fix["title"], url=self.url(eid), stage=scanner.stage, notes=notes,
                category=entry["category"], severity=entry["severity"],
            ))
        return out

    def _category_fit(self, category: str, facts: list[Fact], log_stage: str | None, keep: int = 2) -> list[str]:
        """The entries of a category that fit these facts best (at most `keep`): the share of the facts'
        words (their lines and what each says: "the kernel's OOM killer", "Ray's memory monitor") that the
        entry's title, summary, tags and wordings use, then whether the entry's phase is the stage the log
        reached. Category-driven: a new entry of the category takes part without any change here."""
        import re

        def words(text: str) -> set[str]:
            return {w for w in re.findall(r"[a-z][a-z0-9_'-]{3,}", text.lower()) if w not in _COMMON_WORDS}

        # the log's lines and what each says; a fact with no line is our own request for more, and what a
        # person's words "say" is our gloss of them: neither tells the entries apart
        said = set().union(*(words(f.text if f.line is None or f.says.startswith("the person") else f.text + " " + f.says)
                             for f in facts)) or {""}
        weights = self.index.get("callees", {}).get("weights", {})
        scored = []
        for ei, entry in enumerate(self.entries):
            if entry["category"] != category:
                continue
            own = words(" ".join([entry["title"], entry["summary"], " ".join(entry.get("tags", ())),
                                  *(sg["norm"] for sg in self.table.sigs if sg["entry"] == ei)]))
            fit = 100.0 * len(said & own) / len(said)
            if log_stage is not None and entry["phase"] == ("startup" if log_stage == "cudagraph" else log_stage):
                fit += 5.0
            scored.append((fit, entry["id"]))
        if not scored:
            return []
        # on a tie, the entry real pastes show most often (the corpus's counts)
        scored.sort(key=lambda t: (-t[0], -weights.get(t[1], 0), t[1]))
        # a second entry only when it fits about as well as the first
        return [eid for fit, eid in scored[:keep] if fit >= scored[0][0] - CATEGORY_CLOSE]

    def _build(self, rec: Record, entry: dict, si: int, base: float, is_conf: bool, runner, rstage, context) -> Match:
        sig = self.table.sigs[si]
        # a "possible" is not asserted, so its numbers are not pulled out
        params = self._params(rec, si) if is_conf else {}
        fix, forms, notes = self._fix_and_forms(entry, params, context if is_conf else None)
        runner_up = None
        if runner is not None:
            rsig = self.table.sigs[runner[2]]
            runner_up = {"id": self.entries[rsig["entry"]]["id"], "signature": rsig["id"], "score": round(runner[1], 1)}
        return Match(
            id=entry["id"],
            title=entry["title"],
            score=base,  # the text score; the stage cue only breaks ties between identical wordings
            confident=is_conf,
            signature={"id": sig["id"], "versions": sig["versions"], "engine": sig["engine"], "backend": sig["backend"]},
            line=rec.norm,
            text=rec.text,
            line_no=_raising_line(rec, sig),
            offset=rec.offset,
            params=params,
            fix=next(iter(forms.values()), None),
            fix_forms=forms,
            fix_title=fix["title"],
            url=self.url(entry["id"]),
            runner_up=runner_up,
            stage=rstage,
            notes=notes,
            category=entry["category"],
            severity=entry["severity"],
            confidence="confident" if is_conf else "possible",
            evidence=[Fact(rec.line, rec.text, f"matches {entry['id']} ({sig['id']}), score {base:.1f}")],
        )

    def _fix_of(self, entry: dict) -> tuple[dict, dict]:
        """(the fix to show, a note naming the sign that chose it): the fix of the first cause, in the
        entry's rank order, whose sign this log holds (kb causes[].signs); else the top cause's fix."""
        found = _SIGNS_FOUND.get()
        for cause in entry.get("signed", ()):
            sign = next((sg for sg in cause["signs"] if sg in found), None)
            if sign is None:
                continue
            at = found[sign]
            where = f" (line {at})" if at is not None else ""
            return cause["fix"], {"cause": f"the log shows {sign!r}{where}: {cause['cause']}"}
        return entry["fix"], {}

    def _fix_and_forms(self, entry: dict, params: dict, context: dict | None) -> tuple[dict, dict, dict]:
        """(fix, its filled forms, notes). A fix whose every setting the log already shows with the same
        value ("--tensor-parallel-size 2" for a run started with it) is one the run had: the entry's
        next fix in rank order that the log does not show takes its place, and a note says so."""
        fix, why = self._fix_of(entry)
        forms, notes = self._forms(fix, params, context)
        settings = context.get("settings") if context else None
        done = fill.already_set(forms.get("cli"), settings) if settings else []
        if done:
            said = " ".join(done)
            for alt in entry.get("fixes", ()):
                if alt["id"] == fix["id"]:
                    continue
                alt_forms, alt_notes = self._forms(alt, params, context)
                if not fill.already_set(alt_forms.get("cli"), settings):
                    why = {"already": f"the log already runs with {said}, what {fix['title']!r} sets, so the next fix is shown"}
                    return alt, alt_forms, {**why, **alt_notes}
            why = {**why, "already": f"the log already runs with {said}, what this fix sets: read the entry's other causes"}
        return fix, forms, {**why, **notes}

    @staticmethod
    def _forms(fix: dict, params: dict, context: dict | None) -> tuple[dict, dict]:
        """The fix's CLI / Python / env forms filled with the user's numbers (none without context:
        a possible match is not asserted, so nothing is filled in for it), and the notes on them."""
        used = set(fill.placeholders(" ".join(v for v in fix.values() if isinstance(v, str))))
        values, notes = fill.all_values(params, context, used) if context is not None else ({}, {})
        forms = {k: fill.fill(fix.get(k), values) for k in ("cli", "python", "env") if fix.get(k)}
        return forms, {k: v for k, v in notes.items() if k in used}

    def _params(self, rec: Record, si: int) -> dict[str, str]:
        """The user's numbers: from the whole template, or for a cut line from the longest part found."""
        sig = self.table.sigs[si]
        best: dict[str, str] = {}
        for text in (rec.message, rec.canon):
            values, whole = walk(text, sig)
            if whole:
                return fill.clean_params(values)
            if len(values) > len(best):
                best = values
        return fill.clean_params(best)


# the signs this match found (sign -> the line it was first seen on): per call, not per Matcher, so two
# threads sharing one Matcher never see each other's signs
_SIGNS_FOUND: ContextVar[dict[str, int | None]] = ContextVar("kvkb_signs_found", default={})  # noqa: B039

# Python's and torch's classes that end a traceback, besides the KB's own (for a class pasted with its
# first letter lost)
_COMMON_TYPES = frozenset(("RuntimeError", "ValueError", "AssertionError", "KeyError", "TypeError", "OSError",
                           "MemoryError", "ImportError", "AttributeError", "IndexError", "NotImplementedError",
                           "torch.OutOfMemoryError", "torch.cuda.OutOfMemoryError", "torch.AcceleratorError",
                           "ray.exceptions.OutOfMemoryError", "ray.exceptions.RayTaskError"))

# words of a failure, in any form: a paste with none of them holds no error at all
_ERROR_WORDS = ("rror", "ERROR", "xception", "ailed", "FAILED", "Killed", "killed", "out of memory", "Out of memory",
                "OOM", "Traceback", "atal", "FATAL", "panic", "Abort", "abort", "SIG", "Cannot allocate", "exceed")
# other programs that print the same runtime texts (torch's, NCCL's, XLA's OOM): inference engines, and
# training code (vLLM never trains). Looked for only in a paste that never names vLLM, lower-cased.
# (A traceback through another package's frames names its program by itself: evidence.frames_owner.)
_OTHER_PROGRAMS = ("sglang", "tensorrt_llm", "tensorrt-llm", "trtllm", "ollama", "ggml", "llama.cpp", "llama_cpp",
                   "llama-server", "lmdeploy", "text_generation_server", "text-generation-inference", "mlc_llm", "exllama", "easydel",
                   "maxtext", "train_step", "training_step", "deepspeed", "megatron", "keras", "mlx_lm", "mlx-lm",
                   "mindie", "openvino",
                   # a training run told in words (vLLM never trains; an RL run's rollout names vLLM)
                   "during training", "while training", "training job", "训练过程", "训练时")
# Hugging Face transformers' JAX models (FlaxGemmaForCausalLM...): a program that is not vLLM (vLLM's own
# JAX models, tpu-inference, are not named so)
_HF_FLAX_RE = Lazy(r"\bflax[a-z0-9]+for(?:causallm|conditionalgeneration|seq2seqlm|maskedlm)")
# the kernel's "Killed process 1389987 (evalscope)": its command name (15 characters at most)
_KILLED_RE = Lazy(r"Killed process \d+ \(([^)\s]{1,15})\)")
# the names vLLM's processes run under (the interpreter, torch's main thread, vLLM's and Ray's process
# titles), LMCache's server beside it, and the compilers a vLLM build or torch.compile runs: a kill of
# one of these may be vLLM's
_VLLM_COMMS = ("python", "pt_", "vllm", "VLLM", "Vllm", "vLLM", "ray", "Ray", "EngineCore", "Worker", "uvicorn", "torchrun",
               "lmcache", "cicc", "nvcc", "ptxas", "cc1plus", "gcc", "g++", "ld", "ninja", "cmake", "pip", "uv", "triton")
# a value a manual leaves out: "xxx", "<ip address>" (two words at least: "<module>" is a frame's name)
_PLACEHOLDER_RE = Lazy(r"(?<![\w/.-])(?:x{3,}|X{3,})(?![\w/.-])|<[a-z]+(?: [a-z]+)+>")
# a Python logger's dotted module name with its line number, in brackets: "[axolotl.utils.models.load_model:1273]"
# (not a file name: vLLM's own lines say "[core.py:500]")
_LOGGER_RE = Lazy(r"\[([a-z_][a-z0-9_]*)(?:\.(?!py:)[a-z_][a-z0-9_]*)+:\d+\]")
_PASTE_SCAN = 1 << 20  # a window up to this size is searched whole for the words above

CUT_LINE_MIN = 6  # characters of a cut error message that must be there to say whose wording it begins
CUT_ANCHOR = 16  # literal characters of a wording a cut last line must hold, after whatever came first
PARAPHRASE_MIN = 40  # characters (values left out) a wording's first sentence needs to be told in prose
PARAPHRASE_SCORE = 88.0  # how close a person's sentence must come to it
PARAPHRASE_RECORDS = 40  # prose records read for it: a paste, not a log
# a qualified exception class cut mid-name (`ray.exceptions.OutOfMe`): a dotted module path, then the start of a class
_CUT_CLASS_RE = Lazy(r"^[a-z_][\w]*(?:\.[a-z_]\w*)*\.[A-Z]\w{2,}$")

_COMMON_WORDS = {"this", "that", "with", "what", "from", "when", "were", "which", "there", "their", "sends", "says",
                 "process", "memory", "engine", "worker", "error", "vllm"}
CATEGORY_CLOSE = 5.0  # points of fit within which a category's second entry is shown as well
_STAGE_WORDS = {"startup": "start-up", "cudagraph": "CUDA-graph capture", "serving": "serving"}

# a runtime's own reason naming a resource that is not memory (CANN: the stream queues, stream/event ids)
_OTHER_RESOURCE_RE = Lazy(r"(?i)alloc sq cq fail|no (?:stream|event|notify) resource"
                          r"|(?:stream|event|notify) resource (?:is )?exhausted")
# An error a person would read as running out of memory (device, host or KV pool); "illegal memory
# access" and "shared memory broadcast" are not shortages.
_MEMORY_WORDS = ("out of memory", "OutOfMemory", "RESOURCE_EXHAUSTED", "Failed to allocate", "KV cache", "cache blocks",
                 "memory for", "memory on device", "not enough memory", "Not enough memory", "insufficient memory",
                 "memory is insufficient")
# Unmatched exceptions that are never a root cause: the process being told to stop, or generic
# wrappers that point elsewhere
_NOT_ROOT_TYPES = ("SystemExit", "KeyboardInterrupt", "CancelledError", "GeneratorExit", "StopIteration", "BrokenPipeError",
                   # a process's death reported by whoever watched it (Ray, vLLM's engine client): never why
                   "ActorDiedError", "RayActorError", "WorkerCrashedError", "ActorUnavailableError", "EngineDeadError",
                   # Ray's report that a remote task raised: the task's own traceback and error follow it
                   "RayTaskError")
_WRAPPER_WORDS = ("root cause", "stack trace", "stacktrace", "hit an exception", "See the above", "see above")


# The host ran out of memory and killed a process (kernel OOM killer, Kubernetes): a memory death
# that vLLM itself never reports, whoever printed the line
_HOST_OOM_WORDS = ("Out of memory: Kill", "oom-kill", "OOMKilled", "oom_reaper")


def _memory_words(records: list[Record]) -> bool:
    return any(((r.kind in ("exception", "inner") or r.level in ("ERROR", "CRITICAL"))
                and any(w in r.message for w in _MEMORY_WORDS)) or any(w in r.message for w in _HOST_OOM_WORDS)
               for r in records)


def _non_memory_root(unmatched: list[Record], startup: int) -> Record | None:
    """The first exception of the last start-up that no entry resembles and that names no memory
    shortage: Python prints a chain's cause first, and vLLM logs the engine's error before the
    wrappers that report it."""
    for r in unmatched:
        if r.startup != startup or r.short_type in _NOT_ROOT_TYPES or "OutOfMemory" in (r.type or ""):
            continue  # an OutOfMemoryError is a memory error whatever its (cut) message says
        if any(w in r.message for w in _WRAPPER_WORDS) or any(w in r.message for w in _MEMORY_WORDS):
            continue
        return r
    return None


def _frame_showing(frames: list[tuple[int, str, str]], at: str) -> tuple[int, str] | None:
    """(line, text) of a frame of a traceback no error line closed (a cut paste) whose function is one of
    the stage's cues: where the log shows that stage when no error record holds the frame."""
    for line, func, path in frames:
        if func and at in cues_of(func):
            return line, f'File "{path}", in {func}'
    return None


def _raising_line(rec: Record, sig: dict) -> int | None:
    """The line where the matched wording starts: a message glued from several lines (a flattened
    traceback, a hard wrap) is shown at the line that holds the error, not where the glue began."""
    if not rec.joins:
        return rec.line
    head = next((lit.strip() for lit in sig.get("lits", ()) if len(lit.strip()) >= 8), "")
    pos = rec.message.lower().find(head[:40].lower()) if head else -1
    return rec.line_at(pos) if pos >= 0 else rec.line


def _lead_stage(records: list[Record], scanner: Scanner) -> None:
    """An error pasted above the log lines that led to it (people paste the error first, then the log):
    a start-up ends at its fatal error, so when the start-up the error belongs to ends at a start-up
    step (loading, profiling, KV sizing, CUDA-graph capture: no line after it says start-up finished
    or went on), that last step is where the error came. Only for an exception with no step before it
    in its start-up and no stage of its own; a start-up whose last step is serving tells nothing (an
    error while serving need not end it), nor across a launch command pasted after the error (a relaunch
    as likely as the same run's)."""
    at, last = scanner.stage, len(scanner.startups) - 1
    if at not in ("startup", "cudagraph") or scanner.stage_at is None:
        return
    for r in records:
        if (r.startup == last and r.stage is None and r.kind in ("exception", "inner") and r.line is not None
                # (on one line, a log flattened onto it, the step is after the error: the error took no stage
                # from the timeline, so no step came before it; a launch there came after it too)
                and r.line <= scanner.stage_at[0] and stage(r.cues) is None
                and not (scanner.launched_at is not None and scanner.launched_at >= r.line)):
            r.stage, r.stage_at = at, scanner.stage_at


ABORT_REACH = 12  # lines after an error within which vLLM's aborts of its requests are that error's


def _abort_stage(records: list[Record], scanner: Scanner) -> None:
    """An error with no stage, followed at once by vLLM aborting requests ("Aborted request <id>."): the
    engine fails the requests it was serving when an error stops it, and at start-up there are none, so
    the error came while serving. Only for an exception with no stage of its own or from the log."""
    if not scanner.aborts:
        return
    for r in records:
        if r.stage is not None or r.kind not in ("exception", "inner") or r.line is None or stage(r.cues) is not None:
            continue
        after = next(((ln, text) for ln, su, text in scanner.aborts
                      if su == r.startup and r.line < ln <= r.line + ABORT_REACH), None)
        if after is not None:
            r.stage, r.stage_at = "serving", after


def _lead_traceback(records: list[Record], scanner: Scanner) -> None:
    """An exception pasted above its own traceback, which the paste then cuts before it repeats the
    exception: the traceback's frames are that exception's, and say its stage. Only for the paste's last
    exception, with no stage of its own, when the cut traceback starts after it in the same start-up."""
    tb = scanner.open_tb
    if tb is None or tb.line is None:
        return
    last = next((r for r in reversed(records) if r.kind in ("exception", "inner") and r.line is not None), None)
    # (on the same line, as in a log flattened onto one line, the exception comes first: one after the
    # traceback's header would have closed it)
    if last is None or last.line > tb.line or stage(last.cues) is not None or last.startup != len(scanner.startups) - 1:
        return
    found = frames_stage(scanner)  # the frames' own stage, not the log's steps (_lead_stage reads those)
    if found is None:
        return
    frame = _frame_showing(scanner.last_tb, found)
    last.cues = last.cues | {found}
    last.cue_at = {**last.cue_at, found: frame or (tb.line, tb.text)}


def _merge_stage(kept: Record, again: Record) -> None:
    """The same error printed twice in one start-up (a launcher's bare copy, then vLLM's logger with its
    `[core.py:1136]` prefix; or the traceback and its summary) is one error: when the copy kept shows no
    stage and the other one does (its frames or its logging call site), the kept one takes that stage.
    A copy that shows a stage of its own keeps it (the first wins, as it always did)."""
    if stage(kept.cues) is not None or stage(again.cues) is None:
        return
    kept.cues = kept.cues | again.cues
    kept.cue_at = {**again.cue_at, **kept.cue_at}
    if kept.site is None:
        kept.site = again.site


_ELLIPSIS_RE = Lazy(r"\s*(?:\.{3,}|\u2026)\s*")


def _in_order(pieces: list[str], text: str) -> bool:
    """Every piece is in text, each after the one before."""
    at = 0
    for p in pieces:
        at = text.find(p, at)
        if at < 0:
            return False
        at += len(p)
    return True


def _demote(m: Match, tier: str) -> None:
    m.confident = False
    m.confidence = tier
    m.fix = None  # an unconfirmed match is not filled with the user's numbers
    m.params = {}


_FIRST_PERSON_RE = Lazy(r"\b(?:I|I'm|I've|I am|[Ww]e|[Ww]e're|[Mm]y|[Oo]ur|me|us)\b|\bI\u2019m\b")


def _in_passing(line: str, wording: str) -> bool:
    """A short wording inside a much longer sentence in the first person ("I'm experiencing an XPU out of
    memory error when ..."): the person's words naming the error (a flattened log or a PR's bullet, with no
    one speaking, is still read as the log)."""
    return len(wording) < MIN_DISTINCT and len(line) >= 2 * len(wording) + 20 and bool(_FIRST_PERSON_RE.search(line))


def _context_chunks(lines: list[str], timeline: list, out: list[tuple[int, str]], room: int) -> int:
    """Append the window's lines grouped by start-up; returns the characters kept."""
    used = 0
    k = 0
    n = min(len(lines), len(timeline))
    while k < n and used < room:
        su = timeline[k][0]
        j = k
        while j < n and timeline[j][0] == su:
            j += 1
        text = "\n".join(lines[k:j])[: room - used]
        out.append((su, text))
        used += len(text)
        k = j
    return used


def _context_text(chunks: list[tuple[int, str]], startup: int) -> str:
    """The text of one start-up (numbers of an earlier, healthy start-up must not fill the fix), after
    what comes before the log's first start-up: the command that launched it, the person's account."""
    own = [t for su, t in chunks if su == startup or su == 0]
    return "\n".join(own) if own else "\n".join(t for _, t in chunks)


def new_issue_url(norm_line: str, line: str) -> str:
    from urllib.parse import urlencode

    title = f"New entry: {line[:120]}" if line else "New entry"
    body = (
        "kbmatch found no confident match for this error.\n\n"
        f"Normalised line:\n```\n{norm_line[:1500]}\n```\n\n"
        "vLLM version, GPU/backend and the full log:\n"
    )
    return f"{NEW_ISSUE_URL}?" + urlencode({"template": "new-entry.yml", "title": title, "body": body})
