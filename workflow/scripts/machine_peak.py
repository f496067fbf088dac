"""Rule machine_peak: this machine's GEMM peaks at the study's thread counts (dlbench.node.peak), measured alone:
float32 here, bfloat16 in the PyTorch environment where the study has bf16 points."""

import json

from dlbench.node import peak
from dlbench.rules import joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> int:
    bf16_python = json.loads(open(sm.input.bf16_env[0]).read())["python"] if sm.input.bf16_env else None
    # A measurement like a CPU point: alone on the node, no heavy work and no GPU point beside it.
    return peak.write(sm.output[0], sm.params.threads, bf16_python=bf16_python, lock=sm.params.lock or None)


joblog.run(sm.log[0], main)
