"""The atlas store: each fact once, with the runs of consecutive releases that hold it.

On disk (kvkb/atlas/atlas.json.gz, shipped in the wheel) it is gzip'd JSON:
  releases   every release read, oldest first (PEP 440 order)
  files, roles, quals   string tables the items index into
  s          [file, text, role, qual, runs]   runs = flat [first, last, line_first, line_last, ...]
  arg/flag/llm/env  [name, default, runs]      runs = flat [first, last, ...]
Release indexes are positions in `releases`. A fact whose wording, default or file changes becomes a
new item, so "which releases print this exact text" is one lookup.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from packaging.version import Version

from kvkb.atlas.extract import PYDANTIC, WILD

ATLAS_PATH = Path(__file__).with_name("atlas.json.gz")
FORMAT = 1
KINDS = ("arg", "flag", "llm", "env")


class AtlasError(Exception):
    """The atlas file is missing, unreadable, or asked for something it cannot do."""


@dataclass(frozen=True)
class StringItem:
    file: str
    text: str  # WILD where a value is formatted in
    role: str  # "raise:ValueError", "log:WARNING" or ""
    qual: str
    runs: tuple[int, ...]  # flat (first, last, line_first, line_last) quadruples

    @property
    def indexes(self) -> set[int]:
        return {i for k in range(0, len(self.runs), 4) for i in range(self.runs[k], self.runs[k + 1] + 1)}

    @property
    def last_line(self) -> tuple[int, int]:
        """(release index, line) of the newest release holding it."""
        return self.runs[-3], self.runs[-1]

    @property
    def first_line(self) -> tuple[int, int]:
        return self.runs[0], self.runs[2]

    def line_at(self, index: int) -> int | None:
        """The line in release `index` when it starts or ends a run (the lines between are not kept;
        0 marks an end whose line is not known: see `Atlas.until`)."""
        for k in range(0, len(self.runs), 4):
            if self.runs[k] == index:
                return self.runs[k + 2] or None
            if self.runs[k + 1] == index:
                return self.runs[k + 3] or None
        return None

    @property
    def shown(self) -> str:
        return self.text.replace(WILD, "{…}")

    @property
    def exception(self) -> str | None:
        """The class raised (pydantic's wrapping aside: see `pydantic`)."""
        return self.role[6:].removesuffix(PYDANTIC) if self.role.startswith("raise:") else None

    @property
    def pydantic(self) -> bool:
        """Raised while a pydantic dataclass or model validates (its __post_init__ or a validator), so
        printed as a ValidationError's "Value error, ...". The atlas marks raises in every method of
        such a class; __post_init__, validators and the verify/check methods they call run inside
        validation (others, such as a resolve step a worker calls later, raise bare)."""
        if not self.role.endswith(PYDANTIC):
            return False
        parts = self.qual.split(".")[1:]
        return any(p == "__post_init__" or "validat" in p or p.lstrip("_").startswith(("verify", "check"))
                   for p in parts)

    @property
    def level(self) -> str | None:
        return self.role[4:] if self.role.startswith("log:") else None


@dataclass(frozen=True)
class NamedItem:
    kind: str
    name: str
    default: str
    runs: tuple[int, ...]  # flat (first, last) pairs

    @property
    def indexes(self) -> set[int]:
        return {i for k in range(0, len(self.runs), 2) for i in range(self.runs[k], self.runs[k + 1] + 1)}


def _literal_parts(text: str) -> list[str]:
    return [p for p in text.split(WILD) if p]


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z][A-Za-z0-9_]{2,}", text)


def _anchor(text: str) -> tuple[str, str] | None:
    """(lowercased anchor word, longest literal part): a text can only occur in a message that holds
    its longest part, so the part's longest whole word indexes it."""
    parts = text.split(WILD)
    if not any(parts):
        return None
    n = max(range(len(parts)), key=lambda i: len(parts[i]))
    longest = parts[n]
    words = _words(longest)
    # a word at an edge next to a formatted value may be cut short there ("{x}th")
    inner = words[(1 if n > 0 else 0): (len(words) - 1 if n < len(parts) - 1 else len(words))] or words
    if not inner:
        return None
    return max(inner, key=len).lower(), longest


