"""Environments: which one each point runs in, their keys, the conda files against the pins, site environments."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from dlbench.atomic import write_json
from dlbench.environments import build, check, choice, command, conda, key, pins
from dlbench.environments.environment import Environment
from dlbench.frameworks import registry
from dlbench.paths import CONDA_ENVS, ENVS, ROOT
from dlbench.rules import context, jobs, stale_locks
from dlbench.run.options import RunOptions
from dlbench.study import config
from dlbench.study.sweep import one_point
from dlbench.testing.sandbox import copy_workflow, snakemake


def study(**extra) -> dict:
    return config.validate({"datasets": ["digits"], "frameworks": registry.names(), **extra})


def test_each_device_kind_picks_its_environment():
    cfg = study()
    chosen = {(fw, dev): choice.point_env(cfg, one_point(fw, "caffe", device=dev))
              for fw in registry.names() for dev in ("cpu", "gpu")}
    assert chosen.items() >= {("pytorch", "cpu"): ("pytorch", None), ("pytorch", "gpu"): ("pytorch-cuda", None),
                              ("tensorflow", "cpu"): ("tensorflow", None),
                              ("tensorflow", "gpu"): ("tensorflow-cuda", None),
                              # no CUDA build: the CPU environment, where the adapter says `unavailable`
                              ("theano", "cpu"): ("theano", None), ("theano", "gpu"): ("theano", None),
                              ("caffe", "cpu"): ("caffe", None), ("caffe", "gpu"): ("caffe", None)}.items()
    for f in registry.FRAMEWORKS.values():  # any other framework as its record says: a CUDA variant or none
        cuda = "cuda" in f.variants and "cuda" not in f.opt_in
        assert chosen[(f.name, "cpu")] == (f.name, None)
        assert chosen[(f.name, "gpu")] == (f"{f.name}-cuda" if cuda else f.name, None)
    opted = study(envs={"opt_in": ["caffe-cuda"]})
    assert choice.point_env(opted, one_point("caffe", "caffe", device="gpu")) == ("caffe-cuda", None)
    assert choice.point_env(opted, one_point("caffe", "caffe", device="cpu")) == ("caffe", None)
    # every environment a point can get is one the workflow knows how to build (the MKL ones:
    # tests/test_blas.py)
    assert {env for env, _ in chosen.values()} | {"caffe-cuda", "caffe-mkl", "theano-mkl"} == set(
        registry.env_names())


def test_a_site_environment_replaces_the_variants_it_names():
    both = study(envs={"site": {"pytorch": "/opt/site/bin/python"}})
    assert choice.point_env(both, one_point("pytorch", "caffe", device="cpu")) == ("pytorch", "/opt/site/bin/python")
    assert choice.point_env(both, one_point("pytorch", "caffe", device="gpu")) == ("pytorch-cuda",
                                                                                  "/opt/site/bin/python")
    gpu_only = study(envs={"site": {"tensorflow": {"cuda": "~/tf/bin/python"}}})
    assert choice.point_env(gpu_only, one_point("tensorflow", "caffe", device="cpu")) == ("tensorflow", None)
    assert choice.point_env(gpu_only, one_point("tensorflow", "caffe", device="gpu")) == (
        "tensorflow-cuda", str(Path("~/tf/bin/python").expanduser()))
    # a site's CUDA Caffe: Caffe's GPU points run there, without the opt-in build
    caffe = study(envs={"site": {"caffe": {"cuda": "/opt/caffe/bin/python"}}})
    assert choice.point_env(caffe, one_point("caffe", "caffe", device="gpu")) == ("caffe-cuda",
                                                                                    "/opt/caffe/bin/python")
    with pytest.raises(config.ConfigError, match=r"envs.site.pytorch: .*absolute path.*variants: cpu, cuda"):
        study(envs={"site": {"pytorch": {"gpu": "/opt/site/bin/python"}}})
    with pytest.raises(config.ConfigError, match=r"envs.opt_in.0: 'pytorch-cuda' is not allowed"):
        study(envs={"opt_in": ["pytorch-cuda"]})


def point_of(study: context.Study, framework: str) -> tuple[dict, SimpleNamespace]:
    p = next(p for p in study.points.values() if p["framework"] == framework)
    return p, SimpleNamespace(framework=p["framework"], dataset=p["dataset"], point=p["id"])


def test_one_environment_value_goes_whole_from_the_rule_to_the_runner(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(stale_locks, "_held", None)
    monkeypatch.setenv("DLBENCH_CACHE", str(tmp_path / "cache"))
    cfg = config.validate({"datasets": ["digits"], "frameworks": ["pytorch", "caffe"], "preset": ["caffe"],
                           "sweep": {"iterations": [30], "batch_size": [32, 64], "threads": [1]}})
    study = context.Study(cfg, context.Reader(main=True, dryrun=False, forcerun=False))
    train = study.train_values()
    torch, wildcards = point_of(study, "pytorch")
    chosen = study.environments[(torch["framework"], torch["dataset"], torch["id"])]
    # one value per environment, shared by its points
    assert all(env is chosen for k, env in study.environments.items() if k[0] == "pytorch")
    # the train rule's params: the same dict, key for key and in order, as before the Environment (Snakemake
    # compares params by repr: another repr would rerun every finished point)
    params = train["env"](wildcards)
    assert repr(params) == f"{{'env': 'pytorch', 'kind': 'built', 'key': '{key.env_key('pytorch')}'}}"
    assert train["env_file"](wildcards) == ["resources/envs/pytorch.json"]  # what the job waits for: the build
    # the job makes it again from the params alone, and the runner gets its interpreter and its description
    again = jobs.environment(train["env_file"](wildcards)[0], params)
    assert again == chosen == Environment.of_params(params)
    options = RunOptions.of_job(study.runner_options, env=again)
    assert options.interpreter == str(key.env_dir("pytorch") / "bin" / "python")
    assert (options.env["env"], options.env["kind"], options.env["key"]) == ("pytorch", "built", chosen.key)
    # the interpreter is where the build of that key lies: what the framework_env rule's description names
    folder = key.env_dir("pytorch")
    folder.mkdir(parents=True)
    write_json(folder / "ENV_INFO.json", {"key": chosen.key, "packages": []})
    write_json(tmp_path / "pytorch.json", build.describe("pytorch", folder))
    described = jobs.environment(str(tmp_path / "pytorch.json"))  # `dlbench train --env FILE`
    assert described.interpreter == chosen.interpreter and described.params() == params
    assert jobs.environment() is None  # neither: this Python


def test_a_site_and_a_conda_environment_keep_their_params(tmp_path, monkeypatch):
    versions = {"framework_version": "2.13.0", "python_version": "3.11.2"}
    site = Environment.site("pytorch-cuda", "pytorch", "/opt/site/bin/python", versions)
    assert repr(site.params()) == ("{'env': 'pytorch-cuda', 'framework': 'pytorch', 'kind': 'site', "
                                   "'python': '/opt/site/bin/python', 'versions': " + repr(versions) + "}")
    assert Environment.of_params(site.params()) == site and site.interpreter == "/opt/site/bin/python"
    assert "versions" not in Environment.site("pytorch", "pytorch", "/opt/x").params()  # not probed here
    assert RunOptions.of_job({}, env=site).env["versions"] == versions
    conda_env = Environment.built("tensorflow", "0123456789ab", conda=True)
    assert conda_env.params() == {"env": "tensorflow", "kind": "conda", "key": "0123456789ab"}
    assert conda_env.interpreter is None and conda_env.description_file is None  # the job runs in it itself
    assert RunOptions.of_job({}, env=conda_env).python is None


@pytest.fixture
def envs_copy(tmp_path, monkeypatch):
    """A copy of envs/ (and of the conda files, workflow/envs/) that dlbench.environments reads instead of the
    repository's (so a test may edit it)."""
    shutil.copytree(ENVS, tmp_path / "envs")
    shutil.copytree(CONDA_ENVS, tmp_path / "workflow" / "envs")
    monkeypatch.setattr(pins, "ENVS", tmp_path / "envs")  # where the pins, locks and recipes are read
    monkeypatch.setattr(conda, "CONDA_ENVS", tmp_path / "workflow" / "envs")
    return tmp_path / "envs"


