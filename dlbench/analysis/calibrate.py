"""How often each verdict errs, measured by simulation: runs tables with a known truth fed through the real findings.

    dlbench calibrate [--replications 250] [--seed 0] [--jobs 2] [--quick] [--json PATH]
    python -m dlbench.analysis.calibrate ...

Each replication simulates the runs of three frameworks on one dataset and device (status ok, the columns
dlbench.analysis.frames.points reads): train time lognormal (Noise.time_log_sd, the sd of its logarithm), accuracy
normal
around 0.95 (Noise.accuracy_sd). Under the null every framework is the same; else PLANTED is faster and more
accurate by `effect` times the noise's sd. The verdicts are dlbench's own functions, called once per replication
on that replication's tables (summary.framework_leaders, summary.framework_effect, compare.compare,
stats.judge_metric); nothing here re-implements a test. The table says, per verdict, repeats and effect, how
often the verdict said "better" the true way, the wrong way, "equivalent", "inconclusive" and "not testable",
each with its simulation standard error sqrt(p (1 - p) / R). Under the null every "better" is false: the
"better" column holds both directions and the wrong-way column is empty.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import cached_property, partial
from pathlib import Path

import numpy as np
import pandas as pd

from dlbench.analysis import comparison, frames, stats, summary

FRAMEWORKS = ("tensorflow", "caffe", "pytorch")
PLANTED = "pytorch"  # the framework a planted difference makes faster and more accurate
SHARED_PRESET = "caffe"  # the whole preset every framework runs in the framework effect's table
DATASET, DEVICE = "mnist", "cpu"

# What a verdict said about one replication: its words, with "better" split by direction.
BETTER, WRONG_WAY = stats.BETTER, "better, wrong way"
EQUIVALENT, INCONCLUSIVE, UNTESTABLE = stats.EQUIVALENT, stats.INCONCLUSIVE, stats.UNTESTABLE
OUTCOMES = (BETTER, WRONG_WAY, EQUIVALENT, INCONCLUSIVE, UNTESTABLE)

REPEATS, EFFECTS, REPLICATIONS = (3, 5), (0.0, 1.0, 2.0, 3.0), 250
QUICK_REPEATS, QUICK_EFFECTS, QUICK_REPLICATIONS = (5,), (0.0, 3.0), 120
NOMINAL_FALSE, NOMINAL_POWER = stats.ALPHA, stats.POWER  # what calibration holds a verdict to


@dataclass(frozen=True)
class Noise:
    """The simulated run-to-run noise: a difference of 2 or 3 sd lies outside the default equivalence margins
    (5 % of time, 0.5 points of accuracy), so that "equivalent" said of one is an error."""
    time_log_sd: float = 0.05  # train and test time: sd of log, about 5 %
    accuracy_sd: float = 0.003  # accuracy (fraction): 0.3 points
    time_s: float = 10.0
    test_time_s: float = 1.0
    accuracy: float = 0.95


@dataclass(frozen=True)
class Replica:
    """One replication's tables: `own` every framework's own defaults (PLANTED shifted), `shared` every framework
    under SHARED_PRESET (PLANTED shifted), `baseline` a second own-defaults set with nothing planted, the A of
    compare(A, B = own)."""
    own: pd.DataFrame
    shared: pd.DataFrame
    baseline: pd.DataFrame

    @cached_property
    def own_points(self) -> pd.DataFrame:
        # points() once per replication; the findings take a frame points() made as it is (tables.points)
        return frames.points(self.own)

    @cached_property
    def effect_table(self) -> pd.DataFrame:
        return summary.framework_effect(self.shared)  # both metrics' verdicts in one call

    @cached_property
    def compare_table(self) -> pd.DataFrame:
        return comparison.compare(self.baseline, self.own)  # both metrics' verdicts in one call


@dataclass(frozen=True)
class Verdict:
    """A verdict to calibrate: `call` reads one Replica and returns one of OUTCOMES."""
    name: str
    call: Callable[[Replica], str]


# ---------------------------------------------------------------------------------------------- simulation


def _template(repeats: int, preset: str) -> pd.DataFrame:
    """The rows of one result set without their measurements: every framework's `repeats` runs, seed = repeat."""
    rows = []
    for fw in FRAMEWORKS:
        whose = preset if preset != "own" else frames.OWN_PRESET[fw]
        for r in range(1, repeats + 1):
            rows.append({"run_id": f"{fw}-{whose}-{r}", "setting_id": f"{fw}-{whose}", "framework": fw,
                         "dataset": DATASET, "device": DEVICE, "preset": preset,
                         "cross_apply": None if preset == "own" else "preset", "network": "lenet",
                         "optimizer": "sgd", "batch_size": 64, "learning_rate": 0.01, "epochs": 1, "threads": 1,
                         "seed": r, "repeat": r, "status": "ok", "contended": False})
    return pd.DataFrame(rows)


