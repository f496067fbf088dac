"""Closeness to the hardware: achieved GFLOP/s of each framework on LeNet against the machine's float32 GEMM peak.

    .venv/bin/python bench/hardware.py [FRAMEWORK ...] [--iterations 300] [--repeats 2] [--threads 1 2]
                                       [--no-variants]

Per thread count: dlbench.node.peak.gemm_gflops (numpy's BLAS, 2048^3, best of 5) and, side by side,
each framework's LeNet point on prepared Fashion-MNIST (batch 64) through runner.run_point; the
record's achieved_gflops (throughput x the network's training FLOPs per image) over the peak.
With variants (the default), also the points with `library: no_onednn` (PyTorch without mkldnn,
TensorFlow without oneDNN), to show that the default is the faster path. The path in effect
(library, memory layout) is read from the record. Target: reported. About 5 minutes.
"""

from __future__ import annotations

import json
import shutil
import sys

import _common as c

from dlbench.node import peak
from dlbench.run import runner
from dlbench.run.options import RunOptions
from dlbench.study.sweep import one_point


def main(argv: list[str] | None = None) -> int:
    ap = c.parser(__doc__, frameworks=c.ALL_FRAMEWORKS, iterations=300, repeats=2, threads=[1, 2])
    ap.add_argument("--no-variants", dest="variants", action="store_false")
    args = ap.parse_args(argv)
    frameworks = c.usable(args.frameworks)
    runs = [(fw, "default") for fw in frameworks]
    if args.variants:
        runs += [(fw, "no_onednn") for fw in frameworks if c.registry.get(fw).honours("library", "no_onednn")]
    ds = c.dataset("fashion_mnist")
    load = c.wait_quiet()
    c.header("closeness to the hardware: achieved GFLOP/s / float32 GEMM peak", load)
    peaks: dict[int, list[float]] = {t: [] for t in args.threads}
    got: dict[tuple, list[dict]] = {}
    for _ in range(args.repeats):
        for t in args.threads:
            peaks[t].append(c.clean(peak.gemm_gflops, 2048, threads=t))
            for fw, library in runs:
                point = one_point(fw, dataset=c.DATASET, iterations=args.iterations, batch_size=64, threads=t,
                                  library=library)
                out = c.WORK / "hardware" / point["id"]
                shutil.rmtree(out, ignore_errors=True)
                rec = c.clean(runner.run_point, point, ds, out, RunOptions(python=c.env_python(fw)))
                if rec["status"] != "ok":
                    raise SystemExit(f"{fw} {library}: {rec['status']}: {rec['reason']}")
                got.setdefault((fw, library, t), []).append(rec)
    rows = []
    for t in args.threads:
        p = c.median(peaks[t])
        best = max((k for k in got if k[2] == t), key=lambda k: c.median([r["achieved_gflops"] for r in got[k]]))
        for (fw, library, threads), recs in got.items():
            if threads != t:
                continue
            g = c.median([r["achieved_gflops"] for r in recs])
            build = json.loads(recs[0]["build_json"] or "{}")
            path = recs[0]["library_in_effect"] or "-"
            layout = recs[0].get("memory_format_in_effect") or build.get("memory_format")  # older records: build
            if layout:
                path += f", {layout}"
            rows.append({"threads": t, "framework": fw, "library": library, "path in effect": path,
                         "img/s": c.median([r["throughput_img_s"] for r in recs]), "GFLOP/s": g,
                         "GEMM peak GFLOP/s": p, "of peak": f"{100 * g / p:.1f}%",
                         "best": "*" if (fw, library, threads) == best else ""})
    flops = next(iter(got.values()))[0]["flops_per_image_train"]
    c.summary(f"LeNet training FLOPs per image: {flops / 1e6:.2f} M; {args.repeats} repeats, medians", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
