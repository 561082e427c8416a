"""`kvkb lint [PATH...]`: schema and semantic checks; exit 0 clean, 1 problems, 2 usage."""

from __future__ import annotations

import sys
from pathlib import Path

from kvkb.lint import lint_paths
from kvkb.loader import kb_dir


def add_parser(sub) -> None:
    p = sub.add_parser("lint", help="check kb entries: numbered problems with file, line and remedy")
    p.add_argument("paths", nargs="*", type=Path, help="entry files or folders (default: kb/)")
    p.set_defaults(run=run)


def run(args) -> int:
    paths = args.paths or [kb_dir()]
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"kvkb lint: no such file or folder: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    problems, count = lint_paths(paths)
    for p in problems:
        print(p.format())
    files = len({p.path for p in problems})
    if problems:
        print(f"\n{len(problems)} problem(s) in {files} file(s); {count} checked", file=sys.stderr)
        return 1
    print(f"{count} entr{'y' if count == 1 else 'ies'} checked, no problems", file=sys.stderr)
    return 0
