"""The commented skeleton `kvkb new <id>` writes: every required key, explained, holding TODOs.

Every TODO fails lint (KB014, and most also fail the schema), so a half-written entry cannot pass;
once they are filled the file validates. Enum choices in the comments come from kvkb.entry, so the
skeleton cannot drift from the model.
"""

from __future__ import annotations

import re

from .entry import ID_RE, SHORT_TITLE_MAX, Backend, Category, Engine, FixTime, Phase, Severity

ID_RULE = "an id is 3-64 characters of lower-case letters, digits and single hyphens (kebab-case), e.g. 'no-memory-for-cache-blocks'"


def valid_id(entry_id: str) -> bool:
    return 3 <= len(entry_id) <= 64 and re.fullmatch(ID_RE, entry_id) is not None


def _choices(enum) -> str:
    return " | ".join(member.value for member in enum)


def skeleton(entry_id: str) -> str:
    """The YAML text for kb/<entry_id>.yaml. Raises ValueError for an id that breaks ID_RULE."""
    if not valid_id(entry_id):
        raise ValueError(ID_RULE)
    return _SKELETON.format(
        id=entry_id,
        severity=_choices(Severity),
        fix_time=_choices(FixTime),
        phase=_choices(Phase),
        category=_choices(Category),
        engine=_choices(Engine),
        backend=_choices(Backend),
        short_max=SHORT_TITLE_MAX,
    )


# str.format template: {{ and }} are literal braces in the YAML
_SKELETON = """\
# yaml-language-server: $schema=schema.json
# A new kvkb entry. Replace every TODO, delete the optional blocks you do not need, then run
#   kvkb lint kb/{id}.yaml
# It fails while any TODO is left. CONTRIBUTING.md explains each step and the rules
# (verbatim signatures from vLLM's source, flags that exist in the versions named, proof for every claim).

# kebab-case, equal to the file name
id: {id}
# the error as users see it in their log, exception type included
title: "TODO: e.g. ValueError: No available memory for the cache blocks"
# a short human name for the navigation and the page heading: at most {short_max} characters, unique in kb/
short_title: "TODO: e.g. No memory left for KV cache blocks"
# one or two sentences (10-400 characters): what happened and what to do about it
summary: >-
  TODO: what vLLM checked, why it failed, and the usual fix.
severity: TODO  # {severity}
fix_time: TODO  # {fix_time}
phase: TODO  # {phase}
category: TODO  # {category}
# optional: flag names and words people search for
tags: []

# Every wording of the error, one per release range (the text changed between releases).
signatures:
  - id: TODO  # short and stable within this entry, e.g. v1-0.22 or v0-cpu
    # exception class as printed (ValueError, torch.OutOfMemoryError); for a log line that is not an
    # exception write `exception: null` and add `level: WARNING` (ERROR | WARNING | INFO)
    exception: TODO
    # the message after "ValueError: ", copied from vLLM's source for these versions; variable parts
    # become {{lower_snake}} placeholders with literal text between them; write {{{{ }}}} for a literal brace
    template: "TODO: the message, e.g. Free memory on device ({{free_gib}}/{{total_gib}} GiB) on startup is less than desired"
    versions: "TODO"  # PEP 440 range of vLLM releases that print exactly this, e.g. ">=0.9.1,<=0.21.0"
    engine: TODO  # {engine}
    backend: TODO  # {backend}
    # verbatim lines as vLLM printed them (from your run or a public issue); each must match the template
    samples:
      - "TODO: a real line"

# what the error means, in plain words (Markdown)
meaning: |
  TODO: which check failed, and what the numbers in the message are.

# Causes, most common first. Each has a way to tell it apart and at least one fix.
causes:
  - id: TODO  # kebab-case, unique within this entry
    title: "TODO: the cause in one line"
    diagnosis: |
      TODO: how a reader tells this cause from the others (which log lines, which numbers).
    fixes:
      - id: TODO  # kebab-case, unique within this entry
        title: "TODO: the change in one line"
        # at least one of cli / python / env. {{placeholders}} come from the signatures or kvkb/params.py
        cli: "TODO: vllm serve MODEL --some-flag VALUE"
        python: "TODO: LLM(model=MODEL, some_arg=VALUE)"
        versions: "TODO"  # the releases where this flag exists and works, e.g. ">=0.4.1"
        risk: low  # low | medium | high: what the fix costs (latency, accuracy, headroom)
        risk_note: "TODO: what gets worse, or delete this line"
        status: unverified  # unverified until `kvkb verify` shows it works: then verified
        why: |
          TODO: why the change resolves the check that failed.

# Optional: advice that circulates and does not work. Each item needs `code` that proves it fails.
# ineffective:
#   - id: invented-flag
#     title: "--invented-flag"
#     claim: What the circulating advice says.
#     cli: "vllm serve MODEL --invented-flag"
#     versions: ">=0.4.1"
#     reason: |
#       Why it does nothing, with vLLM's own output as proof.
#     code: |
#       (the broken program with the advice applied; `if __name__ == "__main__":` guard required)

# A small program that raises this error, and the same program fixed. The reproduction runner runs
# both (kvkb verify); vLLM spawns processes, so the guard is required.
broken_code: |
  from vllm import LLM, SamplingParams

  if __name__ == "__main__":
      # TODO: the smallest program that raises the error
      llm = LLM(model="MODEL")
      print(llm.generate(["Hello"], SamplingParams(max_tokens=8))[0].outputs[0].text)
fixed_code: |
  from vllm import LLM, SamplingParams

  if __name__ == "__main__":
      # TODO: the same program with the top fix applied
      llm = LLM(model="MODEL")
      print(llm.generate(["Hello"], SamplingParams(max_tokens=8))[0].outputs[0].text)

# Optional Markdown sections: workaround (to get unblocked now), prevention, detection.
# workaround: |
# prevention: |
# detection: |

# how a reader confirms the fix took
verify:
  text: |
    TODO: what the log shows once the fix works.
  # optional: log line templates that prove it, e.g. "{{device}} KV cache size: {{kv_tokens}} tokens"
  log_lines: []

# other entries that are confused with this one or come next; ids must exist in kb/ (delete if none)
related:
  - id: TODO
    relation: see-also  # next | cause | wrapper | see-also | confused-with

# where the facts come from: vLLM source paths (with the versions read) or URLs
references:
  - title: "TODO: e.g. kv_cache_utils.py: check_enough_kv_cache_memory"
    source: "TODO: vllm/v1/core/kv_cache_utils.py (or use url:)"
    versions: "TODO"  # the releases whose source you read

# kbmatch tests: whole pastes that must name this entry, and near misses that must not
samples:
  match:
    - |
      TODO: a real paste, a few log lines around the error
  no_match:
    - "TODO: a similar line that belongs to another entry, or delete this list"
"""
