"""How long the points without a result will take, before anything has run and better as points finish.

A point's wall time is modelled as

    fixed cost + steps x (the framework's overhead per step + batch x FLOPs per image / rate)
               + test images x forward FLOPs per image / rate

where `rate` is the FLOP/s of the training step's computation. Each point takes the best source there is
for its rate and fixed cost:

- `measured`: finished points of the same kind (framework, network, dataset, device, threads, and the
  library, compile and precision mode):
  their median rate (their step time less the overhead per step: another batch size is judged right)
  and fixed cost;
- `scaled`: finished points of the same framework and network (and device) of another kind: their
  median rate, scaled by the framework's thread scaling to this point's threads;
- `modelled`: the machine's one-thread GEMM peak (dlbench.node.peak) times the framework's default
  efficiency and its thread scaling, the framework's default fixed cost (its registry record's `cost`); the
  FLOPs per image come from the network (dlbench.spec.networks.flops_per_image).

A probe (`dlbench plan CONFIG --probe`, dlbench.plan.probes) runs one short point of every kind that has no
finished point yet and keeps its record in results/probes/; the estimate counts probes as finished
points. A GPU point with nothing measured has no estimate (no GPU peak is known): it is counted apart.

Reading every finished record of a 20,000-point study costs seconds at every dry run; the estimate
needs medians, so it reads at most SAMPLE records of each kind (the rest are only seen to exist).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from dlbench.datasets import catalog
from dlbench.frameworks import registry
from dlbench.record import store
from dlbench.spec import inputs, networks
from dlbench.spec.lr_policies import steps_per_epoch

SAMPLE = 20  # finished records read per kind
# Defaults before anything is measured: each framework's registry record (`cost`, dlbench.frameworks.registry).
# Efficiency: the fraction of the one-thread float32 GEMM peak (dlbench.node.peak, numpy's BLAS) that one thread's
# training step reaches; thread exponent: training throughput grows as threads ** exponent; fixed cost: a
# point's wall time outside training and testing (interpreter, imports, data load, build, compile, exit).
# They describe a framework's natural compile and precision mode; a point of another mode (bf16, say) is
# modelled alike until a point of its own kind has run. Where they come from:
# - thread exponent: docs/performance.md, closeness to the hardware (LeNet, batch 64, 1 and 2 threads):
#   PyTorch 5118/3034 img/s = 2 ** 0.75, TensorFlow 3309/3041 = 2 ** 0.12; Theano and Caffe gain nothing
#   from a second thread (0.97 and 1.01).
# - efficiency and fixed cost: the records of the default study as it was then (LeNet on digits, batch 32
#   and 128, 2 threads) on the development machine (AMD EPYC, 2 cores, 131 GFLOP/s GEMM peak at 2 threads,
#   taken as 66 at 1), 2026-12-01: the median achieved GFLOP/s brought to 1 thread by the exponent, over
#   the one-thread peak; the median wall time less training and testing. PyTorch's and TensorFlow's oneDNN
#   beat numpy's OpenBLAS on these small convolutions, hence fractions above 1. JAX's: the modern study's
#   jax.jit fp32 points (config/modern.yaml at scale 0.05, flax_cnn, batch 128; docs/modern.md): 53.1 GFLOP/s
#   of a 127.9 peak at 1 thread, 75.1 at 2 (2 ** 0.5), 2.4-3.8 s outside training and testing.
# `python bench/estimate_error.py --derive --results DIR` prints what another study's records show.
# - step overhead: a training step's time apart from its computation (the framework's dispatch; what makes
#   small batches slow), from the same records: step time = overhead + batch x time per image, solved from
#   batch 32 and 128 (Theano's two do not fit a positive overhead, and JAX's study has one batch size: none
#   is assumed).
PROBES = "results/probes"
PEAK = "results/machine/peak.json"  # the machine_peak rule's measurement
QUICK_PEAK = "results/machine/peak.estimate.json"  # the estimate's own quick one, when the rule has not run


def mode(p: dict) -> tuple:
    """The library, compile and precision mode a point runs in (a bf16 point is not timed by an fp32 one)."""
    fw = registry.get(p["framework"])
    return tuple(fw.in_effect(axis, p) for axis in ("library", "compile", "precision"))


def family(p: dict) -> tuple:
    """Points whose measured speed carries over: same framework, network, device and mode."""
    return (p["framework"], p["network"], p["device"], *mode(p))


def kind(p: dict) -> tuple:
    """Points measured alike: the same family, dataset and threads."""
    return (family(p), p["dataset"], p["threads"])


def train_size(p: dict) -> int:
    return p.get("input", {}).get("train_samples") or catalog.INFO[p["dataset"]]["train_count"]


def test_size(p: dict) -> int:
    return p.get("input", {}).get("test_samples") or catalog.INFO[p["dataset"]]["test_count"]


def planned_images(point: dict) -> int:
    n = train_size(point)
    iterations = point["iterations"] or math.ceil(point["epochs"] * steps_per_epoch(n, point["batch_size"]))
    return iterations * point["batch_size"]


def planned_test_images(point: dict) -> int:
    """Images the point's tests go through: one test every test interval (else every epoch) and the final one."""
    n = train_size(point)
    spe = steps_per_epoch(n, point["batch_size"])
    total = point["iterations"] or math.ceil(point["epochs"] * spe)
    every = point.get("test_interval") or spe
    return (total // every if every < total else 0) * test_size(point) + test_size(point)


def flops(point: dict) -> dict[str, int]:
    return networks.flops_per_image(point["layers"], inputs.model_input_shape(point))


@dataclass
class Measure:
    """What one finished record says about its kind."""

    throughput: float  # training images per second
    test_throughput: float | None
    fixed_s: float  # wall time outside training and testing
    gflops: float  # achieved training GFLOP/s
    threads: int
    batch_size: int
    framework: str

    def compute_flops(self) -> float:
        """FLOP/s of the step's computation, its framework's overhead per step taken out."""
        step_s = self.batch_size / self.throughput
        cost = registry.get(self.framework).cost
        compute_s = max(0.1 * step_s, step_s - (cost.step_overhead_s if cost else 0.0))
        return self.gflops * 1e9 * step_s / compute_s


@dataclass
class Finished:
    """The points without a result, and a sample of the finished records of each kind."""

    pending: list[dict]
    done: int = 0
    by_kind: dict[tuple, list[Measure]] = field(default_factory=dict)


def measure_of(record: dict, point: dict) -> Measure | None:
    if record.get("status") != "ok" or not record.get("throughput_img_s") or not record.get("wall_time_s"):
        return None
    busy = sum(record.get(k) or 0.0 for k in ("train_time_s", "test_time_s", "interval_test_time_s"))
    per_image = record.get("flops_per_image_train") or flops(point)["train"]
    return Measure(record["throughput_img_s"], record.get("test_throughput_img_s"),
                   max(0.0, record["wall_time_s"] - busy), record["throughput_img_s"] * per_image / 1e9,
                   int(point["threads"]), int(point["batch_size"]), point["framework"])


def finished(points: list[dict], run_dir, probes: str | os.PathLike | None = PROBES) -> Finished:
    """Which points lack a result (one stat each), and up to SAMPLE finished records per kind (and probes)."""
    out = Finished([])
    for p in points:
        path = os.path.join(run_dir(p), store.RESULT)  # os, not pathlib: once per point of the study
        if not os.path.exists(path):
            out.pending.append(p)
            continue
        out.done += 1
        sample = out.by_kind.setdefault(kind(p), [])
        if len(sample) >= SAMPLE:
            continue
        record = store.read_or_skip(path)
        if record is None:
            out.pending.append(p)
            out.done -= 1
            continue
        m = measure_of(record, p)
        if m:
            sample.append(m)
    for p, m in probe_measures(points, probes):
        out.by_kind.setdefault(kind(p), []).append(m)
    out.by_kind = {k: v for k, v in out.by_kind.items() if v}
    return out


def probe_measures(points: list[dict], probes: str | os.PathLike | None):
    """(point, measure) of every probe kept for a kind of these points."""
    if not probes or not Path(probes).is_dir():
        return
    kinds = {probe_name(p): p for p in points}
    for name, p in kinds.items():
        record = store.read_or_skip(Path(probes) / name / store.RESULT)
        m = measure_of(record, p) if record else None
        if m:
            yield p, m


def probe_name(p: dict) -> str:
    (fw, network, device, library, compile_, precision), dataset, threads = kind(p)
    natural = registry.get(fw).natural  # a point of the natural mode keeps the name it always had
    modes = "".join(f"-{v}" for axis, v in (("compile", compile_), ("precision", precision))
                    if v is not None and v != natural.get(axis))
    return f"{fw}-{network}-{dataset}-{device}-t{threads}-{library}{modes}"


# ---------------------------------------------------------------------------------------------
# The machine's peak
# ---------------------------------------------------------------------------------------------

def peak_gflops(threads: list[int], root: str | os.PathLike = ".", measure: bool = True) -> dict[int, float]:
    """GEMM GFLOP/s by thread count: the machine_peak rule's file, else the estimate's own quick measurement
    (n = 1024, best of 3, about a second in all), made once and kept in results/machine/peak.estimate.json."""
    root = Path(root)
    known: dict[int, float] = {}
    for name in (QUICK_PEAK, PEAK):  # the rule's figures win
        path = root / name
        if path.exists():
            try:
                known.update({int(k): float(v) for k, v in json.loads(path.read_text())["gflops_by_threads"].items()})
            except (ValueError, KeyError, TypeError):
                pass
    missing = sorted(set(threads) - set(known))
    if missing and measure:
        from dlbench.atomic import write_json
        from dlbench.node import peak

        t0 = time.perf_counter()
        quick = {t: round(peak.gemm_gflops(n=1024, threads=t, repeats=3), 2) for t in missing}
        print(f"dlbench: measured this machine's GEMM peak for the estimate in {time.perf_counter() - t0:.1f} s "
              f"({', '.join(f'{t} threads: {g:.0f} GFLOP/s' for t, g in quick.items())})", file=sys.stderr)
        path = root / QUICK_PEAK
        old = json.loads(path.read_text())["gflops_by_threads"] if path.exists() else {}
        write_json(path, {"gemm_n": 1024, "gflops_by_threads": {**old, **{str(t): g for t, g in quick.items()}}})
        known.update(quick)
    return known


# ---------------------------------------------------------------------------------------------
# The estimate
# ---------------------------------------------------------------------------------------------

class Model:
    """Seconds per point from what has been measured, else from FLOPs and the machine's one-thread peak."""

    def __init__(self, done: Finished, peak: dict[int, float]):
        self.peak = peak
        self.by_kind = {k: self._medians(ms) for k, ms in done.by_kind.items()}
        self.by_kind_measures = done.by_kind
        self.family: dict[tuple, list[Measure]] = {}
        for k, ms in done.by_kind.items():
            self.family.setdefault(k[0], []).extend(ms)
        self._flops: dict[str, dict[str, int]] = {}
        self._seconds: dict[str, tuple[float | None, str]] = {}  # by point id: the estimate and the cluster ask both

    @staticmethod
    def _medians(ms: list[Measure]) -> tuple[float, float | None, float]:
        tests = [m.test_throughput for m in ms if m.test_throughput]
        return (statistics.median(m.throughput for m in ms), statistics.median(tests) if tests else None,
                statistics.median(m.fixed_s for m in ms))

    def _flops_of(self, p: dict) -> dict[str, int]:
        key = json.dumps([p["layers"], inputs.model_input_shape(p)])
        if key not in self._flops:
            self._flops[key] = flops(p)
        return self._flops[key]

    def seconds(self, p: dict) -> tuple[float | None, str]:
        """(expected wall seconds, the source: measured, scaled or modelled); None where nothing is known.

        Training: per step, the framework's overhead and the batch's FLOPs at the rate of the computation;
        the rate from finished points of the kind (measured), or of the framework and network at other threads
        or on another dataset (scaled by the framework's thread scaling), else from the GEMM peak (modelled).
        """
        if p["id"] not in self._seconds:
            self._seconds[p["id"]] = self._seconds_of(p)
        return self._seconds[p["id"]]

    def _seconds_of(self, p: dict) -> tuple[float | None, str]:
        fl = self._flops_of(p)
        threads = int(p["threads"])
        cost = registry.get(p["framework"]).cost
        exponent = cost.thread_exponent if cost else 0.5
        if kind(p) in self.by_kind:
            ms = self.by_kind_measures[kind(p)]
            rate = statistics.median(m.compute_flops() for m in ms)
            fixed, source = statistics.median(m.fixed_s for m in ms), "measured"
        elif family(p) in self.family:
            ms = self.family[family(p)]
            rate = statistics.median(m.compute_flops() * (threads / m.threads) ** exponent for m in ms)
            fixed, source = statistics.median(m.fixed_s for m in ms), "scaled"
        elif p["device"] == "cpu" and self.peak.get(1) and cost:
            rate = cost.efficiency * self.peak[1] * 1e9 * threads ** exponent
            fixed, source = cost.fixed_s, "modelled"
        else:
            return None, "unknown"
        per_image = (cost.step_overhead_s if cost else 0.0) / p["batch_size"] + fl["train"] / rate
        # a test is a forward pass at the same rate: a third of the FLOPs per image
        return fixed + planned_images(p) * per_image + planned_test_images(p) * fl["forward"] / rate, source


def estimate(points: list[dict], run_dir, done: Finished | None = None, *, root: str | os.PathLike = ".",
             peak: dict[int, float] | None = None, model: Model | None = None) -> dict:
    """Seconds for the points lacking metrics.json, and how many came from each source (model: one made of
    the same finished points already, see model_of)."""
    done = done or finished(points, run_dir)
    model = model or model_of(done, root, peak)
    seconds, sources = 0.0, {"measured": 0, "scaled": 0, "modelled": 0, "unknown": 0}
    for p in done.pending:
        guess, source = model.seconds(p)
        sources[source] += 1
        seconds += guess or 0.0
    return {"points": len(points), "pending": len(done.pending), "measured_kinds": len(done.by_kind),
            "estimated_s": seconds, "unknown": sources.pop("unknown"), "sources": sources}


def model_of(done: Finished, root: str | os.PathLike = ".", peak: dict[int, float] | None = None) -> Model:
    """The model of these finished points, with the one-thread peak (measured once if no file has it) where a
    point still needs it."""
    if peak is None:  # the model needs the one-thread peak only
        peak = peak_gflops([1], root) if done.pending else {}
    return Model(done, peak)


def describe(est: dict) -> str:
    hours = est["estimated_s"] / 3600
    text = (f"dlbench: {est['pending']} of {est['points']} points have no result yet; "
            f"estimated training time for them: {hours:.2f} h ({est['estimated_s']:.0f} s)")
    counted = {k: v for k, v in est.get("sources", {}).items() if v}
    if counted:
        text += " (" + ", ".join(f"{n} {k}" for k, n in counted.items()) + ")"
    if est["unknown"]:
        text += f", not counting {est['unknown']} GPU points with no measured point of their kind (probe them)"
    return text
