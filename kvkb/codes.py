"""Numbered problem codes (tldr-lint style): each has a stable number, a name and a remedy."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    code: str
    name: str
    remedy: str


CODES: dict[str, Code] = {
    c.code: c
    for c in [
        Code("KB001", "yaml-syntax", "fix the YAML at that position (quote strings holding ': ' or '#', check indentation)"),
        Code("KB002", "not-an-entry", "an entry is a mapping with id, title, signatures, ...: run `kvkb new <id>` for a skeleton"),
        Code("KB003", "unreadable-file", "make the file readable UTF-8 text (save it as UTF-8; entries are text, not binary)"),
        Code("KB010", "missing-key", "add the key; `kvkb new <id>` shows every required key with a comment"),
        Code("KB011", "invalid-value", "give the value the type and form the schema asks for (kb/schema.json)"),
        Code("KB012", "unknown-key", "remove the key or rename it to the known key suggested"),
        Code("KB013", "duplicate-key", "keep one of the keys: YAML would silently keep only the last"),
        Code("KB014", "todo-left", "replace every TODO from `kvkb new` with the real text (or delete the optional key)"),
        Code("KB020", "id-not-file-name", "rename the file to <id>.yaml or change the id"),
        Code("KB021", "duplicate-id", "ids are unique across kb/ and within an entry's signatures, causes and fixes"),
        Code("KB022", "dangling-related", "point 'related' at an existing entry id, or add that entry"),
        Code("KB025", "short-title-too-long", "shorten short_title to 48 characters or fewer: it names the error in the site's navigation; the exact error line stays in title"),
        Code("KB026", "duplicate-short-title", "give each entry its own short_title: two equal names in the navigation cannot be told apart"),
        Code("KB030", "invalid-version-range", "write a PEP 440 range such as '>=0.9.1,<=0.21.0'"),
        Code("KB040", "bad-template", "use {lower_snake} placeholders separated by literal text"),
        Code("KB041", "backtracking-template", "put literal text between placeholders so matching stays linear"),
        Code("KB042", "sample-mismatch", "make the sample the verbatim vLLM line, or fix the template so it matches it"),
        Code("KB043", "must-match-missed", "kbmatch must name this entry on the sample; improve the signature or the sample"),
        Code("KB044", "must-not-match-hit", "the must-not-match sample is matched confidently; make the signature more specific"),
        Code("KB050", "unknown-fix-placeholder", "use a placeholder from the entry's signatures or one kbmatch derives"),
        Code("KB051", "ineffective-without-code", "give the ineffective fix a 'code' program so its failure is proven"),
        Code("KB052", "code-not-runnable", "broken_code/fixed_code must be valid Python with an `if __name__ == \"__main__\":` guard"),
        Code("KB060", "raw-html", "write it as text: put tags and angle brackets in backticks (`<script>`) or reword; entry text lands on the site, where raw HTML would run in readers' browsers"),
        Code("KB070", "versions-disagree-with-vllm", "write the versions lint gives: the releases whose code prints the wording (`kvkb atlas find` shows each with file:line)"),
        Code("KB071", "exception-disagrees-with-vllm", "write the exception class (or log level) vLLM's code raises the wording with, as `kvkb atlas find` shows"),
        Code("KB072", "wording-not-in-vllm", "copy the wording from vLLM's code (`kvkb atlas find` a phrase of it); if another program prints it, set the signature's origin (torch, nccl, xla, ...)"),
        Code("KB073", "foreign-wording-in-vllm", "vLLM's own code prints this wording: set origin: vllm (or drop origin) so lint checks it"),
        Code("KB074", "flag-missing-in-range", "narrow the fix's versions to the releases that accept the flag, or name the flag those releases have (`kvkb atlas find --flag`)"),
        Code("KB075", "parameter-missing-in-range", "narrow the versions to the releases whose LLM(...) / EngineArgs take the parameter (`kvkb atlas find --arg`)"),
        Code("KB076", "variable-missing-in-range", "narrow the versions to the releases whose envs.py has the variable (`kvkb atlas find --env`)"),
        Code("KB077", "default-disagrees-with-vllm", "state the default vLLM's code has in the releases meant (`kvkb atlas find --arg/--env` prints each default with its releases)"),
        Code("KB078", "foreign-name-in-vllm", "vLLM accepts this name: remove it from foreign_names so lint checks it against each release"),
        Code("KB079", "name-not-in-vllm", "no vLLM release has this flag / parameter / variable: fix the name, or list it under foreign_names when it belongs to another program (docker, nvidia-smi)"),
    ]
}


@dataclass(frozen=True, order=True)
class Problem:
    path: str
    line: int
    column: int
    code: str
    message: str

    @property
    def remedy(self) -> str:
        return CODES[self.code].remedy

    def format(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.code} {self.message}\n    remedy: {self.remedy}"


class EntryError(Exception):
    """Raised where one bad entry must stop a build (site, index): carries every problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(problems)
        super().__init__("\n".join(p.format() for p in self.problems))
