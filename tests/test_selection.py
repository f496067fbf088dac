"""`select:` and `exclude:` after the sweep's expansion: they reach every sub-study of config/paper.yaml."""

import re

import pytest
import yaml

from dlbench.atomic import write_json
from dlbench.paths import ROOT
from dlbench.record import store
from dlbench.study import config, sweep
from dlbench.testing.sandbox import snakemake

PAPER = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())


def paper(**keys) -> dict:
    return config.validate({**PAPER, **keys})


@pytest.fixture(scope="module")
def full():
    return sweep.plan(paper())


def test_select_by_framework_reaches_the_sub_studies_that_name_their_own(full):
    got = sweep.plan(paper(select={"framework": ["caffe"]}))
    assert {p["framework"] for p in got.points} == {"caffe"}
    assert len(got.points) == sum(p["framework"] == "caffe" for p in full.points) > 0
    # `library` names its own frameworks (TensorFlow and PyTorch): none of its points is left; `blas` keeps Caffe's
    studies = {s for m in got.membership.values() for s in m}
    assert "library" not in studies and "blas" in studies
    assert got.removed == {"select.framework": len(full.points) - len(got.points)}
    assert got.expanded == len(full.points)


def test_every_key_of_a_select_must_match_and_each_says_what_it_removed(full):
    got = sweep.plan(paper(select={"framework": ["pytorch"], "device": ["gpu"], "dataset": ["mnist"]}))
    assert got.points and all((p["framework"], p["device"], p["dataset"]) == ("pytorch", "gpu", "mnist")
                              for p in got.points)
    # applied in turn: framework, then dataset, then device
    pytorch = [p for p in full.points if p["framework"] == "pytorch"]
    mnist = [p for p in pytorch if p["dataset"] == "mnist"]
    gpu = [p for p in mnist if p["device"] == "gpu"]
    assert got.removed == {"select.framework": len(full.points) - len(pytorch),
                           "select.dataset": len(pytorch) - len(mnist), "select.device": len(mnist) - len(gpu)}
    assert len(got.points) == len(gpu)


def test_excluding_a_study_keeps_the_points_another_study_needs(full):
    got = sweep.plan(paper(exclude={"study": ["tuning"]}))
    only_tuning = [i for i, m in full.membership.items() if m == ["tuning"]]
    shared = [i for i, m in full.membership.items() if "tuning" in m and len(m) > 1]
    assert only_tuning and shared
    assert got.removed == {"exclude.study": len(only_tuning)}
    assert all(i in got.membership and "tuning" not in got.membership[i] for i in shared)
    assert not any(t["tuning_grid"].startswith("tuning:") for t in got.tuning.values())


def test_exclude_drops_a_point_that_matches_any_key(full):
    got = sweep.plan(paper(exclude={"device": ["gpu"], "preset": ["tensorflow"]}))
    assert got.points and all(p["device"] == "cpu" and p["preset"] != "tensorflow" for p in got.points)
    assert len(got.points) == sum(p["device"] == "cpu" and p["preset"] != "tensorflow" for p in full.points)


def test_select_by_status_reads_each_points_record(tmp_path):
    cfg = config.validate({"datasets": ["digits"], "frameworks": ["pytorch", "tensorflow"], "preset": ["caffe"],
                           "sweep": {"learning_rate": [0.01, 0.02, 0.04]}})
    points = sweep.plan(cfg).points
    statuses = {points[0]["id"]: "error", points[1]["id"]: "ok", points[2]["id"]: "timeout"}
    for p in points:
        if p["id"] in statuses:
            write_json(tmp_path / p["id"] / store.RESULT,
                       {"id": p["id"], "framework": p["framework"], "dataset": "digits", "status": statuses[p["id"]]})

    def status_of(p):
        return store.status_in(tmp_path / p["id"])

    failed = sweep.plan({**cfg, "select": {"status": ["error", "timeout", "hung"]}}, status_of)
    assert [p["id"] for p in failed.points] == [points[0]["id"], points[2]["id"]]
    new = sweep.plan({**cfg, "select": {"status": ["none"]}}, status_of)
    assert len(new.points) == len(points) - 3 and new.removed == {"select.status": 3}


def test_a_wrong_filter_is_refused_in_one_line():
    with pytest.raises(config.ConfigError,
                       match=r"select\.framework\.0: 'torch' is not allowed \(did you mean 'pytorch'\?\); choose"):
        paper(select={"framework": ["torch"]})
    with pytest.raises(config.ConfigError, match=r"unknown key 'frameworks' in exclude"):
        paper(exclude={"frameworks": ["caffe"]})


def test_the_papers_dry_run_says_what_each_filter_removed(tmp_path, full):
    out = snakemake(ROOT, "-n", "--directory", str(tmp_path), "--configfile", str(ROOT / "config" / "paper.yaml"),
                    "--config", 'select={"framework": ["theano"], "device": ["cpu"]}',
                    'exclude={"study": ["tuning"]}')
    theano = [p for p in full.points if p["framework"] == "theano"]
    cpu = [p for p in theano if p["device"] == "cpu"]
    kept = [p for p in cpu if full.membership[p["id"]] != ["tuning"]]
    line = (f"dlbench: select.framework removed {len(full.points) - len(theano)}, select.device removed "
            f"{len(theano) - len(cpu)}, exclude.study removed {len(cpu) - len(kept)}; {len(kept)} of "
            f"{len(full.points)} points remain")
    assert line in out.stderr
    assert re.search(rf"^train\s+{len(kept)}$", out.stdout, re.M), out.stdout[-2000:]
