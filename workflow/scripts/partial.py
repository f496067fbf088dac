"""Rule partial: findings, charts and the table of runs from the points finished so far (dlbench.present.partial)."""

from dlbench.present import partial
from dlbench.rules import joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> int:
    try:
        k = partial.draw(sm.params.metrics, sm.output, membership=sm.params.membership, tuning=sm.params.tuning,
                         peak_path=sm.params.peak, published=sm.params.published,
                         verdicts=sm.params.verdicts, study_file=sm.params.study_file)
    except partial.NothingFinished as exc:
        print(f"dlbench: {exc}")
        return 2
    print(f"dlbench: drew results/partial/ from {k} of {len(sm.params.metrics)} points")
    return 0


joblog.run(sm.log[0], main)
