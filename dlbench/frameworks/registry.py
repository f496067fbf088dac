"""Everything that differs per framework, one record each; every list of frameworks derives from here.

The config schema's list of frameworks, the presets' `own`, the charts' colours and order,
set-up's environments, the tests that run every framework: all read FRAMEWORKS. A new
framework is its adapter (dlbench/frameworks/<name>.py), its pins (envs/<name>.txt) and
its record below.

Standard library only: the runner and the trainer import it in every environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The run axes a framework may accept other values of, and each axis's value when a point does not set it
# (None: the axis is left out of the point, and the framework runs as it always does).
AXIS_DEFAULTS = {"device": "cpu", "library": "default", "interop_threads": None}


@dataclass(frozen=True)
class Counts:
    """The values of an axis that counts threads: every whole number from 1."""

    def __contains__(self, value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    def __str__(self) -> str:
        return "any whole number from 1"


@dataclass(frozen=True)
class Framework:
    name: str  # as the config names it
    label: str  # as people write it
    own_preset: str  # whose example's defaults are its own (a preset of dlbench/presets.yaml)
    published_as: str | None  # its name in the study's published table; None: not in the study
    color: str  # its colour in every chart
    # Values of each run axis it can honour, beyond the axis default: library -> what each switches.
    accepts: dict[str, tuple[str, ...] | Counts] = field(default_factory=dict)
    # Environment variables set before the framework is imported, and those a value of an axis adds.
    env: dict[str, str] = field(default_factory=dict)
    axis_env: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)

    def values(self, axis: str) -> tuple[str, ...]:
        """Every value of a run axis of named values this framework accepts (the default first)."""
        default = AXIS_DEFAULTS[axis]
        return (default, *(v for v in self.accepts.get(axis, ()) if v != default))

    def honours(self, axis: str, value) -> bool:
        """Whether this framework can run a point with this value of a run axis."""
        return value == AXIS_DEFAULTS[axis] or value in self.accepts.get(axis, ())

    def accepted(self, axis: str) -> str:
        """The values of a run axis this framework accepts, in words (for a one-line config error)."""
        allowed = self.accepts.get(axis, ())
        if isinstance(allowed, Counts):
            return str(allowed)
        if AXIS_DEFAULTS[axis] is None and not allowed:
            return "none; leave the key out for it"
        return ", ".join(str(v) for v in self.values(axis) if v is not None)

    def environment(self, point: dict) -> dict[str, str]:
        """Variables that must be set before the framework is imported in the trainer process."""
        env = dict(self.env)
        for axis in AXIS_DEFAULTS:
            env.update(self.axis_env.get((axis, str(point.get(axis, AXIS_DEFAULTS[axis]))), {}))
        if point.get("device", "cpu") == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU point must not touch (or initialise) a GPU
        return env


# In the order of the study (Wu et al. 2019): TensorFlow, Caffe, Torch, Theano.
FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (
    # TensorFlow's inter-op pool (ops run side by side) is a knob apart from its intra-op threads (`threads`).
    Framework("tensorflow", "TensorFlow", own_preset="tensorflow", published_as="tensorflow", color="#ff8f00",
              accepts={"device": ("cpu", "gpu"), "library": ("default", "no_onednn"), "interop_threads": Counts()},
              env={"TF_CPP_MIN_LOG_LEVEL": "1", "TF_ENABLE_ONEDNN_OPTS": "1"},
              axis_env={("library", "no_onednn"): {"TF_ENABLE_ONEDNN_OPTS": "0"}}),
    Framework("caffe", "Caffe", own_preset="caffe", published_as="caffe", color="#2ca02c",
              accepts={"device": ("cpu", "gpu")}),
    # The study ran Torch7; dlbench runs its successor with Torch's defaults.
    Framework("pytorch", "PyTorch", own_preset="torch", published_as="torch", color="#ee4c2c",
              accepts={"device": ("cpu", "gpu"), "library": ("default", "no_onednn")}),
    Framework("theano", "Theano", own_preset="theano", published_as="theano", color="#3d6ab0",
              accepts={"device": ("cpu", "gpu")}),
)}


def names() -> list[str]:
    return list(FRAMEWORKS)


def get(name: str) -> Framework:
    return FRAMEWORKS[name]


def own_presets() -> list[str]:
    """The frameworks' own presets, in the study's order: the presets a cross-application draws from."""
    return [f.own_preset for f in FRAMEWORKS.values()]
