"""How often each sentence of the findings errs, measured by simulation: whole runs tables with a known truth.

    dlbench calibrate [--design default|paper] [--replications 200] [--seed 0] [--jobs 2] [--quick]
                      [--repeats N ...] [--config PATH] [--markdown] [--json PATH]
    python -m dlbench.analysis.calibrate ...

Each replication simulates a whole runs table of a design (dlbench.analysis.designs: the default study or the
paper's, each with its truth; dlbench.analysis.simulate: the config's own points, with their unequal batch sizes,
lengths and images trained, sweeps beside the default points, a missing seed, contended runs and accuracies of
k / n test images) under a Scenario whose truth is known, and passes it through the functions the findings rule
runs (observations.observations, summary.framework_leaders, summary.framework_effect, summary.own_vs_cross,
summary.best_values), reading the words they give the findings (dlbench.analysis.sentences). Nothing here
re-implements a test. Each Sentence states its truth under each scenario, from the simulation's design (never
from the code it checks); the table says, per sentence, scenario and repeats, how often it claimed a difference
the truth does not hold (a "better" the wrong way included), claimed an equivalence where the truth differs, said
"agrees" where the truth does not, and found the truth, each with its simulation
standard error sqrt(p (1 - p) / R).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from dlbench import atomic
from dlbench.analysis import simulate, stats
from dlbench.analysis.designs import DEFAULT, DESIGNS, POWER_EFFECT, Design
from dlbench.analysis.sentences import BY, DIFFERENCE, EQUIVALENCE, NOT_TESTED, SAME, Replica, Sentence
from dlbench.analysis.simulate import Noise, Scenario
from dlbench.study.config import ConfigError

REPLICATIONS = 200
QUICK_REPEATS, QUICK_REPLICATIONS = (5,), 60
NOMINAL_FALSE, NOMINAL_POWER = stats.ALPHA, stats.POWER


# ---------------------------------------------------------------------------------------------- the run


@dataclass
class Row:
    """One sentence under one scenario at one repeats: its rates and their simulation standard errors."""
    sentence: str
    table: str
    scenario: str
    repeats: int
    replications: int
    truth: str
    rates: dict = field(default_factory=dict)  # false difference, false equivalence, false agreement, found
    se: dict = field(default_factory=dict)
    words: dict = field(default_factory=dict)  # every word said, and how often

    def rate(self, what: str) -> float:
        return self.rates[what]


RATES = ("false difference", "false equivalence", "false agreement", "found")


def tally(s: Sentence, scenario: str, repeats: int, words: Sequence[str]) -> Row:
    """The rates of one sentence's `words` under `scenario`: a difference claimed that is not the truth, an
    equivalence claimed where the truth differs, "agrees" where the truth is not, and the truth said (only where
    the truth is a difference: the power)."""
    truth = s.truth[scenario.split(" ")[0]]
    n = len(words)
    claims = [s.claim(w) for w in words]
    truth_differs = truth not in (SAME, NOT_TESTED) and s.claim(truth) == DIFFERENCE
    counts = {"false difference": sum(c == DIFFERENCE and w.split(BY)[0] != truth for c, w in zip(claims, words)),
              "false equivalence": sum(c == EQUIVALENCE and (truth_differs or truth == NOT_TESTED) for c in claims),
              "false agreement": sum(w == "agrees" and truth != "agrees" for w in words)}
    rates = {k: v / n for k, v in counts.items()}
    rates["found"] = sum(w == truth for w in words) / n if truth_differs else math.nan
    se = {k: math.sqrt(p * (1 - p) / n) if np.isfinite(p) else math.nan for k, p in rates.items()}
    said = {w: words.count(w) for w in sorted(set(words))}
    return Row(s.name, s.table, scenario, repeats, n, truth, rates, se, said)


def _judge_block(config_path: str, repeats: int, scenario: Scenario, noise: Noise, seeds: list,
                 chosen: Sequence[Sentence]) -> list[list[str]]:
    """Each sentence's word on each replication of one worker's share (`seeds`: one SeedSequence each)."""
    template = simulate.study_template(config_path, repeats)
    out: list[list[str]] = [[] for _ in chosen]
    for seed in seeds:
        rng = np.random.default_rng(seed)
        rep = Replica(simulate.simulate(template, scenario, noise, rng))
        for k, s in enumerate(chosen):
            out[k].append(s.word(rep))
    return out


def run(replications: int = REPLICATIONS, seed: int = 0, repeats: Sequence[int] | None = None,
        chosen: Sequence[Sentence] | None = None, noise: Noise | None = None, jobs: int = 1,
        config_path: str | Path | None = None, effect: float = POWER_EFFECT,
        only: Sequence[str] | None = None, design: Design = DEFAULT) -> list[Row]:
    """Every sentence of `design` under its every scenario (`only`: those of these names, "null" or "planted") at
    every repeats (default: the design's): one Row each. `config_path` and `noise` replace the design's. Each
    replication's draws come from its own child of `seed`, so that the table is the same for any `jobs`."""
    chosen = list(chosen or design.sentences())
    repeats = tuple(repeats or design.repeats)
    config_path, noise = config_path or design.config, noise or design.noise
    cells = [(n, sc) for n in repeats for sc in design.scenarios(effect)
             if only is None or sc.name.split(" ")[0] in only]
    children = np.random.SeedSequence(seed).spawn(len(cells))
    tasks = []
    for (n, sc), child in zip(cells, children):
        reps = child.spawn(replications)
        tasks += [(n, sc, list(part)) for part in np.array_split(np.array(reps, dtype=object), max(1, jobs))
                  if len(part)]
    args = [(str(config_path), n, sc, noise, part, chosen) for n, sc, part in tasks]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            results = list(pool.map(_judge_block, *zip(*args)))
    else:
        results = [_judge_block(*a) for a in args]
    words: dict = {}
    for (n, sc, _), result in zip(tasks, results):
        for k, said in enumerate(result):
            words.setdefault((k, n, sc.name), []).extend(said)
    return [tally(s, sc.name, n, words[(k, n, sc.name)]) for k, s in enumerate(chosen) for n, sc in cells]


# ---------------------------------------------------------------------------------------------- reading it


def _short_of_power(r: Row, power_repeats: int) -> bool:
    found = r.rate("found")
    return r.repeats == power_repeats and np.isfinite(found) and found < NOMINAL_POWER - 2 * r.se["found"]


def short_of_power(rows: Sequence[Row], power_repeats: int = 5) -> set[str]:
    """The sentences whose planted difference is found below NOMINAL_POWER (minus two standard errors) at
    `power_repeats` repeats (a design's `underpowered` names them; a name holds commas, so it is read from the
    rows)."""
    return {r.sentence for r in rows if _short_of_power(r, power_repeats)}


def failures(rows: Sequence[Row], power_repeats: int = 5, documented: frozenset = frozenset()) -> list[str]:
    """The sentences that fail calibration, one line each: a false difference, equivalence or agreement above
    NOMINAL_FALSE (plus two standard errors) under any scenario; the planted difference found below
    NOMINAL_POWER (minus two) at `power_repeats` repeats, unless the sentence is one whose power is `documented`
    (a design's underpowered sentences, whose measured power docs/verdicts.md states)."""
    out = []
    for r in rows:
        where = f"{r.sentence}, {r.scenario}, {r.repeats} repeats"
        for what in RATES[:3]:
            if r.rate(what) > NOMINAL_FALSE + 2 * r.se[what]:
                out.append(f"{where}: {what} {r.rate(what):.3f} > {NOMINAL_FALSE:g} + 2 x {r.se[what]:.3f}")
        if _short_of_power(r, power_repeats) and r.sentence not in documented:
            out.append(f"{where}: power {r.rate('found'):.3f} < {NOMINAL_POWER:g} - 2 x {r.se['found']:.3f}")
    return out


HEADERS = ["sentence", "scenario", "repeats", "R", "truth", *RATES]


def _cell(r: Row, what: str) -> str:
    p = r.rate(what)
    return "-" if not np.isfinite(p) else f"{p:.3f} ({r.se[what]:.3f})"


def _cells(r: Row) -> list[str]:
    return [r.sentence, r.scenario, str(r.repeats), str(r.replications), r.truth, *(_cell(r, w) for w in RATES)]


def text(rows: Sequence[Row]) -> str:
    """The plain-text table: each rate with its simulation standard error in brackets."""
    body = [_cells(r) for r in rows]
    widths = [max(len(x) for x in col) for col in zip(HEADERS, *body)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(HEADERS), line(["-" * w for w in widths]), *(line(b) for b in body)]) + "\n"


