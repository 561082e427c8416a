"""`kvkb index`: rebuild kbmatch's precompiled index now (it also rebuilds itself when kb/ changes)."""

from __future__ import annotations

import sys
from pathlib import Path


def add_parser(sub) -> None:
    p = sub.add_parser("index", help="rebuild kbmatch's match index from kb/")
    p.add_argument("--kb", type=Path, default=None, help="kb folder (default: KVKB_KB_DIR or the checkout's kb/)")
    p.set_defaults(run=run)


def run(args) -> int:
    from kvkb.codes import EntryError
    from kvkb.matcher import index

    directory = args.kb or Path(index.kb_dir())
    if not directory.is_dir():
        print(f"kvkb index: no such folder: {directory}", file=sys.stderr)
        return 2
    try:
        built = index.load(directory, rebuild=True)
    except EntryError as exc:
        print(str(exc), file=sys.stderr)
        print(f"\nkvkb index: not built: {len(exc.problems)} problem(s) in the entries above", file=sys.stderr)
        return 2
    path, _ = index.index_paths(directory)
    print(f"indexed {len(built['entries'])} entries, {len(built['signatures'])} signatures -> {path}", file=sys.stderr)
    return 0
