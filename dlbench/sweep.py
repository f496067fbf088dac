"""Expand a validated config into the points table: one row per training job, stable ids."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re

from dlbench import initialisers, models, presets
from dlbench.datasets import catalog

# Sweep axes that override a preset's value, in the order they appear in ids.
OVERRIDABLE = ("optimizer", "momentum", "weight_decay", "learning_rate", "batch_size", "epochs", "iterations")
# Axes that belong to the run, not to the preset.
RUN_AXES = {"device": "cpu", "threads": 1, "library": "default"}

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _scaled(value: float, scale: float, *, whole: bool) -> float | int:
    if scale == 1:
        return value
    scaled = value * scale
    return max(1, round(scaled)) if whole else max(scaled, 1e-3)


def digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def point_id(p: dict) -> str:
    """Readable slug plus a digest of every parameter: same parameters, same id, on any machine."""
    length = f"i{p['iterations']}" if p.get("iterations") else f"e{p['epochs']:g}"
    parts = [p["preset"], p["network"], f"bs{p['batch_size']}", f"lr{p['learning_rate']:g}", length,
             p["device"], f"t{p['threads']}"]
    if p["library"] != "default":
        parts.append(p["library"])
    parts.append(f"r{p['repeat']}")
    body = {k: v for k, v in p.items() if k != "id"}
    slug = _UNSAFE.sub("_", "-".join(str(x) for x in parts))
    return f"{slug}-{digest(body)[:10]}"


def sub_studies(cfg: dict) -> dict[str, dict]:
    """The config's sub-studies as whole configs: each overrides the top level (its sweep merges over it)."""
    if not cfg.get("studies"):
        return {"main": cfg}
    out = {}
    for name, study in cfg["studies"].items():
        sub = {k: v for k, v in cfg.items() if k != "studies"}
        sub.update({k: v for k, v in study.items() if k != "sweep"})
        sub["sweep"] = {**cfg.get("sweep", {}), **study.get("sweep", {})}
        if "epochs" in study.get("sweep", {}):
            sub["sweep"].pop("iterations", None)
        if "iterations" in study.get("sweep", {}):
            sub["sweep"].pop("epochs", None)
        out[name] = sub
    return out


def expand(cfg: dict) -> list[dict]:
    """Every point of every sub-study, each once, in a stable order."""
    points: dict[str, dict] = {}
    for sub in sub_studies(cfg).values():
        for p in expand_one(sub):
            points.setdefault(p["id"], p)
    return list(points.values())


def membership(cfg: dict) -> dict[str, list[str]]:
    """Point id -> the sub-studies it belongs to (a point shared by two studies runs once)."""
    out: dict[str, list[str]] = {}
    for name, sub in sub_studies(cfg).items():
        for p in expand_one(sub):
            out.setdefault(p["id"], []).append(name)
    return out


def expand_one(cfg: dict) -> list[dict]:
    """Every point of one study, in a stable order."""
    sweep = cfg.get("sweep", {})
    custom = cfg.get("presets", {})
    scale = cfg.get("scale", 1)
    points = []
    axes = {**{k: [v] for k, v in RUN_AXES.items()}, **{k: sweep[k] for k in RUN_AXES if k in sweep}}
    over_keys = [k for k in OVERRIDABLE if k in sweep]
    for dataset, framework, preset_name in itertools.product(cfg["datasets"], cfg["frameworks"], cfg["preset"]):
        base = presets.resolve(preset_name, framework, dataset, custom)
        for over in itertools.product(*(sweep[k] for k in over_keys)):
            settings = dict(base)
            settings.update(zip(over_keys, over))
            if "epochs" in sweep:
                settings.pop("iterations", None)
            if "iterations" in sweep:
                settings.pop("epochs", None)
            for run in itertools.product(*axes.values()):
                run_axes = dict(zip(axes, run))
                for repeat in range(cfg.get("repeats", 1)):
                    points.append(_point(dataset, framework, preset_name, settings, run_axes, repeat, cfg, scale))
    for p in points:
        p["id"] = point_id(p)
    return points


def _point(dataset, framework, preset_name, s, run_axes, repeat, cfg, scale) -> dict:
    info = catalog.INFO[dataset]
    input_cfg = dict(s.get("input", {}))
    if cfg.get("full"):
        input_cfg.pop("train_samples", None)
        input_cfg.pop("test_samples", None)
    layers = models.resolve(s["network"], info["classes"])
    lr_policy = dict(s.get("lr_policy", {"name": "fixed"}))
    iterations = s.get("iterations")
    epochs = s.get("epochs")
    return {
        "framework": framework,
        "dataset": dataset,
        "preset": preset_name,
        "network": s["network"],
        "layers": layers,
        "input": input_cfg,
        "optimizer": s["optimizer"],
        "momentum": float(s.get("momentum", 0.0)),
        "weight_decay": float(s.get("weight_decay", 0.0)),
        "learning_rate": float(s["learning_rate"]),
        "lr_policy": lr_policy,
        "batch_size": int(s["batch_size"]),
        "test_batch_size": int(s.get("test_batch_size", 100)),
        "iterations": _scaled(iterations, scale, whole=True) if iterations else None,
        "epochs": _scaled(epochs, scale, whole=False) if epochs else None,
        "test_interval": s.get("test_interval"),
        "init": initialisers.normalise(s.get("init")),
        "shuffle": bool(s.get("shuffle", True)),
        "ema_decay": s.get("ema_decay"),
        "validation": s.get("validation"),
        "device": run_axes["device"],
        "threads": int(run_axes["threads"]),
        "library": run_axes["library"],
        "repeat": repeat,
        "seed": int(cfg.get("seed", 1)) + repeat,
    }


def one_point(framework: str, preset: str = "caffe", dataset: str = "digits", **sweep_values) -> dict:
    """The single point of a one-framework study: `preset` on `dataset`, each sweep value fixed.

    The point exactly as the workflow expands it (validated config, same id), for running one by hand.
    """
    from dlbench import config

    cfg = config.validate({"datasets": [dataset], "frameworks": [framework], "preset": [preset],
                           "sweep": {k: [v] for k, v in sweep_values.items()}})
    (point,) = expand(cfg)
    return point


def total_iterations(point: dict, train_size: int) -> int:
    """Iterations a point trains for, given the training-set size after any subset."""
    if point.get("iterations"):
        return int(point["iterations"])
    return max(1, math.ceil(point["epochs"] * math.ceil(train_size / point["batch_size"])))
