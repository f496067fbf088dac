"""Every wait a test starts is bounded: a hung subprocess fails its test with a timeout, it does not run into CI's
kill (which would lose the durations table). pytest-timeout bounds each test as a whole (pyproject.toml); this
checks the waits themselves, in the tests and in the scenarios they run (dlbench/testing)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from dlbench.paths import ROOT

# subprocess.<name>(...) waits for the command to end.
SUBPROCESS_WAITS = {"run", "call", "check_call", "check_output"}
# <process>.<name>(...) waits for it: Popen.wait(timeout), Popen.communicate(input, timeout).
METHOD_WAITS = {"wait": 0, "communicate": 1}
SOURCES = sorted([*ROOT.glob("tests/*.py"), *ROOT.glob("dlbench/testing/*.py")])


def unbounded_waits(source: str) -> list[tuple[int, str]]:
    """(line, call) of every subprocess call or process wait in `source` that names no timeout."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        name, owner = node.func.attr, node.func.value
        bounded = any(k.arg == "timeout" for k in node.keywords)
        if isinstance(owner, ast.Name) and owner.id == "subprocess" and name in SUBPROCESS_WAITS:
            if not bounded:
                found.append((node.lineno, f"subprocess.{name}"))
        elif name in METHOD_WAITS and not (isinstance(owner, ast.Name) and owner.id == "os"):
            if not bounded and len(node.args) <= METHOD_WAITS[name]:
                found.append((node.lineno, f".{name}()"))
    return found


def test_the_checker_finds_an_unbounded_wait_and_passes_a_bounded_one():
    code = ("import subprocess, os\n"
            "subprocess.run(['true'])\n"
            "subprocess.run(['true'], timeout=5)\n"
            "p = subprocess.Popen(['true'])\n"
            "p.wait()\n"
            "p.wait(5)\n"
            "p.communicate()\n"
            "p.communicate(None, 5)\n"
            "p.communicate(timeout=5)\n"
            "os.wait()\n")
    assert unbounded_waits(code) == [(2, "subprocess.run"), (5, ".wait()"), (7, ".communicate()")]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_subprocess_and_wait_names_a_timeout(path: Path):
    found = unbounded_waits(path.read_text())
    assert not found, f"{path.relative_to(ROOT)}: waits without a timeout at " + ", ".join(
        f"line {line} ({call})" for line, call in found)