def draws(rng: np.random.Generator, replications: int, repeats: int, effect: float, noise: Noise) -> np.ndarray:
    """(replications, 3 sets, frameworks, repeats, 3 metrics: train time, test time, accuracy), all at once.
    Sets 0 (own) and 1 (shared) carry the planted difference; set 2 (the baseline) does not."""
    z = rng.standard_normal((replications, 3, len(FRAMEWORKS), repeats, 3))
    shift = np.zeros((3, len(FRAMEWORKS), 1, 3))
    p = FRAMEWORKS.index(PLANTED)
    shift[:2, p, :, 0] = -effect  # faster, in sd of log time
    shift[:2, p, :, 2] = effect  # more accurate, in sd of accuracy
    z = z + shift
    out = np.empty_like(z)
    out[..., 0] = noise.time_s * np.exp(noise.time_log_sd * z[..., 0])
    out[..., 1] = noise.test_time_s * np.exp(noise.time_log_sd * z[..., 1])
    out[..., 2] = np.clip(noise.accuracy + noise.accuracy_sd * z[..., 2], 0.0, 1.0)
    return out


def _filled(template: pd.DataFrame, values: np.ndarray) -> pd.DataFrame:
    flat = values.reshape(-1, 3)  # frameworks x repeats, in the template's row order
    return template.assign(train_time_s=flat[:, 0], test_time_s=flat[:, 1], accuracy=flat[:, 2])


def replicas(values: np.ndarray) -> list[Replica]:
    """The Replica of each replication of draws()' array."""
    repeats = values.shape[3]
    own, shared = _template(repeats, "own"), _template(repeats, SHARED_PRESET)
    return [Replica(_filled(own, v[0]), _filled(shared, v[1]), _filled(own, v[2])) for v in values]


# ---------------------------------------------------------------------------------------------- the verdicts


def _leader_outcome(result: stats.Leader) -> str:
    """The leader's state as an outcome: "distinct" is better, the right way where PLANTED leads."""
    if result.state == "distinct":
        return BETTER if result.name == PLANTED else WRONG_WAY
    return {"equivalent": EQUIVALENT, "inconclusive": INCONCLUSIVE}.get(result.state, UNTESTABLE)


def _leader(metric: str, rep: Replica) -> str:
    table = summary.framework_leaders(rep.own_points, metric)
    row = table[table["comparison"] == "own defaults"]
    return _leader_outcome(row["result"].iloc[0]) if len(row) else UNTESTABLE


def _effect(metric: str, rep: Replica) -> str:
    row = rep.effect_table[rep.effect_table["metric"] == metric]
    if not len(row):
        return UNTESTABLE
    # "differ" has no direction: where a difference was planted it is the true finding
    return {"differ": BETTER, "equivalent": EQUIVALENT, "inconclusive": INCONCLUSIVE}.get(row["verdict"].iloc[0],
                                                                                           UNTESTABLE)


def _compared(metric: str, rep: Replica) -> str:
    """PLANTED's row of `metric` in compare(baseline, own): B's PLANTED is faster and more accurate than A's."""
    table = rep.compare_table
    row = table[(table["framework"] == PLANTED) & (table["metric"] == metric)]
    word = str(row["verdict"].iloc[0]).replace(comparison.CONTENDED, "") if len(row) else UNTESTABLE
    more, less = comparison.METRICS[metric]
    if word in (more, less):
        return BETTER if word == (less if metric.endswith("_s") else more) else WRONG_WAY
    if word.startswith(EQUIVALENT):
        return EQUIVALENT
    if word == UNTESTABLE or word.startswith(("too few", "only in", "no finished")):
        return UNTESTABLE
    return INCONCLUSIVE  # "inconclusive", and the older "same (within noise)"


def _pair(metric: str, rep: Replica) -> str:
    """stats.judge_metric of PLANTED against one other framework, by seed: the primitive the leader selects from."""
    other = next(fw for fw in FRAMEWORKS if fw != PLANTED)
    df = rep.own_points
    a, b = ({s: v for s, v in zip(g["seed"], g[metric])} for g in (df[df["framework"] == fw]
                                                                      for fw in (PLANTED, other)))
    word = stats.judge_metric(a, b, metric, larger_is_better=summary.LARGER_IS_BETTER[metric]).word
    return {stats.WORSE: WRONG_WAY}.get(word, word)


