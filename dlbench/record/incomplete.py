"""Points that a killed Snakemake's jobs finished: their measurements kept, not measured again.

Snakemake marks a job's outputs incomplete when it starts the job and removes the marks when it sees the job end.
A Snakemake killed alone (the OOM killer, a lost login) leaves its jobs running; one that finishes publishes its
raw measurement whole (measurement.json, the train rule's output, last: dlbench.record.raw) and its record, but
nobody removes the marks, and the next run (`rerun-incomplete`, the default profile's) would measure the point
again. A measurement is written whole or not at all, so a whole one whose files agree with it under such marks is a
finished point: its marks are removed (`keep_finished`), as Snakemake would have done.

The marks are Snakemake's file persistence: one file per output under .snakemake/incomplete/, named by the output
path in URL-safe base64, cut into pieces of the file system's longest name (all but the last led by "@").
Standard library only.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path

from dlbench.record import raw

MARKS = Path(".snakemake") / "incomplete"


def _output_of(mark: Path, root: Path) -> str | None:
    """The output path a mark stands for (None: not a mark, such as Snakemake's migration note)."""
    pieces = [part.removeprefix("@") for part in mark.relative_to(root).parts]
    try:
        return base64.urlsafe_b64decode("".join(pieces)).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def marked(workdir: str | os.PathLike = ".") -> dict[str, Path]:
    """Output path -> its incomplete mark, for every mark in workdir."""
    root = Path(workdir) / MARKS
    found = {}
    for mark in root.rglob("*") if root.is_dir() else ():
        output = _output_of(mark, root) if mark.is_file() else None
        if output is not None:
            found[output] = mark
    return found


def keep_finished(workdir: str | os.PathLike = ".") -> list[str]:
    """Remove the incomplete marks of every point folder whose measurement is whole (see the module's doc); the
    folders, as Snakemake names them. Only while no run of this workflow is alive (its jobs would be unfinished)."""
    by_folder: dict[str, list[Path]] = {}
    for output, mark in marked(workdir).items():
        by_folder.setdefault(os.path.dirname(output), []).append(mark)
    kept = []
    for folder, marks in sorted(by_folder.items()):
        if raw.whole(Path(workdir) / folder):
            for mark in marks:
                mark.unlink(missing_ok=True)
            kept.append(folder)
    return kept
