"""Matcher: paste in, Report out (root cause, matches best first, each with its filled fix and why).

    from kvkb.matcher.engine import Matcher
    report = Matcher.load().match(text)      # kbmatch: precompiled index, no pydantic
    report = Matcher.from_entries(entries).match(text)   # kvkb lint: entries already validated
"""

from __future__ import annotations

import io
import os
from typing import BinaryIO

from . import fill, read
from .literal import walk
from .score import Table
from .segment import Record, segment, split_lines, stage

DEFAULT_BASE_URL = "https://kvkb.github.io/kvkb/"
NEW_ISSUE_URL = "https://github.com/kvkb/kvkb/issues/new"
CUTOFF = 80.0  # a confident match scores at least this...
MARGIN = 8.0  # ...and beats the best other entry for the same line by this much
POSSIBLE = 55.0  # shown as "possible" when nothing is confident
STAGE_BONUS = 10.0  # the traceback shows the stage (load, CUDA-graph capture, serving) an entry is about
MAX_RECORDS = 5000  # distinct records kept from one input (bounded memory on huge logs)
MAX_CONTEXT = 4 << 20  # characters of text kept for reading numbers off other lines
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

    def __repr__(self) -> str:
        return f"Match({self.id!r}, {self.score:.1f}, confident={self.confident})"

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

    @property
    def confident(self) -> list[Match]:
        return [m for m in self.matches if m.confident]

    def to_dict(self) -> dict:
        return {"matches": [m.to_dict() for m in self.matches], "root_cause": self.root_cause}


