"""The findings of 20,000 records: how long one render takes, and how many times it computes the points table.

    .venv/bin/python bench/findings_render.py [--points 20000] [--runs 3]

The records are the large hand-made study in memory (dlbench.testing.study.large_frames). Each run renders
findings.md in this process (findings.render, as the findings rule's script calls it) and counts the calls of
frames.points() that computed the table rather than copying one already computed. The dlbench measured is the
one on the path: run it once with PYTHONPATH set to another checkout to compare two versions; the text of
both renders is written to $DLBENCH_BENCH_DIR/findings_render/<commit>.md to be compared.
"""

from __future__ import annotations

import argparse
import time

import _common as c

from dlbench import atomic
from dlbench.analysis import frames
from dlbench.record import provenance
from dlbench.testing import study


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from dlbench.present import findings

    runs, curves, _ = study.large_frames(args.points)
    real, computed = frames.points, []

    def counting(frame):
        if not all(col in frame.columns for col in getattr(frames, "DERIVED", ("-",))):
            computed.append(len(frame))
        return real(frame)

    for module in (frames, *_users()):
        module.points = counting
    rows, text = [], ""
    for _ in range(args.runs):
        computed.clear()
        busy = c.busy_cores(1.0)
        t0 = time.perf_counter()
        text = findings.render(runs, curves)
        rows.append({"render_s": time.perf_counter() - t0, "points_computed": len(computed),
                     "others_busy_cores": busy, "load1": c.load1()})
    out = c.WORK / "findings_render"
    out.mkdir(parents=True, exist_ok=True)
    commit = (provenance.dlbench_build()["dlbench_commit"] or "unknown")[:10]
    atomic.write_text(out / f"{commit}.md", text)
    c.summary(f"findings.render of {args.points} records, dlbench {commit} ({c.machine_line()}); text in "
              f"{out / (commit + '.md')}", rows)
    return 0


def _users():
    """The modules that took `points` from frames by name (their own reference is the one they call)."""
    import importlib

    for name in ("present.findings", "analysis.summary", "analysis.published", "analysis.observations",
                 "analysis.joint_grids", "analysis.comparison"):
        module = importlib.import_module(f"dlbench.{name}")
        if hasattr(module, "points"):
            yield module


if __name__ == "__main__":
    raise SystemExit(main())
