"""Compile and precision: each framework's training throughput eager and compiled, in fp32 and in bf16.

    .venv/bin/python bench/modern.py [FRAMEWORK ...] [--iterations 150] [--repeats 2] [--threads 2]

Per framework with a compile and a precision switch (PyTorch, TensorFlow, JAX): Flax's MNIST
example's network and settings (preset `flax`: flax_cnn, batch 128, SGD with momentum) on the
prepared Fashion-MNIST, through runner.run_point, in four configurations: fp32 eager (the
baseline), compiled, bf16, and compiled + bf16 (for JAX, "eager" is op by op under
jax.disable_jit). One interleaved run: each repeat measures the float32 GEMM peak (numpy) and
the bfloat16 one (PyTorch, in its environment), then every framework's four configurations, their
order rotating repeat after repeat. The throughput is the record's (the training time alone: the
compile phase is apart). Figures: each configuration's img/s and its ratio to fp32 eager; the
achieved GFLOP/s (throughput x the network's training FLOPs per image) against the float32 GEMM
peak and, for bf16 configurations, the bfloat16 one; the CPU the trainer used.

Target: the best configuration at least 40 % of the float32 GEMM peak. Where it is not, the reason
is measured: the network's own matrix products (each conv as im2col x weights, each dense layer;
forward, and the two products of its backward pass) timed as plain float32 GEMMs with numpy at
their shapes give the ceiling that any GEMM-based implementation of this network could reach here.
About 10-15 minutes with the defaults (torch.compile's cold compilation is half a minute a point).
"""

from __future__ import annotations

import shutil
import sys
import time

import _common as c
import numpy as np

from dlbench.frameworks import registry
from dlbench.node import peak
from dlbench.run import runner
from dlbench.run.options import RunOptions
from dlbench.spec import networks
from dlbench.study.sweep import one_point

CONFIGS = [("eager", "fp32"), ("compiled", "fp32"), ("eager", "bf16"), ("compiled", "bf16")]
TARGET = 0.40


def layer_gemms(layers: list[dict], input_shape: tuple[int, int, int], batch: int) -> list[tuple[int, int, int]]:
    """(M, K, N) of every matrix product a training step of the network makes: per conv (as im2col) and dense
    layer, the forward product and the two of its backward pass (weights' gradient, input's gradient)."""
    out = []
    for layer, shape, (_, _, prev) in zip([x for x in layers if x["type"] in ("conv", "dense")],
                                          [s for x, s in zip(layers, networks.shapes(layers, input_shape))
                                           if x["type"] in ("conv", "dense")],
                                          networks.trainable(layers, input_shape)):
        m = batch * (shape[1] * shape[2] if layer["type"] == "conv" else 1)
        k = networks.fan_in(layer, prev)
        n = layer["filters"] if layer["type"] == "conv" else layer["units"]
        out += [(m, k, n), (k, m, n), (m, n, k)]
    return out