class Atlas:
    """In memory: releases and items; lookups build their indexes on first use."""

    def __init__(self, releases: list[str] | None = None):
        self.releases: list[str] = list(releases or [])
        # key -> list of runs (mutable while building)
        self._strings: dict[tuple[str, str, str, str], list[int]] = {}
        self._named: dict[tuple[str, str, str], list[int]] = {}

    # --- building --------------------------------------------------------------------------------
    def add_release(self, version: str, facts: Iterable[tuple]) -> None:
        """Append release `version` (newer than every release held) with its facts."""
        v = Version(version)
        if version in self.releases:
            raise AtlasError(f"{version} is already in the atlas")
        if self.releases and v < Version(self.releases[-1]):
            raise AtlasError(
                f"{version} is older than {self.releases[-1]}, the newest release in the atlas; releases are "
                "added oldest first: rebuild with `kvkb atlas add --rebuild` and every release")
        idx = len(self.releases)
        self.releases.append(version)
        seen_s: dict[tuple, int] = {}
        seen_n: set[tuple] = set()
        for f in facts:
            if f[0] == "s":
                key = (f[1], f[2], f[3], f[4])
                line = f[5]
                if key not in seen_s or line < seen_s[key]:
                    seen_s[key] = line
            else:
                seen_n.add((f[0], f[1], f[2] if len(f) > 2 else ""))
        for key, line in seen_s.items():
            runs = self._strings.setdefault(key, [])
            if runs and runs[-3] == idx - 1:
                runs[-3], runs[-1] = idx, line
            else:
                runs += [idx, idx, line, line]
        for key in seen_n:
            runs = self._named.setdefault(key, [])
            if runs and runs[-1] == idx - 1:
                runs[-1] = idx
            else:
                runs += [idx, idx]
        self.__dict__.pop("_index", None)

    def until(self, version: str) -> "Atlas":
        """The atlas as it stood when `version` was its newest release: every later release dropped.

        Adding the dropped releases again (`kvkb atlas add`) gives back the same atlas, byte for byte,
        which rehearses a new release's drift report on one already held. Only a run's ends keep
        their line, so where a run went on past `version`, its line in `version` is not known: it
        reads as unknown (0) until the next release is added and sets its own line there.
        """
        if version not in self.releases:
            raise AtlasError(f"{version} is not in the atlas ({self.releases[0]}–{self.releases[-1]})"
                             if self.releases else "the atlas is empty")
        last = self.releases.index(version)
        out = Atlas(self.releases[: last + 1])
        for key, runs in self._strings.items():
            kept: list[int] = []
            for k in range(0, len(runs), 4):
                first, end, line_first, line_end = runs[k: k + 4]
                if first > last:
                    break
                if end > last:
                    end, line_end = last, (line_first if first == last else 0)
                kept += [first, end, line_first, line_end]
            if kept:
                out._strings[key] = kept
        for key, runs in self._named.items():
            kept = []
            for k in range(0, len(runs), 2):
                if runs[k] > last:
                    break
                kept += [runs[k], min(runs[k + 1], last)]
            if kept:
                out._named[key] = kept
        return out

    def facts_of(self, version: str) -> list[tuple]:
        """The facts of one release as `extract.release_facts` gave them (each string once, at its
        first line in the release), read back from the atlas: the newest release's lines are always
        kept, so `until(previous).add_release(newest, facts_of(newest))` rebuilds the atlas exactly."""
        i = self.releases.index(version)
        out: list[tuple] = []
        for it in self.strings():
            if i in it.indexes:
                out.append(("s", it.file, it.text, it.role, it.qual, it.line_at(i) or 0))
        for (kind, name, default), runs in self._named.items():
            if any(runs[k] <= i <= runs[k + 1] for k in range(0, len(runs), 2)):
                out.append((kind, name, default) if kind != "flag" else (kind, name))
        return out

    # --- disk ------------------------------------------------------------------------------------
    def dumps(self) -> bytes:
        files = sorted({k[0] for k in self._strings})
        roles = sorted({k[2] for k in self._strings})
        quals = sorted({k[3] for k in self._strings})
        fi, ri, qi = ({v: i for i, v in enumerate(t)} for t in (files, roles, quals))
        data: dict = {"format": FORMAT, "releases": self.releases, "files": files, "roles": roles, "quals": quals,
                      "s": [[fi[k[0]], k[1], ri[k[2]], qi[k[3]], runs] for k, runs in sorted(self._strings.items())]}
        for kind in KINDS:
            data[kind] = [[k[1], k[2], runs] for k, runs in sorted(self._named.items()) if k[0] == kind]
        raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
        # mtime 0: the same atlas gives the same bytes, so a rebuild shows no spurious diff
        return gzip.compress(raw, compresslevel=9, mtime=0)

    def save(self, path: Path = ATLAS_PATH) -> None:
        tmp = Path(path).with_suffix(".tmp")
        tmp.write_bytes(self.dumps())
        tmp.replace(path)

    @classmethod
    def loads(cls, blob: bytes) -> "Atlas":
        try:
            data = json.loads(gzip.decompress(blob))
        except (OSError, EOFError, ValueError) as exc:
            raise AtlasError(f"the atlas is not readable ({exc}): rebuild it with `kvkb atlas add`") from None
        if data.get("format") != FORMAT:
            raise AtlasError(f"atlas format {data.get('format')} is not {FORMAT}: rebuild it with `kvkb atlas add`")
        atlas = cls(data["releases"])
        files, roles, quals = data["files"], data["roles"], data["quals"]
        atlas._strings = {(files[f], text, roles[r], quals[q]): runs for f, text, r, q, runs in data["s"]}
        atlas._named = {(kind, name, default): runs for kind in KINDS for name, default, runs in data[kind]}
        return atlas

    @classmethod
    def load(cls, path: Path = ATLAS_PATH) -> "Atlas":
        try:
            blob = Path(path).read_bytes()
        except OSError as exc:
            raise AtlasError(f"no atlas at {path} ({exc.strerror}): build it with `kvkb atlas add VERSION...`") from None
        return cls.loads(blob)

    # --- queries ---------------------------------------------------------------------------------
    @property
    def newest(self) -> int:
        return len(self.releases) - 1

    def strings(self) -> Iterator[StringItem]:
        for (file, text, role, qual), runs in self._strings.items():
            yield StringItem(file, text, role, qual, tuple(runs))

    def named(self, kind: str, name: str | None = None) -> list[NamedItem]:
        return [NamedItem(k[0], k[1], k[2], tuple(runs)) for k, runs in self._named.items()
                if k[0] == kind and (name is None or k[1] == name)]

    def holders(self, kind: str, name: str) -> set[int]:
        """Release indexes where a flag / arg / llm parameter / env variable exists."""
        return self._name_index.get((kind, name), set())

    @cached_property
    def _name_index(self) -> dict[tuple[str, str], set[int]]:
        out: dict[tuple[str, str], set[int]] = {}
        for (kind, name, _default), runs in self._named.items():
            s = out.setdefault((kind, name), set())
            for k in range(0, len(runs), 2):
                s.update(range(runs[k], runs[k + 1] + 1))
        return out

    @cached_property
    def _index(self) -> dict[str, list[tuple[str, re.Pattern | None, tuple]]]:
        """anchor word -> (longest literal part, compiled pattern, key) for every string item."""
        index: dict[str, list] = {}
        for key in self._strings:
            text = key[1]
            anchor = _anchor(text)
            if anchor is not None:
                index.setdefault(anchor[0], []).append((anchor[1], key))
        return index

    def find_text(self, text: str, min_cover: float = 0.5) -> list[tuple[StringItem, int]]:
        """String items whose pattern occurs in `text`, with the literal characters they cover.

        An item counts when its literal parts, in order, with anything between them, match inside
        `text`, and cover at least `min_cover` of text's characters (so a short literal such as
        "out of memory" does not claim a whole sentence).
        """
        # the text's words, and its words' tails: an item's anchor may be cut by a value before it
        words = {w.lower() for w in _words(text)}
        bare = len(text.strip())
        found = []
        seen = set()
        for w in words:
            for longest, key in self._index.get(w, ()):
                if key in seen or longest not in text:
                    continue
                seen.add(key)
                pattern = key[1]
                covered = len(pattern.replace(WILD, ""))
                if bare and covered / bare < min_cover:
                    continue
                if _compile(pattern).search(text):
                    found.append((StringItem(*key, tuple(self._strings[key])), covered))
        return found

    def search(self, query: str) -> list[StringItem]:
        """Items whose text contains `query` (case-insensitive; {…} or {name} in it match any value)."""
        parts = [p for p in re.split(r"\{[^{}]*\}|" + WILD, query) if p]
        rx = re.compile(".*?".join(re.escape(p) for p in parts), re.I | re.S)
        longest = max(parts, key=len).lower() if parts else ""
        out = []
        for key, runs in self._strings.items():
            if longest in key[1].lower() and rx.search(key[1].replace(WILD, "{…}")):
                out.append(StringItem(*key, tuple(runs)))
        return out


