"""Expand a validated config into the points table: one row per training job, stable ids."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import NamedTuple

from dlbench.datasets import catalog
from dlbench.frameworks import registry
from dlbench.spec import initial_weights, networks
from dlbench.study import presets, selection
from dlbench.study.identity import digest, setting_id

# Sweep axes that override a preset's value, in the order they appear in ids.
OVERRIDABLE = ("optimizer", "momentum", "weight_decay", "learning_rate", "batch_size", "epochs", "iterations")
# Axes that belong to the run, not to the preset (registry.AXIS_DEFAULTS, and threads); an axis whose default
# is None is left out of a point that does not set it, or sets the framework's natural value (so that adding
# the axis changed no existing point's id or parameters).
RUN_AXES = {"device": registry.AXIS_DEFAULTS["device"], "threads": 1,
            **{k: v for k, v in registry.AXIS_DEFAULTS.items() if k != "device"}}
# The axes of a tuning grid (config `tune`): factors of the preset's own values.
TUNE_AXES = ("batch_size", "learning_rate", "length")

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _scaled(value: float, scale: float, *, whole: bool) -> float | int:
    if scale == 1:
        return value
    scaled = value * scale
    return max(1, round(scaled)) if whole else max(scaled, 1e-3)


def point_id(p: dict) -> str:
    """Readable slug plus a digest of every parameter: same parameters, same id, on any machine."""
    length = f"i{p['iterations']}" if p.get("iterations") else f"e{p['epochs']:g}"
    parts = [p["preset"]]
    if p.get("cross_apply") == "settings":
        parts.append("settings")
    parts += [p["network"], f"bs{p['batch_size']}", f"lr{p['learning_rate']:g}", length, p["device"],
              f"t{p['threads']}"]
    if p.get("interop_threads"):
        parts.append(f"io{p['interop_threads']}")
    if p["library"] != "default":
        parts.append(p["library"])
    parts += [p[axis] for axis in ("compile", "precision", "memory_format") if p.get(axis)]
    if p.get("version"):  # only where the study lists several versions of the framework (dlbench.environments.versions)
        parts.append(f"v{p['version']}")
    parts.append(f"r{p['repeat']}")
    body = {k: v for k, v in p.items() if k != "id"}
    slug = _UNSAFE.sub("_", "-".join(str(x) for x in parts))
    return f"{slug}-{digest(body)[:10]}"


def sub_studies(cfg: dict) -> dict[str, dict]:
    """The config's sub-studies as whole configs: each overrides the top level (its sweep merges over it)."""
    if not cfg.get("studies"):
        return {"main": cfg}
    out = {}
    for name, given in cfg["studies"].items():
        sub = {k: v for k, v in cfg.items() if k != "studies"}
        sub.update({k: v for k, v in given.items() if k != "sweep"})
        sub["sweep"] = {**cfg.get("sweep", {}), **given.get("sweep", {})}
        if "epochs" in given.get("sweep", {}):
            sub["sweep"].pop("iterations", None)
        if "iterations" in given.get("sweep", {}):
            sub["sweep"].pop("epochs", None)
        out[name] = sub
    return out


class Plan(NamedTuple):
    """A study expanded once: its points, the sub-studies of each, and the place of each in a tuning grid;
    what its `select` and `exclude` removed (key -> points) of how many points it expanded to."""

    points: list[dict]
    membership: dict[str, list[str]]
    tuning: dict[str, dict]
    removed: dict[str, int] = {}
    expanded: int = 0


def plan(cfg: dict, status_of: Callable[[dict], str | None] | None = None) -> Plan:
    """Every point of every sub-study (each once, in a stable order), from one expansion of each sub-study.

    `membership`: point id -> the sub-studies it belongs to (a point shared by two sub-studies runs once).
    `tuning`: point id -> its place in a tuning grid (config `tune`), for the points of the sub-studies that tune:
    `tuning_grid`, one grid (its sub-study, and the settings it is tuned around, repeats together);
    `tuning_is_default`, the grid's point with every factor 1, the defaults it is tuned against.
    A point in two grids keeps the first.
    Then the config's `select` and `exclude` cut the points down (dlbench.study.selection); status_of gives a point's
    record status where they name `status` (None: no record).
    """
    points: dict[str, dict] = {}
    membership: dict[str, list[str]] = {}
    tuning: dict[str, dict] = {}
    for name, sub in sub_studies(cfg).items():
        for p, _, base in _expand_one(sub):
            points.setdefault(p["id"], p)
            membership.setdefault(p["id"], []).append(name)
            if sub.get("tune"):
                grid = f"{name}:" + setting_id(base)
                tuning.setdefault(p["id"], {"tuning_grid": grid, "tuning_is_default": p["id"] == base["id"]})
    kept, membership, removed = selection.apply(list(points.values()), membership, cfg, status_of)
    if removed:  # a grid whose sub-study was left out is no grid
        tuning = {i: t for i, t in tuning.items() if t["tuning_grid"].split(":")[0] in membership.get(i, [])}
    return Plan(kept, membership, tuning, removed, len(points))


def expand(cfg: dict) -> list[dict]:
    """Every point of every sub-study, each once, in a stable order."""
    return plan(cfg).points


def membership(cfg: dict) -> dict[str, list[str]]:
    """Point id -> the sub-studies it belongs to (see plan)."""
    return plan(cfg).membership


def tuning(cfg: dict) -> dict[str, dict]:
    """Point id -> its place in a tuning grid (see plan)."""
    return plan(cfg).tuning


