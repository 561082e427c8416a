"""`kbmatch [FILE] [--json] [--top N] [--explain ID] [--base-url URL] [--no-color]`

Exit 0: a confident match; 1: none; 2: usage error, unreadable input or a broken kb/ entry.
Imports stay minimal and lazy: this runs on every paste and its start-up time is measured.
"""

from __future__ import annotations

import sys

USAGE = "kbmatch [FILE] [--json] [--top N] [--explain ID] [--base-url URL] [--no-color]"


def _parser():
    import argparse

    p = argparse.ArgumentParser(
        prog="kbmatch",
        usage=USAGE,
        description="Find the root cause of a vLLM KV-cache / out-of-memory error in a log, with the fix filled "
        "with your numbers. Reads FILE, or stdin: `docker logs vllm 2>&1 | kbmatch`.",
    )
    p.add_argument("file", nargs="?", metavar="FILE", help="log file; '-' or nothing reads stdin")
    p.add_argument("--json", action="store_true", help="print the matches as JSON")
    p.add_argument("--top", type=int, default=3, metavar="N", help="show up to N matches (default 3)")
    p.add_argument("--explain", metavar="ID", help="print the entry ID in the terminal and exit")
    p.add_argument("--base-url", metavar="URL", help="site for entry links (env KVKB_BASE_URL; default the published site)")
    p.add_argument("--no-color", action="store_true", help="never colour the output")
    return p


class _Args:
    file = None
    json = False
    top = 3
    explain = None
    base_url = None
    no_color = False


_VALUED = {"--top": "top", "--explain": "explain", "--base-url": "base_url"}


def _fast_args(argv: list[str]) -> _Args | None:
    """The common command lines without argparse (whose import costs ~5 ms of every run); None
    for anything else (--help, abbreviations, mistakes), which argparse then handles and explains."""
    args = _Args()
    it = iter(argv)
    for a in it:
        if a == "--json":
            args.json = True
        elif a == "--no-color":
            args.no_color = True
        elif a.split("=", 1)[0] in _VALUED:
            name, eq, value = a.partition("=")
            if not eq:
                value = next(it, None)
                if value is None or value.startswith("-"):
                    return None
            if name == "--top":
                if not value.isdigit():
                    return None
                value = int(value)
            setattr(args, _VALUED[name], value)
        elif (a == "-" or not a.startswith("-")) and args.file is None:
            args.file = a
        else:
            return None
    return args


def _err(msg: str) -> int:
    print(f"kbmatch: {msg}", file=sys.stderr)
    return 2


def _use_color(args) -> bool:
    import os

    return not args.no_color and not os.environ.get("NO_COLOR") and sys.stdout.isatty()


def main(argv: list[str] | None = None) -> int:
    args = _fast_args(sys.argv[1:] if argv is None else argv)
    if args is None:
        args = _parser().parse_args(argv)
    if args.top < 1:
        return _err("--top must be at least 1")
    try:
        if args.explain:
            return _explain(args)
        return _match(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def _index_error(exc) -> int:
    print(str(exc), file=sys.stderr)
    return _err("the knowledge base has invalid entries (above); fix them or run `kvkb lint`")


def _match(args) -> int:
    from .engine import Matcher

    try:
        matcher = Matcher.load(base_url=args.base_url)
    except Exception as exc:  # EntryError; imported lazily (kvkb.codes) to keep start-up small
        if type(exc).__name__ == "EntryError":
            return _index_error(exc)
        raise
    if args.file in (None, "-"):
        if sys.stdin is None:
            return _err("no FILE and no stdin")
        if sys.stdin.isatty():
            print("kbmatch: paste the log, then press Ctrl-D", file=sys.stderr)
        try:
            report = matcher.match_stream(sys.stdin.buffer)
        except OSError as exc:
            return _err(f"cannot read stdin: {exc.strerror or exc}")
    else:
        try:
            with open(args.file, "rb") as f:
                report = matcher.match_stream(f)
        except IsADirectoryError:
            return _err(f"{args.file} is a directory, not a log file")
        except OSError as exc:
            return _err(f"cannot read {args.file}: {exc.strerror or exc}")
    if args.json:
        from .api import to_json

        print(to_json(report, args.top))
    else:
        from .render import report_text

        sys.stdout.write(report_text(report, args.top, _use_color(args)))
    return 0 if report.root_cause else 1


def _explain(args) -> int:
    from .engine import Matcher
    from .index import load_explain
    from .render import explain_text

    try:
        entries = load_explain()
    except Exception as exc:
        if type(exc).__name__ == "EntryError":
            return _index_error(exc)
        raise
    entry = entries.get(args.explain)
    if entry is None:
        import difflib

        close = difflib.get_close_matches(args.explain, list(entries), n=3, cutoff=0.4)
        hint = f" (did you mean {', '.join(close)}?)" if close else f"; known ids: {', '.join(sorted(entries))}"
        return _err(f"no entry '{args.explain}'{hint}")
    url = Matcher({"entries": [], "signatures": []}, args.base_url).url(args.explain)
    sys.stdout.write(explain_text(entry, url, _use_color(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
