"""Rule machine_peak: this machine's float32 GEMM peak at the study's thread counts (dlbench.peak)."""

from dlbench import joblog, peak

sm = snakemake  # noqa: F821 - the object Snakemake gives a script

joblog.run(sm.log[0], lambda: peak.write(sm.output[0], sm.params.threads))
