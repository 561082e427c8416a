"""Load YAML with the C loader and keep where each value sits, so problems can name a line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

try:  # libyaml is an order of magnitude faster; fall back quietly where it is missing
    from yaml import CSafeLoader as SafeLoader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader  # type: ignore[assignment]

Path_ = tuple[str | int, ...]


@dataclass
class Located:
    data: Any
    # (key path) -> (line, column), both 1-based; the key's own position for mapping values
    marks: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    duplicate_keys: list[tuple[Path_, tuple[int, int]]] = field(default_factory=list)
    # literal block scalars (`key: |`): path -> (line of the value's first line, column of its
    # indentation), so a problem inside embedded code can point at its own line
    blocks: dict[Path_, tuple[int, int]] = field(default_factory=dict)

    def where_inside(self, path: Path_, line: int, column: int = 1) -> tuple[int, int]:
        """Position of line/column (1-based) inside the literal block at path; else where(path)."""
        if path in self.blocks and line >= 1:
            first, indent = self.blocks[path]
            return first + line - 1, indent + column - 1
        return self.where(path)

    def where(self, path: Path_) -> tuple[int, int]:
        """Position of the deepest known prefix of path (errors often point inside a value)."""
        for n in range(len(path), -1, -1):
            if path[:n] in self.marks:
                return self.marks[path[:n]]
        return (1, 1)


class YamlSyntaxError(Exception):
    def __init__(self, message: str, line: int, column: int):
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


def load(text: str) -> Located:
    """Parse text; raise YamlSyntaxError with a 1-based position on bad YAML."""
    try:
        _check_depth(text)
        node = yaml.compose(text, Loader=SafeLoader)
        data = yaml.load(text, Loader=SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = exc.problem or str(exc)
        if exc.context:
            problem = f"{problem} ({exc.context})"
        raise YamlSyntaxError(problem, line, col) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(str(exc), 1, 1) from None
    except RecursionError:
        raise YamlSyntaxError("nested too deeply", 1, 1) from None
    except (ValueError, OverflowError) as exc:  # e.g. 2024-13-45 resolves as a date and fails to build
        raise YamlSyntaxError(f"cannot build a value: {exc} (quote it to keep it a string)", 1, 1) from None
    located = Located(data)
    if node is not None:
        _walk(node, (), located, lines=text.splitlines())
    return located


MAX_DEPTH = 64  # entries nest 5 deep; libyaml's composer segfaults on ~100k levels, so refuse early


def _check_depth(text: str) -> None:
    # the event stream is flat (no recursion), so this is safe on any input
    depth = 0
    for event in yaml.parse(text, Loader=SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                raise YamlSyntaxError(f"nested more than {MAX_DEPTH} levels deep", mark.line + 1, mark.column + 1)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def _walk(node: yaml.Node, path: Path_, out: Located, done: set[int] | None = None, lines: Sequence[str] = ()) -> None:
    # Each node is walked once: an alias (*a) re-uses its anchor's node, so walking it again would
    # loop forever on a self-referencing anchor and take exponential time on nested aliases
    # ("billion laughs"). Paths reached through an alias fall back to the alias's own position.
    done = set() if done is None else done
    out.marks.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
    if id(node) in done:
        return
    done.add(id(node))
    if isinstance(node, yaml.ScalarNode) and node.style == "|":
        # a literal block: its text starts on the line after the `|`, at the block's indentation
        first = node.start_mark.line + 2
        indent = next((len(l) - len(l.lstrip(" ")) for l in lines[first - 1 : node.end_mark.line + 1] if l.strip()), 0)
        out.blocks[path] = (first, indent + 1)
    elif isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue  # complex keys never reach here: yaml.load rejects them first
            key = key_node.value
            child = path + (key,)
            pos = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if key in seen:
                out.duplicate_keys.append((child, pos))
            seen.add(key)
            out.marks[child] = pos  # PyYAML keeps the last of duplicate keys; so do we
            _walk(value_node, child, out, done, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out.marks[path + (i,)] = (item.start_mark.line + 1, item.start_mark.column + 1)
            _walk(item, path + (i,), out, done, lines)
