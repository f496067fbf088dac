"""What the rules are given (dlbench/rules/context.py): the study read once, and by a job's own Snakemake only what its
DAG needs (no record read, no interpreter probed, nothing locked, nothing said)."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from dlbench.atomic import write_json
from dlbench.environments import key, site, versions
from dlbench.environments.environment import Environment
from dlbench.frameworks import caffe_data, registry
from dlbench.node import locks
from dlbench.paths import ROOT
from dlbench.plan import estimate
from dlbench.record import store
from dlbench.rules import context, stale_locks
from dlbench.study import config

STUDY = {"datasets": ["digits"], "frameworks": ["pytorch", "caffe"], "preset": ["caffe"],
         "sweep": {"iterations": [30], "batch_size": [32, 64], "threads": [1]}}
MAIN = context.Reader(main=True, dryrun=False, forcerun=False)
JOB = context.Reader(main=False, dryrun=False, forcerun=False)


@pytest.fixture
def here(tmp_path, monkeypatch):
    """An empty study folder as the working directory (records and Snakemake's locks are read from there)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(stale_locks, "_held", None)  # the run's own lock, taken once per process: taken here again
    return tmp_path


def study(reader=MAIN, said=None, **keys) -> context.Study:
    return context.Study(config.validate({**STUDY, **keys}), reader, say=(said.append if said is not None else None))


def wildcards(p: dict) -> SimpleNamespace:
    return SimpleNamespace(framework=p["framework"], dataset=p["dataset"], point=p["id"])


def forbid(monkeypatch, module, name: str) -> None:
    def refused(*args, **kwargs):
        raise AssertionError(f"{module.__name__}.{name} was called")

    monkeypatch.setattr(module, name, refused)


def test_a_value_every_point_shares_is_plain_and_one_that_differs_is_looked_up(here):
    s = study()
    assert len(s.points) == 4
    train = s.train_values()
    assert train["threads"] == 1 and train["gpu"] == 0 and train["measure"] == 1  # plain: no function per job
    assert train["conda"] == context.BASE_CONDA
    caffe = next(p for p in s.points.values() if p["framework"] == "caffe")
    torch = next(p for p in s.points.values() if p["framework"] == "pytorch")
    # Caffe's points read the input prepared for it (registry: prepared_input), PyTorch's the dataset's store
    assert callable(train["prepared_input"])
    assert train["prepared_input"](wildcards(torch)) == []
    assert train["prepared_input"](wildcards(caffe)) == [
        f"resources/caffe/digits/{caffe_data.input_key(caffe['input'])}/{name}" for name in
        ("train.h5", "test.h5", "train.txt", "test.txt", "meta.json")]
    assert train["env_file"](wildcards(caffe)) == ["resources/envs/caffe.json"]
    assert train["env"](wildcards(torch)) == {"env": "pytorch", "kind": "built", "key": key.env_key("pytorch")}
    input_key = caffe_data.input_key(caffe["input"])
    assert s.caffe_input_settings(SimpleNamespace(dataset="digits", input_key=input_key)) == caffe["input"]
    assert s.metrics == [f"results/runs/{p['framework']}/digits/{p['id']}/metrics.json" for p in s.points.values()]


def test_a_dry_run_plans_first_attempts_with_plain_values_that_a_run_asks_for_at_its_first(here):
    run, dry = study().train_values(), study(context.Reader(main=True, dryrun=True, forcerun=False)).train_values()
    torch = next(p for p in study().points.values() if p["framework"] == "pytorch")
    # a run's attempt and cluster time are functions of the attempt; a dry run plans attempt 1 of every job
    assert run["attempt"](wildcards(torch), attempt=3) == 3 and dry["attempt"] == 1
    assert run["runtime"](wildcards(torch), attempt=2) == 2 * (60 + 30)
    assert dry["runtime"] == run["runtime"](wildcards(torch), attempt=1) == 60 + 30  # no finished point: the default
    # without --sdm conda the directive is unused: a dry run names none, so Snakemake expands no job's params for it
    assert run["conda"] == context.BASE_CONDA and dry["conda"] is None
    conda_dry = study(context.Reader(main=True, dryrun=True, use_conda=True, forcerun=False)).train_values()
    assert conda_dry["conda"](wildcards(torch)) == "../envs/pytorch.yaml"  # with it, the dry run names each env
    assert {k: v for k, v in dry.items() if not callable(v) and k not in ("attempt", "runtime", "conda")} == {
        k: v for k, v in run.items() if not callable(v) and k not in ("attempt", "runtime", "conda")}


def test_the_bf16_peak_is_measured_where_the_registry_says(here):
    assert study().peak_bf16_env(None) == []  # no bf16 point: numpy's float32 peak only
    bf16 = study(frameworks=["pytorch"], sweep={**STUDY["sweep"], "precision": ["bf16"]})
    assert bf16.peak_bf16_env(None) == [f"resources/envs/{registry.bf16_peak_framework().name}.json"]
    assert registry.bf16_peak_framework().name == "pytorch"


def test_the_main_process_clears_stale_locks_and_says_what_it_removed(here):
    (here / ".snakemake" / "locks").mkdir(parents=True)
    (here / ".snakemake" / "locks" / "0.input.lock").write_text("x")
    said = []
    study(said=said)
    assert said == ["dlbench: removed stale Snakemake locks left by a killed run"]
    assert not list((here / ".snakemake" / "locks").iterdir())


def test_snakemakes_locks_stay_while_another_run_holds_the_run_lock(here):
    # another dlbench run in this folder, alive: it holds .snakemake/dlbench.lock (taken the one way dlbench takes
    # a lock, dlbench.node.locks.flocked) for its lifetime
    other = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom dlbench.rules import stale_locks\n"
                              "print(*stale_locks.hold_and_clear_stale(sys.argv[1]), flush=True)\ntime.sleep(60)",
                              str(here)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert other.stdout.readline().split() == ["0", "[]"]  # it took the run lock: nothing of a killed run
        (here / ".snakemake" / "locks").mkdir()
        (here / ".snakemake" / "locks" / "0.input.lock").write_text("x")  # that run's own lock: not stale
        assert stale_locks.hold_and_clear_stale(here) == (0, [])
        assert (here / ".snakemake" / "locks" / "0.input.lock").exists()
    finally:
        other.kill()
        other.wait(timeout=10)
    assert stale_locks.hold_and_clear_stale(here) == (1, [])  # it died: its lock file is stale now
    assert not (here / ".snakemake" / "locks" / "0.input.lock").exists()


def test_a_jobs_own_snakemake_reads_no_record_probes_nothing_and_says_nothing(here, monkeypatch):
    with_site = {"envs": {"site": {"pytorch": "/opt/site/bin/python"}}, "select": {"status": ["none", "error"]}}
    for name in ("status_in", "read_or_skip"):
        forbid(monkeypatch, store, name)
    forbid(monkeypatch, site, "probed")
    forbid(monkeypatch, versions, "prepare")
    forbid(monkeypatch, stale_locks, "hold_and_clear_stale")
    forbid(monkeypatch, estimate, "finished")
    monkeypatch.delenv(site.SITE_ENVS_VAR, raising=False)
    said = []
    job = study(JOB, said, **with_site)
    assert len(job.points) == 4 and said == []  # the selection by status keeps every point there
    torch = next(p for p in job.points.values() if p["framework"] == "pytorch")
    # without the main process's probe, the site environment as its job needs it: the interpreter
    assert job.env_params(torch) == {"env": "pytorch", "framework": "pytorch", "kind": "site",
                                     "python": "/opt/site/bin/python"}
    # a cluster job's time was asked for by the main process: its own Snakemake reads no finished point
    assert job.point_runtime(wildcards(torch), attempt=2) == 2 * (60 + 30)
    job.announce()
    assert said == []


def test_a_dry_run_runs_no_site_interpreter_and_uses_what_the_last_run_probed(here, tmp_path, env_python):
    # A site interpreter is the user's code: this one (a real script) leaves a mark each time it runs, then runs
    # the built PyTorch environment's Python. Before: `snakemake -n` ran it while `dlbench validate` refused to
    # run anything
    mark = tmp_path / "ran"
    python = tmp_path / "site-python"
    python.write_text(f"#!/bin/sh\necho x >> {mark}\nexec {env_python('pytorch')} \"$@\"\n")
    python.chmod(0o755)
    with_site = {"envs": {"site": {"pytorch": str(python)}}, "sweep": {**STUDY["sweep"], "device": ["cpu"]}}
    dry = context.Reader(main=True, dryrun=True, forcerun=False)
    said = []
    first = study(dry, said, **with_site)
    assert not mark.exists() and any("dry run: not probing the site interpreters" in line for line in said)
    torch = next(p for p in first.points.values() if p["framework"] == "pytorch")
    assert "versions" not in first.env_params(torch)
    real = study(**with_site)  # the run itself probes it, once, and keeps what it found
    assert mark.read_text().count("x") >= 1
    runs = mark.read_text().count("x")
    said.clear()
    again = study(dry, said, **with_site)
    assert mark.read_text().count("x") == runs and not any("not probing" in line for line in said)
    assert again.env_params(torch) == real.env_params(torch)  # the dry run plans what the run will
    python.write_text(python.read_text())  # the same bytes written again: still the probed interpreter
    said.clear()
    assert study(dry, said, **with_site).env_params(torch) == real.env_params(torch) and not said
    python.write_text(python.read_text() + "# rebuilt\n")  # another interpreter file: not the probed one
    said.clear()
    assert "versions" not in study(dry, said, **with_site).env_params(torch) and said


def test_a_yte_template_config_is_refused_as_validate_refuses_it(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("__use_yte__: true\ndatasets: [digits]\nframeworks: [pytorch]\n")
    with pytest.raises(context.StudyError, match="__use_yte__: a yte template runs code"):
        context.read_config({"datasets": ["digits"], "frameworks": ["pytorch"]}, [str(path)], str(config.SCHEMA))


def test_the_main_process_probes_each_site_interpreter_once_and_hands_it_to_its_jobs(here, monkeypatch):
    probed = []

    def probe(framework, env, python):
        probed.append((framework, env, python))
        return Environment.site(env, framework, python, {"v": "1"})

    monkeypatch.setattr(site, "probed", probe)
    with_site = {"envs": {"site": {"pytorch": "/opt/site/bin/python"}}, "sweep": {**STUDY["sweep"], "device": ["cpu"]}}
    main = study(**with_site)
    assert probed == [("pytorch", "pytorch", "/opt/site/bin/python")]  # two points, one interpreter: one probe
    environ = {}
    main.export(environ)
    assert environ[locks.NODE_LOCK_ENV] == main.measure_lock
    monkeypatch.setenv(site.SITE_ENVS_VAR, environ[site.SITE_ENVS_VAR])
    monkeypatch.setattr(site, "probed", lambda *a: pytest.fail("a job's own Snakemake probed"))
    job = study(JOB, **with_site)
    torch = next(p for p in job.points.values() if p["framework"] == "pytorch")
    assert job.env_params(torch) == main.env_params(torch)  # the same params: the job reruns nothing
    assert job.env_params(torch)["versions"] == {"v": "1"}


def test_select_by_status_reads_each_record_once_and_names_the_forcerun(here, monkeypatch):
    first = study()
    p = next(iter(first.points.values()))
    write_json(here / context.run_dir(p) / store.RESULT, {"id": p["id"], "framework": p["framework"],
                                                                "dataset": "digits", "status": "error"})
    reads = []
    real = store.status_in
    monkeypatch.setattr(store, "status_in", lambda d: reads.append(d) or real(d))
    said = []
    s = study(said=said, select={"status": ["error"]})
    assert list(s.points.values()) == [p] and len(reads) == 4  # each point's record read once
    assert said == ["dlbench: select.status removed 3; 1 of 4 points remain",
                    "dlbench: select.status: 1 of the points kept have a record; add --forcerun train to run them "
                    "again (the records stay in their attempts/)"]
    said.clear()
    study(context.Reader(main=True, forcerun=True), said, select={"status": ["error"]})
    assert said == ["dlbench: select.status removed 3; 1 of 4 points remain"]


def test_a_config_error_and_too_many_threads_stop_in_one_line(here):
    bad = here / "bad.yaml"
    bad.write_text("datasets: [digits]\ndatasets: [mnist]\n")
    with pytest.raises(context.StudyError) as stop:
        context.read_config({"datasets": ["mnist"]}, [str(bad)], str(config.SCHEMA))
    assert str(stop.value).startswith("dlbench: config error: ") and "\n" not in str(stop.value)
    cfg = context.read_config({**STUDY, "sweep": {**STUDY["sweep"], "threads": [1, 4]}}, [], str(config.SCHEMA))
    context.check_local_cores(cfg, 4)
    with pytest.raises(context.StudyError, match=r"sweep.threads: 4 is more than this machine's 2 cores"):
        context.check_local_cores(cfg, 2)


def test_the_jobs_import_this_checkout(tmp_path):
    environ = {"PYTHONPATH": "/elsewhere"}
    context.own_package(str(tmp_path), environ)
    assert environ["PYTHONPATH"].split(":") == [str(tmp_path), "/elsewhere"]
    fresh = {}
    context.own_package(str(tmp_path), fresh)
    assert fresh == {"PYTHONPATH": str(tmp_path)}


def test_the_wildcards_are_those_of_the_registry_and_the_catalog(here):
    constraints = study().wildcard_constraints()
    assert constraints["framework"].split("|") == registry.names()
    assert {env for env in registry.env_names() if re.fullmatch(constraints["env"], env)} == set(registry.env_names())
    assert "digits" in constraints["dataset"].split("|") and "cifar10" in constraints["dataset"].split("|")


def test_snakemake_reads_a_job_functions_signature_from_it_not_at_every_call(monkeypatch):
    from snakemake.common import get_function_params, get_input_function_aux_params

    times_two = context.job_function(lambda wildcards, attempt: 2 * attempt)

    def no_signature(*args, **kwargs):
        raise AssertionError("Snakemake read the signature again")

    monkeypatch.setattr(inspect, "signature", no_signature)
    assert list(get_function_params(times_two)) == ["wildcards", "attempt"]
    assert get_input_function_aux_params(times_two, {"attempt": 3, "input": [], "threads": 1}) == {"attempt": 3}
    assert times_two(None, attempt=3) == 6