def markdown(rows: Sequence[Row]) -> str:
    """The same table in Markdown (docs/verdicts.md)."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + " --- |" * len(HEADERS)]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def as_json(rows: Sequence[Row], settings: dict) -> dict:
    def clean(d: dict) -> dict:
        return {k: (v if np.isfinite(v) else None) for k, v in d.items()}
    return {"settings": settings,
            "rows": [{**asdict(r), "rates": clean(r.rates), "se": clean(r.se)} for r in rows],
            "failures": failures(rows)}


# ---------------------------------------------------------------------------------------------- the command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from dlbench import arguments

    parser.add_argument("--design", choices=sorted(DESIGNS), default=DEFAULT.name,
                        help="the study simulated: default (config/config.yaml) or paper (config/paper.yaml, every "
                        "sub-study); default: default")
    parser.add_argument("--replications", type=arguments.count(2, "a number of replications"), default=None,
                        help=f"replications per scenario and repeats (default {REPLICATIONS}; --quick: "
                        f"{QUICK_REPLICATIONS})")
    parser.add_argument("--seed", type=int, default=0, help="the simulation's seed (the same seed, the same table)")
    parser.add_argument("--jobs", type=arguments.count(1, "a number of workers"), default=min(2, os.cpu_count() or 1),
                        help="worker processes")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_REPLICATIONS} replications, "
                        f"{QUICK_REPEATS[0]} repeats")
    parser.add_argument("--repeats", type=arguments.count(1, "a number of seeds"), nargs="+", default=None,
                        help="the seeds of each point (default: the design's, 4 and 5 for the default study, 3 and 5 "
                        f"for the paper's; --quick: {QUICK_REPEATS[0]})")
    parser.add_argument("--config", type=Path, default=None,
                        help="another config of the design's shape to simulate (default: the design's own)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--json", type=Path, default=None, help="also write the table as JSON to this file")


def command(args: argparse.Namespace) -> int:
    design = DESIGNS[args.design]
    repeats = args.repeats or (QUICK_REPEATS if args.quick else design.repeats)
    replications = args.replications or (QUICK_REPLICATIONS if args.quick else REPLICATIONS)
    if replications < 2:
        print("dlbench calibrate: --replications must be 2 or more", file=sys.stderr)
        return 2
    config_path = args.config or design.config
    try:  # the study simulated, read and checked here: a bad config is one line, not a traceback from a worker
        simulate.study_template(str(config_path), repeats[0])
    except ConfigError as exc:
        print(exc.said(), file=sys.stderr)
        return 2
    if args.json and args.json.is_dir():
        print(f"dlbench calibrate: --json {args.json} is a folder; name a file in it", file=sys.stderr)
        return 2
    if args.json and not args.json.parent.is_dir():  # refused before minutes of simulation, not after
        print(f"dlbench calibrate: --json {args.json}: no folder {args.json.parent}; create it or name another",
              file=sys.stderr)
        return 2
    from dlbench.node import locks

    try:
        # heavy work: minutes on every core it is given, so never beside a measurement on this node
        with locks.heavy_work(locks.node_lock(), "dlbench calibrate"):
            started = time.perf_counter()
            rows = run(replications, args.seed, repeats, jobs=max(1, args.jobs), config_path=config_path,
                       design=design)
            wall = time.perf_counter() - started
    except (locks.LockTimeout, locks.LockUnusable) as exc:
        print(f"dlbench calibrate: {exc}", file=sys.stderr)
        return 1
    print(markdown(rows) if args.markdown else text(rows), end="")
    bad = failures(rows, documented=design.underpowered)
    print(f"\n{len(rows)} rows, {replications} replications each, seed {args.seed}, {wall:.0f} s on {args.jobs} "
          f"jobs (load average {os.getloadavg()[0]:.1f}); design {design.name}, study {config_path}; noise "
          f"{asdict(design.noise)}; margins {asdict(stats.Margins())}")
    short = sorted(short_of_power(rows) & design.underpowered)
    if short:
        print("short of power, as docs/verdicts.md states: " + "; ".join(short))
    print("miscalibrated:\n  " + "\n  ".join(bad) if bad else "every sentence within calibration")
    if args.json:
        settings = {"design": design.name, "replications": replications, "seed": args.seed,
                    "repeats": list(repeats), "effect_sd": POWER_EFFECT, "noise": asdict(design.noise),
                    "margins": asdict(stats.Margins()), "config": str(config_path), "wall_s": round(wall, 1)}
        atomic.write_text(args.json, json.dumps(as_json(rows, settings), indent=1) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dlbench calibrate",
                                     description="measure how often each sentence of the findings errs, by "
                                     "simulation (docs/verdicts.md)")
    add_arguments(parser)
    return command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
