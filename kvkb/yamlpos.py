"""Load YAML with the C loader and keep where each value sits, so problems can name a line."""

from __future__ import annotations

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
    located = Located(data)
    if node is not None:
        _walk(node, (), located)
    return located


def _walk(node: yaml.Node, path: Path_, out: Located) -> None:
    out.marks.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = key_node.value
            child = path + (key,)
            pos = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if key in seen:
                out.duplicate_keys.append((child, pos))
            seen.add(key)
            out.marks[child] = pos
            _walk(value_node, child, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, path + (i,), out)
