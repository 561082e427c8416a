"""Compiled regular expressions kept between runs, as Python keeps compiled modules in __pycache__.

kbmatch's start-up is measured against importing its libraries, and turning ~150 patterns into
the regex engine's program in pure Python (`re._parser`, `re._compiler`) costs several ms a run,
a sixth of it. The programs are plain lists of ints that CPython's `_sre.compile` accepts as they
are, so they are stored with marshal beside this module's bytecode and handed to `_sre.compile`
on the next run. Only this module touches those internals, and every way they could disagree
falls back to `re.compile`: the file is tagged with the interpreter's version, `_sre.MAGIC`
(bumped when the engine's opcodes change) and `_sre.CODESIZE`; a program is keyed by its exact
pattern and flags; and `_sre.compile` validates a program before using it (a bad one raises, and
the pattern is compiled afresh). The file is written as Python writes .pyc files: on a run that
compiled a pattern it did not hold, unless PYTHONDONTWRITEBYTECODE or `-B` is set, never in the
browser, and a folder that cannot be written is skipped without a word. `python -m
kvkb.matcher.regex_cache` writes it for every pattern the matcher declares, for installs (and
benchmarks) that run with bytecode writing off.
"""

from __future__ import annotations

import marshal
import os
import re
import sys

try:
    import _sre
except ImportError:  # not CPython
    _sre = None

FORMAT = 1
_TAG = sys.implementation.cache_tag
_PATH = (os.path.join(os.path.dirname(os.path.realpath(__file__)), "__pycache__", f"regex.{_TAG}.marshal")
         if _TAG and _sre is not None and sys.platform != "emscripten" else None)
_HEADER = (FORMAT, sys.version, getattr(_sre, "MAGIC", None), getattr(_sre, "CODESIZE", None))

# (pattern, flags) -> (flags as compiled, program, groups, groupindex, indexgroup)
_programs: dict = {}
# every (pattern, flags) declared through this module, in order: what the cache file holds
_declared: dict = {}
_missed = False


def _read(path) -> dict:
    try:
        with open(path, "rb") as f:
            header, programs = marshal.loads(f.read())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    return programs if header == _HEADER and isinstance(programs, dict) else {}


if _PATH is not None:
    _programs = _read(_PATH)


def _program(pattern, flags: int) -> tuple:
    """What re._compiler.compile hands to _sre.compile (CPython 3.11-3.13)."""
    from re import _compiler, _parser

    p = _parser.parse(pattern, flags)
    code = [int(op) for op in _compiler._code(p, flags)]  # opcodes are int subclasses marshal refuses
    groupindex = dict(p.state.groupdict)
    indexgroup = [None] * p.state.groups
    for k, i in groupindex.items():
        indexgroup[i] = k
    return int(flags | p.state.flags), code, p.state.groups - 1, groupindex, tuple(indexgroup)


def compile(pattern, flags: int = 0) -> re.Pattern:  # noqa: A001 - re.compile's twin
    """re.compile(pattern, flags), from the stored program when there is one."""
    global _missed
    flags = int(flags)
    key = (pattern, flags)
    _declared[key] = None
    prog = _programs.get(key)
    if prog is not None:
        try:
            return _sre.compile(pattern, *prog)
        except Exception:  # a program this engine does not accept: compile afresh
            pass
    if not _missed and _PATH is not None and not sys.dont_write_bytecode:
        import atexit

        atexit.register(_save_quietly)
    _missed = True
    return re.compile(pattern, flags)


class Lazy:
    """A regex compiled on first use. kbmatch's start-up is measured, compiling costs 0.1-1 ms a
    pattern, and most pastes never need the rarer ones (ANSI codes, box borders, wrappers)."""

    __slots__ = ("_args", "_rx")

    def __init__(self, pattern, flags: int = 0):
        self._args = (pattern, int(flags))
        self._rx = None
        _declared[self._args] = None  # the cache file holds it even before a run needs it

    def __getattr__(self, name):
        rx = self._rx
        if rx is None:
            rx = self._rx = compile(*self._args)
        return getattr(rx, name)


def save(path=None) -> int:
    """Write the programs of every declared pattern; the number written. Raises OSError."""
    path = path or _PATH
    if path is None:
        raise OSError("this interpreter keeps no compiled regexes (not CPython, or no bytecode cache)")
    programs = {key: _programs.get(key) or _program(*key) for key in _declared}
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(marshal.dumps((_HEADER, programs)))
        os.replace(tmp, path)  # atomic: a reader sees the old file or the new one
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    _programs.update(programs)
    return len(programs)


def _save_quietly() -> None:
    try:
        save()
    except Exception:  # like a .pyc that cannot be written: the next run compiles again
        pass


def _declare_all() -> None:
    """Import the modules that reach every one declaring a pattern, so that each declares its own: the
    engine imports the rest at load time, the index only when a match loads it. (By name: this module
    is the one the others import, and names no module above it.)"""
    import importlib

    for name in ("engine", "index"):
        importlib.import_module(f"{__package__}.{name}")


def main() -> int:
    _declare_all()
    try:
        n = save()
    except OSError as exc:
        print(f"regex_cache: cannot write {_PATH}: {exc}", file=sys.stderr)
        return 1
    print(f"regex_cache: {n} compiled patterns in {_PATH}")
    return 0


if __name__ == "__main__":
    # run as a script this file is __main__, a second copy: the matcher's modules declare their
    # patterns in the copy they import
    from kvkb.matcher import regex_cache

    sys.exit(regex_cache.main())
