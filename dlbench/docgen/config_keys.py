"""docs/config.md, every key of the config explained, written from the schema's own descriptions.

The schema is the one home of what a key means: this module only lays it out, and a test compares the
page with what it would write, so the two cannot drift apart.

    python -m dlbench.docgen.config_keys            write docs/config.md (`dlbench docs` runs it)
    python -m dlbench.docgen.config_keys --check    exit 1 if docs/config.md differs from the schema
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from dlbench.docgen import DOCS, GENERATED, page_command
from dlbench.paths import SCHEMA
from dlbench.study.config import load_schema

PAGE = DOCS / "config.md"
SOURCE = "workflow/schemas/config.schema.yaml"
INTRO = f"""\
{GENERATED.format(source=SOURCE)}

# The config

A study is one YAML file ([Studies](studies.md) describes those that come with dlbench in `config/`).
Run another with `snakemake --cores 8 --configfile config/paper.yaml`, or override one key with
`--config repeats=3`. A wrong key, type or value stops the run before any job starts, with one line
that names the key and what is allowed. `dlbench validate FILE` checks a config without running it.

Every key below, as `{SOURCE}` describes it (this page is written from the
schema by `dlbench docs`: edit the schema, not this page). `<name>` stands for a name
you choose; a key under `studies.<name>` means what the top-level key of the same name means.
What the presets, cross-application, tuning, the compute libraries and the threads mean together is in
[Studies](studies.md).
"""


@dataclass(frozen=True)
class Key:
    path: str
    kind: str
    default: str
    description: str


def _resolve(node: dict, schema: dict) -> tuple[dict, str | None]:
    """A `$ref` to a definition followed (the node's own description kept); the top-level key it names, if any."""
    ref = node.get("$ref")
    if not ref:
        return node, None
    parts = ref.removeprefix("#/").split("/")
    if parts[0] == "properties":
        return node, parts[-1]
    target = schema
    for part in parts:
        target = target[part]
    merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return merged, None


def _kind(node: dict, schema: dict) -> str:
    """What a value may be, in words: its type, its range, the values allowed."""
    node, top = _resolve(node, schema)
    if top:
        return f"as `{top}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{json.dumps(v) if not isinstance(v, str) else v}`" for v in node["enum"])
    if "oneOf" in node:
        return " or ".join(_kind(option, schema) for option in node["oneOf"])
    kind = node.get("type", "")
    if isinstance(kind, list):
        kind = " or ".join(k for k in kind)
    if kind == "array":
        return "list of " + _kind(node.get("items", {}), schema)
    if kind in ("integer", "number"):
        bounds = [f"≥ {node['minimum']}" if "minimum" in node else "",
                  f"> {node['exclusiveMinimum']}" if "exclusiveMinimum" in node else "",
                  f"≤ {node['maximum']}" if "maximum" in node else "",
                  f"< {node['exclusiveMaximum']}" if "exclusiveMaximum" in node else ""]
        return " ".join([kind, *(b for b in bounds if b)])
    if kind == "object" and "properties" not in node and isinstance(node.get("additionalProperties"), dict):
        return "mapping of " + _kind(node["additionalProperties"], schema)
    return kind or "any"


def _code(default: str) -> str:
    return f"`{default}`" if default and not default.startswith("(") else default


def _words(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def keys(schema: dict | None = None) -> Iterator[Key]:
    """Every key of the schema, depth first, with its kind, its default and its description."""
    schema = schema or load_schema(SCHEMA)

    def walk(node: dict, prefix: str) -> Iterator[Key]:
        node, top = _resolve(node, schema)
        if top:
            return  # described where it is defined, at the top level
        for name, sub in node.get("properties", {}).items():
            path = f"{prefix}{name}"
            resolved, top = _resolve(sub, schema)
            default = json.dumps(resolved["default"]) if "default" in resolved else ""
            default = "(required)" if name in node.get("required", ()) else default
            said = f"this study's own `{top}`" if top else resolved.get("description", "")
            yield Key(path, _kind(sub, schema), default, _words(said))
            yield from walk(resolved, f"{path}.")
        extra = node.get("additionalProperties")
        if isinstance(extra, dict) and not node.get("properties"):
            yield from walk(extra, f"{prefix}<name>.")

    yield from walk(schema, "")


def render(schema: dict | None = None) -> str:
    schema = schema or load_schema(SCHEMA)
    lines = [INTRO, _words(schema["description"]), "", "| key | value | default | what it does |",
             "| --- | --- | --- | --- |"]
    lines += [f"| `{k.path}` | {k.kind} | {_code(k.default)} | {k.description} |" for k in keys(schema)]
    return "\n".join(lines) + "\n"


def undescribed(schema: dict | None = None) -> list[str]:
    """Keys the schema leaves without a description (each should have one)."""
    return [k.path for k in keys(schema) if not k.description]


def main(argv: list[str] | None = None) -> int:
    return page_command(argv, "dlbench.docgen.config_keys", __doc__, PAGE, render, SOURCE)


if __name__ == "__main__":
    sys.exit(main())
