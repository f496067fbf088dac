"""The sentences of the findings as the calibration reads them: each is a word read off the tables the findings
rule computes from a runs table (dlbench.present.findings.render calls the same functions), classed as a claim of
a difference, of an equivalence, or of nothing.

A Replica is one simulated runs table with the findings' tables of it, each computed once; a Sentence reads its
word off a Replica and says which words claim what. The truth each sentence should tell is not here: the designs
(dlbench.analysis.designs) write it from the simulation's design.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import pandas as pd

from dlbench.analysis import frames, stats, summary
from dlbench.analysis.observations import observations

# A sentence's word, classed: it claims a difference (one way), an equivalence, or nothing (inconclusive, not
# testable, not tested).
DIFFERENCE, EQUIVALENCE, NOTHING = "difference", "equivalence", "nothing"
BY = " (by"  # a word's route: "differ (by one-way ANOVA, not blocked)" claims what "differ" claims
SAME = "same"  # a truth of no difference: an equivalence claim holds, any difference claim is false
NOT_TESTED = "not tested"  # a truth of no data: any claim is false


@dataclass(frozen=True)
class Replica:
    """One replication: the simulated study (`runs`) and the findings' tables of it, each computed once."""
    runs: pd.DataFrame

    @cached_property
    def points(self) -> pd.DataFrame:
        return frames.points(self.runs)  # the findings hand every table one points() frame, as here

    @cached_property
    def observations(self) -> dict:
        return observations(self.points)

    @cached_property
    def _leaders(self) -> dict:
        return {}

    def leaders(self, metric: str) -> pd.DataFrame:
        if metric not in self._leaders:
            self._leaders[metric] = summary.framework_leaders(self.points, metric)
        return self._leaders[metric]

    @cached_property
    def effect(self) -> pd.DataFrame:
        return summary.framework_effect(self.points)

    @cached_property
    def own_vs_cross(self) -> pd.DataFrame:
        return summary.own_vs_cross(self.points)

    @cached_property
    def best_batch(self) -> pd.DataFrame:
        return summary.best_values(self.points, "batch_size")


@dataclass(frozen=True)
class Sentence:
    """A sentence of the findings: `word` reads its word off a Replica; `classes` says which words claim a
    difference or an equivalence (others claim nothing); `truth` maps a scenario's name to the word that holds
    (SAME: no difference; NOT_TESTED: no data)."""
    name: str
    table: str  # the findings' section it is read from
    word: Callable[[Replica], str]
    classes: dict
    truth: dict

    def claim(self, word: str) -> str:
        return self.classes.get(word.split(BY)[0], NOTHING)


def differences(*words: str) -> dict:
    return {w: DIFFERENCE for w in words}


EQUIV = {"equivalent": EQUIVALENCE}


def _at(table: pd.DataFrame, dataset: str | None, device: str | None) -> pd.DataFrame:
    """The rows of one dataset and device (None: any; the first row then counts)."""
    if dataset is not None:
        table = table[table["dataset"] == dataset]
    if device is not None:
        table = table[table["device"] == device]
    return table


def observation_word(key: str, rep: Replica) -> str:
    verdict = rep.observations[key].verdict
    if verdict.startswith("not tested"):
        return NOT_TESTED
    if verdict.startswith(stats.UNTESTABLE):
        return stats.UNTESTABLE
    return "equivalent" if verdict.startswith("equivalent") else verdict


def batch_accuracy_word(rep: Replica) -> str:
    """Observation (e)'s word for accuracy's change in its first sweep: "(lower; ..." or "(higher; ...)"."""
    found = re.search(r"\), accuracy [^;]*?\(([a-z ]+);", rep.observations["e"].evidence)
    return found.group(1) if found else NOT_TESTED


def leader_word(metric: str, comparison_name: str, rep: Replica, dataset: str | None = None,
                device: str | None = None) -> str:
    table = _at(rep.leaders(metric), dataset, device)
    row = table[table["comparison"] == comparison_name]
    if not len(row):
        return NOT_TESTED
    result = row["result"].iloc[0]
    return f"{result.name} leads" if result.state == "distinct" else result.state


def effect_word(metric: str, rep: Replica) -> str:
    """The framework effect's verdict; a difference told by a test that does not block on the seed (the design's
    test blocks wherever three or more seeds are shared, as the simulated studies' are) says by which: the truth
    found by the wrong test is not found."""
    row = rep.effect[rep.effect["metric"] == metric]
    if not len(row):
        return NOT_TESTED
    verdict, test = str(row["verdict"].iloc[0]), row["test"].iloc[0]
    blocked = "block" in test.name or "paired" in test.name
    return verdict if blocked or verdict != "differ" else f"{verdict}{BY} {test.name}, not blocked)"


def own_vs_cross_word(framework: str, rep: Replica, dataset: str | None = None, device: str | None = None) -> str:
    table = _at(rep.own_vs_cross, dataset, device)
    row = table[table["framework"] == framework]
    word = str(row["told"].iloc[0]) if len(row) else NOT_TESTED
    return "equivalent" if word.startswith("equivalent") else word


def best_batch_word(framework: str, rep: Replica) -> str:
    table = rep.best_batch
    row = table[table["framework"] == framework]
    if not len(row):
        return NOT_TESTED
    state = row["state"].iloc[0]
    return f"batch {row['batch_size'].iloc[0]:g} best" if state == "distinct" else state


def metric_words(metric: str) -> str:
    return "train time" if metric.endswith("_s") else "accuracy"