def test_the_key_changes_with_its_own_pins_and_recipe_only(envs_copy):
    names = registry.env_names()
    before = {env: key.env_key(env) for env in names}
    assert len(set(before.values())) == len(names)  # every environment is cached apart
    with open(envs_copy / "pytorch-cuda.txt", "a") as fh:
        fh.write("typing-extensions==4.16.0\n")
    after = {env: key.env_key(env) for env in names}
    assert [env for env in names if after[env] != before[env]] == ["pytorch-cuda"]
    with open(envs_copy / "caffe" / "build.sh", "a") as fh:
        fh.write("# a changed recipe\n")
    again = {env: key.env_key(env) for env in names}
    assert sorted(env for env in names if again[env] != after[env]) == ["caffe", "caffe-cuda", "caffe-mkl"]


def pip_pins(yaml_path: Path) -> list[str]:
    deps = yaml.safe_load(yaml_path.read_text())["dependencies"]
    return next(d["pip"] for d in deps if isinstance(d, dict))


def test_the_conda_files_say_what_the_pins_say():
    assert conda.write_conda(check=True) == [], "run `dlbench envs conda` after changing envs/*.txt"
    for env in conda.conda_envs():
        pinned = [ln.strip() for ln in pins.pins_file(env).read_text().splitlines()
                  if ln.strip() and not ln.lstrip().startswith("#")]
        in_yaml = pip_pins(CONDA_ENVS / f"{env}.yaml")
        assert in_yaml[:len(pinned)] == pinned, env  # the same versions, through pip, in both ways
        assert not any(p.startswith("-r") for p in in_yaml)  # resolved by conda against a copy: gone
    assert sorted(p.stem for p in CONDA_ENVS.glob("*.yaml")) == sorted(conda.conda_envs())  # none without pins
    assert not any("drop this line" in p.read_text() for p in CONDA_ENVS.glob("*.yaml"))
    assert not list(ENVS.glob("*.yaml"))  # the pins' folder holds pins and locks, the conda files live apart
    runner_needs = pip_pins(CONDA_ENVS / "pytorch-cuda.yaml")
    assert "psutil==7.2.2" in runner_needs and "nvidia-ml-py==13.615.71" in runner_needs


