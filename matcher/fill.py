"""Fill fix templates with the user's numbers: the signature's own params plus kvkb.params.DERIVED.

Pure functions. A value that cannot be computed from what the paste shows stays visible as
`<name>`: nothing is invented. Every derived value comes with a note saying how it was computed.
"""

from __future__ import annotations

import math
import re

from .normalize import to_number
from .regex_cache import Lazy, compile as _rx

BLOCK = 16  # the GPU KV block size; a max_model_len that is a multiple of it wastes no block

_CONTEXT_PATTERNS = [(names, words, Lazy(rx)) for names, words, rx in [
    # (names, words the line must contain, regex): numbers vLLM prints on other lines of a startup
    # log. A regex is compiled only when its words are in the paste (each compile costs ~0.3 ms).
    (("free_gib", "total_gib"), ("Free memory on device",), r"Free memory on device[^(\n]*\((-?[\d.]+)/([\d.]+) GiB\)"),
    (("free_gib", "total_gib"), ("Available memory on node",), r"Available memory on node \d+ \((-?[\d.]+)/([\d.]+) GiB\)"),
    (("total_gib",), ("total_gpu_memory",), r"total_gpu_memory \(([\d.]+) ?GiB\)"),
    (("total_gib",), ("total capacity of",), r"total capacity of ([\d.]+) GiB"),
    (("gpu_memory_utilization",), ("memory utilization (",), r"desired (?:GPU|CPU) memory utilization \(([\d.]+),"),
    (("gpu_memory_utilization",), ("memory_utilization", "memory-utilization"), r"gpu[_-]memory[_-]utilization['\"]?[=: ]+([01]?\.\d+|1(?:\.0+)?)\b"),
    (("max_model_len",), ("model_len", "model-len"), r"max[_-]model[_-]len['\"]?[=: ]+(\d[\d,]*)\b"),
    (("max_model_len",), ("max seq len (",), r"max seq len \((\d[\d,]*)\)"),
    (("kv_cache_space_gib_now",), ("VLLM_CPU_KVCACHE_SPACE",), r"VLLM_CPU_KVCACHE_SPACE[=: ]+(\d+)\b"),
    (("kv_cache_space_gib_now",), ("VLLM_CPU_KVCACHE_SPACE",), r"VLLM_CPU_KVCACHE_SPACE \(Gi?B\) for CPU backend is not set, using (\d+) by default"),
    (("available_kv_gib",), ("Available KV cache memory",), r"Available KV cache memory: (-?[\d.]+) GiB"),
]]

# Where a startup log names the model: the CLI's non-default args, the engine config line, the
# command line, a Python call. The first one found wins.
# (a model id or path holds no space, comma or line break: a quote left open in the person's code
# must not run the value on into the next lines)
_MODEL_PATTERNS = [(word, Lazy(rx)) for word, rx in [
    ("'model':", r"'model': '([^'\s,]+)'"),
    ("model=", r"\bmodel='([^'\s,]+)'"),
    ("model=", r"\bmodel=\"([^\"\s,]+)\""),
    # "vllm serve MODEL", or the older "vllm serve --model MODEL" (a flag is no model)
    ("vllm serve", r"vllm serve\s+(?:--model[= ]\s*)?(?!-)([\w.\-/]+)"),
]]


# a setting the paste states: "--max-model-len 4096" or "--max-model-len=4096" (a command), "max_model_len=4096"
# (vLLM's config line, a Python call), "'max_model_len': 4096" (the non-default args, quotes as typeset)
_SETTING_RE = Lazy(r"--(?P<flag>[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*)(?:=|[ \t]+)(?!-[a-z-])(?P<fv>[^\s'\",)}\]\\]+)"
                   r"|\b(?P<kw>[a-z][a-z0-9]*(?:_[a-z0-9]+)+)\s*=\s*['\"]?(?P<kv>[^\s'\",)}\]]+)"
                   r"|['\"\u2018\u2019](?P<key>[a-z][a-z0-9]*(?:_[a-z0-9]+)+)['\"\u2018\u2019]\s*:\s*['\"\u2018\u2019]?(?P<dv>[^\s'\",)}\]\u2018\u2019]+)")
# a flag of a fix's command line, with its value when it has one
_FIX_FLAG_RE = Lazy(r"--([a-z][a-z0-9-]*)(?:[= ]+(?!-)(\S+))?")


def settings_in(text: str) -> dict[str, str]:
    """setting (as Python spells it: max_model_len) -> the value the paste last gives it."""
    found: dict[str, str] = {}
    if "--" not in text and "=" not in text and ":" not in text:
        return found
    for m in _SETTING_RE.finditer(text):
        name = m.group("flag") or m.group("kw") or m.group("key")
        found[name.replace("-", "_")] = m.group("fv") or m.group("kv") or m.group("dv")
    return found


_PLAIN_NUMBER_RE = Lazy(r"-?\d[\d,]*(?:\.\d+)?")


