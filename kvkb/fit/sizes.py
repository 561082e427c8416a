"""Parse and print memory sizes and token counts the way vLLM users write them.

vLLM's own parser (`vllm/utils/argparse_utils.py:human_readable_int`, 0.32.0) reads a single
lowercase suffix as decimal (k=1e3, m=1e6, g=1e9, t=1e12) and uppercase as binary (K=2**10 ...).
We accept that plus the unit words people paste from logs and spec sheets: GiB/MiB/KiB/TiB
(binary), GB/MB/KB/TB (decimal), B, and plain bytes. Decimals are allowed ("23.99 GiB", which is
how vLLM prints memory); the result is floored to whole bytes with exact rational arithmetic.
"""

from __future__ import annotations

import re
from fractions import Fraction

GiB = 1 << 30
MiB = 1 << 20

_UNITS = {
    "": 1, "b": 1,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
}
# vLLM's single-letter suffixes are case sensitive: lowercase decimal, uppercase binary.
_LETTER = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12,
           "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

_RE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([A-Za-z]*)\s*")


class SizeError(ValueError):
    """A size or length the user typed that we cannot read."""


def _parse(text: str, what: str) -> int:
    if not isinstance(text, str):
        text = str(text)
    m = _RE.fullmatch(text)
    if not m:
        raise SizeError(f"cannot read {what} {text!r}: expected a number with an optional unit "
                        "(e.g. 24GiB, 80GB, 512MiB, 2G, 1500000000)")
    number, unit = m.group(1), m.group(2)
    if unit in _LETTER:
        mult = _LETTER[unit]
    elif unit.lower() in _UNITS:
        mult = _UNITS[unit.lower()]
    else:
        raise SizeError(f"cannot read {what} {text!r}: unknown unit {unit!r} "
                        "(use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB, or vLLM's k/m/g (decimal), K/M/G (binary))")
    return int(Fraction(number) * mult)


def parse_size(text: str) -> int:
    """'24GiB' -> 25769803776, '80GB' -> 80000000000, '2G' -> 2147483648, '2g' -> 2000000000."""
    value = _parse(text, "size")
    if value <= 0:
        raise SizeError(f"size {text!r} must be more than 0 bytes")
    return value


def parse_tokens(text: str) -> int:
    """A token count as vLLM's --max-model-len reads it: '32k' -> 32000, '32K' -> 32768."""
    value = _parse(text, "token count")
    if value <= 0:
        raise SizeError(f"token count {text!r} must be at least 1")
    return value


def format_gib(n: int) -> str:
    """vLLM's own format (`utils/mem_utils.py:format_gib`): round(bytes / GiB, 2)."""
    return f"{round(n / GiB, 2)}"


def human_bytes(n: int) -> str:
    """Readable size with binary units, e.g. '1.50 GiB', '56.0 KiB', '512 B'."""
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            value = n / size
            return f"{sign}{value:.2f} {unit}" if value < 100 else f"{sign}{value:.1f} {unit}"
    return f"{sign}{n} B"


def human_tokens(n: int) -> str:
    """131072 -> '128k' (binary k, as model cards count context), 32000 -> '32,000'."""
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}k"
    return f"{n:,}"
