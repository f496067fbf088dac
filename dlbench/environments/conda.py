"""The conda files, workflow/envs/<env>.yaml (for `snakemake --sdm conda`), generated from the same pins as the
built environments, so that both ways install the same versions (`dlbench envs conda [--check]`)."""

from __future__ import annotations

import re
from pathlib import Path

from dlbench.environments import pins
from dlbench.frameworks import registry
from dlbench.paths import CONDA_ENVS

# The conda files' Python: the version dlbench is developed and tested on (pyproject's requires-python).
CONDA_PYTHON = "3.11"
# What the runner itself needs where a job runs in the framework's conda environment (--sdm conda):
# the monitor (psutil, NVML). Their versions are those of envs/base.txt.
RUNNER_PACKAGES = ("psutil", "nvidia-ml-py", "pyyaml")
# A pins file line `# conda: SPEC` asks conda for a package pip cannot give (a compiler, a shared library).
CONDA_LINE = re.compile(r"^#\s*conda:\s*(\S+)")
# The second line of every conda file. Its words are part of the file, which Snakemake digests under --sdm conda
# (its software-env trigger): new words would rerun every point there. Kept as they were first written.
USED_BY = "# Used by `snakemake --sdm conda` (each point's environment; see dlbench/environments/build.py)."


def _pins(path: Path) -> tuple[list[str], list[str], list[str]]:
    """(comment lines, conda specs, pip requirements) of a pins file."""
    comments, conda, pip = [], [], []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if m := CONDA_LINE.match(stripped):
            conda.append(m.group(1))
        elif stripped.startswith("#"):
            comments.append(stripped)
        elif stripped:
            pip.append(stripped)
    return comments, conda, pip


def _runner_pins() -> list[str]:
    _, _, base = _pins(pins.pins_file("base"))
    found = {re.split(r"[=<>!~\[ ]", p, maxsplit=1)[0].lower(): p for p in base}
    return [found[name] for name in RUNNER_PACKAGES]


def conda_yaml(env: str) -> str:
    """workflow/envs/<env>.yaml as generated from envs/<env>.txt: Python and the `# conda:` packages from conda-forge,
    every pin through pip (one version everywhere), and for a framework environment the runner's packages."""
    comments, conda, pip = _pins(pins.pins_file(env))
    if env != "base":
        pip += [p for p in _runner_pins() if p not in pip]
    lines = [f"# Generated from envs/{env}.txt by `dlbench envs conda`: edit the pins, not this file.", USED_BY,
             *comments,
             f"name: dlbench-{env}", "channels: [conda-forge]", "dependencies:", f"  - python={CONDA_PYTHON}",
             *(f"  - {spec}" for spec in conda), "  - pip", "  - pip:", *(f"      - {req}" for req in pip)]
    return "\n".join(lines) + "\n"


def conda_envs() -> list[str]:
    return ["base", *registry.env_names()]


def write_conda(check: bool = False) -> list[str]:
    """Write every workflow/envs/<env>.yaml from its pins (check: only compare); the names of those that differed."""
    stale = []
    for env in conda_envs():
        path = CONDA_ENVS / f"{env}.yaml"
        text = conda_yaml(env)
        if not path.exists() or path.read_text() != text:
            stale.append(env)
            if not check:
                path.write_text(text)
    return stale
