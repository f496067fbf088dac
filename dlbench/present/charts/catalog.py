"""The study's charts by name, each registered once (its report category, title and drawing), the files they
are saved as, and the index of a folder of them (which were drawn, which not and why).

Standard library only: the workflow reads this list every time it starts (dlbench.present.charts.draw, which draws
them, imports Altair).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# Each chart's files: a page of its own (Vega inlined), the drawing (SVG, PNG, PDF) and its Vega spec, data computed
# (the results page draws every chart from it, with one copy of Vega for them all).
FORMATS = ("html", "svg", "png", "pdf", "vega.json")
# A folder of charts holds the charts the study has data for, and this index of them: {"drawn": [name, ...],
# "not_drawn": {name: why, ...}} (dlbench.present.charts.draw.draw_all writes it; the findings read it).
INDEX = "index.json"

@dataclass(frozen=True)
class Chart:
    """One chart, registered once: where the report files it, its title there, and how it is drawn (a drawing of
    dlbench.present.charts.drawings, by name, with its arguments). Its caption is its branch of
    workflow/report/charts.rst."""

    category: str  # the Snakemake report's category
    subcategory: str | None  # its subcategory within the category (None: the category's top level)
    title: str
    drawing: str
    args: tuple = ()


_TIME_S, _ACCURACY = "training time (s, log)", "test accuracy (%)"
CHARTS: dict[str, Chart] = {
    "train_time_by_framework": Chart("Time and accuracy", "Per framework", "Training time per framework",
                                     "per_framework", ("train_time_s", _TIME_S, True)),
    "test_time_by_framework": Chart("Time and accuracy", "Per framework", "Testing time per framework",
                                    "per_framework", ("test_time_s", "testing time (s, log)", True)),
    "accuracy_by_framework": Chart("Time and accuracy", "Per framework", "Accuracy per framework",
                                   "per_framework", ("accuracy_pct", _ACCURACY, False)),
    "status_by_framework": Chart("Time and accuracy", "Per framework", "Points per status", "status"),
    "train_time_vs_batch_size": Chart("Hyper-parameters", "Batch size", "Training time vs batch size",
                                      "against", ("batch_size", "train_time_s", _TIME_S, True, True)),
    "accuracy_vs_batch_size": Chart("Hyper-parameters", "Batch size", "Accuracy vs batch size",
                                    "against", ("batch_size", "accuracy_pct", _ACCURACY, True, False)),
    "train_time_vs_learning_rate": Chart("Hyper-parameters", "Learning rate", "Training time vs learning rate",
                                         "against", ("learning_rate", "train_time_s", _TIME_S, True, True)),
    "accuracy_vs_learning_rate": Chart("Hyper-parameters", "Learning rate", "Accuracy vs learning rate",
                                       "against", ("learning_rate", "accuracy_pct", _ACCURACY, True, False)),
    "train_time_vs_length": Chart("Hyper-parameters", "Length", "Training time vs length",
                                  "against", ("length", "train_time_s", _TIME_S, True, True)),
    "accuracy_vs_length": Chart("Hyper-parameters", "Length", "Accuracy vs length",
                                "against", ("length", "accuracy_pct", _ACCURACY, True, False)),
    "defaults_matrix_accuracy": Chart("Default settings", "Own and cross-applied",
                                      "Own vs cross-applied defaults: accuracy", "defaults_matrix", ("accuracy_pct",)),
    "defaults_matrix_train_time": Chart("Default settings", "Own and cross-applied",
                                        "Own vs cross-applied defaults: training time", "defaults_matrix",
                                        ("train_time_s",)),
    "tuning_grid": Chart("Hyper-parameters", "Tuning", "Tuning around the defaults", "tuning"),
    "speedup_vs_threads": Chart("Scaling", "Threads", "Speed-up against threads", "speedup"),
    "time_to_accuracy": Chart("Time and accuracy", "Trade-offs", "Time to accuracy", "time_to_accuracy"),
    "pareto_front": Chart("Time and accuracy", "Trade-offs", "Time/accuracy Pareto front", "pareto"),
    "cpu_timeline": Chart("Resources", "Timelines", "CPU timeline", "timeline",
                          ("cpu_pct", "CPU (% of one core)", "CPU use")),
    "memory_timeline": Chart("Resources", "Timelines", "Memory timeline", "timeline",
                             ("rss_mb", "resident memory (MB)", "Resident memory")),
    "gpu_timeline": Chart("Resources", "Timelines", "GPU timeline", "timeline",
                          ("gpu_util_pct", "GPU utilisation (%)", "GPU utilisation")),
    "resource_correlation": Chart("Resources", "Against hyper-parameters", "Resource use vs hyper-parameters",
                                  "correlation"),
    "published_comparison": Chart("Comparison with the paper", "Published figures", "This machine vs the paper",
                                  "published"),
    "compile_speedup": Chart("Compile and precision", "Speed-ups", "Speed-up of compiling", "axis_speedup",
                             ("compile",)),
    "bf16_speedup": Chart("Compile and precision", "Speed-ups", "Speed-up of bfloat16", "axis_speedup",
                          ("precision",)),
}


def chart_files(root: str, names=None) -> list[str]:
    """The files of the charts `names` (every registered chart, if None) in the folder root: one of each of FORMATS
    each. The charts a study drew: chart_files(root, read_index(root)["drawn"])."""
    return [f"{root}/{name}.{fmt}" for name in (CHARTS if names is None else names) for fmt in FORMATS]


def read_index(root) -> dict:
    """The index of a folder of charts: {"drawn": [name, ...], "not_drawn": {name: why, ...}}."""
    path = Path(root) / INDEX
    if not path.exists():  # a folder drawn before there was an index held every chart, placeholders too
        raise FileNotFoundError(f"{root} has no {INDEX}: its charts were drawn by an earlier dlbench; draw them "
                                "again (snakemake --forcerun charts)")
    return json.loads(path.read_text())


def chart_name(path: str) -> str:
    """A chart's name from its file (or its name)."""
    return Path(path).name.split(".")[0]


def category(path: str) -> str:
    """The Snakemake report category of a chart (its file or its name)."""
    return CHARTS[chart_name(path)].category


def subcategory(path: str) -> str | None:
    """The Snakemake report subcategory of a chart (its file or its name; None: the category's top level)."""
    return CHARTS[chart_name(path)].subcategory
