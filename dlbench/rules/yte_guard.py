"""A study config that is a yte template, refused before Snakemake renders it (and so runs its code).

Snakemake 9 renders every `--configfile` with yte (`__use_yte__: true` makes a YAML file a template whose `?`
expressions and `__definitions__` are Python) while it turns its command line into settings
(snakemake.settings.types.ConfigSettings, made in snakemake.cli.args_to_api), before it reads the Snakefile: the
workflow's own code comes too late to stop it. What Snakemake runs earlier is the workflow profile,
profiles/default/config.yaml, which snakemake.cli.parse_args reads before args_to_api, and reads as a yte template
itself; its `__definitions__` call refuse_templates(), which reads each `--configfile` as plain YAML (strictly:
dlbench.study.strictyaml, no code) and ends the run in one line where one is a template, or is a file the workflow
would refuse to read. Where the workflow profile is not read (`--workflow-profile none`, or Snakemake's API called
from Python) the workflow refuses the file when it reads it (dlbench.rules.context.read_config), after Snakemake
rendered it: docs/reliability.md says so.

Standard library and dlbench.study.strictyaml only: it runs at every start of Snakemake.
"""

from __future__ import annotations

import argparse
import sys

from dlbench.study import strictyaml

MARK = "__use_yte__"


def template_problem(path: str, raw) -> str | None:
    """The line that refuses a config file read as `raw`, where it is a yte template; else None."""
    if isinstance(raw, dict) and MARK in raw:
        return (f"{path}: {MARK}: a yte template runs code when it is read; dlbench reads plain YAML only: write its "
                "values out")
    return None


class _Quiet(argparse.ArgumentParser):
    def error(self, message):  # an argument Snakemake will judge itself: not this parser's to refuse
        raise ValueError(message)


def configfiles(argv: list[str]) -> list[str]:
    """The files Snakemake's `--configfile`/`--configfiles` name in argv (abbreviated as Snakemake allows; `--config`
    is its own option, taken here so that it is not read as an abbreviation of them)."""
    parser = _Quiet(add_help=False)
    parser.add_argument("--configfile", "--configfiles", nargs="+", action="extend", default=[])
    parser.add_argument("--config", "-C", nargs="*")
    try:
        return parser.parse_known_args(argv)[0].configfile
    except ValueError:
        return []


def problems(argv: list[str]) -> list[str]:
    """One line for each config file of argv that the workflow would refuse to read: a yte template, or a file that is
    not plain YAML as dlbench reads it (a key given twice, aliases that multiply). A file that cannot be opened is
    left to Snakemake, which names it."""
    found = []
    for path in configfiles(argv):
        try:
            raw = strictyaml.load_file(path)
        except strictyaml.YamlProblem as exc:
            found.append(str(exc))
            continue
        except OSError:
            continue
        problem = template_problem(path, raw)
        if problem:
            found.append(problem)
    return found


def refuse_templates(argv: list[str] | None = None) -> None:
    """End the run (exit 2) with one line per config file that problems() names; nothing rendered, nothing run."""
    found = problems(sys.argv[1:] if argv is None else argv)
    if found:
        for line in found:
            print(f"dlbench: config error: {line}", file=sys.stderr)
        raise SystemExit(2)
