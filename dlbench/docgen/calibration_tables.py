"""docs/verdicts.md's tables, written from the calibration as measured (dlbench/analysis/calibration/<design>.json,
which `dlbench calibrate --design NAME --json` writes): the page's prose stays as written, and each table between
its markers is the measured one, so that the page and the numbers the findings quote cannot drift apart.

    python -m dlbench.docgen.calibration_tables            rewrite the tables in docs/verdicts.md
    python -m dlbench.docgen.calibration_tables --check    exit 1 if a table differs from its measured file
"""

from __future__ import annotations

import re
import sys

from dlbench.analysis import calibrate, designs
from dlbench.docgen import DOCS, page_command

PAGE = DOCS / "verdicts.md"
SOURCE = "dlbench/analysis/calibration/*.json"
BEGIN, END = "<!-- calibration table: {design} -->", "<!-- end of the calibration table -->"


def table(design: str) -> str:
    """A design's measured table in Markdown, with the settings it was measured with."""
    measured = designs.measured(design)
    if measured is None:
        return f"Not measured: run `dlbench calibrate --design {design} --json {SOURCE.replace('*', design)}`.\n"
    s = measured["settings"]
    return (f"Measured with `dlbench calibrate --design {design}`: {s['replications']} replications per scenario "
            f"and repeats, seed {s['seed']}, repeats {' and '.join(map(str, s['repeats']))}, effect "
            f"{s['effect_sd']:g} sd, margins {s['margins']['time_pct']:g} % of time and "
            f"{s['margins']['accuracy_pp']:g} points of accuracy, {s['wall_s']:.0f} s on the machine it ran on.\n\n"
            + calibrate.markdown(calibrate.rows_of(measured)))


def render(text: str | None = None) -> str:
    """The page with every marked table written again from its measured file."""
    text = PAGE.read_text() if text is None else text
    pattern = re.compile(re.escape(BEGIN).replace(r"\{design\}", r"(?P<design>[a-z]+)") + r"\n.*?" + re.escape(END),
                         re.S)
    return pattern.sub(lambda m: f"{BEGIN.format(design=m['design'])}\n{table(m['design'])}{END}", text)


def main(argv: list[str] | None = None) -> int:
    return page_command(argv, "dlbench.docgen.calibration_tables", __doc__, PAGE, render, SOURCE)


if __name__ == "__main__":
    sys.exit(main())
