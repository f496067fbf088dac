"""Tuning: the joint grids of the `tune` sub-studies against their defaults (the tables the tuning chart draws
and the findings' "Tuned against own defaults" states)."""

from __future__ import annotations

import pandas as pd

from dlbench.tables import NEAR_BEST_PP, TIE, points, settings_label

TUNED = ["batch_size", "learning_rate", "length"]
CHOICES = ["defaults", "best accuracy", f"fastest within {NEAR_BEST_PP:g} points"]


def tuning_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """Each cell of each tuning grid (one batch size x learning rate x length): means over its ok repeats.

    Points outside a grid (no `tuning_grid`) are left out. `is_default`: the cell the grid is tuned around.
    """
    cols = ["tuning_grid", "framework", "dataset", "device", "whose", "grid_settings", *TUNED, "length_unit",
            "is_default", "accuracy_pct", "train_time_s", "n_ok", "n_failed"]
    df = points(runs)
    df = df[df["tuning_grid"].notna() & (df["tuning_grid"].astype(str) != "")]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.assign(ok=(df["status"] == "ok") & df["accuracy"].notna(),
                   is_default=df["tuning_is_default"].map(lambda v: v is True or v == 1 or v == "True"),
                   grid_settings=settings_label(df, {"whose", *TUNED}))  # what the grid holds fixed
    df = df.assign(acc=df["accuracy_pct"].where(df["ok"]), t=df["train_time_s"].where(df["ok"]))
    keys = ["tuning_grid", "framework", "dataset", "device", "whose", "grid_settings", *TUNED, "length_unit"]
    cells = df.groupby(keys, as_index=False, dropna=False).agg(
        is_default=("is_default", "max"), accuracy_pct=("acc", "mean"), train_time_s=("t", "mean"),
        n_ok=("ok", "sum"), n=("ok", "size"))
    cells["n_failed"] = cells["n"] - cells["n_ok"]
    return cells[cols]


def tuning_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per tuning grid: its defaults, the best-accuracy cell, and the fastest cell within NEAR_BEST_PP of it.

    Three rows per grid (`choice`: CHOICES). Accuracy: mean over ok repeats (ties broken by training
    time). accuracy_gain_pp: the cell's accuracy minus the defaults' (points); time_saved_pct: how much
    less training time than the defaults, in % of theirs (negative: it took longer). Cells whose every
    repeat failed are not candidates; `tried`/`failed`: cells of the grid, and cells with a failed point.
    """
    cols = ["framework", "dataset", "device", "whose", "choice", *TUNED, "length_unit", "accuracy_pct",
            "train_time_s", "accuracy_gain_pp", "time_saved_pct", "tried", "failed", "tuning_grid"]
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
        for choice, cell in picks:
            row = {"framework": first["framework"], "dataset": first["dataset"], "device": first["device"],
                   "whose": first["whose"], "choice": choice, "length_unit": first["length_unit"],
                   "tried": len(g), "failed": int((g["n_failed"] > 0).sum()), "tuning_grid": grid}
            if cell is not None:
                row.update({k: cell[k] for k in (*TUNED, "accuracy_pct", "train_time_s")})
                if default is not None:
                    row["accuracy_gain_pp"] = cell["accuracy_pct"] - default["accuracy_pct"]
                    row["time_saved_pct"] = (default["train_time_s"] - cell["train_time_s"]) / \
                        default["train_time_s"] * 100
            rows.append(row)
    out = pd.DataFrame(rows, columns=cols)
    return out.astype({"accuracy_gain_pp": float, "time_saved_pct": float, "accuracy_pct": float,
                       "train_time_s": float})
