"""Load and validate a study config: every mistake becomes one line naming the key and the fix."""

from __future__ import annotations

import copy
import difflib
import math
import os
from typing import Any

import jsonschema
import yaml

from dlbench.datasets import catalog
from dlbench.frameworks import registry
from dlbench.paths import SCHEMA
from dlbench.record import statuses
from dlbench.spec import initial_weights, inputs, networks
from dlbench.study import presets, selection, strictyaml


class ConfigError(ValueError):
    """A config that cannot run; the message is one line per problem (the schema's are all said at once)."""

    def said(self) -> str:
        """The message as the commands print it: each problem on its own line, prefixed."""
        return "\n".join(f"dlbench: config error: {line}" for line in str(self).splitlines())


def load_schema(path: str | os.PathLike = SCHEMA) -> dict:
    """The config schema, with the lists that live in code (frameworks, datasets) filled in."""
    with open(path) as fh:
        # libyaml's loader where PyYAML has it: the pure-Python one takes a sizeable share of every workflow start
        schema = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    props = schema["properties"]
    props["frameworks"]["items"]["enum"] = registry.names()
    props["datasets"]["items"]["enum"] = list(catalog.INFO)
    # Every compute-library value some framework honours; which framework takes which: check_axes.
    props["sweep"]["properties"]["library"]["items"]["enum"] = list(dict.fromkeys(
        v for f in registry.FRAMEWORKS.values() for v in f.values("library")))
    for key, values in (("framework", registry.names()), ("dataset", list(catalog.INFO))):
        schema["$defs"]["point_filter"]["properties"][key]["items"]["enum"] = values
    # Every status a record can be tabled with (a machine failure published after its retries, damaged too)
    schema["$defs"]["point_filter"]["properties"]["status"]["items"]["enum"] = [
        *statuses.RESULTS, "cancelled", *statuses.RETRIED, statuses.DAMAGED, selection.NO_RECORD]
    props["versions"]["propertyNames"]["enum"] = [f.name for f in registry.FRAMEWORKS.values() if f.packages]
    envs = props["envs"]["properties"]
    envs["site"]["propertyNames"]["enum"] = registry.names()
    envs["site"]["additionalProperties"]["oneOf"][1]["propertyNames"]["enum"] = [
        registry.PLAIN_VARIANT, *registry.DEVICE_VARIANTS.values()]
    envs["opt_in"]["items"]["enum"] = [f"{f.name}-{v}" for f in registry.FRAMEWORKS.values() for v in f.opt_in]
    return schema


def _where(path) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def _near(given, allowed) -> str:
    """ " (did you mean 'x'?)" for a near miss of a name (a typo), else nothing."""
    names = [str(a) for a in allowed]
    close = difflib.get_close_matches(str(given), names, n=1, cutoff=0.75) if isinstance(given, str) else []
    return f" (did you mean {close[0]!r}?)" if close else ""


