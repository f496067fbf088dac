"""The study's charts by name, with the report category and title of each, and the files they are saved as.

Standard library only: the workflow reads this list every time it starts (dlbench.charts, which draws
them, imports Altair).
"""

from __future__ import annotations

from pathlib import Path

FORMATS = ("html", "svg")
# name -> (Snakemake report category, title)
CHARTS: dict[str, tuple[str, str]] = {
    "train_time_by_framework": ("Time and accuracy", "Training time per framework"),
    "test_time_by_framework": ("Time and accuracy", "Testing time per framework"),
    "accuracy_by_framework": ("Time and accuracy", "Accuracy per framework"),
    "status_by_framework": ("Time and accuracy", "Points per status"),
    "train_time_vs_batch_size": ("Hyper-parameters", "Training time vs batch size"),
    "accuracy_vs_batch_size": ("Hyper-parameters", "Accuracy vs batch size"),
    "train_time_vs_learning_rate": ("Hyper-parameters", "Training time vs learning rate"),
    "accuracy_vs_learning_rate": ("Hyper-parameters", "Accuracy vs learning rate"),
    "train_time_vs_length": ("Hyper-parameters", "Training time vs length"),
    "accuracy_vs_length": ("Hyper-parameters", "Accuracy vs length"),
    "defaults_matrix_accuracy": ("Default settings", "Own vs cross-applied defaults: accuracy"),
    "defaults_matrix_train_time": ("Default settings", "Own vs cross-applied defaults: training time"),
    "tuning_grid": ("Hyper-parameters", "Tuning around the defaults"),
    "speedup_vs_threads": ("Scaling", "Speed-up against threads"),
    "time_to_accuracy": ("Time and accuracy", "Time to accuracy"),
    "pareto_front": ("Time and accuracy", "Time/accuracy Pareto front"),
    "cpu_timeline": ("Resources", "CPU timeline"),
    "memory_timeline": ("Resources", "Memory timeline"),
    "gpu_timeline": ("Resources", "GPU timeline"),
    "resource_correlation": ("Resources", "Resource use vs hyper-parameters"),
    "published_comparison": ("Comparison with the paper", "This machine vs the paper"),
    "compile_speedup": ("Compile and precision", "Speed-up of compiling"),
    "bf16_speedup": ("Compile and precision", "Speed-up of bfloat16"),
}

# name -> the report's subcategory within its category, so that a category's charts are not one list
SUBCATEGORIES: dict[str, str] = {
    "train_time_by_framework": "Per framework", "test_time_by_framework": "Per framework",
    "accuracy_by_framework": "Per framework", "status_by_framework": "Per framework",
    "time_to_accuracy": "Trade-offs", "pareto_front": "Trade-offs",
    "train_time_vs_batch_size": "Batch size", "accuracy_vs_batch_size": "Batch size",
    "train_time_vs_learning_rate": "Learning rate", "accuracy_vs_learning_rate": "Learning rate",
    "train_time_vs_length": "Length", "accuracy_vs_length": "Length", "tuning_grid": "Tuning",
    "defaults_matrix_accuracy": "Own and cross-applied", "defaults_matrix_train_time": "Own and cross-applied",
    "speedup_vs_threads": "Threads",
    "cpu_timeline": "Timelines", "memory_timeline": "Timelines", "gpu_timeline": "Timelines",
    "resource_correlation": "Against hyper-parameters",
    "published_comparison": "Published figures",
    "compile_speedup": "Speed-ups", "bf16_speedup": "Speed-ups",
}


def chart_files(root: str) -> list[str]:
    """Every file the charts rule writes: one HTML and one SVG per chart (a chart without data says so)."""
    return [f"{root}/{name}.{fmt}" for name in CHARTS for fmt in FORMATS]


def chart_name(path: str) -> str:
    return Path(path).stem


def category(path: str) -> str:
    """The Snakemake report category of a chart file."""
    return CHARTS[chart_name(path)][0]


def subcategory(path: str) -> str | None:
    """The Snakemake report subcategory of a chart file (None: the category's top level)."""
    return SUBCATEGORIES.get(chart_name(path))
