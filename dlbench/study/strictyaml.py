"""Reading a study's YAML strictly: a key given twice, or aliases that multiply into a huge document, are
refused with one line (PyYAML keeps the last of two keys without a word, and expands nested aliases into
as many copies as they name: a few lines can stand for billions of values)."""

from __future__ import annotations

import os

import yaml

MAX_NODES = 1_000_000  # values a config may stand for once its aliases are expanded


class YamlProblem(ValueError):
    """The message is one line naming the place and the fix."""


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """How many values the node stands for with every alias written out (each node counted once per use)."""
    if id(node) in memo:
        return memo[id(node)]
    memo[id(node)] = 1  # a recursive alias: counted once, then refused by the constructor
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    else:
        size = 1
    memo[id(node)] = min(size, 10 * MAX_NODES)
    return memo[id(node)]


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise YamlProblem(f"line {key_node.start_mark.line + 1}, column {key_node.start_mark.column + 1}: "
                                  f"a key that is a {type(key).__name__} ({key!r}); a key is a name: write it as one")
            if key in seen:
                raise YamlProblem(f"line {key_node.start_mark.line + 1}: the key {key!r} is given twice (first on line "
                                  f"{seen[key] + 1}); YAML would keep only the last one: remove one of them")
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def _yaml_error(exc: yaml.YAMLError) -> str:
    """PyYAML's complaint in one line, with the line and column where it found the problem (and where what it was
    reading began: an unclosed bracket is found at the end)."""
    def at(mark) -> str:
        return f"line {mark.line + 1}, column {mark.column + 1}"

    found, began = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    text = f"{at(found)}: {problem}" if found is not None else problem
    if context:
        text += f" ({context}{' at ' + at(began) if began is not None else ''})"
    return text


def load(text: str, where: str = "the config"):
    """The document in `text`, or YamlProblem."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise YamlProblem(f"{where} is not valid YAML: {_yaml_error(exc)}") from None
    if node is None:
        return None
    size = _expanded_size(node, {})
    if size > MAX_NODES:
        raise YamlProblem(f"{where}'s aliases (*name) expand to more than {MAX_NODES:,} values; write the "
                          "lists out, or use fewer nested aliases")
    loader = _Loader(text)
    try:
        return loader.construct_document(node)
    except YamlProblem as exc:
        raise YamlProblem(f"{where}, {exc}") from None
    finally:
        loader.dispose()


def load_file(path: str | os.PathLike):
    with open(path) as fh:
        return load(fh.read(), str(path))