def _describe(error: jsonschema.ValidationError, schema: dict) -> str:
    """One readable line for a schema violation."""
    where = _where(error.absolute_path)
    v = error.validator
    if v == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        allowed = ", ".join(sorted(error.schema.get("properties", {})))
        return f"unknown key {extra[0]!r} in {where}{_near(extra[0], error.schema.get('properties', {}))}; " \
               f"allowed keys: {allowed}"
    if v == "enum":
        allowed = ", ".join(map(str, error.validator_value))
        return (f"{where}: {error.instance!r} is not allowed{_near(error.instance, error.validator_value)}; "
                f"choose one of: {allowed}")
    if v == "type":
        return f"{where}: expected {error.validator_value}, got {error.instance!r}"
    if v == "minItems":
        return f"{where}: the list is empty; give at least {error.validator_value} value"
    if v == "minProperties":
        return f"{where}: is empty; give at least one of: {', '.join(error.schema.get('properties', {}))}"
    if v == "pattern" and str(error.validator_value).startswith("^[/~]"):
        return f"{where}: {error.instance!r} is not an absolute path on one line (give it from / or ~)"
    if v == "pattern":
        if error.validator_value == schema["$defs"]["name"]["pattern"]:
            return (f"{where}: {error.instance!r} is not a plain name "
                    "(lower-case letters, digits and _ only, starting with a letter)")
        return (f"{where}: {error.instance!r} has a character that is not allowed here (it must match "
                f"{error.validator_value}: no spaces, quotes or line breaks)")
    if v == "oneOf":
        shapes = error.validator_value
        if len(shapes) == 2 and "propertyNames" in shapes[1]:  # envs.site's two shapes
            variants = ", ".join(shapes[1]["propertyNames"]["enum"])
            return (f"{where}: {error.instance!r} is neither a Python's absolute path nor {{variant: path}} "
                    f"(variants: {variants})")
    if v in ("oneOf", "anyOf") and error.context:
        # The alternative of the instance's own kind said why it failed (a mapping with an unknown key, say);
        # where none did, the first alternative's complaint (not one of the names).
        inside = [e for e in error.context
                  if len(e.absolute_path) > len(error.absolute_path) or e.validator not in ("type", "enum")]
        return _describe(max(inside, key=lambda e: len(e.absolute_path)) if inside else error.context[0], schema)
    if v == "required":
        return f"{where}: {error.message}"
    if v in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        return f"{where}: {error.instance!r} is out of range ({v} {error.validator_value})"
    if v == "uniqueItems":
        return f"{where}: {error.instance!r} lists a value twice"
    return f"{where}: {error.message}"


def _fill_defaults(schema: dict, data: dict) -> None:
    """Fill the schema's `default`s into the config, one level of objects deep."""
    for key, sub in schema.get("properties", {}).items():
        if key not in data and "default" in sub:
            data[key] = copy.deepcopy(sub["default"])
        if isinstance(data.get(key), dict) and sub.get("type") == "object":
            _fill_defaults(sub, data[key])


def check_axes(where: str, part: dict) -> None:
    """Every run-axis value of the top level or a sub-study can be honoured by every framework it names."""
    for axis in registry.AXIS_DEFAULTS:
        for value in part.get("sweep", {}).get(axis, []):
            for name in part["frameworks"]:
                framework = registry.get(name)
                if not framework.honours(axis, value):
                    raise ConfigError(f"{where}sweep.{axis}: {name} cannot honour {value!r} (it accepts: "
                                      f"{framework.accepted(axis)}); sweep it in a sub-study (`studies:`) of the "
                                      "frameworks that accept it")


def check_presets(where: str, part: dict, custom: dict) -> None:
    """Every framework of the top level or a sub-study has settings for every dataset under every preset it names,
    and their input handling fits the dataset's images (a pad_to below them, a crop beyond them: refused before any
    job)."""
    for dataset in part["datasets"]:
        for framework in part["frameworks"]:
            for name in part["preset"]:
                for how in part["cross_apply"]:
                    why = presets.missing(name, framework, dataset, custom, how)
                    if why:
                        raise ConfigError(f"{where}preset: {why}")
                    given = presets.resolve(name, framework, dataset, custom, how).get("input") or {}
                    why = inputs.size_problem(given, catalog.INFO[dataset]["shape"], f" of {dataset}")
                    if why:
                        key = f"presets.{name}.input" if name in custom else f"{where}preset: {name} ({framework})'s"
                        raise ConfigError(f"{key}.{why}")


def check_tune(where: str, part: dict) -> None:
    """A tuning grid holds the defaults (factor 1) on every axis, and tunes no axis its own sweep also sets."""
    sweep = part.get("sweep", {})
    for axis, factors in (part.get("tune") or {}).items():
        if 1 not in factors:
            raise ConfigError(f"{where}tune.{axis}: {factors} lacks 1, the defaults themselves, against which "
                              "the tuned settings are compared; add 1 to the list")
        swept = [k for k in (("epochs", "iterations") if axis == "length" else (axis,)) if k in sweep]
        if swept:
            raise ConfigError(f"{where.rstrip('.') or '(top level)'}: {axis} is both tuned (tune.{axis}) and "
                              f"swept (sweep.{swept[0]}); give it in one of them")


