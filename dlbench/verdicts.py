"""A comparison in words: a mean with its interval, who leads and whether the data can tell (dlbench.stats'
results worded for results/findings.md; no number is computed here)."""

from __future__ import annotations

import math

from dlbench import stats

AGREES, DISAGREES = "agrees", "disagrees"
TIED = "tied (within noise)"
SINGLE = "single run: no interval"
UNITS = {"train_time_s": " s", "test_time_s": " s", "accuracy_pct": "%", "throughput_img_s": " img/s"}


def not_tested(why: str) -> str:
    return f"not tested in this run ({why})"


def value(d: dict, unit: str = "", digits: int = 4) -> str:
    """"12.3 s [11.0, 13.6], n 3": a mean with its 95 % interval, or the single run's value, said as such."""
    if d["n"] < 2:
        return f"{d['mean']:.{digits}g}{unit} ({SINGLE})"
    return f"{d['mean']:.{digits}g}{unit} [{d['ci_low']:.{digits}g}, {d['ci_high']:.{digits}g}], n {d['n']}"


def state(result: stats.Leader) -> str:
    """How sure the lead is: "told apart", TIED or SINGLE."""
    return {"distinct": "told apart", "tied": TIED, "single": SINGLE, "alone": "alone"}[result.state]


def leader_text(result: stats.Leader, metric: str) -> str:
    """Every group's mean and interval, best first, and the leader against the runner-up: the named test, and
    the Holm-corrected p where more than one pair was tested."""
    unit = UNITS.get(metric, "")
    values = "; ".join(f"{_name(g)} {value(result.intervals[g], unit)}"
                       for g in [result.name, *(r.name for r in result.rivals)])
    if result.state == "alone":
        return values
    if result.state == "single":
        return f"{values}: {SINGLE} on a side, so no test tells them apart"
    r = result.runner_up
    holm = f"; Holm over {len(result.rivals)} pairs: {stats.format_p(r.p_holm)}" if len(result.rivals) > 1 else ""
    verdict = (f"{_name(result.name)} is told apart from the runner-up {_name(r.name)}" if r.distinct
               else f"{_name(result.name)} and {_name(r.name)}: {TIED}")
    text = f"{values}. {verdict} ({r.test.text()}{holm}, alpha {stats.ALPHA:g})"
    others = [t for t in result.tied_with if t != r.name]
    if others:
        text += f"; also {TIED} with the leader: {', '.join(_name(o) for o in others)}"
    return text


def _name(group) -> str:
    """A group's name: a framework, or a swept value (a batch size of 64, a learning rate of 0.01)."""
    return f"{group:g}" if isinstance(group, (int, float)) and not isinstance(group, bool) else str(group)


def claim(result: stats.Leader, claimed: str) -> str:
    """Does the data say `claimed` leads? AGREES (it leads, told apart from every other), DISAGREES (another
    leads and is told apart from it), TIED, or SINGLE."""
    if result.state == "single":
        return SINGLE
    if result.name == claimed:
        return AGREES if result.state == "distinct" else TIED
    rival = next((r for r in result.rivals if r.name == claimed), None)
    if rival is None:
        return not_tested(f"{claimed} did not run here")
    return DISAGREES if rival.distinct else TIED


def combine(states: list[str]) -> str:
    """One verdict from several (datasets, devices): any disagreement disagrees; all agreeing agrees; else tied
    where one was tied, else single."""
    if DISAGREES in states:
        return DISAGREES
    if states and all(s == AGREES for s in states):
        return AGREES
    if TIED in states:
        return TIED
    return SINGLE if states else not_tested("nothing to compare")


def answered(verdict: str) -> bool:
    """The data could tell: agrees, disagrees or tied."""
    return verdict in (AGREES, DISAGREES, TIED)


def half_width_text(half: float, unit: str) -> str:
    return "-" if half is None or (isinstance(half, float) and math.isnan(half)) else f"{half:.3g}{unit}"
