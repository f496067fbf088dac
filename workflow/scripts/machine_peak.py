"""Rule machine_peak: this machine's float32 GEMM peak at the study's thread counts (dlbench.peak), measured alone."""

import contextlib

from dlbench import joblog, peak
from dlbench.locks import flocked

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> int:
    with flocked(sm.params.lock) if sm.params.lock else contextlib.nullcontext():  # no GPU point beside it
        return peak.write(sm.output[0], sm.params.threads)


joblog.run(sm.log[0], main)