def check_versions(cfg: dict) -> None:
    """Versions only of the study's frameworks, and not of one that runs in a site's own build."""
    studied = set(cfg["frameworks"]).union(*(s.get("frameworks", []) for s in cfg.get("studies", {}).values()))
    for name in cfg["versions"]:
        if name not in studied:
            raise ConfigError(f"versions.{name}: {name} is not among the study's frameworks; add it or remove the key")
        if name in cfg["envs"]["site"]:
            raise ConfigError(f"versions.{name}: {name} runs in a site's own build (envs.site.{name}), which has "
                              "one version; remove one of the two")


def non_finite(value: Any, path: tuple = ()) -> tuple[tuple, float] | None:
    """The first NaN or infinity in a config, and where: YAML reads `.nan` and `.inf` as floats, and every bound of
    the schema compares false with NaN (so `interval_s: .nan` would pass `exclusiveMinimum: 0`)."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        found = non_finite(item, (*path, key))
        if found:
            return found
    return None


def validate(raw: dict[str, Any], *, local_cores: int | None = None,
             schema_path: str | os.PathLike = SCHEMA) -> dict[str, Any]:
    """The validated config with defaults filled in, or ConfigError with one line.

    local_cores: the cores of this machine when the points run here (threads above
    it would silently be capped by Snakemake, so they are refused); None on a cluster.
    """
    if not isinstance(raw, dict):
        raise ConfigError("the config is empty or not a mapping; see config/config.yaml for an example")
    cfg = copy.deepcopy(raw)
    found = non_finite(cfg)
    if found:
        raise ConfigError(f"{_where(found[0])}: {found[1]} is not a number a study can use; give a finite number")
    schema = load_schema(schema_path)
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(cfg),
                    key=lambda e: (len(e.absolute_path), str(list(e.absolute_path))))
    if errors:  # every one at once, each in its own line (a key's several complaints said once)
        raise ConfigError("\n".join(dict.fromkeys(_describe(e, schema) for e in errors)))
    _fill_defaults(schema, cfg)

    sweep = cfg["sweep"]
    if "epochs" in sweep and "iterations" in sweep:
        raise ConfigError("sweep: give either epochs or iterations, not both")
    for name, given in cfg.get("studies", {}).items():
        inner = given.get("sweep", {})
        if "epochs" in inner and "iterations" in inner:
            raise ConfigError(f"studies.{name}.sweep: give either epochs or iterations, not both")
    for name, preset in cfg["presets"].items():
        if "epochs" in preset and "iterations" in preset:
            raise ConfigError(f"presets.{name}: give either epochs or iterations, not both")
        if "epochs" not in preset and "iterations" not in preset:
            raise ConfigError(f"presets.{name}: give its length as epochs or iterations")
        if preset["network"] not in networks.NETWORKS:
            raise ConfigError(f"presets.{name}.network: unknown network {preset['network']!r}; "
                              f"known: {', '.join(sorted(networks.NETWORKS))}")
        try:
            initial_weights.check(preset.get("init"), networks.NETWORKS[preset["network"]])
        except initial_weights.InitError as e:
            raise ConfigError(f"presets.{name}.{e} of network {preset['network']}") from None
    known = presets.preset_names() | {"own"} | set(cfg["presets"])
    parts = {"": cfg, **{f"studies.{k}.": v for k, v in cfg.get("studies", {}).items()}}  # the top, each sub-study
    for where, part in parts.items():
        for name in part.get("preset", []):
            if name not in known:
                raise ConfigError(f"{where}preset: unknown preset {name!r}; known: {', '.join(sorted(known))} "
                                  "(declare custom ones under `presets:`)")
        if where or not cfg.get("studies"):  # the top level runs only where there are no sub-studies
            check_presets(where, {k: part.get(k, cfg[k]) for k in ("datasets", "frameworks", "preset",
                                                                     "cross_apply")}, cfg["presets"])
        # Its own tuning grid (else the top level's) against its own sweep.
        check_tune(where, {"tune": part.get("tune", cfg.get("tune")), "sweep": part.get("sweep", {})})
        # What the sub-study runs: its own frameworks (else the top level's), its sweep merged over the top level's.
        check_axes(where, {"frameworks": part.get("frameworks", cfg["frameworks"]),
                           "sweep": {**cfg["sweep"], **part.get("sweep", {})}})
        bound = point_bound(cfg, part)
        if bound > cfg["max_points"]:
            raise ConfigError(f"{where or 'the study '}asks for up to {bound:,} points, more than max_points "
                              f"({cfg['max_points']:,}); shorten its lists, or raise max_points if it means it")
    lock_file = cfg["measurement"]["lock_file"]
    if ".." in lock_file.split("/"):  # it would name another folder than it reads as, and nothing checks which
        raise ConfigError(f"measurement.lock_file: {lock_file!r} has a `..` part; give the node-local file's path "
                          "without it (its folder must exist on every node: dlbench does not make it)")
    if local_cores:
        check_local_cores(cfg, local_cores)
    check_versions(cfg)
    model = cfg["cluster"].get("gpu_model")
    if model:
        problem = gpu_model_problem(model)
        if problem:
            raise ConfigError(f"cluster.gpu_model: {problem}")
    for name, where in cfg["data"].items():
        if not os.path.exists(os.path.expanduser(where)):
            raise ConfigError(f"data.{name}: {where} does not exist; give the folder or archive "
                              f"holding the {name} files, or remove the key to download them")
    for name in cfg["data_test_copy"]:
        if name not in cfg["data"]:
            raise ConfigError(f"data_test_copy.{name}: no data.{name} to take the test copy from; give its folder "
                              f"as data.{name}, or remove the key")
    return cfg


def check_local_cores(cfg: dict, local_cores: int) -> None:
    """Refuse, in a validated config, threads above this machine's cores (Snakemake would cap them silently)."""
    parts = {"": cfg, **{f"studies.{k}.": v for k, v in cfg.get("studies", {}).items()}}  # the top, each sub-study
    for where, part in parts.items():
        too_many = [t for t in part.get("sweep", {}).get("threads", []) if t > local_cores]
        if too_many:
            raise ConfigError(f"{where}sweep.threads: {too_many[0]} is more than this machine's {local_cores} "
                              f"cores; use at most {local_cores} here, or run on a cluster "
                              "(--profile profiles/slurm)")


