"""`kvkb atlas add VERSION...` / `kvkb atlas find TEXT` (--flag, --env, --arg) / `kvkb atlas drift [VERSION]` /
`kvkb atlas cut VERSION --out PATH`: the atlas of what every vLLM release prints and accepts. find, drift
and cut work offline from the committed atlas; add downloads wheels.
Exit 0 done (find: something found), 1 find found nothing, 2 usage or fetch error."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from packaging.version import InvalidVersion, Version

from kvkb.atlas.store import ATLAS_PATH, Atlas, AtlasError, StringItem, spans, versions_string

MAX_SHOWN = 25


def add_parser(sub) -> None:
    p = sub.add_parser("atlas", help="what every vLLM release prints and accepts: add releases, find a text or flag",
                       description="The atlas indexes every vLLM release's string literals (with file:line and the "
                       "exception or log level they are raised with), flags, LLM(...) parameters, EngineArgs fields "
                       "and VLLM_ variables. `kvkb lint` checks entries against it.")
    p.add_argument("--atlas", type=Path, default=None,
                   help=f"atlas file (default: $KVKB_ATLAS or {ATLAS_PATH.relative_to(ATLAS_PATH.parents[2])})")
    asub = p.add_subparsers(dest="atlas_command", metavar="ACTION")
    a = asub.add_parser("add", help="download releases' wheels, add them, and print each one's drift report")
    a.add_argument("versions", nargs="*", metavar="VERSION", help="vLLM releases, e.g. 0.34.0")
    a.add_argument("--new", action="store_true", help="add every release on the package index newer than the atlas's newest")
    a.add_argument("--rebuild", action="store_true", help="start from an empty atlas (VERSIONs are then every release to hold)")
    a.add_argument("--report", type=Path, help="also write the drift report(s) to this file (Markdown)")
    a.add_argument("--workdir", type=Path, help="where wheels are downloaded (and deleted), default a temporary folder")
    d = asub.add_parser("drift", help="print a release's drift report again, offline, against kb/ as it is now",
                        description="The drift report `kvkb atlas add` printed for VERSION (default: the newest release "
                        "in the atlas), computed again from the atlas and the current kb/ entries: what is still to mend.")
    d.add_argument("version", nargs="?", metavar="VERSION", help="a release the atlas holds (default: its newest)")
    d.add_argument("--kb", type=Path, default=None, help="the entries' folder (default: kb/)")
    d.add_argument("--report", type=Path, help="also write the report to this file (Markdown)")
    c = asub.add_parser("cut", help="write the atlas as it stood at a release (later ones dropped), to rehearse adding the next",
                        description="Writes the atlas as it was when VERSION was its newest release. `kvkb atlas --atlas OUT "
                        "add NEXT` then prints NEXT's drift report as if NEXT were new, and rebuilds the same atlas byte "
                        "for byte.")
    c.add_argument("version", metavar="VERSION", help="the newest release to keep, e.g. 0.32.0")
    c.add_argument("--out", type=Path, required=True, help="where to write the cut atlas (never the committed one)")
    f = asub.add_parser("find", help="which releases print a text, or accept a flag, parameter or variable")
    f.add_argument("text", nargs="?", help="a phrase of a message; {name} or {…} in it match any value")
    g = f.add_mutually_exclusive_group()
    g.add_argument("--flag", help="a command-line flag, e.g. --kv-cache-memory-bytes")
    g.add_argument("--env", help="an environment variable, e.g. VLLM_CPU_KVCACHE_SPACE")
    g.add_argument("--arg", help="an LLM(...) parameter or EngineArgs field, e.g. kv_cache_memory_bytes")
    p.set_defaults(run=run, _parser=p)


def _path(args) -> Path:
    return args.atlas or Path(os.environ.get("KVKB_ATLAS") or ATLAS_PATH)


def run(args) -> int:
    if args.atlas_command == "find":
        return _find(args)
    if args.atlas_command == "add":
        return _add(args)
    if args.atlas_command == "cut":
        return _cut(args)
    if args.atlas_command == "drift":
        return _drift(args)
    args._parser.print_help(sys.stderr)
    return 2


def _fail(message: str) -> int:
    print(f"kvkb atlas: {message}", file=sys.stderr)
    return 2


# --- find -------------------------------------------------------------------------------------------
def _find(args) -> int:
    try:
        atlas = Atlas.load(_path(args))
    except AtlasError as exc:
        return _fail(str(exc))
    if args.flag or args.env or args.arg:
        return _find_name(atlas, args)
    if not args.text or not args.text.strip():
        return _fail("give a TEXT to find, or --flag / --env / --arg NAME")
    return _find_text(atlas, args.text.strip())


def _line(atlas: Atlas, it: StringItem, index: int) -> str:
    line = it.line_at(index)
    return f"{atlas.releases[index]} {it.file}" + (f":{line}" if line is not None else "")


def _find_text(atlas: Atlas, text: str) -> int:
    from kvkb.atlas.match import explain, message_of

    items = atlas.search(message_of(text))
    whole = explain(atlas, text)
    if not items and not whole.releases:
        print(f"no vLLM release {atlas.releases[0]}–{atlas.releases[-1]} prints {text!r}", file=sys.stderr)
        return 1
    if whole.releases:
        print(f"printed whole by {spans(whole.releases, atlas.releases)}")
        print(f"  versions: \"{versions_string(whole.releases, atlas.releases)}\"\n")
    items.sort(key=lambda it: (-max(it.indexes), it.file))
    for it in items[:MAX_SHOWN]:
        idx = it.indexes
        how = (f"raised as {it.exception}" + (" in a pydantic config (printed as ValidationError: \"Value error, ...\")"
                                              if it.pydantic else "")
               if it.exception else f"logged at {it.level}" if it.level else "a string")
        print(it.shown)
        print(f"  {how} in {it.qual or '<module>'}")
        print(f"  releases: {spans(idx, atlas.releases)}")
        print(f"  first: {_line(atlas, it, min(idx))}")
        print(f"  last:  {_line(atlas, it, max(idx))}")
        print(f"  versions: \"{versions_string(idx, atlas.releases)}\"\n")
    if len(items) > MAX_SHOWN:
        print(f"... and {len(items) - MAX_SHOWN} more; give a longer phrase", file=sys.stderr)
    if len(items) > 1:
        union = set().union(*(it.indexes for it in items))
        print(f"all {len(items)} together: releases {spans(union, atlas.releases)}, "
              f"versions \"{versions_string(union, atlas.releases)}\"")
    return 0


def _find_name(atlas: Atlas, args) -> int:
    if args.flag:
        flag = args.flag if args.flag.startswith("-") else "--" + args.flag
        rows = [("flag", flag, atlas.named("flag", flag))]
        if "_" in flag:
            alt = "--" + flag.lstrip("-").replace("_", "-")
            rows.append(("flag", alt, atlas.named("flag", alt)))
        field = flag.lstrip("-").replace("-", "_")
        rows.append(("EngineArgs field", field, atlas.named("arg", field)))
    elif args.env:
        rows = [("variable", args.env, atlas.named("env", args.env))]
    else:
        rows = [("LLM parameter", args.arg, atlas.named("llm", args.arg)),
                ("EngineArgs field", args.arg, atlas.named("arg", args.arg))]
        via = atlas.holders("llm", "**kwargs") & atlas.holders("arg", args.arg) - atlas.holders("llm", args.arg)
        if via:
            print(f"LLM(..., {args.arg}=...) is accepted through **kwargs by {spans(via, atlas.releases)}")
    found = False
    for what, name, items in rows:
        if not items:
            continue
        found = True
        held = set().union(*(it.indexes for it in items))
        print(f"{what} {name}: {spans(held, atlas.releases)}")
        print(f"  versions: \"{versions_string(held, atlas.releases)}\"")
        if what != "flag":
            for it in sorted(items, key=lambda it: min(it.indexes)):
                default = ("unknown (read outside envs.py)" if it.default == "?" and what == "variable"
                           else it.default or "(none)")
                print(f"  default {default}: {spans(it.indexes, atlas.releases)}")
    if not found:
        shown = args.flag or args.env or args.arg
        print(f"no vLLM release {atlas.releases[0]}–{atlas.releases[-1]} has {shown}", file=sys.stderr)
        return 1
    return 0


# --- drift ------------------------------------------------------------------------------------------
def _drift(args) -> int:
    from kvkb.atlas.drift import drift, format_drift

    try:
        atlas = Atlas.load(_path(args))
    except AtlasError as exc:
        return _fail(str(exc))
    version = args.version or atlas.releases[-1]
    if version not in atlas.releases:
        return _fail(f"{version} is not in the atlas ({atlas.releases[0]}–{atlas.releases[-1]}); "
                     "`kvkb atlas add` it first")
    if args.kb is not None and not args.kb.is_dir():
        return _fail(f"{args.kb} is not a folder of entries")
    text = format_drift(drift(atlas, version, _entries(args.kb)), atlas)
    sys.stdout.write(text)
    if args.report:
        args.report.write_text(text, encoding="utf-8")
    return 0


# --- cut --------------------------------------------------------------------------------------------
def _cut(args) -> int:
    path = _path(args)
    if args.out.resolve() == path.resolve():
        return _fail(f"--out {args.out} is the atlas being cut: write the cut one elsewhere")
    try:
        cut = Atlas.load(path).until(args.version)
    except AtlasError as exc:
        return _fail(str(exc))
    cut.save(args.out)
    print(f"wrote {args.out}: {len(cut.releases)} releases ({cut.releases[0]}–{cut.releases[-1]})", file=sys.stderr)
    return 0


# --- add --------------------------------------------------------------------------------------------
def _add(args) -> int:
    from kvkb.atlas import wheels
    from kvkb.atlas.build import add_releases
    from kvkb.atlas.drift import drift, format_drift
    from kvkb.atlas.wheels import FetchError

    path = _path(args)
    try:
        atlas = Atlas() if args.rebuild else Atlas.load(path) if path.exists() else Atlas()
    except AtlasError as exc:
        return _fail(str(exc))
    versions = list(args.versions)
    for v in versions:
        try:
            Version(v)
        except InvalidVersion:
            return _fail(f"{v!r} is not a version (write e.g. 0.34.0)")
    try:
        if args.new:
            newest = Version(atlas.releases[-1]) if atlas.releases else Version("0")
            versions += [v for v in wheels.released_versions() if Version(v) > newest]
        if not versions:
            if args.new:
                print(f"no release newer than {atlas.releases[-1] if atlas.releases else 'none'} on the index",
                      file=sys.stderr)
                return 0
            return _fail("give the VERSION(s) to add, or --new")
        t0 = time.monotonic()
        added = add_releases(atlas, versions, path=path, workdir=args.workdir, fetch=wheels.release_sources,
                             progress=lambda m: print(m, file=sys.stderr, flush=True))
    except (AtlasError, FetchError) as exc:
        return _fail(str(exc))
    elapsed = time.monotonic() - t0
    entries = _entries()
    reports = [format_drift(drift(atlas, v, entries), atlas) for v in added]
    text = "\n".join(reports)
    sys.stdout.write(text)
    if args.report:
        args.report.write_text(text, encoding="utf-8")
    size = path.stat().st_size / 1e6
    print(f"added {len(added)} release(s) in {elapsed:.0f}s; the atlas holds {len(atlas.releases)} "
          f"({atlas.releases[0]}–{atlas.releases[-1]}), {size:.1f} MB at {path}", file=sys.stderr)
    return 0


def _entries(folder: Path | None = None) -> dict:
    from kvkb.loader import load_kb

    return (load_kb(folder) if folder is not None else load_kb()).entries
