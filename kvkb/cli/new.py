"""`kvkb new <id> [--kb DIR] [--force]`: write a commented skeleton entry that fails lint until filled."""

from __future__ import annotations

import sys
from pathlib import Path

from kvkb.loader import kb_dir
from kvkb.scaffold import ID_RULE, skeleton, valid_id


def add_parser(sub) -> None:
    p = sub.add_parser(
        "new",
        help="start a new entry: writes kb/<id>.yaml, a commented skeleton with TODOs",
        description="Write kb/<id>.yaml: every required key with a comment and a TODO. "
        "`kvkb lint` fails until every TODO is filled. Exit 0 written, 1 file exists, 2 usage.",
    )
    p.add_argument("id", help="the entry id, kebab-case; it is also the file name")
    p.add_argument("--kb", type=Path, default=None, help="the kb folder (default: kb/, or $KVKB_KB_DIR)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    p.set_defaults(run=run)


def run(args) -> int:
    if not valid_id(args.id):
        print(f"kvkb new: bad id '{args.id}': {ID_RULE}", file=sys.stderr)
        return 2
    folder = args.kb or kb_dir()
    if not folder.is_dir():
        print(f"kvkb new: no such folder: {folder} (pass --kb DIR)", file=sys.stderr)
        return 2
    path = folder / f"{args.id}.yaml"
    try:
        # 'x' refuses an existing file atomically; --force overwrites
        with path.open("w" if args.force else "x", encoding="utf-8") as fh:
            fh.write(skeleton(args.id))
    except FileExistsError:
        print(f"kvkb new: {path} exists; edit it, or pass --force to overwrite it", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"kvkb new: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(path)
    print(f"Fill every TODO, then run: kvkb lint {path}", file=sys.stderr)
    return 0