def gemm_ceiling(shapes: list[tuple[int, int, int]], threads: int, repeats: int = 3) -> float:
    """GFLOP/s of numpy's float32 GEMM over these shapes together: their FLOPs / the sum of their best times."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    flops = total = 0.0
    with threadpool_limits(limits=threads, user_api="blas"):
        for m, k, n in shapes:
            a = rng.standard_normal((m, k), dtype=np.float32)
            b = rng.standard_normal((k, n), dtype=np.float32)
            a @ b
            best = float("inf")
            for _ in range(repeats):
                t0 = time.perf_counter()
                a @ b
                best = min(best, time.perf_counter() - t0)
            flops += 2.0 * m * k * n
            total += best
    return flops / total / 1e9


def main(argv: list[str] | None = None) -> int:
    switch = [f.name for f in registry.FRAMEWORKS.values() if f.accepts.get("compile")]
    ap = c.parser(__doc__, frameworks=switch, iterations=150, repeats=2, threads=[2])
    args = ap.parse_args(argv)
    ds = c.dataset(c.DATASET)
    bf16_python = c.env_python("pytorch")
    load = c.wait_quiet()
    c.header("compile and precision: throughput against fp32 eager; best configuration against the GEMM peaks", load)
    got: dict[tuple, list[dict]] = {}
    peaks: dict[tuple[str, int], list[float]] = {}
    for r in range(args.repeats):
        for t in args.threads:
            peaks.setdefault(("fp32", t), []).append(c.clean(peak.gemm_gflops, 2048, threads=t))
            bf16 = c.clean(peak.bf16_in, bf16_python, [t], 2048)
            peaks.setdefault(("bf16", t), []).append(bf16["bf16_gflops_by_threads"][str(t)])
            for fw in args.frameworks:
                shift = r % len(CONFIGS)  # each repeat starts at another configuration
                for compile_, precision in CONFIGS[shift:] + CONFIGS[:shift]:
                    point = one_point(fw, "flax", c.DATASET, iterations=args.iterations, threads=t,
                                      compile=compile_, precision=precision)
                    out = c.WORK / "modern" / fw / point["id"]
                    shutil.rmtree(out, ignore_errors=True)
                    rec = c.clean(runner.run_point, point, ds, out, RunOptions(python=c.env_python(fw)))
                    if rec["status"] != "ok":
                        raise SystemExit(f"{fw} {compile_} {precision}: {rec['status']}: {rec['reason']}\n"
                                         f"{rec.get('log_tail', '')}")
                    got.setdefault((fw, compile_, precision, t), []).append(rec)
                    print(f"# {fw} {compile_} {precision} t{t}: {rec['throughput_img_s']:.0f} img/s, compile "
                          f"{rec['compile_time_s']:.1f} s, CPU {rec['cpu_util_mean_pct']:.0f}%", flush=True)
    rows = []
    layers = one_point("jax", "flax", c.DATASET)["layers"]
    flops = networks.flops_per_image(layers, networks.INPUT_SHAPES["flax_cnn"])["train"]
    best = None
    for t in args.threads:
        fp32_peak, bf16_peak = c.median(peaks[("fp32", t)]), c.median(peaks[("bf16", t)])
        for fw in args.frameworks:
            base = c.median([r["throughput_img_s"] for r in got[(fw, "eager", "fp32", t)]])
            for compile_, precision in CONFIGS:
                recs = got[(fw, compile_, precision, t)]
                img_s = c.median([r["throughput_img_s"] for r in recs])
                gflops = img_s * flops / 1e9
                row = {"threads": t, "framework": fw, "compile": compile_, "precision": precision, "img/s": img_s,
                       "x fp32 eager": img_s / base, "GFLOP/s": gflops,
                       "of fp32 peak": f"{100 * gflops / fp32_peak:.1f}%",
                       "of bf16 peak": f"{100 * gflops / bf16_peak:.1f}%" if precision == "bf16" else "-",
                       "compile s": c.median([r["compile_time_s"] for r in recs]),
                       "CPU %": c.median([r["cpu_util_mean_pct"] for r in recs]),
                       "accuracy": c.median([r["accuracy"] for r in recs]),
                       "in effect": f"{recs[0]['compile_in_effect']}; {recs[0]['precision_in_effect']}"}
                rows.append(row)
                if best is None or gflops > best[0]:
                    best = (gflops, row, fp32_peak, bf16_peak)
    gflops, row, fp32_peak, bf16_peak = best
    t = row["threads"]
    ceiling = c.clean(gemm_ceiling, layer_gemms(layers, networks.INPUT_SHAPES["flax_cnn"], 128), t)
    c.summary(f"flax_cnn, batch 128, {args.iterations} iterations, {args.repeats} repeats (medians); training "
              f"FLOPs per image {flops / 1e6:.1f} M; GEMM peaks at {t} thread(s): float32 {fp32_peak:.1f} GFLOP/s "
              f"(numpy), bfloat16 {bf16_peak:.1f} GFLOP/s (PyTorch); CPU bf16 flags: "
              f"{c.machine.bf16_native() or 'none'}", rows)
    verdict = c.verdict(gflops / fp32_peak >= TARGET)
    print(f"\n# best: {row['framework']} {row['compile']} {row['precision']} on {t} thread(s), {gflops:.1f} GFLOP/s: "
          f"{100 * gflops / fp32_peak:.1f}% of the float32 GEMM peak, {100 * gflops / bf16_peak:.1f}% of the bfloat16 "
          f"one; target >= {100 * TARGET:.0f}% of float32: {verdict}")
    print(f"# this network's own matrix products as plain float32 GEMMs (numpy, {t} thread(s), batch 128): "
          f"{ceiling:.1f} GFLOP/s, {100 * ceiling / fp32_peak:.1f}% of the float32 GEMM peak: the ceiling of a "
          f"GEMM-based implementation of it here; the best configuration reached {100 * gflops / ceiling:.0f}% of it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