class Matcher:
    def __init__(self, index: dict, base_url: str | None = None):
        self.index = index
        self.entries = index["entries"]
        self.table = Table(index["signatures"], index.get("vocab"), index.get("groups"))
        self.anchors = [a.encode() for a in index.get("anchors", ["rror", "WARN"])]
        base = base_url or os.environ.get("KVKB_BASE_URL") or DEFAULT_BASE_URL
        self.base_url = base.rstrip("/") + "/"

    @classmethod
    def from_entries(cls, entries: list, base_url: str | None = None) -> "Matcher":
        from .index import build

        return cls(build(list(entries))[0], base_url)

    @classmethod
    def load(cls, directory=None, base_url: str | None = None) -> "Matcher":
        from .index import load

        return cls(load(directory), base_url)

    def url(self, entry_id: str) -> str:
        return f"{self.base_url}errors/{entry_id}/"

    # --- matching ------------------------------------------------------------------------------

    def match(self, text: str | bytes) -> Report:
        data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
        return self.match_stream(io.BytesIO(data))

    def match_stream(self, stream: BinaryIO) -> Report:
        stats = read.Stats()
        records: list[Record] = []
        seen: set[tuple] = set()
        cues: set[str] = set()
        context: list[str] = []
        kept = 0
        literal = self.table.literal_numbers
        for first, offset, window in read.windows(stream, self.anchors, stats):
            lines = split_lines(window)
            # past read.LINE_LIMIT a big log is not line-counted: number the window's lines from 1
            # for segmenting, then the records carry the window's byte offset instead
            recs, window_cues = segment([((first or 1) + k, ln) for k, ln in enumerate(lines)])
            if first is None:
                for r in recs:
                    r.line, r.offset = None, offset
            cues |= window_cues
            if kept < MAX_CONTEXT:
                context.append(window[: MAX_CONTEXT - kept])
                kept += len(context[-1])
            for r in recs:
                # numbers are masked in norm, except those a template spells out ("usage: 100.0%")
                key = (r.kind, r.type, r.norm, frozenset(r.numbers & literal) if literal else None)
                if key in seen or len(seen) >= MAX_RECORDS:
                    continue
                seen.add(key)
                records.append(r)
        report = self._decide(records, frozenset(cues), "\n".join(context))
        report.bytes, report.lines, report.records = stats.bytes, stats.lines, len(records)
        return report

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

    def _score_record(self, record: Record, global_stage: str | None):
        """[(final, base, sig index, record stage)] per entry (best signature each), best first."""
        scored = self.table.score(record, POSSIBLE - STAGE_BONUS)
        if not scored:
            return []
        record_stage = stage(record.cues) or global_stage
        best: dict[int, tuple[float, float, bool, int]] = {}
        for base, si, is_exact in scored:
            ei = self.table.sigs[si]["entry"]
            final = base + self._entry_bonus(self.entries[ei], record_stage)
            cur = best.get(ei)
            # among one entry's wordings: the higher score, then the one the line holds word for word
            if cur is None or (final, base, is_exact) > cur[:3] or (
                (final, base, is_exact) == cur[:3] and self._variant_better(record, si, cur[3])
            ):
                best[ei] = (final, base, is_exact, si)
        ranked = sorted(best.values(), key=lambda t: (-t[0], -t[1], not t[2]))
        return [(f, b, si, record_stage) for f, b, _, si in ranked]

    def _variant_better(self, record: Record, si: int, sj: int) -> bool:
        """Two wordings of one entry tie after canonicalisation ("models's"): prefer the one the log really has."""
        from rapidfuzz import fuzz

        from .normalize import normalise

        raw = normalise(record.message, canon=False)
        a, b = self.table.sigs[si].get("norm_raw", ""), self.table.sigs[sj].get("norm_raw", "")
        return fuzz.partial_ratio(a, raw) > fuzz.partial_ratio(b, raw)

    def _decide(self, records: list[Record], cues: frozenset[str], context_text: str) -> Report:
        global_stage = stage(cues)
        confident: dict[str, Match] = {}
        possible: dict[str, Match] = {}
        context = None
        first_error = None
        for rec in records:
            if first_error is None and rec.kind in ("exception", "inner") or (first_error is None and rec.level in ("ERROR", "CRITICAL")):
                first_error = rec
            ranked = self._score_record(rec, global_stage)
            if not ranked:
                continue
            final, base, si, rstage = ranked[0]
            runner = ranked[1] if len(ranked) > 1 else None
            is_conf = base >= CUTOFF and (runner is None or final - runner[0] >= MARGIN)
            entry = self.entries[self.table.sigs[si]["entry"]]
            if is_conf and entry["id"] in confident:
                continue
            if not is_conf and (entry["id"] in confident or (entry["id"] in possible and possible[entry["id"]].score >= base)):
                continue
            if context is None and is_conf:
                context = fill.context_values(context_text)
            m = self._build(rec, entry, si, base, is_conf, runner, rstage, context)
            (confident if is_conf else possible)[entry["id"]] = m
        for eid in confident:
            possible.pop(eid, None)
        conf = list(confident.values())  # log order
        root = None
        primary = [m for m in conf if m.category != "engine-wrapper"] or conf
        if primary:
            # the most severe; among equals the first in the log (conf is in log order)
            root = max(primary, key=lambda m: (_SEVERITY.get(m.severity, 0), -conf.index(m)))
        ordered = ([root] if root else []) + [m for m in conf if m is not root]
        ordered += sorted(possible.values(), key=lambda m: -m.score)
        report = Report(root.id if root else None, ordered)
        if root is None:
            shown = first_error or (records[0] if records else None)
            report.first_error = shown.text if shown else None
            report.new_issue_url = new_issue_url(shown.norm if shown else "", shown.text if shown else "")
        return report

    def _build(self, rec: Record, entry: dict, si: int, base: float, is_conf: bool, runner, rstage, context) -> Match:
        sig = self.table.sigs[si]
        # a "possible" is not asserted, so its numbers are not pulled out
        params = self._params(rec, si) if is_conf else {}
        fix = entry["fix"]
        used = set(fill.placeholders(" ".join(v for v in fix.values() if isinstance(v, str))))
        values, notes = fill.all_values(params, context, used) if is_conf else ({}, {})
        forms = {k: fill.fill(fix.get(k), values) for k in ("cli", "python", "env") if fix.get(k)}
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
            line_no=rec.line,
            offset=rec.offset,
            params=params,
            fix=next(iter(forms.values()), None),
            fix_forms=forms,
            fix_title=fix["title"],
            url=self.url(entry["id"]),
            runner_up=runner_up,
            stage=rstage,
            notes={k: v for k, v in notes.items() if k in used},
            category=entry["category"],
            severity=entry["severity"],
        )

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


def new_issue_url(norm_line: str, line: str) -> str:
    from urllib.parse import urlencode

    title = f"New entry: {line[:120]}" if line else "New entry"
    body = (
        "kbmatch found no confident match for this error.\n\n"
        f"Normalised line:\n```\n{norm_line[:1500]}\n```\n\n"
        "vLLM version, GPU/backend and the full log:\n"
    )
    return f"{NEW_ISSUE_URL}?" + urlencode({"template": "new-entry.yml", "title": title, "body": body})
