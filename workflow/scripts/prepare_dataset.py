"""Rule prepare_dataset: one dataset into resources/datasets/<name>/ (dlbench.rules.jobs.prepare)."""

from dlbench.rules import joblog, jobs

sm = snakemake  # noqa: F821 - the object Snakemake gives a script

joblog.run(sm.log[0], lambda: jobs.prepare(sm.wildcards.dataset, sm.params.folder, local=sm.params.local,
                                           test_copy=sm.params.test_copy))
