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

A Scenario's rules say, in units of the noise's sd, how far each point's truth lies from the common baseline (a
rule matches points by their columns or sub-study and spreads its shift as ALONG says); the truth of each
sentence under it is written beside it in dlbench.analysis.designs, from the design, not computed by the code
under test.
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
from dlbench.study import config, presets, sweep

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = ROOT / "config" / "config.yaml"
PAPER_CONFIG = ROOT / "config" / "paper.yaml"


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
    """A point's truth from the baseline, in sd of one setting's runs: `time` and `test_time` in
    Noise.time_log_sd on log time (negative: faster), `accuracy` in Noise.run_accuracy_sd (positive: more
    accurate)."""
    time: float = 0.0
    accuracy: float = 0.0
    test_time: float = 0.0


# How a Rule's shift is spread over the points it matches (Rule.along).
ALONG = {
    None: "the whole shift at every point it matches",
    "batch": "the shift per octave of batch size from the point's preset's own (none at the preset's batch): two "
             "batch sizes an octave apart differ by the whole shift",
    "images": "training time proportional to the images the point trains, against its preset's own point (the shift's "
              "time is a factor: 1, proportional)",
    "shortest": "at the shortest length of a length sweep only",
}


@dataclass(frozen=True)
class Rule:
    """A shift for the points whose columns equal `match` ((column, value), ...; the column "study" matches a point
    of that sub-study), spread as `along` says (ALONG)."""
    match: tuple
    shift: Shift
    along: str | None = None


@dataclass(frozen=True)
class Scenario:
    """The truth of a study: each point's shift is the sum of the shifts of the rules it matches."""
    name: str
    rules: tuple = field(default_factory=tuple)


def rule(shift: Shift, along: str | None = None, **match) -> Rule:
    return Rule(tuple(sorted(match.items())), shift, along)


def planted(effect: float) -> Scenario:
    """The default study's planted differences, `effect` sd each (3: the calibration's power):
    Caffe's own defaults faster; TensorFlow's own defaults more accurate; Caffe's preset on PyTorch at its own
    batch (64) more accurate than PyTorch's own defaults, and at batch 256 faster and 2 x `effect` less accurate
    (a sweep beside the preset's point, which pooled with it would hide both)."""
    k = effect
    return Scenario(f"planted {k:g} sd", (
        rule(Shift(time=-k), framework="caffe", whose="caffe", batch_size=64),
        rule(Shift(accuracy=k), framework="tensorflow", whose="tensorflow"),
        rule(Shift(accuracy=k), framework="pytorch", whose="caffe", batch_size=64),
        rule(Shift(time=-k, accuracy=-2 * k), framework="pytorch", whose="caffe", batch_size=256),
    ))


# The paper's planted study: per dataset, each framework's training time on the CPU and what the GPU takes off it
# (in steps of the effect, on log time), chosen so that the published leaders lead by one step on each dataset and
# device, every framework gains from the GPU, and the gains rank in the published order, one step or more apart.
PAPER_CPU_STEPS = {"mnist": {"caffe": 0, "tensorflow": 1, "pytorch": 4, "theano": 5},
                   "cifar10": {"theano": 0, "caffe": 1, "pytorch": 3, "tensorflow": 4}}
PAPER_GPU_GAIN_STEPS = {"mnist": {"caffe": 1, "tensorflow": 3, "theano": 4, "pytorch": 5},
                        "cifar10": {"theano": 1, "tensorflow": 2, "caffe": 3, "pytorch": 4}}


def planted_paper(effect: float) -> Scenario:
    """config/paper.yaml's planted truth, `effect` sd a step (see PAPER_CPU_STEPS): on MNIST Caffe fastest on the
    CPU and TensorFlow on the GPU, on CIFAR-10 Theano on the CPU and Caffe on the GPU (observations (a), (g));
    the GPU faster for every framework, its gains in the published order (c), (i); TensorFlow more accurate
    everywhere, PyTorch tied with it on MNIST's GPU (b), (h); TensorFlow testing CIFAR-10 more slowly on the GPU
    (j); another framework's settings on a framework's network less accurate than its own (d); in the batch-size
    sweeps, and wherever else batch sizes differ (the tuning grid), each doubling of the batch faster and less
    accurate by `effect` (e); training time proportional to the images trained, and the shortest length of a
    length sweep 2 x `effect` less accurate than the others, which are alike (f). Nothing else differs."""
    k = effect
    rules = []
    for dataset, steps in PAPER_CPU_STEPS.items():
        rules += [rule(Shift(time=k * s), framework=f, dataset=dataset) for f, s in steps.items() if s]
    for dataset, steps in PAPER_GPU_GAIN_STEPS.items():
        rules += [rule(Shift(time=-k * s), framework=f, dataset=dataset, device="gpu") for f, s in steps.items()]
    rules += [rule(Shift(accuracy=k), framework="tensorflow"),
              rule(Shift(accuracy=k), framework="pytorch", dataset="mnist", device="gpu"),
              rule(Shift(test_time=k), framework="tensorflow", dataset="cifar10", device="gpu"),
              rule(Shift(accuracy=-k), study="cross", reading="settings"),
              rule(Shift(time=-k, accuracy=-k), "batch"),  # each octave of batch size, in every sweep
              rule(Shift(time=1.0), "images"),
              rule(Shift(accuracy=-2 * k), "shortest", study="length")]
    return Scenario(f"planted {k:g} sd", tuple(rules))


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


# The template's columns that say how to simulate a point, not what a runs table holds.
HELPERS = ["test_count", "whose", "reading", "preset_batch", "images_ref", "shortest_length"]