def _same_value(a: str, b: str) -> bool:
    """0.9 is 0.90 and 8,192 is 8192; other values compare as words (fp8, True)."""
    if _PLAIN_NUMBER_RE.fullmatch(a) and _PLAIN_NUMBER_RE.fullmatch(b):
        return to_number(a) == to_number(b)
    return a.strip("'\"").lower() == b.strip("'\"").lower()


def already_set(cli: str | None, settings: dict[str, str]) -> list[str]:
    """The fix's flags ("--tensor-parallel-size 2") when the paste already sets every one of them to the
    fix's value: a fix the run already had, which cannot be what fixes it. Else []."""
    if not cli or not settings:
        return []
    flags = [(m.group(1), m.group(2)) for m in _FIX_FLAG_RE.finditer(cli)]
    if not flags or any(value is None or value.startswith("<") for _, value in flags):
        return []  # a switch, or a value kvkb could not fill in: nothing to compare
    if all(_same_value(settings.get(name.replace("-", "_"), ""), value) for name, value in flags):
        return [f"--{name} {value}" for name, value in flags]
    return []


def context_values(text: str) -> dict[str, float]:
    """Numbers found anywhere in the paste; the first occurrence wins (the startup lines)."""
    found: dict[str, float] = {}
    for names, words, pattern in _CONTEXT_PATTERNS:
        if all(n in found for n in names) or not any(w in text for w in words):
            continue
        m = pattern.search(text)
        if not m:
            continue
        for name, value in zip(names, m.groups()):
            num = to_number(value)
            if num is not None and name not in found:
                found[name] = num
    for word, pattern in _MODEL_PATTERNS:
        if word in text and (m := pattern.search(text)):
            found["model"] = m.group(1)  # a string among the numbers: only derive() reads it
            break
    settings = settings_in(text)
    if settings:
        found["settings"] = settings  # what the run already set: a fix that sets the same is no fix
    return found


def shipped_config(model: str) -> tuple[str, dict] | None:
    """The config.json kvkb ships for this model id (or a local path ending in its name), if any."""
    from kvkb.fit import shipped_configs  # the package __init__ only: os, no pathlib, no arithmetic

    want = model.rstrip("/").lower()
    tail = want.rsplit("/", 1)[-1]
    hits = [(repo, path) for repo, path in shipped_configs()
            if repo.lower() == want or repo.lower().rsplit("/", 1)[-1] == tail]
    if len(hits) != 1:
        return None
    import json

    with open(hits[0][1], encoding="utf-8") as f:
        return hits[0][0], json.load(f)


def _fit_max_model_len(model: str, available_gib: float, max_model_len: float | None) -> tuple[int, str] | None:
    """Exact KV arithmetic (kvkb fit) for a shipped model, on the KV memory the log reports."""
    found = shipped_config(model)
    if not found or available_gib <= 0:
        return None
    repo, config = found
    from kvkb.fit.capacity import FitError, fit  # lazy: pure arithmetic, no heavy imports

    # vLLM prints the GiB figure rounded to 2 decimals: take the low end so the answer always fits.
    budget = int((available_gib - 0.005) * 2**30)
    try:
        result = fit(config, kv_cache_memory=budget, max_model_len=int(max_model_len) if max_model_len else None, name=repo)
    except FitError:
        return None
    if result.max_model_len_that_fits <= 0:
        return None
    return result.max_model_len_that_fits, (
        f"kvkb fit with {repo}'s config.json: {result.bytes_per_token:,} bytes per token, "
        f"{_fmt(available_gib)} GiB of KV memory (low end of vLLM's rounding) holds a {result.max_model_len_that_fits}-token request"
    )


def numbers(params: dict[str, str]) -> dict[str, float]:
    out = {}
    for k, v in params.items():
        num = to_number(v)
        if num is not None:
            out[k] = num
    return out


def _gib(v: dict[str, float], name: str) -> float | None:
    if name + "_gib" in v:
        return v[name + "_gib"]
    if name + "_gb" in v:  # vLLM <=0.8.2 printed GB for what were binary GiB
        return v[name + "_gb"]
    return None


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}".rstrip("0")


