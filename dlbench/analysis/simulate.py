"""Whole runs tables shaped like a real study, with a known truth: what dlbench calibrate feeds the findings.

A study's points are the workflow's own (dlbench.study.sweep.plan of a config file: the same presets, batch sizes,
lengths, images trained, sub-studies and seeds); each becomes a record with the columns runs.parquet has, and its
measurements are drawn around a true value that the Scenario sets per point:

- training and test time lognormal (Noise.time_log_sd, the sd of the logarithm), accuracy normal
  (Noise.accuracy_sd) and then rounded to the test set's size (k / n: the digits' 359 test images, mnist_5k's
  1,000), as a real test set scores it;
- a seed effect on accuracy shared by the points that run the same preset's network and settings with that seed
  (Noise.seed_sd; the same initial weights and batch order): what pairing by seed and the blocked ANOVA remove;
- missing seeds: in each replication one run of a sub-study (Noise.missing_study) fails (status error, no
  measurements), so that one framework lacks a seed the others ran;
- contended runs: one run of the points told fastest (Noise.contended_at) and one at random are flagged
  `contended` (timed under outside load, as runs.parquet marks them) and take Noise.contended_factor times as
  long: a table that counted them would be the slower and the noisier for it.

A Scenario says, in units of the noise's sd, how far each point's truth lies from the common baseline; the truth
of each verdict under it is written beside it in dlbench.analysis.calibrate, from the design, not computed by the
code under test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from dlbench.datasets import catalog
from dlbench.frameworks import registry
from dlbench.study import config, sweep

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = ROOT / "config" / "config.yaml"


@dataclass(frozen=True)
class Noise:
    """The simulated run-to-run noise and the faults of a real study (see the module's docstring)."""
    time_log_sd: float = 0.05  # sd of log time: about 5 %, the default time margin
    accuracy_sd: float = 0.003  # 0.3 points: a 2- or 3-sd difference lies outside the 0.5-point margin
    seed_sd: float = 0.003  # a seed's shared effect on accuracy under one preset's network and settings
    time_s: float = 5.0
    test_time_s: float = 0.5
    accuracy: float = 0.95
    missing_study: str | None = "caffe_preset"  # the sub-study that loses one run per replication (None: none)
    contended_at: str = "caffe"  # the framework whose own-defaults point has one contended run per replication
    contended_factor: float = 1.5

    @property
    def run_accuracy_sd(self) -> float:
        """The sd of one setting's runs' accuracy (the run's noise and its seed's): the sigma of a planted
        difference, what a reader sees as the spread of a setting's runs."""
        return math.hypot(self.accuracy_sd, self.seed_sd)


@dataclass(frozen=True)
class Shift:
    """A point's truth from the baseline, in sd of one setting's runs: `time` in Noise.time_log_sd on log time
    (negative: faster), `accuracy` in Noise.run_accuracy_sd (positive: more accurate)."""
    time: float = 0.0
    accuracy: float = 0.0


@dataclass(frozen=True)
class Scenario:
    """The truth of a study: `shifts` maps a point's description (framework, whose preset, batch size) to its
    Shift, any key None matching every value; the first match counts."""
    name: str
    shifts: tuple = field(default_factory=tuple)  # ((framework, whose, batch_size), Shift), ...

    def shift(self, framework: str, whose: str, batch_size: int) -> Shift:
        for (fw, wh, bs), s in self.shifts:
            if (fw is None or fw == framework) and (wh is None or wh == whose) and (bs is None or bs == batch_size):
                return s
        return Shift()


def planted(effect: float) -> Scenario:
    """The default study's planted differences, `effect` sd each (3: the calibration's power):
    Caffe's own defaults faster; TensorFlow's own defaults more accurate; Caffe's preset on PyTorch at its own
    batch (64) more accurate than PyTorch's own defaults, and at batch 256 faster and 2 x `effect` less accurate
    (a sweep beside the preset's point, which pooled with it would hide both)."""
    k = effect
    return Scenario(f"planted {k:g} sd", (
        (("caffe", "caffe", 64), Shift(time=-k)),
        (("tensorflow", "tensorflow", None), Shift(accuracy=k)),
        (("pytorch", "caffe", 64), Shift(accuracy=k)),
        (("pytorch", "caffe", 256), Shift(time=-k, accuracy=-2 * k)),
    ))


NULL = Scenario("null")


def _test_count(point: dict) -> int:
    info = catalog.INFO[point["dataset"]]
    return int(point["input"].get("test_samples") or info["test_count"])


def _images_trained(point: dict) -> tuple[int, int]:
    """(iterations, images trained) of a point that runs to its end: epochs over its training images, or its
    iterations times its batch."""
    train = int(point["input"].get("train_samples") or catalog.INFO[point["dataset"]]["train_count"])
    if point.get("epochs"):
        per_epoch = math.ceil(train / point["batch_size"])
        iterations = int(per_epoch * point["epochs"])
    else:
        iterations = int(point["iterations"])
    return iterations, iterations * point["batch_size"]


@lru_cache(maxsize=8)
def study_template(config_path: str, repeats: int | None = None) -> pd.DataFrame:
    """The rows of a study's runs table without their measurements: every point of the config (with `repeats`
    in place of the config's, if given), as collect writes it (`studies`, `tuning_grid`)."""
    raw = config.read_file(config_path)
    if repeats is not None:
        raw["repeats"] = repeats
    cfg = config.validate(raw)
    plan = sweep.plan(cfg)
    rows = []
    for p in plan.points:
        iterations, images = _images_trained(p)
        own = registry.get(p["framework"]).own_preset
        rows.append({"run_id": p["id"], "framework": p["framework"], "dataset": p["dataset"], "preset": p["preset"],
                     "cross_apply": p.get("cross_apply", None if p["preset"] in ("own", own) else "preset"),
                     "network": p["network"], "optimizer": p["optimizer"], "momentum": p["momentum"],
                     "weight_decay": p["weight_decay"], "learning_rate": p["learning_rate"],
                     "batch_size": p["batch_size"], "epochs": p["epochs"], "iterations_planned": iterations,
                     "iterations": iterations, "images_trained": images, "device": p["device"],
                     "threads": p["threads"], "library": p["library"], "repeat": p["repeat"], "seed": p["seed"],
                     "studies": ",".join(plan.membership.get(p["id"], [])), "test_count": _test_count(p),
                     "whose": own if p["preset"] == "own" else p["preset"],
                     **plan.tuning.get(p["id"], {"tuning_grid": None, "tuning_is_default": None})})
    return pd.DataFrame(rows)


def simulate(template: pd.DataFrame, scenario: Scenario, noise: Noise, rng: np.random.Generator) -> pd.DataFrame:
    """One replication's runs table: the template's rows measured around the scenario's truth."""
    n = len(template)
    shifts = [scenario.shift(f, w, b) for f, w, b in zip(template["framework"], template["whose"],
                                                          template["batch_size"])]
    dt = np.array([s.time for s in shifts])
    da = np.array([s.accuracy for s in shifts])
    log_t = np.log(noise.time_s) + noise.time_log_sd * (dt + rng.standard_normal(n))
    log_test = np.log(noise.test_time_s) + noise.time_log_sd * rng.standard_normal(n)
    # the seed's effect, shared by the runs of one preset's network and settings with that seed
    block = template["whose"].astype(str) + "|" + template["network"].astype(str) + "|" + \
        template["batch_size"].astype(str) + "|" + template["seed"].astype(str)
    codes, uniques = pd.factorize(block)
    seed_effect = rng.standard_normal(len(uniques))[codes] * noise.seed_sd
    accuracy = noise.accuracy + noise.run_accuracy_sd * da + noise.accuracy_sd * rng.standard_normal(n) + seed_effect
    count = template["test_count"].to_numpy()
    accuracy = np.clip(np.round(accuracy * count), 0, count) / count  # k / n of the test set
    runs = template.drop(columns=["test_count", "whose"]).assign(
        status="ok", train_time_s=np.exp(log_t), test_time_s=np.exp(log_test), accuracy=accuracy, contended=False)
    runs["throughput_img_s"] = runs["images_trained"] / runs["train_time_s"]
    contended = _contended_rows(template, noise, rng)
    runs.loc[contended, "contended"] = True
    runs.loc[contended, "train_time_s"] *= noise.contended_factor
    missing = _missing_row(template, noise, rng, exclude=set(contended))
    if missing is not None:
        runs.loc[missing, ["status", "reason"]] = ["error", "the trainer exited with code 1"]
        runs.loc[missing, ["train_time_s", "test_time_s", "accuracy", "iterations", "throughput_img_s"]] = np.nan
    return runs


def _contended_rows(template: pd.DataFrame, noise: Noise, rng: np.random.Generator) -> list:
    own = template[(template["framework"] == noise.contended_at)
                   & (template["whose"] == registry.get(noise.contended_at).own_preset)
                   & (template["preset"] == "own")]
    chosen = [own.index[rng.integers(len(own))]] if len(own) else []
    others = template.index.difference(chosen)
    return chosen + [others[rng.integers(len(others))]]


def _missing_row(template: pd.DataFrame, noise: Noise, rng: np.random.Generator, exclude: set):
    if noise.missing_study is None:
        return None
    members = template[template["studies"].str.split(",").map(lambda s: noise.missing_study in s)]
    members = members[members["framework"] != noise.contended_at].drop(index=list(exclude), errors="ignore")
    return members.index[rng.integers(len(members))] if len(members) else None
