"""Tuning: the joint grids of the `tune` sub-studies against their defaults (the tables the tuning chart draws
and the findings' "Tuned against own defaults" states)."""

from __future__ import annotations

import math

import pandas as pd

from dlbench.analysis import stats
from dlbench.analysis.frames import NEAR_BEST_PP, TIE, by_seed, points, settings_label, told

TUNED = ["batch_size", "learning_rate", "length"]
CHOICES = ["defaults", "best accuracy", f"fastest within {NEAR_BEST_PP:g} points"]


def tuning_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """Each cell of each tuning grid (one batch size x learning rate x length): means over its ok repeats.

    Points outside a grid (no `tuning_grid`) are left out. `is_default`: the cell the grid is tuned around.
    """
    cols = ["tuning_grid", "framework", "dataset", "device", "whose", "grid_settings", *TUNED, "length_unit",
            "is_default", "accuracy_pct", "train_time_s", "n_ok", "n_failed", "accuracies", "times"]
    df = points(runs)
    df = df[df["tuning_grid"].notna() & (df["tuning_grid"].astype(str) != "")]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.assign(ok=(df["status"] == "ok") & df["accuracy"].notna(),
                   is_default=df["tuning_is_default"].map(lambda v: v is True or v == 1 or v == "True"),
                   grid_settings=settings_label(df, {"whose", *TUNED}))  # what the grid holds fixed
    df = df.assign(acc=df["accuracy_pct"].where(df["ok"]), t=df["train_time_s"].where(df["ok"]))
    seed = df["seed"] if "seed" in df.columns else pd.Series(float("nan"), index=df.index)
    df = df.assign(acc_seed=list(zip(seed, df["acc"])), t_seed=list(zip(seed, df["t"])))
    keys = ["tuning_grid", "framework", "dataset", "device", "whose", "grid_settings", *TUNED, "length_unit"]
    cells = df.groupby(keys, as_index=False, dropna=False).agg(
        is_default=("is_default", "max"), accuracy_pct=("acc", "mean"), train_time_s=("t", "mean"),
        n_ok=("ok", "sum"), n=("ok", "size"), accuracies=("acc_seed", by_seed), times=("t_seed", by_seed))
    cells["n_failed"] = cells["n"] - cells["n_ok"]
    return cells[cols]


def tuning_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per tuning grid: its defaults, the best-accuracy cell, and the fastest cell within NEAR_BEST_PP of it.

    Three rows per grid (`choice`: CHOICES). Accuracy: mean over ok repeats (ties broken by training
    time). accuracy_gain_pp: the cell's accuracy minus the defaults' (points); time_saved_pct: how much
    less training time than the defaults, in % of theirs (negative: it took longer). Each with its 95 %
    interval and what the test tells (`gain_told`: higher / lower / equivalent / inconclusive / not testable;
    `time_told`: shorter /
    longer / ...; see gains()). `best_told`: whether the best-accuracy cell is told apart from every other cell
    of its grid (stats.leader, Holm over the rivals). Cells whose every repeat failed are not candidates;
    `tried`/`failed`: cells of the grid, and cells with a failed point.
    """
    cols = ["framework", "dataset", "device", "whose", "choice", *TUNED, "length_unit", "accuracy_pct",
            "train_time_s", "accuracy_gain_pp", "gain_ci_low", "gain_ci_high", "gain_told", "time_saved_pct",
            "saved_ci_low", "saved_ci_high", "time_told", "best_told", "tried", "failed", "tuning_grid"]
    cells = tuning_cells(runs)
    rows = []
    for grid, g in cells.groupby("tuning_grid", sort=True):
        default = g[g["is_default"]]
        default = default.iloc[0] if len(default) else None
        good = g[g["accuracy_pct"].notna()]
        picks = [("defaults", default)]
        if good.empty:
            picks += [(CHOICES[1], None), (CHOICES[2], None)]
        else:
            top = good["accuracy_pct"].max()
            best = good[good["accuracy_pct"] >= top - TIE * 100].sort_values("train_time_s").iloc[0]
            near = good[good["accuracy_pct"] >= top - NEAR_BEST_PP].sort_values(
                ["train_time_s", "accuracy_pct"], ascending=[True, False]).iloc[0]
            picks += [(CHOICES[1], best), (CHOICES[2], near)]
        first = g.iloc[0]
        best_told = _best_told(good, picks[1][1]) if not good.empty else None
        for choice, cell in picks:
            row = {"framework": first["framework"], "dataset": first["dataset"], "device": first["device"],
                   "whose": first["whose"], "choice": choice, "length_unit": first["length_unit"],
                   "tried": len(g), "failed": int((g["n_failed"] > 0).sum()), "tuning_grid": grid}
            if cell is not None:
                row.update({k: cell[k] for k in (*TUNED, "accuracy_pct", "train_time_s")})
                if default is not None:
                    row.update(gains(cell, default))
                if choice == CHOICES[1]:
                    row["best_told"] = best_told
            rows.append(row)
    out = pd.DataFrame(rows, columns=cols)
    return out.astype({c: float for c in ("accuracy_gain_pp", "gain_ci_low", "gain_ci_high", "time_saved_pct",
                                          "saved_ci_low", "saved_ci_high", "accuracy_pct", "train_time_s")})


def gains(cell: pd.Series, default: pd.Series) -> dict:
    """A cell against its grid's defaults: the accuracy gain in points (the difference of the means, Welch's t
    of that contrast) and the training time saved in % of the defaults' (from the ratio of the means; paired by
    seed, the geometric mean of the seeds' ratios), each with its 95 % interval and what the test tells (paired
    by seed where both ran the same seeds: stats.change)."""
    if cell is default or cell.name == default.name:
        return {"accuracy_gain_pp": 0.0, "time_saved_pct": 0.0, "gain_told": "-", "time_told": "-"}
    acc = stats.judge_metric(cell["accuracies"], default["accuracies"], "accuracy_pct")
    time = stats.judge_metric(cell["times"], default["times"], "train_time_s")
    saved = {"time_saved_pct": (1 - math.exp(time.estimate)) * 100 if math.isfinite(time.estimate) else math.nan,
             "saved_ci_low": (1 - math.exp(time.high)) * 100, "saved_ci_high": (1 - math.exp(time.low)) * 100}
    return {"accuracy_gain_pp": cell["accuracy_pct"] - default["accuracy_pct"], "gain_ci_low": acc.low,
            "gain_ci_high": acc.high, "gain_told": told(acc, "higher", "lower"), **saved,
            "time_told": told(time, "longer", "shorter")}


def _best_told(good: pd.DataFrame, best: pd.Series) -> str:
    """Is the best-accuracy cell told apart from each other cell of its grid? (stats.leader, Holm over them)"""
    if len(good) < 2:
        return "the only cell"
    groups = {i: c["accuracies"] for i, c in good.iterrows()}
    result = stats.leader(groups, True, "accuracy_pct")
    if result.state == "untestable":
        return stats.UNTESTABLE
    close = [r for r in result.rivals if not r.distinct]
    if result.name == best.name and not close:
        return f"told apart from the other {len(good) - 1} cells"
    return f"not told apart from {len(close) + (result.name != best.name)} other cell(s)"