@lru_cache(maxsize=8)
def study_template(config_path: str, repeats: int | None = None) -> pd.DataFrame:
    """The rows of a study's runs table without their measurements: every point of the config (with `repeats`
    in place of the config's, if given), as collect writes it (`studies`, `tuning_grid`), and HELPERS."""
    raw = config.read_file(config_path)
    if repeats is not None:
        raw["repeats"] = repeats
    cfg = config.validate(raw)
    plan = sweep.plan(cfg)
    rows = []
    for p in plan.points:
        iterations, images = _images_trained(p)
        own = registry.get(p["framework"]).own_preset
        cross = p.get("cross_apply", None if p["preset"] in ("own", own) else "preset")
        rows.append({"run_id": p["id"], "framework": p["framework"], "dataset": p["dataset"], "preset": p["preset"],
                     "cross_apply": cross, "network": p["network"], "optimizer": p["optimizer"],
                     "momentum": p["momentum"], "weight_decay": p["weight_decay"],
                     "learning_rate": p["learning_rate"], "batch_size": p["batch_size"], "epochs": p["epochs"],
                     "iterations_planned": iterations, "iterations": iterations, "images_trained": images,
                     "device": p["device"], "threads": p["threads"], "interop_threads": p.get("interop_threads"),
                     "library": p["library"], "compile": p.get("compile"), "precision": p.get("precision"),
                     "memory_format": p.get("memory_format"), "repeat": p["repeat"], "seed": p["seed"],
                     "studies": ",".join(plan.membership.get(p["id"], [])), "test_count": _test_count(p),
                     "whose": own if p["preset"] == "own" else p["preset"],
                     "reading": "own" if p["preset"] in ("own", own) else cross,
                     **plan.tuning.get(p["id"], {"tuning_grid": None, "tuning_is_default": None})})
    return _with_sweep_helpers(pd.DataFrame(rows))


def _with_sweep_helpers(t: pd.DataFrame) -> pd.DataFrame:
    """The template with what the rules' `along` reads: each point's preset batch size, the images its preset's
    own point trains, and whether it is the shortest length of its length sweep."""
    t = t.assign(preset_batch=[_preset_batch(w, d) for w, d in zip(t["whose"], t["dataset"])])
    where = ["framework", "dataset", "device", "whose"]
    # the images of each preset's own point (the defaults sub-study's, else the preset's batch), the length sweep's
    # reference; and the shortest length of each length sweep
    own = t[_in_study(t, "defaults") | ~t["studies"].astype(bool)]
    t = t.join(own.groupby(where)["images_trained"].median().rename("images_ref"), on=where)
    in_length = _in_study(t, "length")
    shortest = t[in_length].groupby(where)["images_trained"].transform("min")
    t["shortest_length"] = in_length & (t["images_trained"] == shortest.reindex(t.index))
    return t


def _in_study(t: pd.DataFrame, study: str) -> pd.Series:
    return t["studies"].str.split(",").map(lambda s: study in s)


def _preset_batch(whose: str, dataset: str) -> float:
    try:
        family = catalog.family(dataset) if dataset in catalog.INFO else dataset
        return float(presets.study_presets()[family][whose]["batch_size"])
    except (KeyError, TypeError, ValueError):
        return math.nan


def _shifts(template: pd.DataFrame, scenario: Scenario, noise: Noise) -> dict[str, np.ndarray]:
    """Each point's shift (the sum over the scenario's rules), as arrays of sd units: time, accuracy, test_time."""
    out = {name: np.zeros(len(template)) for name in ("time", "accuracy", "test_time")}
    for r in scenario.rules:
        hit = np.ones(len(template), dtype=bool)
        for column, value in r.match:
            hit &= (_in_study(template, value) if column == "study" else template[column] == value).to_numpy()
        scale = _along(template, r.along, noise)
        for name in out:
            out[name] += np.where(hit, getattr(r.shift, name) * scale, 0.0)
    return out


def _along(t: pd.DataFrame, along: str | None, noise: Noise) -> np.ndarray:
    """How much of a rule's shift each point takes (ALONG)."""
    if along is None:
        return np.ones(len(t))
    if along == "batch":
        return np.log2(t["batch_size"] / t["preset_batch"]).fillna(0.0).to_numpy()
    if along == "images":  # a factor on log time, in sd units: time proportional to images
        return (np.log(t["images_trained"] / t["images_ref"]) / noise.time_log_sd).fillna(0.0).to_numpy()
    if along == "shortest":
        return t["shortest_length"].astype(float).to_numpy()
    raise ValueError(f"a rule's along is one of {sorted(map(str, ALONG))}, not {along!r}")


def simulate(template: pd.DataFrame, scenario: Scenario, noise: Noise, rng: np.random.Generator) -> pd.DataFrame:
    """One replication's runs table: the template's rows measured around the scenario's truth."""
    n = len(template)
    shift = _shifts(template, scenario, noise)
    log_t = np.log(noise.time_s) + noise.time_log_sd * (shift["time"] + rng.standard_normal(n))
    log_test = np.log(noise.test_time_s) + noise.time_log_sd * (shift["test_time"] + rng.standard_normal(n))
    # the seed's effect, shared by the runs of one preset's network and settings with that seed
    block = template["whose"].astype(str) + "|" + template["network"].astype(str) + "|" + \
        template["batch_size"].astype(str) + "|" + template["seed"].astype(str)
    codes, uniques = pd.factorize(block)
    seed_effect = rng.standard_normal(len(uniques))[codes] * noise.seed_sd
    accuracy = noise.accuracy + noise.run_accuracy_sd * shift["accuracy"] + noise.accuracy_sd * \
        rng.standard_normal(n) + seed_effect
    count = template["test_count"].to_numpy()
    accuracy = np.clip(np.round(accuracy * count), 0, count) / count  # k / n of the test set
    runs = template.drop(columns=HELPERS).assign(
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
