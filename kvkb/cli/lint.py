"""`kvkb lint [PATH...]`: schema and semantic checks; exit 0 clean, 1 problems, 2 usage, 3 internal error."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kvkb.codes import CODES
from kvkb.lint import lint_paths
from kvkb.loader import entry_files, kb_dir


def add_parser(sub) -> None:
    p = sub.add_parser(
        "lint",
        help="check kb entries: numbered problems with file, line and remedy",
        description="Check kb entries. Each problem prints as FILE:LINE:COL: CODE message, with its remedy. "
        "Exit 0 clean, 1 problems found, 2 usage error.",
    )
    p.add_argument("paths", nargs="*", type=Path, help="entry files or folders (default: kb/, or $KVKB_KB_DIR)")
    p.add_argument("--no-matcher", action="store_true",
                   help="skip the kbmatch checks on each entry's samples (KB043, KB044)")
    p.add_argument("--codes", action="store_true", help="print the table of problem codes (Markdown) and exit")
    p.set_defaults(run=run)


def codes_table() -> str:
    """The Markdown table CONTRIBUTING.md carries (a test keeps the two equal)."""
    rows = ["| Code | Name | Remedy |", "| --- | --- | --- |"]
    rows += [f"| {c.code} | {c.name} | {c.remedy.replace('|', chr(92) + '|')} |" for c in CODES.values()]
    return "\n".join(rows) + "\n"


def run(args) -> int:
    if args.codes:
        sys.stdout.write(codes_table())
        return 0
    paths = args.paths or [kb_dir()]
    for path in paths:
        if not path.exists():
            return _usage(f"no such file or folder: {path}")
        if not (path.is_file() or path.is_dir()):
            return _usage(f"not a file or folder: {path}")
        if path.is_dir() and not entry_files(path):
            return _usage(f"no entries (*.yaml) in {path}")
    try:
        problems, count = lint_paths(paths, with_matcher=not args.no_matcher)
    except Exception as exc:  # a bug, not a bad entry: say so without a traceback (KVKB_DEBUG=1 shows it)
        if os.environ.get("KVKB_DEBUG"):
            raise
        print(f"kvkb lint: internal error, please report it: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    for p in problems:
        print(p.format())
    if problems:
        files = len({p.path for p in problems})
        print(f"\n{len(problems)} problem(s) in {files} file(s); {count} checked", file=sys.stderr)
        return 1
    print(f"{count} entr{'y' if count == 1 else 'ies'} checked, no problems", file=sys.stderr)
    return 0


def _usage(message: str) -> int:
    print(f"kvkb lint: {message}", file=sys.stderr)
    return 2
