"""The BLAS as a setting of its own: Theano and Caffe with OpenBLAS or Intel's MKL (`library: mkl`),
each in its own environment, the library in effect read back from the running process."""

from __future__ import annotations

import json

import pytest

from dlbench.frameworks import registry
from dlbench.run import runner
from dlbench.run.options import RunOptions
from dlbench.study import config
from dlbench.study.sweep import one_point


def test_mkl_points_run_in_their_own_environments():
    for name in ("theano", "caffe"):
        fw = registry.get(name)
        assert fw.env_name({"device": "cpu", "library": "mkl"}) == f"{name}-mkl"
        assert fw.env_name({"device": "cpu", "library": "default"}) == name
    with pytest.raises(config.ConfigError, match="sweep.library: pytorch cannot honour 'mkl'"):
        config.validate({"datasets": ["digits"], "frameworks": ["theano", "pytorch"], "sweep": {"library": ["mkl"]}})


def mapped(record: dict) -> str:
    return " ".join(json.loads(record["build_json"]).get("blas_mapped") or [])


@pytest.mark.long
@pytest.mark.parametrize("framework", ["theano", "caffe"])
def test_the_same_point_on_openblas_and_on_mkl(framework, env_python, digits_dir, tmp_path):
    records = {}
    for library in ("default", "mkl"):
        point = one_point(framework, "caffe", epochs=6, batch_size=64, threads=2, library=library)
        python = env_python(registry.get(framework).env_name(point))
        records[library] = runner.run_point(point, digits_dir, tmp_path / library, RunOptions(python=python))
    openblas, mkl = records["default"], records["mkl"]
    for r in records.values():
        assert r["status"] == "ok", r.get("log_tail")
        assert r["accuracy"] > 0.85
    # read from the process's memory map, not from how it was built
    assert openblas["library_in_effect"] == "openblas" and "libopenblas" in mapped(openblas)
    assert "libmkl" not in mapped(openblas)
    assert mkl["library_in_effect"] == "mkl" and "libmkl_rt" in mapped(mkl)
    assert mkl["library"] == "mkl" and openblas["library"] == "default"


@pytest.mark.long
def test_a_point_asking_for_mkl_where_there_is_none_is_refused(env_python, digits_dir, tmp_path):
    point = one_point("theano", "caffe", iterations=5, threads=1, library="mkl")
    r = runner.run_point(point, digits_dir, tmp_path / "out", RunOptions(python=env_python("theano")))  # OpenBLAS only
    assert r["status"] == "unavailable" and "asks for MKL" in r["reason"] and "openblas" in r["reason"]
