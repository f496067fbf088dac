"""One adapter per framework. This module stays importable in every environment."""

from __future__ import annotations

FRAMEWORKS = ("pytorch", "tensorflow", "theano", "caffe")


def environment(framework: str, point: dict) -> dict[str, str]:
    """Variables that must be set before the framework is imported in the trainer process."""
    env: dict[str, str] = {}
    if framework == "tensorflow":
        env["TF_CPP_MIN_LOG_LEVEL"] = "1"
        env["TF_ENABLE_ONEDNN_OPTS"] = "0" if point.get("library") == "no_onednn" else "1"
    if point.get("device") == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU point must not touch (or initialise) a GPU
    return env