def verdicts() -> list[Verdict]:
    """Every verdict calibrated by default."""
    # partials of module functions: a worker process receives them pickled
    return [Verdict("pair (judge), train time", partial(_pair, "train_time_s")),
            Verdict("pair (judge), accuracy", partial(_pair, "accuracy_pct")),
            Verdict("leader, train time", partial(_leader, "train_time_s")),
            Verdict("leader, accuracy", partial(_leader, "accuracy_pct")),
            Verdict("framework effect, train time", partial(_effect, "train_time_s")),
            Verdict("framework effect, accuracy", partial(_effect, "accuracy_pct")),
            Verdict("compare, train time", partial(_compared, "train_time_s")),
            Verdict("compare, accuracy", partial(_compared, "accuracy"))]


# ---------------------------------------------------------------------------------------------- the run


@dataclass
class Row:
    """One verdict at one repeats and effect: its outcomes' rates and their simulation standard errors."""
    verdict: str
    repeats: int
    effect_sd: float
    replications: int
    rates: dict = field(default_factory=dict)  # outcome -> rate (WRONG_WAY: NaN under the null)
    se: dict = field(default_factory=dict)

    def rate(self, outcome: str) -> float:
        return self.rates[outcome]


def tally(name: str, repeats: int, effect_sd: float, outcomes: Sequence[str]) -> Row:
    """The rates of `outcomes`; under the null a "better" either way is counted as "better" (false)."""
    n = len(outcomes)
    counts = {o: sum(1 for x in outcomes if x == o) for o in OUTCOMES}
    if effect_sd == 0:
        counts[BETTER] += counts.pop(WRONG_WAY)
    rates = {o: counts[o] / n if o in counts else math.nan for o in OUTCOMES}
    se = {o: math.sqrt(p * (1 - p) / n) if np.isfinite(p) else math.nan for o, p in rates.items()}
    return Row(name, repeats, effect_sd, n, rates, se)


def _judge_block(values: np.ndarray, chosen: Sequence[Verdict]) -> list[list[str]]:
    """Each verdict's outcome on each replication of `values` (one worker's share)."""
    reps = replicas(values)
    return [[v.call(rep) for rep in reps] for v in chosen]


def run(replications: int = REPLICATIONS, seed: int = 0, repeats: Sequence[int] = REPEATS,
        effects: Sequence[float] = EFFECTS, chosen: Sequence[Verdict] | None = None, noise: Noise = Noise(),
        jobs: int = 1) -> list[Row]:
    """Every verdict at every (repeats, effect): one Row each. The draws come from `seed` cell by cell, in this
    process, so that the table is the same for any `jobs`."""
    chosen = list(chosen or verdicts())
    cells = [(n, e) for n in repeats for e in effects]
    root = np.random.SeedSequence(seed)
    values = [draws(np.random.default_rng(s), replications, n, e, noise)
              for (n, e), s in zip(cells, root.spawn(len(cells)))]
    blocks = [(i, block) for i, v in enumerate(values) for block in np.array_split(v, max(1, jobs))]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            results = list(pool.map(_judge_block, [b for _, b in blocks], [chosen] * len(blocks)))
    else:
        results = [_judge_block(b, chosen) for _, b in blocks]
    per_cell: dict[int, list[list[str]]] = {i: [[] for _ in chosen] for i in range(len(cells))}
    for (i, _), result in zip(blocks, results):
        for k, outcomes in enumerate(result):
            per_cell[i][k] += outcomes
    return [tally(v.name, n, e, per_cell[i][k]) for k, v in enumerate(chosen) for i, (n, e) in enumerate(cells)]


# ---------------------------------------------------------------------------------------------- reading it


