"""What the last real run probed of each site interpreter (`envs.site`), kept for a dry run, which runs no
interpreter of the user's: running one runs its code (its sitecustomize, its framework's import)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from dlbench import atomic

# Beside Snakemake's own state in the working directory: a dry run reads it from where the real run wrote it.
STORE = Path(".snakemake") / "dlbench-site-probes.json"


def _identity(python: str) -> list | None:
    """The interpreter file as it is now (its real path and a digest of its bytes): another file, or the same
    one rebuilt or rewritten to run another build, is probed again; the same bytes written again are not."""
    try:
        real = os.path.realpath(python)
        digest = hashlib.sha256(Path(real).read_bytes()).hexdigest()
    except OSError:
        return None
    return [real, digest]


def remember(descriptions: Iterable[dict], store: Path = STORE) -> None:
    """Keep the probed descriptions, each with its interpreter's identity (atomically: a dry run beside a
    starting run reads the old file or the new one)."""
    kept = [{**d, "identity": _identity(d["python"])} for d in descriptions]
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(store, json.dumps(kept, indent=1))
    except OSError:  # a read-only working directory: the next dry run probes nothing and says so
        pass


def recall(store: Path = STORE) -> dict[tuple[str, str], dict]:
    """(environment, interpreter) -> the description the last run probed, where the interpreter is the same
    file still; unreadable or missing: nothing."""
    try:
        kept = json.loads(store.read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for d in kept if isinstance(kept, list) else []:
        if isinstance(d, dict) and d.get("identity") and d["identity"] == _identity(d.get("python", "")):
            out[(d["env"], d["python"])] = {k: v for k, v in d.items() if k != "identity"}
    return out