_loaded: dict[str, Atlas] = {}


def load_default() -> Atlas:
    """The committed atlas (KVKB_ATLAS overrides its path, for tests), loaded once per process."""
    path = Path(os.environ.get("KVKB_ATLAS") or ATLAS_PATH)
    key = str(path)
    if key not in _loaded:
        _loaded[key] = Atlas.load(path)
    return _loaded[key]


_compiled: dict[str, re.Pattern] = {}


def _compile(pattern: str) -> re.Pattern:
    rx = _compiled.get(pattern)
    if rx is None:
        rx = re.compile("(?s)" + ".*?".join(re.escape(p) for p in pattern.split(WILD)))
        _compiled[pattern] = rx
    return rx


def versions_string(indexes: Iterable[int], releases: list[str]) -> str:
    """The PEP 440 range naming exactly these releases: '>=a,<=b' ('>=a' when b is the newest),
    with '!=x' for releases between that do not hold it."""
    idx = sorted(set(indexes))
    if not idx:
        return ""
    first, last = idx[0], idx[-1]
    clauses = [f">={releases[first]}"]
    if last != len(releases) - 1:
        clauses.append(f"<={releases[last]}")
    held = set(idx)
    clauses += [f"!={releases[i]}" for i in range(first, last + 1) if i not in held]
    return ",".join(clauses)


def spans(indexes: Iterable[int], releases: list[str]) -> str:
    """'0.5.5–0.7.3, 0.9.0' for humans."""
    idx = sorted(set(indexes))
    out, start = [], None
    for n, i in enumerate(idx):
        if start is None:
            start = i
        if n + 1 == len(idx) or idx[n + 1] != i + 1:
            out.append(releases[start] if start == i else f"{releases[start]}–{releases[i]}")
            start = None
    return ", ".join(out)
