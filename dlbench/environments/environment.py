"""The environment a point runs in, as one frozen value.

Built once per environment where the workflow reads the study (dlbench.environments.choice) and passed whole to
the runner, as dlbench.run.options.RunOptions is: the train rule's `env` param is its params() (what Snakemake
compares to rerun a point), and the job makes it again with of_params. Read as a mapping it is the description
the runner records (env, framework, kind, key, python, versions).

Its kinds:
  - built: from its pins, cached under its key (dlbench.environments.build); its interpreter is where the cache
    keeps the build of that key, which the framework_env rule makes before any of its points runs;
  - conda: its conda file, under `snakemake --sdm conda`: the job itself runs in it (this interpreter);
  - site: an interpreter the config names (`envs.site`), with the versions it reported when probed
    (dlbench.environments.site), so that another site build reruns its points.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from dlbench.environments.key import built_folder
from dlbench.frameworks import registry

BUILT, CONDA, SITE = "built", "conda", "site"
# A built environment's description, the framework_env rule's output: what a train job of it waits for.
DESCRIPTION = "resources/envs/{env}.json"


@dataclass(frozen=True)
class Environment(Mapping):
    """One framework environment: its name (`pytorch`, `pytorch-cuda`, `pytorch@2.12.0`), its framework, its kind,
    its key (built, conda), its interpreter (site: the one named; built: its cache's) and versions (site)."""

    name: str
    framework: str
    kind: str
    key: str | None = None
    python: str | None = None
    versions: Mapping | None = None

    @classmethod
    def built(cls, name: str, env_key: str, *, conda: bool = False) -> Environment:
        """A built environment of that key (or its conda file, under --sdm conda)."""
        return cls(name, registry.framework_of_env(name).name, CONDA if conda else BUILT, key=env_key)

    @classmethod
    def site(cls, name: str, framework: str, python: str, versions: Mapping | None = None) -> Environment:
        """A site interpreter, with the versions its probe reported (None: not probed here)."""
        return cls(name, framework, SITE, python=python, versions=versions)

    @classmethod
    def of_params(cls, params: Mapping) -> Environment:
        """The environment whose params() these are (what the train rule gives its job)."""
        if params["kind"] == SITE:
            return cls.site(params["env"], params["framework"], params["python"], params.get("versions"))
        return cls.built(params["env"], params["key"], conda=params["kind"] == CONDA)

    @classmethod
    def read(cls, path: str | os.PathLike) -> Environment:
        """The environment a description file names (dlbench.environments.build.describe: `dlbench envs build ENV
        --out FILE`, the framework_env rule's output)."""
        with open(path) as fh:
            d = json.load(fh)
        return cls(d["env"], d.get("framework") or registry.framework_of_env(d["env"]).name, d.get("kind", BUILT),
                   key=d.get("key"), python=d.get("python"), versions=d.get("versions"))

    def params(self) -> dict:
        """What identifies it to Snakemake, which compares a job's params by repr to rerun it: a built (or conda)
        one by its name and key, a site one by its interpreter and the versions probed there. Key for key and in
        this order the dicts the train rule has always been given, so that finished points stay finished."""
        if self.kind == SITE:
            out = {"env": self.name, "framework": self.framework, "kind": SITE, "python": self.python}
            return out if self.versions is None else {**out, "versions": self.versions}
        return {"env": self.name, "kind": self.kind, "key": self.key}

    @property
    def interpreter(self) -> str | None:
        """The Python that runs its trainer: the named one, a built one's in the cache; None: this one (conda)."""
        if self.python:
            return self.python
        if self.kind == BUILT:
            return str(built_folder(self.name, self.key) / "bin" / "python")
        return None

    @property
    def description_file(self) -> str | None:
        """What a point of a built one waits for: the framework_env rule's output (None: nothing is built)."""
        return DESCRIPTION.format(env=self.name) if self.kind == BUILT else None

    def _described(self) -> dict:
        given = {"env": self.name, "framework": self.framework, "kind": self.kind, "key": self.key,
                 "python": self.interpreter, "versions": self.versions}
        return {k: v for k, v in given.items() if v is not None}

    def __getitem__(self, name: str):
        return self._described()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._described())

    def __len__(self) -> int:
        return len(self._described())