def point_bound(cfg: dict, part: dict) -> int:
    """The most points the top level or a sub-study can expand to: the product of its lists, counted before
    expanding any."""
    sweep = {**cfg["sweep"], **part.get("sweep", {})}
    lists = [part.get(k, cfg.get(k)) or [None] for k in ("datasets", "frameworks", "preset", "cross_apply")]
    lists += list(sweep.values()) + list((part.get("tune", cfg.get("tune")) or {}).values())
    return math.prod(len(v) for v in lists if isinstance(v, list)) * int(part.get("repeats", cfg.get("repeats", 1)))


def load(path: str | os.PathLike, **kw) -> dict[str, Any]:
    return validate(read_file(path), **kw)


def read_file(path: str | os.PathLike):
    """A config file's content, read strictly (dlbench.study.strictyaml), or ConfigError with its one line."""
    try:
        return strictyaml.load_file(path)
    except strictyaml.YamlProblem as exc:
        raise ConfigError(str(exc)) from None
    except OSError as exc:  # missing, a folder, unreadable
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc}); name a config file") from None


def gpu_model_problem(model: str) -> str | None:
    """What the SLURM executor plugin would refuse about this GPU model at submission (its own rule), or None."""
    try:
        from snakemake_executor_plugin_slurm.utils import set_gres_string
    except ImportError:  # no plugin here: nothing submits to SLURM from this machine
        return None

    class Resources(dict):
        __getattr__ = dict.get

    class Job:
        resources = Resources(gpu=1, gpu_model=model)

    try:
        set_gres_string(Job())
    except Exception as exc:  # noqa: BLE001 - the plugin's WorkflowError, whatever its module
        return f"{model!r} is refused by the SLURM executor plugin ({str(exc).strip()})"
    return None
