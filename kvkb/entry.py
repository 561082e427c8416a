"""The entry model: the one definition of what a kb/<id>.yaml file holds.

The site, the matcher's index builder, the linter and the reproduction runner all validate entries
through these classes (via kvkb.loader); kb/schema.json is generated from them for editors and is
kept equal to them by a test.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Callable, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

ID_RE = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
# '{{name}}' is an escaped literal, not a placeholder (kvkb.template has the full grammar)
PLACEHOLDER_RE = re.compile(r"(?<!\{)\{([a-z_][a-z0-9_]*)\}(?!\})")

KebabId = Annotated[str, Field(pattern=ID_RE, min_length=3, max_length=64)]
# signature ids carry versions ("v1-0.9-to-0.21"), so dots are allowed there
SignatureId = Annotated[str, Field(pattern=r"^[a-z0-9]+(?:[-.][a-z0-9]+)*$", min_length=2, max_length=64)]
# pattern: at least one non-space character (whitespace-only text renders as an empty section)
Markdown = Annotated[str, Field(min_length=1, pattern=r"\S", description="Markdown text")]
Text = Annotated[str, Field(min_length=3, pattern=r"\S")]
# an entry's short_title fits one line of the site's left navigation (lint KB025)
SHORT_TITLE_MAX = 48


class _Strict(BaseModel):
    # Unknown keys are errors (lint KB012 names the closest known key); no silent typos.
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)


class Severity(str, Enum):
    fatal = "fatal"  # the engine does not start or dies
    error = "error"  # a request fails, the server lives
    warning = "warning"  # degraded (e.g. preemption), nothing fails


class FixTime(str, Enum):
    minutes = "minutes"  # change one flag and restart
    hour = "hour"  # needs measuring, a different GPU split, quantised weights...
    report = "report"  # not fixable by the user: a bug to report upstream


class Phase(str, Enum):
    startup = "startup"
    serving = "serving"


class Category(str, Enum):
    """What ran out, or what kind of check failed (the site's navigation groups by it)."""

    kv_capacity = "kv-capacity"  # the KV-cache pool is too small for the lengths or batch asked
    device_memory = "device-memory"  # an accelerator's own memory: CUDA/HIP/XPU/NPU/TPU/HPU OOM
    host_memory = "host-memory"  # host RAM: swap space, CPU/KV offloading, OOM killer, /dev/shm
    cpu_backend = "cpu-backend"  # the CPU backend's KV cache space
    config = "config"  # a start-up check refuses a combination of settings
    request = "request"  # one request exceeds a per-request limit
    multimodal = "multimodal"  # an image/audio/video item exceeds a multimodal budget
    sleep_mode = "sleep-mode"  # sleep / wake-up of the cumem allocator
    engine_wrapper = "engine-wrapper"  # an error that wraps another (EngineDeadError)
    internal = "internal"  # a vLLM invariant broke: a bug to report, not a setting
    misinformation = "misinformation"  # advice or messages that circulate but are not vLLM's


# --- what each category holds, checkable ------------------------------------------------------------
# Each category's description (kb/schema.json shows it) and the rule that makes it checkable: a
# test (tests/test_kb_entries.py) requires every entry to meet its own category's rule and no
# other's, so a category cannot quietly fill with entries of unrelated kinds. The rules read the
# error as users see it (title, templates, exception classes) and a few structured fields, never
# the prose. A new entry that fits no rule needs a category (or a sharper rule) first.

_KV_WORDS = re.compile(r"KV cache|cache blocks|block_manager|preempt|auto-fit max_model_len", re.I)
_DEVICE_MEMORY_WORDS = re.compile(
    r"out of memory|OUT_OF_\w+|RESOURCE_EXHAUSTED|Ran out of memory|Allocation failed|not enough GPU memory"
    r"|free memory|memory profiling|HBM|[SV]MEM", re.I)
_HOST_WORDS = re.compile(
    r"\bCPU (?:buffer|swap|offload)|swap space|offload|pin(?:ned)? memory|\bUVA\b|/dev/shm|shared memory"
    r"|\bshm\b|host (?:RAM|memory)|OOM[- ]?kill|oom_kill|\bKilled\b|Bus error|memory monitor|LMCache", re.I)
_MULTIMODAL_WORDS = re.compile(r"\bMM\b|_mm_|\bmm_|multi-?modal|\{modality\}|\b(?:image|audio|video)\b|encoder cache", re.I)
_REQUEST_WORDS = re.compile(r"prompt|request|max_tokens|context length", re.I)
# an entry about a text vLLM does not print says so in its title
_NOT_VLLM_WORDS = re.compile(r"no vLLM release|not (?:a )?vLLM(?:'s)? (?:error|message)", re.I)
_SLEEP_WORDS = re.compile(r"sleep|wake[_ ]?up|cumem|memory pool", re.I)
_WRAPPER_WORDS = re.compile(
    r"root cause|stack ?trace|original error|EngineCore|Engine (?:core|loop|process)|Background loop|Worker failed"
    r"|fatal signal|output_handler|Task finished", re.I)
# a setting named in the message: a snake_case knob or a --flag
_SETTING_WORDS = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b|--[a-z]")
_DEVICE_BACKENDS = {"cuda", "rocm", "xpu", "npu", "tpu", "hpu"}


def _wording(entry: "Entry") -> str:
    """The error as users see it: titles, every signature's template and exception class."""
    parts = [entry.title, entry.short_title]
    parts += [f"{s.exception or s.level}: {s.template}" for s in entry.signatures]
    return "\n".join(parts)


def _device_oom(entry: "Entry") -> bool:
    """A signature on an accelerator backend that says its memory ran out (or an OOM exception class)."""
    return any(
        s.backend.value in _DEVICE_BACKENDS
        and ("OutOfMemoryError" in (s.exception or "") or _DEVICE_MEMORY_WORDS.search(s.template))
        for s in entry.signatures
    )


def _is(words: re.Pattern, entry: "Entry") -> bool:
    return words.search(_wording(entry)) is not None


CATEGORY_RULES: dict[Category, tuple[str, "Callable[[Entry], bool]"]] = {
    Category.kv_capacity: (
        "the KV-cache pool is too small for the lengths or the batch asked: the message speaks of the "
        "KV cache, its blocks or preemption; no accelerator OOM, not the CPU backend, not a bug",
        lambda e: _is(_KV_WORDS, e) and not _device_oom(e) and not _all_cpu(e) and not _is(_HOST_WORDS, e)
        and e.fix_time is not FixTime.report,
    ),
    Category.device_memory: (
        "an accelerator's own memory ran out (CUDA/HIP/XPU/NPU/TPU/HPU): a signature on a device "
        "backend says so (an OutOfMemoryError, 'out of memory', RESOURCE_EXHAUSTED, free memory checks); "
        "sleep mode's wake-up OOM has its own category",
        lambda e: _device_oom(e) and not _is(_SLEEP_WORDS, e) and not _is(_HOST_WORDS, e),
    ),
    Category.host_memory: (
        "host RAM: swap space, CPU/KV offloading and its buffers, pinned memory, the OOM killer, /dev/shm",
        lambda e: _is(_HOST_WORDS, e) and not _all_cpu(e) and not _is(_WRAPPER_WORDS, e),
    ),
    Category.cpu_backend: (
        "the CPU backend's own KV cache space: every signature is the cpu backend's",
        lambda e: _all_cpu(e),
    ),
    Category.config: (
        "a start-up check refuses a combination of settings: exceptions at startup that name a setting, "
        "about no memory that ran out (no KV, device, host, multimodal or sleep wording)",
        lambda e: e.phase is Phase.startup and all(s.exception for s in e.signatures)
        and _is(_SETTING_WORDS, e) and not any(_is(w, e) for w in (_KV_WORDS, _HOST_WORDS, _MULTIMODAL_WORDS, _SLEEP_WORDS))
        and not _device_oom(e) and not _all_cpu(e) and e.fix_time is not FixTime.report,
    ),
    Category.request: (
        "one request exceeds a per-request limit while serving (prompt, max_tokens, context length); "
        "not a multimodal item, not the KV pool",
        lambda e: e.phase is Phase.serving and _is(_REQUEST_WORDS, e)
        and not any(_is(w, e) for w in (_KV_WORDS, _MULTIMODAL_WORDS, _WRAPPER_WORDS)) and not _device_oom(e),
    ),
    Category.multimodal: (
        "an image, audio or video item exceeds a multimodal budget (encoder cache, per-item tokens, "
        "processor cache)",
        lambda e: _is(_MULTIMODAL_WORDS, e) and not _device_oom(e),
    ),
    Category.sleep_mode: (
        "sleep mode: sleep() not freeing memory, or wake_up() failing to get it back (cumem allocator)",
        lambda e: _is(_SLEEP_WORDS, e),
    ),
    Category.engine_wrapper: (
        "an error that only reports another (EngineDeadError, 'see root cause above'): it relates to "
        "the entries of the errors it wraps (relation 'cause')",
        lambda e: _is(_WRAPPER_WORDS, e) and any(r.relation == "cause" for r in e.related),
    ),
    Category.internal: (
        "a vLLM invariant broke: a bug to report (fix_time 'report'), not a setting to change",
        lambda e: e.fix_time is FixTime.report,
    ),
    Category.misinformation: (
        "a message or advice that circulates but is not vLLM's: proven-ineffective advice and the real "
        "errors it is confused with (relation 'confused-with')",
        lambda e: _is(_NOT_VLLM_WORDS, e) and bool(e.ineffective) and any(r.relation == "confused-with" for r in e.related),
    ),
}


def _all_cpu(entry: "Entry") -> bool:
    return all(s.backend.value == "cpu" for s in entry.signatures)


def category_misfits(entry: "Entry") -> list[str]:
    """Why the entry does not fit its category: its own rule fails, or another category's rule
    holds as well (the entry is of that other kind). Empty when it fits."""
    problems = []
    if not fits(entry, entry.category):
        problems.append(f"is not {entry.category.value}: {CATEGORY_RULES[entry.category][0]}")
    for other, (says, _rule) in CATEGORY_RULES.items():
        if other is not entry.category and fits(entry, other):
            problems.append(f"reads as {other.value}: {says}")
    return problems


def fits(entry: "Entry", category: Category) -> bool:
    """Whether the entry is of the kind the category describes. A message vLLM does not print is
    misinformation whatever it resembles."""
    if category is not Category.misinformation and _is(_NOT_VLLM_WORDS, entry):
        return False
    return CATEGORY_RULES[category][1](entry)


class Engine(str, Enum):
    v0 = "v0"
    v1 = "v1"
    any = "any"


class Backend(str, Enum):
    cuda = "cuda"
    rocm = "rocm"
    cpu = "cpu"
    xpu = "xpu"  # Intel GPUs
    # accelerators served through platform plugins, whose OOM texts come from their own runtimes
    npu = "npu"  # Ascend, vllm-ascend
    tpu = "tpu"  # Google TPU, PyTorch/XLA or tpu-inference (JAX)
    hpu = "hpu"  # Intel Gaudi, vllm-gaudi / HabanaAI fork
    any = "any"


class FixStatus(str, Enum):
    verified = "verified"  # a reproduction showed it resolves the error
    ineffective = "ineffective"  # a reproduction (or vLLM itself) showed it does not
    unverified = "unverified"  # not run yet


class Risk(str, Enum):
    low = "low"
    medium = "medium"
    high = "high"


# one PEP 440 clause ('>=0.9.1', '==0.8.*'); the schema carries this pattern for editors, and the
# validator below also rejects ranges no release can satisfy
_CLAUSE = r"\s*(?:~=|===|==|!=|<=|>=|<|>)\s*[0-9][0-9A-Za-z.*+!_-]*\s*"
VERSIONS_RE = rf"^{_CLAUSE}(?:,{_CLAUSE})*$"


def _probe_versions(spec: SpecifierSet) -> list[Version]:
    """Versions at and just above every bound: if the range admits any release it admits one of these."""
    probes = [Version("0"), Version("9999")]
    for clause in spec:
        try:
            v = Version(clause.version.replace(".*", ""))
        except InvalidVersion:
            continue
        major, minor, micro = (list(v.release) + [0, 0])[:3]
        post = (v.post or 0) + 1
        probes += [v, Version(f"{major}.{minor}.{micro}.post{post}"), Version(f"{major}.{minor}.{micro + 1}"),
                   Version(f"{major}.{minor + 1}.0")]
    return probes


def check_versions(value: str) -> str:
    """A PEP 440 specifier set such as '>=0.9.1,<=0.21.0' that some release satisfies."""
    try:
        spec = SpecifierSet(value)
    except InvalidSpecifier as exc:
        raise ValueError(f"invalid version range {value!r}: {exc}") from None
    if not str(spec):
        raise ValueError("invalid version range: empty; use e.g. '>=0.4.1'")
    if not any(spec.contains(v, prereleases=True) for v in _probe_versions(spec)):
        raise ValueError(f"invalid version range {value!r}: no release satisfies it (bounds reversed?)")
    return value


Versions = Annotated[
    str,
    Field(
        pattern=VERSIONS_RE,
        description="PEP 440 version range of vLLM releases, e.g. '>=0.9.1,<=0.21.0'",
        examples=[">=0.22.0", ">=0.9.1,<=0.21.0"],
    ),
    AfterValidator(check_versions),
]


# who prints a signature's text: vLLM's Python code (checked against kvkb/atlas), vLLM's compiled csrc/
# (not in the atlas), a library / runtime / program under it, or nobody ("invented": advice and messages
# that circulate but no release prints, for misinformation entries)
Origin = Literal["vllm", "vllm-csrc", "torch", "cuda", "nccl", "xla", "jax", "gaudi", "ascend", "oneapi", "lmcache",
                 "pydantic", "ray", "kernel", "python", "triton", "invented", "other"]
# who that is, in words (the site's signature table, kbmatch's note on another program's text)
ORIGIN_NAMES = {
    "vllm-csrc": "vLLM's compiled C++/CUDA extension", "torch": "PyTorch", "cuda": "the CUDA runtime",
    "nccl": "NCCL", "xla": "XLA", "jax": "JAX", "gaudi": "Habana Gaudi's runtime", "ascend": "the Ascend runtime",
    "oneapi": "Intel oneAPI", "lmcache": "LMCache", "pydantic": "pydantic", "ray": "Ray", "kernel": "the Linux kernel",
    "python": "Python", "triton": "Triton (its kernel launcher)", "other": "another program",
}


class Signature(_Strict):
    """One observed wording of the error, as one vLLM release range prints it."""

    id: SignatureId = Field(description="stable id of this wording within the entry, e.g. 'v1-0.22'")
    exception: str | None = Field(
        description="exception class as printed (ValueError, torch.OutOfMemoryError); "
        "null for a log line that is not an exception (warnings, INFO lines)",
    )
    level: Literal["CRITICAL", "ERROR", "WARNING", "INFO"] | None = Field(
        default=None, description="log level when the signature is a log line rather than an exception"
    )
    template: str = Field(
        min_length=10,
        description="the message after 'Type: ' with variable parts as {named_placeholders}",
    )
    versions: Versions
    engine: Engine
    backend: Backend
    origin: Origin = Field(
        default="vllm",
        description="whose text it is: 'vllm' (lint checks its wording, exception and versions against "
        "every release's code, kvkb/atlas) or the program that prints it (torch, nccl, xla, ...), "
        "which lint checks vLLM's code does not print",
    )
    samples: list[str] = Field(
        min_length=1, description="verbatim lines as vLLM prints them (after 'Type: ' is fine too)"
    )
    advisory: bool = Field(
        default=False,
        description="a warning or INFO line that healthy runs print too (a hint, not a failure): kbmatch "
        "never names the entry confidently from this line alone, only as 'possible'",
    )
    note: str | None = None

    @property
    def placeholders(self) -> list[str]:
        return PLACEHOLDER_RE.findall(self.template)

    @model_validator(mode="after")
    def _exception_or_level(self) -> "Signature":
        if self.exception is None and self.level is None:
            raise ValueError("a signature needs 'exception' (an exception line) or 'level' (a log line)")
        if self.advisory and (self.exception is not None or self.level not in ("WARNING", "INFO")):
            raise ValueError("advisory is for a WARNING or INFO log line; an exception or an ERROR line is a failure")
        return self


class Fix(_Strict):
    """One change a user can make. cli/python/env may carry {placeholders} that kbmatch fills."""

    id: KebabId
    title: Text
    cli: str | None = Field(default=None, description="vllm serve form, e.g. 'vllm serve MODEL --max-model-len {max_model_len_fit}'")
    python: str | None = Field(default=None, description="Python form, e.g. 'LLM(model=MODEL, max_model_len={max_model_len_fit})'")
    env: str | None = Field(default=None, description="environment variable form, when an env var is the knob")
    versions: Versions = ">=0.4.1"
    risk: Risk = Risk.low
    risk_note: str | None = None
    status: FixStatus = FixStatus.unverified
    why: Markdown | None = Field(default=None, description="why the fix works (or, when ineffective, why not)")
    code: str | None = Field(
        default=None,
        description="the broken code with this fix applied; the reproduction runner runs it "
        "(required for ineffective fixes so their failure is proven)",
    )

    @model_validator(mode="after")
    def _has_a_form(self) -> "Fix":
        if not (self.cli or self.python or self.env):
            raise ValueError("a fix needs at least one of 'cli', 'python' or 'env'")
        return self


class IneffectiveFix(Fix):
    """Advice that circulates and does not work: an invented flag, a knob with no effect here."""

    status: FixStatus = FixStatus.ineffective
    claim: Text = Field(description="what the circulating advice says")
    reason: Markdown = Field(description="why it does nothing, with the proof (vLLM's own output or source)")

    @field_validator("status")
    @classmethod
    def _is_ineffective(cls, status: FixStatus) -> FixStatus:
        if status is not FixStatus.ineffective:
            raise ValueError(f"advice listed under 'ineffective' has status 'ineffective', not '{status.value}'")
        return status


# a sign is looked for as it stands in a log: too short a text would be found everywhere
Sign = Annotated[str, Field(min_length=6, pattern=r"\S")]


class Cause(_Strict):
    id: KebabId
    title: Text
    diagnosis: Markdown = Field(description="how to tell this cause from the others (log lines, numbers)")
    signs: list[Sign] = Field(
        default_factory=list,
        description="texts that, found verbatim in a pasted log, point to this cause (a flag on the launch "
                    "command, a kernel or pod line): kbmatch shows the fix of the first cause, in rank order, "
                    "whose sign the log holds, and says which sign chose it; without one, the top cause's fix")
    fixes: list[Fix] = Field(min_length=1)


class Related(_Strict):
    id: KebabId
    relation: Literal["next", "cause", "wrapper", "see-also", "confused-with"] = "see-also"
    note: str | None = None


class Reference(_Strict):
    title: str
    url: str | None = None
    source: str | None = Field(default=None, description="vLLM source path, e.g. vllm/v1/core/kv_cache_utils.py")
    versions: Versions | None = None

    @model_validator(mode="after")
    def _has_target(self) -> "Reference":
        if not (self.url or self.source):
            raise ValueError("a reference needs 'url' or 'source'")
        return self


class Verify(_Strict):
    text: Markdown
    log_lines: list[str] = Field(
        default_factory=list,
        description="log line templates that show the fix took, e.g. '{device} KV cache size: {kv_tokens} tokens'",
    )


class Samples(_Strict):
    """semgrep-style: pastes that must match this entry, and pastes that must not."""

    match: list[str] = Field(min_length=1)
    no_match: list[str] = Field(default_factory=list)


class Entry(_Strict):
    schema_: str | None = Field(default=None, alias="$schema", description="editor hint; ignored")
    id: KebabId
    title: str = Field(min_length=5, pattern=r"\S", description="the error as users see it")
    # the site's navigation and the entry page's H1 show this; the exact error line stays `title`
    short_title: str = Field(
        min_length=3,
        pattern=r"\S",
        description=f"a short human name for the error, at most {SHORT_TITLE_MAX} characters and unique in kb/ "
        "(the navigation and the page heading show it), e.g. 'No memory left for KV cache blocks'",
        # lint (KB025) enforces the length with a remedy; the schema tells editors the same limit
        json_schema_extra={"maxLength": SHORT_TITLE_MAX},
    )
    summary: str = Field(min_length=10, max_length=400, pattern=r"\S", description="one or two sentences")
    severity: Severity
    fix_time: FixTime
    phase: Phase
    category: Category = Field(
        description="what ran out, or what kind of check failed; each category holds one kind of entry "
        "(tests check every entry against these): "
        + "; ".join(f"{c.value}: {says}" for c, (says, _rule) in CATEGORY_RULES.items())
    )
    tags: list[str] = Field(default_factory=list)
    signatures: list[Signature] = Field(min_length=1)
    meaning: Markdown = Field(description="what the error means, in plain words")
    causes: list[Cause] = Field(min_length=1, description="ranked, most common first")
    ineffective: list[IneffectiveFix] = Field(
        default_factory=list, description="advice that does not work, with the reason"
    )
    broken_code: str | None = Field(default=None, description="Python that raises this error")
    fixed_code: str | None = Field(default=None, description="the same program, fixed; it starts and generates")
    workaround: Markdown | None = None
    prevention: Markdown | None = None
    detection: Markdown | None = None
    verify: Verify
    related: list[Related] = Field(default_factory=list)
    foreign_names: list[Annotated[str, Field(pattern=r"^(?:--?[A-Za-z0-9][\w.-]*|[A-Z][A-Z0-9_]+)$")]] = Field(
        default_factory=list,
        description="flags and environment variables the entry names that are not vLLM's (docker's --gpus, "
        "nvidia-smi's --query-gpu, NCCL_NVLS_ENABLE): lint checks every other flag and VLLM_ variable against "
        "the releases a fix claims, and checks these are indeed absent from vLLM's code",
    )
    references: list[Reference] = Field(min_length=1)
    samples: Samples

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @property
    def all_fixes(self) -> list[Fix]:
        return [fix for cause in self.causes for fix in cause.fixes] + list(self.ineffective)

    @property
    def top_fix(self) -> Fix:
        return self.causes[0].fixes[0]
