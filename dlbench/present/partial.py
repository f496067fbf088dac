"""A look at a study before it ends: its results page, findings, charts and tables from the points finished so far.

`snakemake partial` draws them into results/partial/ without training anything or waiting for the rest (only
for the point being measured on this node, as all heavy work does: dlbench.node.locks.heavy_work). It
reads only finished records (a record is written whole or not at all, dlbench.record.store), writes nothing the
study itself writes, and says "k of N points" in the findings and under every chart's title, so that a
partial chart is never taken for the study's.

    results/partial/index.html                     the results page (dlbench.present.results_page), headed by k of N
    results/partial/{runs,curves,samples}.parquet   the finished points' tables
    results/partial/summary.parquet                the summary of them; runs.csv and summary.csv
    results/partial/charts/                        every chart with data, its subtitle saying k of N; index.json
    results/partial/findings.md                    the findings, headed by k of N
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from dlbench import atomic
from dlbench.node import locks
from dlbench.record import store

# Standard library only at the top: the workflow imports this module every time it starts.


class NothingFinished(RuntimeError):
    """No point of the study has finished yet: there is nothing to draw."""


def finished(metrics_paths: list[str]) -> list[str]:
    """The study's records that exist now (one stat each)."""
    return [path for path in metrics_paths if os.path.exists(path)]


def state(metrics_paths: list[str]) -> str:
    """A digest of which records exist and when each was written: the rule runs again when it changes."""
    h = hashlib.blake2b(digest_size=8)
    for path in finished(metrics_paths):
        h.update(f"{path} {os.stat(path).st_mtime_ns}\n".encode())
    return h.hexdigest()


def note(k: int, n: int) -> str:
    return f"{k} of {n} points (drawn while the study was unfinished)"


def draw(metrics_paths: list[str], out: dict, *, membership=None, tuning=None, peak_path=None,
         published=None, verdicts=None, study_file=None) -> int:
    """The page, findings, charts and tables from the records of metrics_paths that exist; how many there were.
    `out`: the rule's outputs by name (runs, curves, samples, summary, runs_csv, summary_csv, findings, charts,
    page).
    `verdicts`: the config's equivalence margins (stats.Margins.from_config); `study_file`: the config file the
    study ran unchanged (findings.render)."""
    done = [path for path in finished(metrics_paths) if store.read_or_skip(path) is not None]
    k, n = len(done), len(metrics_paths)
    if not k:
        raise NothingFinished(f"none of the study's {n} points has finished yet: nothing to draw (run `snakemake "
                              "partial` again once a point has finished)")
    # Drawing loads the CPU for seconds to minutes, and partial runs while the study measures: as heavy work it
    # waits for the point being measured on this node (at most measurement.lock_timeout_s, then LockTimeout).
    with locks.heavy_work(locks.node_lock(), "the partial report"):
        _draw(done, n, out, membership=membership, tuning=tuning, peak_path=peak_path, published=published,
              verdicts=verdicts, study_file=study_file)
    return k


def _draw(done: list[str], n: int, out: dict, *, membership, tuning, peak_path, published, verdicts,
          study_file) -> None:
    """draw's work, on the records `done` of a study of n points."""
    import pandas as pd  # here, not above: the workflow imports this module (state) every time it starts

    from dlbench.aggregate import collect
    from dlbench.aggregate.collect import write_parquet
    from dlbench.analysis import stats
    from dlbench.analysis.summary import summary_table
    from dlbench.present import findings, results_page, tables_csv
    from dlbench.present.charts.draw import draw_all

    k = len(done)
    peak = peak_path if peak_path and Path(peak_path).exists() else None
    runs = collect.aggregate(done, out["runs"], out["curves"], out["samples"], membership=membership,
                             peak_path=peak, tuning=tuning)
    line = note(k, n)
    index = draw_all(out["runs"], out["curves"], out["samples"], out["charts"], published=published, subtitle=line)
    reference = pd.read_csv(published) if published and Path(published).exists() else None
    margins = stats.Margins.from_config({"verdicts": verdicts})
    text = findings.render(runs, pd.read_parquet(out["curves"]), reference, margins, index["not_drawn"],
                           study_file)
    atomic.write_text(out["findings"], headed(text, k, n))
    write_parquet(summary_table(runs), out["summary"])
    tables_csv.write(out["runs"], out["runs_csv"])
    tables_csv.write(out["summary"], out["summary_csv"])
    # the points' own folders are the study's: results/runs/, beside results/partial/
    results_page.write(Path(out["page"]).parent, out["page"], runs_root=Path(out["page"]).parent.parent / "runs",
                       title="Results so far", note=f"Partial: drawn from {line}.")


def headed(text: str, k: int, n: int) -> str:
    """The findings with k of N said right under their title."""
    head, _, rest = text.partition("\n")
    warning = (f"\n**Partial: drawn from {k} of {n} points**; the other {n - k} had not finished when this was "
               "written, so every count, mean and verdict below is of the finished points only.\n")
    return f"{head}\n{warning}{rest}" if head.startswith("#") else f"{warning}\n{text}"
