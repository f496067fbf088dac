"""Rule partial: findings, charts and the table of runs from the points finished so far (dlbench.partial)."""

from dlbench import joblog, partial

sm = snakemake  # noqa: F821 - the object Snakemake gives a script

joblog.run(sm.log[0], lambda: partial.draw(sm.params.metrics, sm.output, membership=sm.params.membership,
                                           tuning=sm.params.tuning, peak_path=sm.params.peak,
                                           published=sm.params.published))
