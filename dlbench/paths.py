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
REPORT = WORKFLOW / "report"
# The published study's figures (GTDLBench), which the charts and findings compare with.
PUBLISHED_CSV = PACKAGE / "reference" / "gtdlbench_results.csv"


def cache_root() -> Path:
    """Where framework environments and compile caches are kept, shared by every clone: $DLBENCH_CACHE."""
    return Path(os.environ.get("DLBENCH_CACHE") or Path.home() / ".cache" / "dlbench").expanduser()
