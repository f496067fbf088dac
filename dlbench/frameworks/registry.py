"""Everything that differs per framework, one record each; every list of frameworks derives from here.

The config schema's list of frameworks, the presets' `own`, the charts' colours and order,
set-up's environments, the tests that run every framework: all read FRAMEWORKS. A new
framework is its adapter (dlbench/frameworks/<name>.py), its pins (envs/<name>.txt) and
its record below.

Environments: a framework's CPU environment is named after it (`pytorch`, pins envs/pytorch.txt);
each of its `variants` is another environment, `<name>-<variant>` (pins envs/pytorch-cuda.txt).
Which one a point runs in is decided by Framework.env_name alone.

Standard library only: the runner and the trainer import it in every environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlbench.rerun import NO_RERUN

# The run axes a framework may accept other values of, and each axis's value when a point does not set it
# (None: the axis is left out of the point, and the framework runs as it always does: its `natural` value).
AXIS_DEFAULTS = {"device": "cpu", "library": "default", "interop_threads": None, "compile": None, "precision": None,
                 "memory_format": None}
# What the values of the compile, precision and memory_format axes mean, per framework:
#   compile    eager: PyTorch's eager mode; TensorFlow's tf.function graph without XLA (its usual mode); JAX op
#              by op under jax.disable_jit. compiled: torch.compile (inductor); tf.function(jit_compile=True)
#              (XLA); jax.jit (XLA, JAX's usual mode). Caffe and Theano have no such switch: they refuse both.
#   precision  fp32: float32 throughout; bf16: mixed precision, bfloat16 compute with float32 master weights
#              (torch.autocast, Keras' mixed_bfloat16 policy, Flax's dtype=bfloat16); fp64: float64 throughout
#              (Theano's floatX=float64, its own default; PyTorch's float64 module; Keras' float64 policy).
#              Caffe: fp32 only (its `caffe` tool trains in float). JAX: fp32 and bf16 (float64 needs
#              jax_enable_x64 and a float64 path through its adapter, which it does not have).
#   memory_format  PyTorch's layout of a network's 4-d weights: contiguous (NCHW, what a PyTorch user gets) or
#              channels_last (torch.channels_last, an opt-in that oneDNN's convolutions run faster in). The other
#              frameworks have no such switch in their users' hands: they refuse both.


@dataclass(frozen=True)
class Counts:
    """The values of an axis that counts threads: every whole number from 1."""

    def __contains__(self, value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    def __str__(self) -> str:
        return "any whole number from 1"


# The environment variant a point of each device wants (a device without one runs in the CPU environment),
# and the one a compute library wants (a BLAS that a framework links at build time: a build of its own).
DEVICE_VARIANTS = {"gpu": "cuda"}
LIBRARY_VARIANTS = {"mkl": "mkl"}
# How the config names a framework's plain environment among its variants (site environments, `envs.site`).
PLAIN_VARIANT = "cpu"


@dataclass(frozen=True)
class Cost:
    """What the run-time estimate (dlbench.plan.estimate) assumes of a framework before any of its points has run, in
    its natural compile and precision mode; where each figure comes from is said there."""

    efficiency: float  # the fraction of the one-thread float32 GEMM peak that one thread's training step reaches
    thread_exponent: float  # training throughput grows as threads ** exponent
    step_overhead_s: float  # a training step's time apart from its computation (dispatch)
    fixed_s: float  # a point's wall time outside training and testing (start-up, imports, build, compile, exit)


@dataclass(frozen=True)
class Framework:
    # Fields marked NO_RERUN are for people and the time estimate: no job's result depends on them, and changing one
    # reruns nothing (dlbench.rerun).
    name: str  # as the config names it
    label: str = field(metadata=NO_RERUN)  # as people write it
    own_preset: str  # whose example's defaults are its own (a preset of dlbench/study/presets.yaml)
    published_as: str | None = field(metadata=NO_RERUN)  # its name in the study's published table; None: not in it
    color: str = field(metadata=NO_RERUN)  # its colour in every chart
    # Values of each run axis it can honour, beyond the axis default: library -> what each switches.
    accepts: dict[str, tuple[str, ...] | Counts] = field(default_factory=dict)
    # Environment variables set before the framework is imported, and those a value of an axis adds.
    env: dict[str, str] = field(default_factory=dict)
    axis_env: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    # Environments besides the CPU one: `<name>-<variant>`, built from envs/<name>-<variant>.txt.
    variants: tuple[str, ...] = ()
    # Those of `variants` used only when a study names them (config `envs.opt_in`): untested builds.
    opt_in: tuple[str, ...] = ()
    # What it runs where a point leaves an axis out (compile: eager); a point giving that value leaves it out
    # too, so that it is the same point (the same id) as one that never named the axis.
    natural: dict[str, str] = field(default_factory=dict)
    # The precision the study's own scripts trained it in, per dataset family where not float32: its figures
    # stand beside the published ones at that precision where this run has it.
    study_precision: dict[str, str] = field(default_factory=dict)
    # Variables set to the point's thread count before the framework is imported (its own thread knob).
    threads_env: tuple[str, ...] = ()
    # Whether dlbench's shared training loop drives it (stepped.SteppedAdapter); Caffe runs its own solver.
    stepped: bool = True
    # The estimate's defaults for it; None: its points wait for a measured one (or a probe).
    cost: Cost | None = field(default=None, metadata=NO_RERUN)
    # Its own packages in its pins files, whose version `versions:` replaces; none: it cannot be run by version.
    packages: tuple[str, ...] = ()
    # Whether its train jobs read input the workflow prepares for it once per input handling (Caffe's HDF5
    # files: dlbench/frameworks/caffe_data.py, rule caffe_data), rather than the dataset's store.
    prepared_input: bool = False
    # Whether it can run a preset's validation with early stopping (the shared loop, base.SteppedAdapter).
    early_stopping: bool = True
    # Whether its environment measures the machine's bfloat16 GEMM peak (dlbench.node.peak), the yardstick of bf16
    # points (numpy has no bfloat16): one framework has it.
    bf16_peak: bool = False
    # The spec's layer types (dlbench/spec/networks.py) its adapter does not build: a point whose network holds one is
    # refused as `unavailable` before training (base.refuse_layers), never run on a substitute.
    cannot_build: tuple[str, ...] = ()

    def values(self, axis: str) -> tuple[str, ...]:
        """Every value of a run axis of named values this framework accepts (the default, or its natural one, first)."""
        default = AXIS_DEFAULTS[axis] if AXIS_DEFAULTS[axis] is not None else self.natural.get(axis)
        return (default, *(v for v in self.accepts.get(axis, ()) if v != default))

    def honours(self, axis: str, value) -> bool:
        """Whether this framework can run a point with this value of a run axis."""
        return value == AXIS_DEFAULTS[axis] or value == self.natural.get(axis) or value in self.accepts.get(axis, ())

    def in_effect(self, axis: str, point: dict):
        """The value of a run axis a point runs with: its own, else this framework's natural one (None: no such
        switch), else the axis default."""
        given = point.get(axis)
        if given is not None:
            return given
        return self.natural.get(axis, AXIS_DEFAULTS[axis])

    def accepted(self, axis: str) -> str:
        """The values of a run axis this framework accepts, in words (for a one-line config error)."""
        allowed = self.accepts.get(axis, ())
        if isinstance(allowed, Counts):
            return str(allowed)
        if AXIS_DEFAULTS[axis] is None and not allowed and axis not in self.natural:
            return "none; leave the key out for it"
        return ", ".join(str(v) for v in self.values(axis) if v is not None)

    def environment(self, point: dict) -> dict[str, str]:
        """Variables that must be set before the framework is imported in the trainer process."""
        env = dict(self.env)
        env.update({name: str(point.get("threads", 1)) for name in self.threads_env})
        for axis in AXIS_DEFAULTS:
            env.update(self.axis_env.get((axis, str(point.get(axis, AXIS_DEFAULTS[axis]))), {}))
        if point.get("device", "cpu") == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU point must not touch (or initialise) a GPU
        return env

    def env_names(self) -> list[str]:
        """Every environment of this framework: the CPU one first, then one per variant."""
        return [self.name, *(f"{self.name}-{v}" for v in self.variants)]

    def env_name(self, point: dict, extra: tuple[str, ...] | frozenset[str] = ()) -> str:
        """The environment a point runs in: the variant its device wants where this framework has it, else
        the CPU one. `extra`: variants a study adds, opt-in ones it names and those a site provides."""
        usable = {v for v in self.variants if v not in self.opt_in} | set(extra)
        wanted = "-".join(v for v in (DEVICE_VARIANTS.get(str(point.get("device", AXIS_DEFAULTS["device"]))),
                                      LIBRARY_VARIANTS.get(str(point.get("library", AXIS_DEFAULTS["library"]))))
                          if v)
        # Without a build for what it wants (no MKL build with CUDA, say), a point runs in the CPU environment,
        # and its adapter refuses it if the library it runs is not the one asked for (base.check_library).
        return f"{self.name}-{wanted}" if wanted in usable else self.name


# In the order of the study (Wu et al. 2019): TensorFlow, Caffe, Torch, Theano; then those it did not run.
FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (
    # TensorFlow's inter-op pool (ops run side by side) is a knob apart from its intra-op threads (`threads`).
    Framework("tensorflow", "TensorFlow", own_preset="tensorflow", published_as="tensorflow", color="#ff8f00",
              accepts={"device": ("cpu", "gpu"), "library": ("default", "no_onednn"), "interop_threads": Counts(),
                       "compile": ("eager", "compiled"), "precision": ("fp32", "bf16", "fp64")},
              natural={"compile": "eager", "precision": "fp32"},
              env={"TF_CPP_MIN_LOG_LEVEL": "1", "TF_ENABLE_ONEDNN_OPTS": "1"},
              axis_env={("library", "no_onednn"): {"TF_ENABLE_ONEDNN_OPTS": "0"}}, variants=("cuda",),
              cost=Cost(efficiency=1.62, thread_exponent=0.12, step_overhead_s=0.0028, fixed_s=2.2),
              packages=("tensorflow-cpu", "tensorflow")),
    # Caffe's CUDA build (envs/caffe/build.sh --cuda) needs nvcc and has not run on a GPU: opt-in.
    # `library: mkl` is a build linked to Intel's MKL (build.sh --mkl), the default one OpenBLAS.
    Framework("caffe", "Caffe", own_preset="caffe", published_as="caffe", color="#2ca02c",
              accepts={"device": ("cpu", "gpu"), "library": ("default", "mkl")}, natural={"precision": "fp32"},
              variants=("cuda", "mkl"), opt_in=("cuda",), stepped=False, prepared_input=True, early_stopping=False,
              # batch normalisation is BatchNorm + Scale, a residual block an Eltwise SUM, gap a global Pooling
              cannot_build=("tokens", "layernorm", "attention", "gelu"),
              cost=Cost(efficiency=0.93, thread_exponent=0.0, step_overhead_s=0.00017, fixed_s=0.15)),
    # The study ran Torch7; dlbench runs its successor with Torch's defaults.
    Framework("pytorch", "PyTorch", own_preset="torch", published_as="torch", color="#ee4c2c",
              accepts={"device": ("cpu", "gpu"), "library": ("default", "no_onednn"),
                       "compile": ("eager", "compiled"), "precision": ("fp32", "bf16", "fp64"),
                       "memory_format": ("contiguous", "channels_last")},
              natural={"compile": "eager", "precision": "fp32", "memory_format": "contiguous"},
              threads_env=("TORCHINDUCTOR_COMPILE_THREADS",),
              # Torch7's default tensor type is double, which train-on-cifar.lua keeps (its MNIST script sets float)
              study_precision={"cifar10": "fp64"},
              # torch.compile starts cold every time, as XLA does (no on-disk cache), so its compile time repeats.
              axis_env={("compile", "compiled"): {"TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}}, variants=("cuda",),
              cost=Cost(efficiency=1.46, thread_exponent=0.75, step_overhead_s=0.0011, fixed_s=2.0),
              packages=("torch",), bf16_peak=True),
    # No CUDA variant: Theano's GPU back end (libgpuarray/pygpu) has no PyPI build. Its C code links
    # OpenBLAS, or with `library: mkl` Intel's MKL from its -mkl environment (PyPI's `mkl`). A fixed hash
    # seed: the compile cache's key of DimShuffle's C code holds a string hash, which Python salts per
    # process, so with a random seed every point compiled that module again and the cache grew a module a point.
    Framework("theano", "Theano", own_preset="theano", published_as="theano", color="#3d6ab0",
              accepts={"device": ("cpu", "gpu"), "library": ("default", "mkl"), "precision": ("fp32", "fp64")},
              natural={"precision": "fp32"}, variants=("mkl",), env={"PYTHONHASHSEED": "0"},
              study_precision={"mnist": "fp64", "cifar10": "fp64"},  # the study's command left floatX at float64
              axis_env={("library", "mkl"): {"DLBENCH_BLAS": "mkl"},
                        ("precision", "fp64"): {"DLBENCH_FLOATX": "float64"}},
              cost=Cost(efficiency=0.69, thread_exponent=0.0, step_overhead_s=0.0, fixed_s=4.1),
              cannot_build=("tokens", "layernorm", "attention", "gelu"),
              packages=("theano-pymc",)),
    # Not in the study. XLA's CPU thread pool takes its size from PJRT_NPROC; on a GPU, JAX would take 75 % of
    # its memory at start unless told to allocate as it goes (so that the monitor sees what it uses).
    Framework("jax", "JAX", own_preset="flax", published_as=None, color="#8e44ad",
              accepts={"device": ("cpu", "gpu"), "compile": ("compiled", "eager"), "precision": ("fp32", "bf16")},
              natural={"compile": "compiled", "precision": "fp32"}, threads_env=("PJRT_NPROC",),
              axis_env={("device", "gpu"): {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}}, variants=("cuda",),
              cost=Cost(efficiency=0.42, thread_exponent=0.5, step_overhead_s=0.0, fixed_s=3.0),
              packages=("jax", "jaxlib")),
)}


def names() -> list[str]:
    return list(FRAMEWORKS)


def get(name: str) -> Framework:
    return FRAMEWORKS[name]


def env_names() -> list[str]:
    """Every environment dlbench can build, all frameworks."""
    return [env for f in FRAMEWORKS.values() for env in f.env_names()]


# An environment of a framework at another version than its pins': `<env>@<version>` (pytorch-cuda@2.12.0).
VERSION_SEP = "@"


def framework_of_env(env: str) -> Framework:
    """The framework an environment name belongs to (`pytorch-cuda` -> PyTorch, `pytorch@2.12.0` too)."""
    env = env.split(VERSION_SEP, 1)[0]
    for f in FRAMEWORKS.values():
        if env in f.env_names():
            return f
    raise KeyError(env)


def bf16_peak_framework() -> Framework:
    """The framework whose environment measures the bfloat16 GEMM peak."""
    return next(f for f in FRAMEWORKS.values() if f.bf16_peak)


def early_stoppers() -> list[str]:
    """The frameworks that can run a validation with early stopping."""
    return [f.name for f in FRAMEWORKS.values() if f.early_stopping]


def own_presets() -> list[str]:
    """The frameworks' own presets, in the study's order: the presets a cross-application draws from."""
    return [f.own_preset for f in FRAMEWORKS.values()]