def derive(v: dict[str, float], wanted: set[str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """(values, notes) for each DERIVED name that the numbers allow.

    `wanted`: the placeholders the fix will show; the costly ones (kvkb fit) run only when wanted.
    """
    values: dict[str, str] = {}
    notes: dict[str, str] = {}
    needed, available = _gib(v, "needed"), _gib(v, "available")
    mml = v.get("max_model_len")

    est = v.get("estimated_max_len")
    model = v.get("model") if isinstance(v.get("model"), str) else None
    kv_gib = available if available is not None else v.get("available_kv_gib")
    want_fit = wanted is None or "max_model_len_fit" in wanted
    fitted = _fit_max_model_len(model, kv_gib, mml) if want_fit and model and kv_gib and not (est and est > 0) else None
    if model:
        values["model"] = model  # fill() puts it where fix forms say MODEL
    if est and est > 0:
        values["max_model_len_fit"] = _fmt(int(est))
        notes["max_model_len_fit"] = f"vLLM's own estimate of the longest context that fits: {int(est)}"
    elif fitted:
        values["max_model_len_fit"], notes["max_model_len_fit"] = str(fitted[0]), fitted[1]
    elif v.get("kv_tokens"):
        fit = int(v["kv_tokens"]) // BLOCK * BLOCK
        if fit > 0:
            values["max_model_len_fit"] = str(fit)
            notes["max_model_len_fit"] = f"the KV cache holds {int(v['kv_tokens'])} tokens; rounded down to a multiple of {BLOCK}: {fit}"
    elif mml and needed and available is not None and needed > 0:
        fit = int(mml * available / needed) // BLOCK * BLOCK
        if fit > 0:
            values["max_model_len_fit"] = str(fit)
            notes["max_model_len_fit"] = (
                f"KV memory grows linearly with context: {int(mml)} x {_fmt(available)}/{_fmt(needed)} GiB, "
                f"rounded down to a multiple of {BLOCK}: {fit} (approximate: vLLM rounds the GiB figures)"
            )

    total, util = v.get("total_gib"), v.get("gpu_memory_utilization")
    if needed and available is not None and total and util:
        target = util + (needed - available) / total
        fit = math.ceil(target * 100 - 1e-9) / 100
        if fit <= 0.99:
            values["gpu_memory_utilization_fit"] = f"{fit:.2f}"
            notes["gpu_memory_utilization_fit"] = (
                f"{_fmt(util)} + ({_fmt(needed)} - {_fmt(available)} GiB missing) / {_fmt(total)} GiB total = {target:.3f}, rounded up"
            )
        else:
            notes["gpu_memory_utilization_fit"] = (
                f"would need {target:.2f} of the {_fmt(total)} GiB device: no utilisation fits; lower max_model_len instead"
            )

    free = v.get("free_gib")
    if free is not None and total:
        fit = math.floor(free / total * 100) / 100
        if fit > 0:
            values["gpu_memory_utilization_free"] = f"{fit:.2f}"
            notes["gpu_memory_utilization_free"] = f"{_fmt(free)} GiB free of {_fmt(total)} GiB = {free / total:.3f}, rounded down"
        else:
            notes["gpu_memory_utilization_free"] = f"only {_fmt(free)} GiB of {_fmt(total)} GiB is free: free the device first"

    space = v.get("kv_cache_space_gib_now")
    if needed is not None and needed >= 0:
        gib = max(1, math.ceil(needed + 0.01))
        values["kv_cache_space_gib"] = str(gib)
        notes["kv_cache_space_gib"] = f"one {_fmt(mml) if mml else 'max_model_len'}-token request needs {_fmt(needed)} GiB of KV; whole GiB with headroom: {gib}"
    elif mml and v.get("kv_tokens") and space:
        gib = math.ceil(space * mml / v["kv_tokens"])
        values["kv_cache_space_gib"] = str(gib)
        notes["kv_cache_space_gib"] = f"{_fmt(space)} GiB holds {int(v['kv_tokens'])} tokens; {int(mml)} tokens need {gib} GiB"

    if mml:
        batched = v.get("max_num_batched_tokens", 0)
        values["max_num_batched_tokens_fit"] = str(int(max(mml, batched)))
        notes["max_num_batched_tokens_fit"] = f"at least max_model_len ({int(mml)})"
    return values, notes


_PH_RE = _rx(r"\{([a-z_][a-z0-9_]*)\}")
# MODEL alone; "MODEL-AWQ" (an AWQ checkpoint of the model) stays as written: the user's id with "-AWQ"
# added names a repository that may not exist
_MODEL_WORD = _rx(r"\bMODEL\b(?!-)")


def placeholders(text: str) -> list[str]:
    return _PH_RE.findall(text)


def fill(text: str | None, values: dict[str, str]) -> str | None:
    if text is None:
        return None
    if values.get("model"):  # fix forms write the model as MODEL: the user's own when the log names it
        text = text.replace("model=MODEL", f"model={values['model']!r}")  # the Python form: a string
        text = _MODEL_WORD.sub(lambda _: values["model"], text)
    return _PH_RE.sub(lambda m: values.get(m.group(1)) or f"<{m.group(1)}>", text)


def clean_params(raw: dict[str, str]) -> dict[str, str]:
    """Strip what a lazy capture drags along ('3984)' from a cut line, surrounding spaces)."""
    out = {}
    for k, val in raw.items():
        if val is None:
            continue
        val = val.strip()
        if to_number(val) is not None and re.fullmatch(r"[(\[]?-?\d[\d,.]*[)\]]?[.,;:]?", val):
            val = val.strip("()[].,;:")
        out[k] = val
    return out


def all_values(params: dict[str, str], context: dict[str, float], wanted: set[str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """Placeholder values for fix templates: raw params, then derived ones (params beat context)."""
    nums = dict(context)
    nums.update(numbers(params))
    values, notes = derive(nums, wanted)
    merged = {k: v for k, v in params.items()}
    merged.update(values)
    return merged, notes
