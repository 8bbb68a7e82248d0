"""YAML loading for every file gicomm reads (configs, experiments, platforms, baselines): a
malformed file, a key given twice in one mapping, or a document that aliases (&a/*a) expand beyond
what a configuration can need fails with file:line and what is wrong, before anything walks it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from gicomm.errors import ConfigError

# Values (scalars, lists, mappings) a document may hold once aliases are expanded. The largest file
# gicomm ships expands to a few thousand; a billion-laughs document to billions.
MAX_EXPANDED = 200_000


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML keeps the last)."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # a merge (<<) may be overridden by the mapping's own keys
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the constructor reports it
                continue
            if first is not None:
                raise ConfigError(
                    f"{where(key_node)}: key {key!r} appears twice in one mapping (first at "
                    f"line {first.start_mark.line + 1}); remove one"
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def where(node: Node) -> str:
    m = node.start_mark
    return f"{m.name}:{m.line + 1}:{m.column + 1}"


def expanded_size(node: Node, memo: dict[int, int], path: set[int]) -> int:
    """How many values `node` stands for once every alias is expanded (computed without
    expanding: a node reached through several aliases is counted from its memo)."""
    key = id(node)
    if key in memo:
        return memo[key]
    if key in path:
        raise ConfigError(f"{where(node)}: an alias refers to a node that contains it")
    path.add(key)
    if isinstance(node, MappingNode):
        children = [n for kv in node.value for n in kv]
    elif isinstance(node, SequenceNode):
        children = list(node.value)
    else:
        children = []
    size = 1 + sum(expanded_size(c, memo, path) for c in children)
    path.discard(key)
    memo[key] = size
    return size


def _check_expansion(root: Node, limit: int) -> None:
    memo: dict[int, int] = {}
    total = expanded_size(root, memo, set())
    if total <= limit:
        return
    # Name the innermost key whose value is too large.
    node, key_node = root, None
    while True:
        children: list[tuple[Node | None, Node]] = []
        if isinstance(node, MappingNode):
            children = [(k, v) for k, v in node.value]
        elif isinstance(node, SequenceNode):
            children = [(None, v) for v in node.value]
        big = next(((k, v) for k, v in children if memo[id(v)] > limit), None)
        if big is None:
            break
        key_node = big[0] or key_node
        node = big[1]
    at = where(key_node) if key_node is not None else where(root)
    name = f" {key_node.value!r}" if isinstance(key_node, ScalarNode) else ""
    raise ConfigError(
        f"{at}: the value of key{name} expands to {memo[id(node)]:,} values through YAML aliases "
        f"(&anchor / *alias); a gicomm document may hold at most {limit:,}"
    )


def load_yaml_text(text: str, name: str, limit: int = MAX_EXPANDED) -> Any:
    loader = _StrictLoader(text)
    loader.name = name
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, limit)
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        raise ConfigError(f"{at}: malformed YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name}: malformed YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{name}: malformed YAML: nested too deeply") from None
    finally:
        loader.dispose()


def load_yaml(path: str | Path, limit: int = MAX_EXPANDED) -> Any:
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a YAML file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 text (byte {exc.start})") from None
    return load_yaml_text(text, str(path), limit)
