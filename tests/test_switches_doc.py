"""docs/reproduction.md's table of switches names, for every framework, each value of a run axis its users must opt
into (every value the registry accepts beside the framework's default): a new switch is an axis and a row."""

from __future__ import annotations

import re

from dlbench.frameworks import registry
from dlbench.paths import ROOT

SWITCH_AXES = ("library", "interop_threads", "compile", "precision", "memory_format")  # the device is not a switch


def rows_of(text: str, label: str) -> str:
    section = text.split("## Each framework as its users get it: the switches", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith(f"| {label} |"))


def test_every_opt_in_value_of_every_framework_is_in_the_switch_table():
    text = (ROOT / "docs" / "reproduction.md").read_text()
    for fw in registry.FRAMEWORKS.values():
        rows = rows_of(text, fw.label)
        assert rows, f"no row for {fw.label}"
        for axis in SWITCH_AXES:
            accepted = fw.accepts.get(axis, ())
            if isinstance(accepted, registry.Counts):
                assert f"`{axis}`" in rows, (fw.name, axis)
                continue
            for value in fw.values(axis)[1:]:  # the first is the default or the natural value: not an opt-in
                assert re.search(rf"`[^`|]*\b{value}\b[^`|]*`", rows), (fw.name, axis, value)