def failures(rows: Sequence[Row], power_effect: float = 3.0, power_repeats: int = 5) -> list[str]:
    """The verdicts that fail calibration, one line each: a false "better" under the null above NOMINAL_FALSE
    (plus two standard errors); power on a `power_effect`-sigma difference with `power_repeats` repeats below
    NOMINAL_POWER (minus two); "equivalent" said of that difference above NOMINAL_FALSE (plus two)."""
    out = []
    for r in rows:
        where = f"{r.verdict}, {r.repeats} repeats, {r.effect_sd:g} sd"
        if r.effect_sd == 0 and r.rate(BETTER) > NOMINAL_FALSE + 2 * r.se[BETTER]:
            out.append(f"{where}: false 'better' {r.rate(BETTER):.3f} > {NOMINAL_FALSE:g} + 2 x {r.se[BETTER]:.3f}")
        if r.effect_sd == power_effect and r.repeats == power_repeats:
            if r.rate(BETTER) < NOMINAL_POWER - 2 * r.se[BETTER]:
                out.append(f"{where}: power {r.rate(BETTER):.3f} < {NOMINAL_POWER:g} - 2 x {r.se[BETTER]:.3f}")
        if r.effect_sd == power_effect and r.rate(EQUIVALENT) > NOMINAL_FALSE + 2 * r.se[EQUIVALENT]:
            out.append(f"{where}: false 'equivalent' {r.rate(EQUIVALENT):.3f} > {NOMINAL_FALSE:g} + 2 x "
                       f"{r.se[EQUIVALENT]:.3f}")
    return out


HEADERS = ["verdict", "repeats", "effect (sd)", "R", "better", "wrong way", "equivalent", "inconclusive",
           "not testable"]


def _cell(r: Row, outcome: str) -> str:
    p = r.rate(outcome)
    return "-" if not np.isfinite(p) else f"{p:.3f} ({r.se[outcome]:.3f})"


def text(rows: Sequence[Row]) -> str:
    """The plain-text table: each rate with its simulation standard error in brackets."""
    body = [[r.verdict, str(r.repeats), f"{r.effect_sd:g}", str(r.replications), *(_cell(r, o) for o in OUTCOMES)]
            for r in rows]
    widths = [max(len(x) for x in col) for col in zip(HEADERS, *body)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(HEADERS), line(["-" * w for w in widths]), *(line(b) for b in body)]) + "\n"


def markdown(rows: Sequence[Row]) -> str:
    """The same table in Markdown (docs/verdicts.md)."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
    for r in rows:
        cells = [r.verdict, str(r.repeats), f"{r.effect_sd:g}", str(r.replications), *(_cell(r, o) for o in OUTCOMES)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def as_json(rows: Sequence[Row], settings: dict) -> dict:
    def clean(d: dict) -> dict:
        return {k: (v if np.isfinite(v) else None) for k, v in d.items()}
    return {"settings": settings,
            "rows": [{**asdict(r), "rates": clean(r.rates), "se": clean(r.se)} for r in rows],
            "failures": failures(rows)}


# ---------------------------------------------------------------------------------------------- the command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--replications", type=int, default=None,
                        help=f"replications per cell (default {REPLICATIONS}; --quick: {QUICK_REPLICATIONS})")
    parser.add_argument("--seed", type=int, default=0, help="the simulation's seed (the same seed, the same table)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_REPLICATIONS} replications, {QUICK_REPEATS[0]} repeats, effects 0 and 3 sd")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--json", type=Path, default=None, help="also write the table as JSON to this file")


def command(args: argparse.Namespace) -> int:
    repeats, effects = (QUICK_REPEATS, QUICK_EFFECTS) if args.quick else (REPEATS, EFFECTS)
    replications = args.replications or (QUICK_REPLICATIONS if args.quick else REPLICATIONS)
    if replications < 2:
        print("dlbench calibrate: --replications must be 2 or more", file=sys.stderr)
        return 2
    started = time.perf_counter()
    rows = run(replications, args.seed, repeats, effects, jobs=max(1, args.jobs))
    wall = time.perf_counter() - started
    print(markdown(rows) if args.markdown else text(rows), end="")
    bad = failures(rows)
    print(f"\n{len(rows)} rows, {replications} replications each, seed {args.seed}, {wall:.0f} s on {args.jobs} "
          f"jobs (load average {os.getloadavg()[0]:.1f}); noise {asdict(Noise())}; margins {asdict(stats.Margins())}")
    print("miscalibrated:\n  " + "\n  ".join(bad) if bad else "every verdict within calibration")
    if args.json:
        settings = {"replications": replications, "seed": args.seed, "repeats": list(repeats),
                    "effects_sd": list(effects), "noise": asdict(Noise()), "margins": asdict(stats.Margins()),
                    "frameworks": list(FRAMEWORKS), "planted": PLANTED, "wall_s": round(wall, 1)}
        args.json.write_text(json.dumps(as_json(rows, settings), indent=1) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dlbench calibrate",
                                     description="measure how often each verdict errs, by simulation "
                                     "(docs/verdicts.md)")
    add_arguments(parser)
    return command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
