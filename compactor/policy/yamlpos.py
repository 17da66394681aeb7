"""Load YAML into plain Python values while remembering where every value was written.

We compose the node graph with PyYAML's SafeLoader and convert it ourselves, so that we can (a) record
a 1-based line/col per JSON path, (b) reject duplicate keys, and (c) refuse hostile input (alias bombs,
deep nesting, huge files) with a clear error instead of exhausting memory.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

import yaml

MAX_FILE_BYTES = 5 * 2**20
MAX_DEPTH = 64
MAX_NODES = 200_000


@dataclass
class YamlProblem(Exception):
    """Why a YAML file could not be loaded: a code and a message at line:col, and a hint."""

    code: str
    message: str
    line: int = 1
    col: int = 1
    hint: str | None = None
    #: the source lines around the position, a caret under the column (syntax errors)
    context: str = ""


@dataclass
class Located:
    """A loaded document plus positions: json path ('tables[0].compaction') -> (line, col)."""

    value: Any
    positions: dict[str, tuple[int, int]] = field(default_factory=dict)

    def pos(self, path: str) -> tuple[int, int]:
        """Position of path or of its nearest recorded ancestor."""
        while True:
            if path in self.positions:
                return self.positions[path]
            if not path:
                return (1, 1)
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""


def join_path(base: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{base}[{key}]"
    return f"{base}.{key}" if base else str(key)


class _Converter:
    def __init__(self) -> None:
        self.positions: dict[str, tuple[int, int]] = {}
        self.nodes = 0
        self.duplicates: list[YamlProblem] = []

    def convert(self, node: yaml.Node, path: str, depth: int, at: Any = None) -> Any:
        """``at``: inside an alias, every value is placed at the alias, not at the anchor's text."""
        at = getattr(node, "alias_mark", None) or at
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise YamlProblem("yaml_too_large", f"document expands to more than {MAX_NODES} values "
                              "(alias/anchor bomb?)", node.start_mark.line + 1, node.start_mark.column + 1,
                              "remove recursive or repeated anchors")
        if depth > MAX_DEPTH:
            raise YamlProblem("yaml_too_deep", f"nesting deeper than {MAX_DEPTH} levels",
                              node.start_mark.line + 1, node.start_mark.column + 1)
        mark = at or node.start_mark
        self.positions.setdefault(path, (mark.line + 1, mark.column + 1))
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for k_node, v_node in node.value:
                if k_node.tag == "tag:yaml.org,2002:merge":
                    raise YamlProblem("yaml_merge_key", "YAML merge keys (<<) are not supported",
                                      k_node.start_mark.line + 1, k_node.start_mark.column + 1,
                                      "use project or file `defaults` instead")
                key = self.convert(k_node, path + ".<key>", depth + 1, at)
                if not isinstance(key, (str, int, float, bool)) or key is None:
                    raise YamlProblem("yaml_bad_key", f"mapping keys must be strings, got {key!r}",
                                      k_node.start_mark.line + 1, k_node.start_mark.column + 1)
                key = str(key) if not isinstance(key, str) else key
                child = join_path(path, key)
                if key in out:
                    self.duplicates.append(YamlProblem(
                        "duplicate_key", f"duplicate key {key!r}", k_node.start_mark.line + 1,
                        k_node.start_mark.column + 1, "each key may appear once in a mapping"))
                    continue
                v_mark, k_mark = (at, at) if at is not None else (v_node.start_mark, k_node.start_mark)
                self.positions[child] = (v_mark.line + 1, v_mark.column + 1)
                self.positions.setdefault(child + ".<keypos>", (k_mark.line + 1, k_mark.column + 1))
                out[key] = self.convert(v_node, child, depth + 1, at)
            self.positions.pop(path + ".<key>", None)
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.convert(v, join_path(path, i), depth + 1, at) for i, v in enumerate(node.value)]
        value = yaml.SafeLoader.construct_scalar_value(node)
        # YAML turns 2024-01-01 into a date; policies treat every such value as text
        return value.isoformat() if isinstance(value, (datetime.date, datetime.datetime)) else value


def _construct_scalar(node: yaml.ScalarNode) -> Any:
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


yaml.SafeLoader.construct_scalar_value = staticmethod(_construct_scalar)


# PyYAML ships no type information (and compactor does not depend on types-PyYAML): its SafeLoader is Any
class _AliasPositionLoader(yaml.SafeLoader):  # type: ignore[misc]
    """Gives an alias (``*x``) its own position instead of its anchor's, so errors point at the use."""

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = super().compose_node(parent, index)
            clone = type(node)(node.tag, node.value, event.start_mark, event.end_mark)
            clone.alias_mark = event.start_mark
            return clone
        return super().compose_node(parent, index)


def load_yaml(text: str) -> tuple[Located, list[YamlProblem]]:
    """Parse YAML text. Raises YamlProblem for syntax errors and hostile input; returns duplicate-key
    problems separately (they do not stop validation)."""
    if len(text.encode("utf-8", "ignore")) > MAX_FILE_BYTES:
        raise YamlProblem("file_too_large", f"file is larger than {MAX_FILE_BYTES // 2**20} MiB",
                          hint="split policies into several files")
    try:
        node = yaml.compose(text, Loader=_AliasPositionLoader)
    except yaml.MarkedYAMLError as e:
        from compactor.policy.yaml_errors import explain, source_context

        found = explain(e, text)
        raise YamlProblem("yaml_syntax", found.message, found.line, found.col, found.hint,
                          source_context(text, found.line, found.col)) from None
    except yaml.YAMLError as e:
        raise YamlProblem("yaml_syntax", str(e)) from None
    except RecursionError:
        raise YamlProblem("yaml_too_deep", "nesting too deep to parse") from None
    if node is None:
        return Located(None, {"": (1, 1)}), []
    conv = _Converter()
    try:
        value = conv.convert(node, "", 0)
    except RecursionError:
        raise YamlProblem("yaml_too_deep", "nesting too deep to parse") from None
    except yaml.constructor.ConstructorError as e:
        mark = e.problem_mark
        raise YamlProblem("yaml_syntax", str(e.problem), (mark.line + 1) if mark else 1,
                          (mark.column + 1) if mark else 1) from None
    return Located(value, conv.positions), conv.duplicates
