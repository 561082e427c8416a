"""`kvkb` — one module per subcommand under kvkb.cli; this only dispatches."""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = {
    "lint": "kvkb.cli.lint",
    "new": "kvkb.cli.new",
    "fit": "kvkb.cli.fit",
    "verify": "kvkb.cli.verify",
    "doctor": "kvkb.cli.doctor",
    "index": "kvkb.cli.index",
    "atlas": "kvkb.cli.atlas",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kvkb", description="vLLM KV-cache and OOM error knowledge base")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue  # a subcommand not built yet is simply absent from --help
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
