"""What a new release changes for the knowledge base: the drift report `kvkb atlas add` prints.

Compares release `new` with the release before it in the atlas, and the entries with both:
  - signatures printed by the previous release that the new one no longer prints, with the closest
    new literal of the new release as the suggested template
  - flags, LLM parameters, EngineArgs fields and VLLM_ variables removed; defaults changed
  - new raise sites and warnings about memory, the KV cache, blocks or lengths that no entry covers
Pure over (Atlas, entries).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rapidfuzz import fuzz, process

from kvkb.atlas.extract import WILD
from kvkb.atlas.match import explain, message_of
from kvkb.atlas.store import Atlas, StringItem
from kvkb.entry import Entry

# what a KB about KV-cache and memory errors must hear about
TOPIC = re.compile(r"memory|\bOOM\b|KV[ _-]?cache|\bblocks?\b|max_model_len|max_num_batched_tokens|max_num_seqs|"
                   r"\blength\b|\blen\b|context (?:length|window)|GiB|swap|offload|gpu_memory_utilization", re.I)


# paths whose errors concern one model family, one KV connector, a benchmark or vendored code: listed
# apart, after the engine's own
NARROW = ("vllm/models/", "vllm/model_executor/models/", "vllm/distributed/kv_transfer/", "vllm/benchmarks/",
          "vllm/third_party/", "vllm/transformers_utils/configs/")


@dataclass
class Drift:
    new: str
    previous: str | None
    gone: list[tuple[str, str, str, StringItem | None, int | None]] = field(default_factory=list)
    # (entry id, signature id, old sample message, nearest new literal, its line)
    removed: list[tuple[str, str]] = field(default_factory=list)  # (kind, name)
    added: list[tuple[str, str]] = field(default_factory=list)
    defaults: list[tuple[str, str, str, str]] = field(default_factory=list)  # (kind, name, old, new)
    uncovered: list[tuple[StringItem, int]] = field(default_factory=list)  # new raise/log sites, line

    @property
    def empty(self) -> bool:
        return not (self.gone or self.removed or self.defaults or self.uncovered)


def _named_at(atlas: Atlas, kind: str, index: int) -> dict[str, str]:
    return {it.name: it.default for it in atlas.named(kind) if index in it.indexes}


def drift(atlas: Atlas, version: str, entries: dict[str, Entry]) -> Drift:
    if version not in atlas.releases:
        raise ValueError(f"{version} is not in the atlas")
    n = atlas.releases.index(version)
    report = Drift(version, atlas.releases[n - 1] if n else None)
    if n == 0:
        return report
    p = n - 1
    new_items = [it for it in atlas.strings() if n in it.indexes and p not in it.indexes]

    # signatures: printed by the previous release, not by the new one
    for eid, entry in sorted(entries.items()):
        for sig in entry.signatures:
            if sig.origin != "vllm":
                continue
            ex = explain(atlas, sig.samples[0], sig.template)
            if p in ex.releases and n not in ex.releases:
                message = message_of(sig.samples[0])
                near = _nearest(message, new_items)
                report.gone.append((eid, sig.id, message, near, near.line_at(n) if near else None))

    for kind in ("flag", "llm", "arg", "env"):
        before, after = _named_at(atlas, kind, p), _named_at(atlas, kind, n)
        if kind == "llm":
            before.pop("**kwargs", None), after.pop("**kwargs", None)
        report.removed += [(kind, name) for name in sorted(set(before) - set(after))]
        report.added += [(kind, name) for name in sorted(set(after) - set(before))]
        if kind != "flag":
            report.defaults += [(kind, name, before[name], after[name]) for name in sorted(set(before) & set(after))
                                if before[name] != after[name]]

    # new raise sites / warnings on the topic that no entry's signature resembles
    templates = [_plain(sig.template) for e in entries.values() for sig in e.signatures]
    for it in new_items:
        if not (it.exception or it.level in {"WARNING", "ERROR", "CRITICAL"}):
            continue
        text = it.text.replace(WILD, " ")
        if not TOPIC.search(text):
            continue
        if templates and process.extractOne(_plain(it.text), templates, scorer=fuzz.token_set_ratio,
                                            score_cutoff=85) is not None:
            continue
        report.uncovered.append((it, it.line_at(n) or 0))
    report.uncovered.sort(key=lambda x: (x[0].file, x[1]))
    return report


def _plain(text: str) -> str:
    return re.sub(r"\{[a-z_][a-z0-9_]*\}", " ", text).replace(WILD, " ")


def _nearest(message: str, items: list[StringItem]) -> StringItem | None:
    """The new literal most like the old message: a raised or logged one first, then any; one whose
    own text is under 40 % of the message's length (a bare name, a fragment) is no template for it."""
    pool = [it for it in items if len(_plain(it.text).strip()) >= 0.4 * len(message)]
    for group in ([it for it in pool if it.role], pool):
        if not group:
            continue
        choices = {i: _plain(it.text) for i, it in enumerate(group)}
        best = process.extractOne(message, choices, scorer=fuzz.ratio, score_cutoff=50)
        if best:
            return group[best[2]]
    return None


def template_of(item: StringItem) -> str:
    """The literal as a signature template: each formatted-in value a numbered placeholder."""
    parts = item.text.split(WILD)
    out = parts[0]
    for k, part in enumerate(parts[1:], 1):
        out += f"{{value_{k}}}" + part
    return out


def format_drift(d: Drift, atlas: Atlas) -> str:
    lines = [f"# vLLM {d.new}: drift against {d.previous or 'nothing (first release in the atlas)'}", ""]
    if d.empty:
        lines.append("Nothing in this release changes what the KB says.")
        return "\n".join(lines) + "\n"
    lines.append(f"## Signatures whose wording is gone or changed ({len(d.gone)})")
    for eid, sid, message, near, line in d.gone:
        lines.append(f"- {eid} / {sid}: {d.previous} prints it, {d.new} does not")
        lines.append(f"    was:  {message}")
        if near is not None:
            lines.append(f"    nearest new literal ({near.file}:{line}, {near.role or 'plain string'}):")
            lines.append(f"    template: {template_of(near)}")
        else:
            lines.append("    no similar new literal: the message may be gone")
    removed = [f"{kind} {name}" for kind, name in d.removed]
    lines += ["", f"## Removed ({len(removed)}): flags, LLM parameters (llm), EngineArgs fields (arg), variables (env)"]
    lines += [f"- {r}" for r in removed]
    lines += ["", f"## Defaults changed ({len(d.defaults)})"]
    lines += [f"- {kind} {name}: {old} -> {new}" for kind, name, old, new in d.defaults]
    core = [(it, line) for it, line in d.uncovered if not it.file.startswith(NARROW)]
    narrow = [(it, line) for it, line in d.uncovered if it.file.startswith(NARROW)]
    lines += ["", f"## New raise sites and warnings about memory, KV cache, blocks or lengths that no entry covers "
                  f"({len(d.uncovered)})", "", f"### Engine, config, scheduler, workers ({len(core)})"]
    for it, line in core:
        lines.append(f"- {it.file}:{line} {it.exception or it.level} in {it.qual or '<module>'}: {it.shown}")
    lines += ["", f"### One model family, KV connector, benchmark or vendored package ({len(narrow)})"]
    for it, line in narrow:
        lines.append(f"- {it.file}:{line} {it.exception or it.level}: {it.shown[:160]}")
    lines += ["", f"({len(d.added)} flags/parameters/fields/variables added; `kvkb atlas find --flag NAME` shows any)"]
    return "\n".join(lines) + "\n"