def expand_one(cfg: dict) -> list[dict]:
    """Every point of one sub-study (an entry of sub_studies), each once, in a stable order."""
    return [p for p, _, _ in _expand_one(cfg)]


def _expand_one(cfg: dict) -> list[tuple[dict, dict, dict]]:
    """(point, its tuning factors, the point it is tuned around) for every point of one sub-study."""
    sweep = cfg.get("sweep", {})
    tune = cfg.get("tune") or {}
    custom = cfg.get("presets", {})
    scale = cfg.get("scale", 1)
    out: dict[str, tuple[dict, dict, dict]] = {}
    axes = {**{k: [v] for k, v in RUN_AXES.items()}, **{k: sweep[k] for k in RUN_AXES if k in sweep}}
    over_keys = [k for k in OVERRIDABLE if k in sweep]
    tune_keys = [k for k in TUNE_AXES if k in tune]
    for dataset, framework, preset_name, how in itertools.product(
            cfg["datasets"], cfg["frameworks"], cfg["preset"], cfg.get("cross_apply", ["preset"])):
        base = presets.resolve(preset_name, framework, dataset, custom, how)
        how = None if presets.is_own(preset_name, framework) else how
        for over in itertools.product(*(sweep[k] for k in over_keys)):
            settings = dict(base)
            settings.update(zip(over_keys, over))
            if "epochs" in sweep:
                settings.pop("iterations", None)
            if "iterations" in sweep:
                settings.pop("epochs", None)
            for factor_values in itertools.product(*(tune[k] for k in tune_keys)):
                factors = dict(zip(tune_keys, factor_values))
                tuned = tuned_settings(settings, factors)
                for run in itertools.product(*axes.values(), _versions(cfg, framework)):
                    run_axes = dict(zip([*axes, "version"], run))
                    for repeat in range(cfg.get("repeats", 1)):
                        p = _point(dataset, framework, preset_name, how, tuned, run_axes, repeat, cfg, scale)
                        around = p if tuned == settings else _point(dataset, framework, preset_name, how,
                                                                    settings, run_axes, repeat, cfg, scale)
                        out.setdefault(p["id"], (p, factors, around))
    return list(out.values())


def _versions(cfg: dict, framework: str) -> list[str | None]:
    """The framework versions a point takes into its id: those the study lists where it lists several, else
    none (one listed version is the study's, and only picks the environment: dlbench.environments.versions)."""
    listed = (cfg.get("versions") or {}).get(framework, [])
    return list(listed) if len(listed) > 1 else [None]


def tuned_settings(settings: dict, factors: dict[str, float]) -> dict:
    """The settings with each tuned value multiplied by its factor (a factor of 1 leaves the value as it is).

    Batch sizes and iterations stay whole numbers (at least 1); `length` scales whichever length the
    settings give, iterations or epochs.
    """
    out = dict(settings)
    for key, factor in factors.items():
        if factor == 1:
            continue
        if key == "length":
            key = "iterations" if settings.get("iterations") else "epochs"
        value = settings[key] * factor
        if key in ("batch_size", "iterations"):
            out[key] = max(1, int(round(value)))
        elif key == "epochs":
            out[key] = int(value) if float(value).is_integer() else float(f"{value:.6g}")
        else:
            out[key] = float(f"{value:.6g}")  # 0.05 x 0.1 is 0.005, not 0.005000000000000001
    return out


def _point(dataset, framework, preset_name, how, s, run_axes, repeat, cfg, scale) -> dict:
    info = catalog.INFO[dataset]
    input_cfg = dict(s.get("input", {}))
    if cfg.get("full"):
        input_cfg.pop("train_samples", None)
        input_cfg.pop("test_samples", None)
    layers = networks.resolve(s["network"], info["classes"])
    lr_policy = dict(s.get("lr_policy", {"name": "fixed"}))
    iterations = s.get("iterations")
    epochs = s.get("epochs")
    point = {
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
        "init": initial_weights.normalise(s.get("init")),
        "shuffle": bool(s.get("shuffle", True)),
        "ema_decay": s.get("ema_decay"),
        "validation": s.get("validation"),
        "device": run_axes["device"],
        "threads": int(run_axes["threads"]),
        "library": run_axes["library"],
        "repeat": repeat,
        "seed": int(cfg.get("seed", 1)) + repeat,
    }
    # Left out at their defaults (see RUN_AXES): a point of the whole-preset reading, without inter-op
    # threads, or compiled and in the precision its framework always uses, is the same point as before
    # these keys existed.
    if how == "settings":
        point["cross_apply"] = how
    if run_axes.get("version"):
        point["version"] = run_axes["version"]
    natural = registry.get(framework).natural
    for axis, default in RUN_AXES.items():
        value = run_axes[axis]
        if default is None and value is not None and value != natural.get(axis):
            point[axis] = int(value) if axis == "interop_threads" else value
    point["id"] = point_id(point)
    return point


def one_point(framework: str, preset: str = "caffe", dataset: str = "digits", **sweep_values) -> dict:
    """The single point of a one-framework study: `preset` on `dataset`, each sweep value fixed.

    The point exactly as the workflow expands it (validated config, same id), for running one by hand.
    """
    from dlbench.study import config

    cfg = config.validate({"datasets": [dataset], "frameworks": [framework], "preset": [preset],
                           "sweep": {k: [v] for k, v in sweep_values.items()}})
    (point,) = expand(cfg)
    return point
