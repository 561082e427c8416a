"""Pass rules for the three kinds of run (pure functions over exit code, output and kbmatch's answer).

- broken: the program fails (or, for warning entries, shows the warning's symptoms) and kbmatch
  names THIS entry as the root cause: the page's error really is the error the code raises.
- fixed: exits 0, generated tokens, and printed its KV capacity line (recorded).
- ineffective: the advice does not resolve the error: the same error comes back, or vLLM rejects
  the advice itself (unknown keyword, unknown environment variable, unrecognized CLI argument).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .scenario import Scenario

MIN_TOKENS = 3

# 0.30+: one line; 0.8-0.27 printed "GPU KV cache size" and the concurrency on separate lines.
_CAPACITY = re.compile(
    r"(?P<device>[A-Z]+) KV cache size: (?P<tokens>[\d,]+) tokens(?:.|\n)*?"
    r"Maximum concurrency for (?P<len>[\d,]+) tokens per request: (?P<conc>[\d.]+)x"
)
_GENERATED = re.compile(r"\[kvkb-repro\] request \d+: generated (\d+) tokens")
_REJECTIONS = [
    ("unknown keyword argument", re.compile(r"TypeError: .*unexpected keyword argument '(\w+)'")),
    ("unknown environment variable", re.compile(r"Unknown vLLM environment variable detected: (\w+)")),
    ("unrecognized CLI argument", re.compile(r"error: unrecognized arguments: (.+)")),
    # an environment value vLLM cannot parse, e.g. VLLM_CPU_KVCACHE_SPACE=8GB -> int('8GB')
    # (0.32 wraps it in pydantic's "Value error, invalid literal ..." of VllmConfig)
    ("invalid value", re.compile(r"invalid literal for int\(\) with base 10: ('[^']*')")),
]


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str


@dataclass(frozen=True)
class Capacity:
    device: str
    kv_tokens: int
    max_model_len: int
    max_concurrency: float


def parse_capacity(output: str) -> Capacity | None:
    """The last KV capacity report in the output (the engine that actually served)."""
    found = list(_CAPACITY.finditer(output))
    if not found:
        return None
    m = found[-1]
    return Capacity(
        device=m["device"],
        kv_tokens=int(m["tokens"].replace(",", "")),
        max_model_len=int(m["len"].replace(",", "")),
        max_concurrency=float(m["conc"]),
    )


def generated_tokens(output: str) -> list[int]:
    return [int(n) for n in _GENERATED.findall(output)]


def rejection(output: str) -> str | None:
    """How vLLM rejected the advice, e.g. "unknown keyword argument 'max_seq_len'", or None."""
    for label, pattern in _REJECTIONS:
        m = pattern.search(output)
        if m:
            return f"{label} {m.group(1).strip()!r}"
    return None


def _missing(patterns: tuple[str, ...], output: str) -> list[str]:
    return [p for p in patterns if not re.search(p, output, re.MULTILINE)]


def judge_broken(scenario: Scenario, exit_code: int | None, output: str, matched: str | None,
                 match_error: str | None = None, backend: str = "cpu") -> Verdict:
    if exit_code is None:
        return Verdict(False, "timed out")
    if scenario.broken_expect == "error":
        if exit_code == 0:
            return Verdict(False, "exited 0: the broken code did not fail")
    else:
        if exit_code != 0:
            return Verdict(False, f"exited {exit_code}: a warning scenario must keep running")
        missing = _missing(scenario.broken_require, output)
        if missing:
            return Verdict(False, f"warning symptoms not seen: {missing}")
    if match_error:
        return Verdict(False, f"kbmatch failed: {match_error}")
    expected = scenario.expected_match(backend)
    if matched != expected:
        return Verdict(False, f"kbmatch named {matched or 'no confident match'}, not {expected}")
    return Verdict(True, f"exit {exit_code}, kbmatch names {matched}")


def judge_fixed(scenario: Scenario, exit_code: int | None, output: str) -> Verdict:
    if exit_code is None:
        return Verdict(False, "timed out")
    if exit_code != 0:
        return Verdict(False, f"exited {exit_code}")
    tokens = generated_tokens(output)
    if not tokens or max(tokens) < MIN_TOKENS:
        return Verdict(False, f"generated {max(tokens, default=0)} tokens (< {MIN_TOKENS})")
    capacity = parse_capacity(output)
    if capacity is None:
        return Verdict(False, "no 'KV cache size: N tokens, Maximum concurrency ...' line")
    present = [p for p in scenario.fixed_forbid if re.search(p, output, re.MULTILINE)]
    if present:
        return Verdict(False, f"the symptom is still there: {present}")
    return Verdict(True, f"generated {max(tokens)} tokens; KV cache {capacity.kv_tokens:,} tokens, "
                         f"{capacity.max_concurrency}x")


def judge_ineffective(scenario: Scenario, exit_code: int | None, output: str, matched: str | None,
                      match_error: str | None = None, backend: str = "cpu") -> Verdict:
    if exit_code is None:
        return Verdict(False, "timed out")
    rejected = rejection(output)
    if rejected:  # an unknown env var only warns and the run goes on: ignored is not applied
        return Verdict(True, f"vLLM rejects the advice: {rejected} (exit {exit_code})")
    same = judge_broken(scenario, exit_code, output, matched, match_error, backend)
    if same.passed:
        return Verdict(True, f"the same error again: {same.reason}")
    # Still failing with another documented memory error (e.g. auto-fit's advice "use a fixed
    # length" ends in "No available memory for the cache blocks") is not a fix either.
    if scenario.broken_expect == "error" and exit_code not in (0, None) and matched and not match_error:
        return Verdict(True, f"still fails, now with {matched}")
    return Verdict(False, f"the advice seems to work or fails differently: {same.reason}")
