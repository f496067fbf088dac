"""How sure each sentence of the findings can be, as the calibration measured it (dlbench.analysis.designs): a study
run as a simulated design runs (its config file, untouched by --config) has each sentence's power to find a
planted 3-sd difference at its repeats; a sentence that finds it less than 80 % of the time says so beside its
verdict, so that a reader weighs an "agrees" or a "leads" by it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dlbench.analysis import designs
from dlbench.analysis.designs import NOMINAL_POWER, POWER_EFFECT, Design


@dataclass(frozen=True)
class Power:
    """The calibration a study's findings quote: its design (None: not a simulated shape) and its repeats."""
    design: Design | None
    repeats: int | None

    def note(self, *sentences: str) -> str:
        """" (calibrated power: ...)" for the first of `sentences` (a sentence's names, designs') measured below
        NOMINAL_POWER at this study's repeats; "" where it reaches it, or nothing was measured."""
        if self.design is None or self.repeats is None:
            return ""
        power = designs.measured_power(self.design.name)
        for name in sentences:
            if (name, self.repeats) in power:
                found, _ = power[(name, self.repeats)]
                if found >= NOMINAL_POWER:
                    return ""
                return (f" (calibrated power: a planted {POWER_EFFECT:g}-sd difference is found {found:.0%} of the "
                        f"time at {self.repeats} repeats in simulated studies of this shape; docs/verdicts.md)")
        return ""

    def intro(self) -> str:
        """One line for the observations: what the calibration says of this study's sentences."""
        if self.design is None:
            return ("How often these sentences err was measured by simulating studies shaped like the default "
                    "study and the paper's (`dlbench calibrate`, docs/verdicts.md); this study's shape was not "
                    "simulated.")
        measured = sorted({r for _, r in designs.measured_power(self.design.name)})
        if self.repeats not in measured:
            return (f"This study is {self.design.name}'s shape, calibrated at {' and '.join(map(str, measured))} "
                    f"repeats (docs/verdicts.md), not at its own {self.repeats}: no sentence's power is quoted.")
        return (f"Calibrated (`dlbench calibrate --design {self.design.name}`, docs/verdicts.md): each sentence claims "
                "a difference the truth does not hold at most 5 % of the time; one that finds a planted "
                f"{POWER_EFFECT:g}-sd difference less than {NOMINAL_POWER:.0%} of the time at this study's "
                f"{self.repeats} repeats says how often.")


def power_of(runs: pd.DataFrame, study_file: str | Path | None) -> Power:
    """The calibration of a study's runs: its design (designs.for_config of the config file it ran, "" where it ran
    another or changed it with --config), its repeats (the most seeds a setting ran)."""
    design = designs.for_config(study_file)
    if design is None or runs.empty or "seed" not in runs.columns:
        return Power(design, None)
    keys = [c for c in ("framework", "dataset", "device", "preset", "batch_size", "learning_rate") if c in runs]
    return Power(design, int(runs.groupby(keys, dropna=False)["seed"].nunique().max()))