def test_a_hand_edit_or_a_stale_conda_file_is_caught(envs_copy):
    conda_files = envs_copy.parent / "workflow" / "envs"
    text = (conda_files / "pytorch.yaml").read_text()
    (conda_files / "pytorch.yaml").write_text(text.replace("torch==2.13.0", "torch==2.5.0"))
    (envs_copy / "theano.txt").write_text((envs_copy / "theano.txt").read_text().replace("scipy==1.10.1",
                                                                                          "scipy==1.10.0"))
    assert conda.write_conda(check=True) == ["pytorch", "theano"]
    assert command.main(["conda", "--check"]) == 1
    conda.write_conda()
    assert conda.write_conda(check=True) == []
    assert "scipy==1.10.0" in pip_pins(conda_files / "theano.yaml")


def setup_builds(for_tests: int, long_tests: int) -> list[str]:
    """The environments scripts/setup.sh's framework section builds, in its order: that section of the script run
    by bash as it is, its build command (`.venv/bin/python -m dlbench.environments.command build ENV ...`) only saying
    ENV, every
    other call of .venv/bin/python made for real."""
    script = (ROOT / "scripts" / "setup.sh").read_text()
    start = script.index("# Framework environments")
    section = script[start:script.index('log "ready"', start)]
    # (fd 3: the script sends the build's output to /dev/null)
    shim = ('function .venv/bin/python { if [[ "$1 $2 $3" == "-m dlbench.environments.command build" ]]; '
            'then echo "build $4" >&3; else "$BASE_PYTHON" "$@"; fi; }\n')
    proc = subprocess.run(["bash", "-c", f"set -euo pipefail\nexec 3>&1\nlog() {{ :; }}\n{shim}"
                                         f"for_tests={for_tests} long_tests={long_tests}\n{section}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "BASE_PYTHON": sys.executable})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert all(ln.startswith("build ") for ln in lines), lines
    return [ln.split(maxsplit=1)[1] for ln in lines]


def test_setup_builds_only_the_cpu_environments():
    # Each framework's CPU environment (the one named as the framework, built from envs/<name>.txt), each once.
    cpu = [f.name for f in registry.FRAMEWORKS.values()]
    assert all(pins.pins_file(env).is_file() for env in cpu)
    for for_tests in (0, 1):
        built = setup_builds(for_tests, long_tests=0)
        assert built == cpu, built
        assert not [env for env in built if env.endswith(("-cuda", "-mkl"))]
    # --long-tests: the MKL variants besides (tests/test_blas.py), and no CUDA one
    mkl = [env for env in registry.env_names() if env.endswith("-mkl")]
    assert mkl and setup_builds(1, long_tests=1) == cpu + mkl


# ---------------------------------------------------------------------------------------------- site environments


def other_python_with(site_packages: Path, where: Path) -> Path | None:
    """Debian's own Python 3.11 made to see a built environment's packages: another site build of the same
    framework (another Python), or None where this machine has no second Python 3.11."""
    debian = Path("/usr/bin/python3.11")
    if not debian.exists():
        return None
    subprocess.run([str(debian), "-m", "venv", "--without-pip", str(where)], check=True, timeout=600)
    lib = next((where / "lib").glob("python3.11")) / "site-packages"
    (lib / "built-env.pth").write_text(f"{site_packages}\n")
    return where / "bin" / "python"


SITE_STUDY = {"datasets": ["digits"], "frameworks": ["pytorch", "tensorflow"], "preset": ["caffe"],
              "sweep": {"iterations": [30], "batch_size": [32], "threads": [1]}, "monitor": {"interval_s": 0.1}}


def trains(workdir: Path) -> list[str]:
    out = snakemake(workdir, "-n", "results/runs.parquet", "--configfile", "site.yaml").stdout
    return sorted(line.split("framework=")[1].split(",")[0] for line in out.splitlines()
                  if "wildcards:" in line and "framework=" in line)


def site_wrapper(path: Path, python: str | Path) -> str:
    """A site's `python` as a module system makes one: a fixed path that runs whichever build is loaded."""
    path.write_text(f'#!/bin/sh\nexec {python} "$@"\n')
    path.chmod(0o755)
    return str(path)


@pytest.mark.long
def test_a_site_environment_runs_its_points_and_another_build_reruns_them_only(env_python, tmp_path):
    first = env_python("pytorch")  # the built environment's own Python, as a site's
    probe = check.probe("pytorch", first)
    site_packages = next(Path(first).parent.parent.glob("lib/python3.*/site-packages"))
    second = other_python_with(site_packages, tmp_path / "other-python")
    if second is None or check.probe("pytorch", second)["python_version"] == probe["python_version"]:
        pytest.skip("no second Python 3.11 of another version here (/usr/bin/python3.11) to make another site build")
    env_python("tensorflow")
    site = site_wrapper(tmp_path / "python", first)
    wf = copy_workflow(tmp_path / "wf", {**SITE_STUDY, "envs": {"site": {"pytorch": site}}}, "site.yaml")
    snakemake(wf, "results/runs.parquet", "--configfile", "site.yaml")
    runs = pd.read_parquet(wf / "results/runs.parquet").set_index("framework")
    assert (runs.status == "ok").all(), runs[["status", "reason"]]
    torch = runs.loc["pytorch"]
    assert (torch.env_kind, torch.env_name, torch.env_python) == ("site", "pytorch", site)
    assert torch.framework_version == probe["framework_version"]
    assert torch.framework_python_version == probe["python_version"]
    assert torch.cuda_version is None and torch.lock_mode == "exclusive" and torch.gpu_device is None
    assert runs.loc["tensorflow"].env_kind == "built" and runs.loc["tensorflow"].env_key
    assert not (wf / "resources/envs/pytorch.json").exists()  # a site environment is not built

    site_wrapper(tmp_path / "python", first)  # the same build again: nothing to do
    assert trains(wf) == []
    site_wrapper(tmp_path / "python", second)  # the same path, another build behind it (a module switched)
    assert trains(wf) == ["pytorch"]  # that framework's points, and no others
    snakemake(wf, "results/runs.parquet", "--configfile", "site.yaml")
    again = pd.read_parquet(wf / "results/runs.parquet").set_index("framework").loc["pytorch"]
    assert again.status == "ok" and again.env_python == site
    assert again.framework_python_version == check.probe("pytorch", second)["python_version"]
    assert again.framework_python_version != torch.framework_python_version


@pytest.mark.slow
@pytest.mark.parametrize("broken", ["missing", "without-torch"])
def test_a_broken_site_environment_stops_the_run_in_one_line(tmp_path, broken):
    python = str(tmp_path / "no/such/python") if broken == "missing" else sys.executable  # the base env: no torch
    wf = copy_workflow(tmp_path / "wf", {**SITE_STUDY, "frameworks": ["pytorch"],
                                         "envs": {"site": {"pytorch": python}}}, "site.yaml")
    proc = snakemake(wf, "--configfile", "site.yaml", check=False)
    assert proc.returncode != 0
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("dlbench:")]
    assert len(lines) == 1, proc.stderr[-2000:]
    assert "site environment of pytorch" in lines[0] and python in lines[0] and "fix:" in lines[0]
    assert ("not an executable" if broken == "missing" else "No module named 'torch'") in lines[0]
    assert "rule " not in proc.stdout and not (wf / "results").exists() and not (wf / "resources").exists()


def test_the_probe_reports_what_the_framework_says(env_python):
    got = check.probe("pytorch", env_python("pytorch"))
    # what the CPU environment (the one probed) is built from: envs/pytorch.txt's `name==version` pins
    pinned = dict(ln.split("==") for ln in (ENVS / "pytorch.txt").read_text().splitlines()
                  if ln.strip() and not ln.startswith("#"))
    assert got["framework_version"].split("+")[0] == pinned["torch"], (got["framework_version"], pinned)
    assert got["numpy_version"] == pinned["numpy"]
    assert got["python_version"].startswith("3.11.") and got["cuda_version"] is None  # the CPU build


def test_the_caffe_cuda_build_needs_nvcc_and_says_so(tmp_path):
    """envs/caffe/build.sh --cuda on a node without nvcc: one line, before anything is fetched or built."""
    proc = subprocess.run(["bash", str(ENVS / "caffe" / "build.sh"), "--cuda", str(tmp_path / "prefix" / "caffe")],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "CAFFE_SKIP_APT": "1", "HOME": str(tmp_path)})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and "--cuda needs nvcc" in proc.stderr
    assert not (tmp_path / "prefix").exists()


@pytest.mark.parametrize("env", [*registry.env_names(), "base"])
def test_every_environment_is_locked_with_hashes_and_holds_its_pins(env):
    assert pins.lock_problems(env) == []


def test_a_lock_that_disagrees_with_its_pins_is_caught(tmp_path, monkeypatch):
    monkeypatch.setattr(pins, "ENVS", tmp_path)
    (tmp_path / "pytorch.txt").write_text("torch==2.13.0\nnumpy==2.4.6\n")
    (tmp_path / "pytorch.lock").write_text("numpy==2.4.5 \\\n    --hash=sha256:00\ntorch==2.13.0+cpu\n"
                                           "--find-links /opt/wheels\n")
    problems = " | ".join(pins.lock_problems("pytorch"))
    assert "numpy is 2.4.5, the pins say ==2.4.6" in problems
    assert "torch has no hash" in problems and "names a package source" in problems
    (tmp_path / "pytorch.txt").write_text("torch===2.13.0\n")  # exactly that release: +cpu does not do
    assert any("torch is 2.13.0+cpu, the pins say ===2.13.0" in p for p in pins.lock_problems("pytorch"))
