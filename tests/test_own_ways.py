"""bench/own_ways.py, the yardstick of bench/script_parity.py: each framework's own documented way trains the very
network of that framework's own-defaults point (its parameter count is the spec's), on that point's data, for the
point's iterations, in the framework's own environment; and it refuses another network in one line."""

from __future__ import annotations

import json
import math
import subprocess

import pytest

from dlbench.datasets import prepare
from dlbench.paths import ROOT
from dlbench.run import measure
from dlbench.spec import networks
from dlbench.study.sweep import one_point

# (way, the framework whose own-defaults point it trains); Caffe's own way is `caffe train` itself
OWN_WAYS = (("tensorflow", "tensorflow"), ("tensorflow_migrated", "tensorflow"), ("keras_fit", "tensorflow"),
            ("pytorch", "pytorch"), ("jax", "jax"), ("theano", "theano"))


@pytest.fixture(scope="module")
def fashion_mnist(tmp_path_factory):
    out = tmp_path_factory.mktemp("own-ways") / "fashion_mnist"
    prepare.prepare("fashion_mnist", out)
    return out


def own_way(env_python, way: str, point: dict, dataset, tmp_path) -> subprocess.CompletedProcess:
    spec = tmp_path / f"{way}.json"
    spec.write_text(json.dumps(point))
    return subprocess.run([env_python(point["framework"]), str(ROOT / "bench" / "own_ways.py"), way, str(spec),
                           str(dataset)], env=measure.trainer_env(point), capture_output=True, text=True, timeout=600)


@pytest.mark.long
@pytest.mark.parametrize(("way", "framework"), OWN_WAYS)
def test_each_own_way_trains_the_own_defaults_network_on_the_points_data(env_python, fashion_mnist, tmp_path, way,
                                                                         framework):
    point = one_point(framework, preset="own", dataset="fashion_mnist", iterations=3, threads=1)
    proc = own_way(env_python, way, point, fashion_mnist, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (got["way"], got["framework"], got["iterations"]) == (way, framework, 3)
    assert got["params"] == networks.param_count(point["layers"], networks.INPUT_SHAPES[point["network"]])
    assert got["train_time_s"] > 0 and math.isfinite(got["final_loss"]) and 0 <= got["accuracy"] <= 1


@pytest.mark.long
def test_an_own_way_refuses_another_network_in_one_line(env_python, fashion_mnist, tmp_path):
    point = one_point("pytorch", preset="caffe", dataset="fashion_mnist", iterations=3, threads=1)
    proc = own_way(env_python, "pytorch", point, fashion_mnist, tmp_path)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1] == ("this own way trains torch_mnist; the point trains lenet (its "
                                                    "own-defaults point is the one to compare)")
