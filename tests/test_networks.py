"""The network specs: shapes, parameter counts and FLOPs computed from the spec alone, and every adapter's count."""

import json
import os
import subprocess

import pytest

from dlbench.frameworks import registry
from dlbench.paths import ROOT as REPO
from dlbench.spec import networks


def test_lenet_shapes_and_parameters():
    layers = networks.resolve("lenet", 10)
    assert networks.shapes(layers, (1, 28, 28))[-1] == (10,)
    assert networks.shapes(layers, (1, 28, 28))[1] == (20, 12, 12)
    # Caffe's LeNet: 520 + 25,050 + 400,500 + 5,010
    assert networks.param_count(layers, (1, 28, 28)) == 431_080


def test_mnist_deep_parameters():
    # TensorFlow's mnist_deep: 832 + 51,264 + 3,212,288 + 10,250
    assert networks.param_count(networks.resolve("mnist_deep", 10), (1, 28, 28)) == 3_274_634


def test_pooling_rounds_up_like_caffe():
    assert networks.pool_out(32, 3, 2, 0) == 16  # cifar10_quick: floor rounding would give 15
    assert networks.pool_out(24, 2, 2, 0) == 12
    assert networks.pool_out(28, 3, 3, 0) == 10


def test_torch_mnist_matches_the_published_576_inputs_of_its_first_dense_layer():
    layers = networks.resolve("torch_mnist", 10)
    shapes = networks.shapes(layers, (1, 32, 32))
    dense_at = next(i for i, layer in enumerate(layers) if layer["type"] == "dense")
    c, h, w = shapes[dense_at - 1]
    assert c * h * w == 576


def test_flops_of_lenet():
    flops = networks.flops_per_image(networks.resolve("lenet", 10), (1, 28, 28))
    # conv1 2*20*24*24*25, conv2 2*50*8*8*500, fc1 2*800*500, fc2 2*500*10
    assert flops["forward"] == 2 * (20 * 24 * 24 * 25 + 50 * 8 * 8 * 500 + 800 * 500 + 500 * 10)
    assert flops["train"] == 3 * flops["forward"]


def test_resolve_sizes_the_logits_and_rejects_unknown_networks():
    assert networks.resolve("lenet", 7)[-1]["units"] == 7
    with pytest.raises(networks.SpecError, match="unknown network"):
        networks.resolve("resnet", 10)


def test_a_network_too_deep_for_its_input_is_refused():
    with pytest.raises(networks.SpecError, match="no pixels"):
        networks.shapes(networks.resolve("lenet", 10), (1, 8, 8))


def test_torch_mnist_pools_with_padding_as_its_script_did():
    """SpatialMaxPooling(3, 3, 3, 3, 1, 1): 28 -> 10 after the first pooling, 3x3 maps at the end, 576 inputs."""
    layers = networks.resolve("torch_mnist", 10)
    pools = [layer for layer in layers if layer["type"] == "pool"]
    assert pools[0] == {"type": "pool", "mode": "max", "kernel": 3, "stride": 3, "pad": 1}
    shapes = networks.shapes(layers, (1, 32, 32))
    assert shapes[2] == (32, 10, 10) and shapes[5] == (64, 3, 3)
    assert networks.pool_out(28, 3, 3, 1) == 10 and networks.pool_out(10 - 4, 2, 2, 0) == 3
    # Caffe drops a last window that would start in the padding: 4 + 2*1 with kernel 2, stride 2 -> 3, not 4
    assert networks.pool_out(4, 2, 2, 1) == 3


def test_connection_tables_follow_the_documented_algorithm():
    """Each output map takes the next fan_in planes of a random order; a new order once its whole chunks are used."""
    table = networks.random_table(16, 256, 4, seed=1)
    assert table == networks.random_table(16, 256, 4, seed=1)  # seeded: the same table every time, every framework
    assert table != networks.random_table(16, 256, 4, seed=2)
    assert all(len(row) == 4 and len(set(row)) == 4 for row in table)
    for start in range(0, 256, 4):  # every order of the 16 planes is used up in 4 chunks of 4
        assert sorted(p for row in table[start:start + 4] for p in row) == list(range(16))
    small = networks.random_table(3, 16, 1, seed=1)
    assert all(sorted(r[0] for r in small[i:i + 3]) == [0, 1, 2] for i in range(0, 15, 3))
    assert networks.random_table(5, 4, 2, seed=0)  # 5 planes, chunks of 2: the fifth plane waits for a new order
    with pytest.raises(networks.SpecError, match="fan_in"):
        networks.random_table(3, 4, 4, seed=1)


def test_torch_cifar10_is_sparse_and_counts_its_connected_weights_only():
    layers = networks.resolve("torch_cifar10", 10)
    assert [len(layer["table"][0]) for layer in layers if layer["type"] == "conv"] == [1, 4]
    # 16 kernels of 5x5 + 16 biases, 1,024 kernels + 256 biases, then 6,400 -> 128 -> 10
    want = (16 * 25 + 16) + (256 * 4 * 25 + 256) + (6400 * 128 + 128) + (128 * 10 + 10)
    assert networks.param_count(layers, (3, 32, 32)) == want == 846_890
    flops = networks.flops_per_image(layers, (3, 32, 32))["forward"]
    assert flops == 2 * (16 * 28 * 28 * 25 + 256 * 10 * 10 * 4 * 25 + 6400 * 128 + 128 * 10)


def test_a_table_that_does_not_fit_its_input_is_refused():
    bad = [networks.conv(4, 3, table=[[0], [1], [2], [5]]), networks.dense(10)]
    with pytest.raises(networks.SpecError, match="beyond the 3 planes"):
        networks.shapes(bad, (3, 8, 8))
    uneven = [networks.conv(2, 3, table=[[0], [1, 2]]), networks.dense(10)]
    with pytest.raises(networks.SpecError, match="same number"):
        networks.shapes(uneven, (3, 8, 8))
    with pytest.raises(networks.SpecError, match="rows for 3 filters"):
        networks.shapes([networks.conv(3, 3, table=[[0]]), networks.dense(10)], (3, 8, 8))


def test_the_reslab_colour_convnet():
    layers = networks.resolve("reslab_cifar10", 10)
    shapes = networks.shapes(layers, (3, 32, 32))
    assert shapes[2] == (4, 10, 10) and shapes[5] == (8, 4, 4) and shapes[-1] == (10,)
    assert networks.param_count(layers, (3, 32, 32)) == (4 * 27 + 4) + (8 * 36 + 8) + (128 * 100 + 100) + 1010


def test_multipliers_say_what_each_example_decays_and_speeds_up():
    tf = [layer for layer in networks.resolve("tf_cifar10", 10) if layer["type"] in ("conv", "dense")]
    assert [networks.multipliers(layer)["decay"] for layer in tf] == [(0, 0), (0, 0), (1, 0), (1, 0), (0, 0)]
    lenet = [layer for layer in networks.resolve("lenet", 10) if layer["type"] in ("conv", "dense")]
    assert {networks.multipliers(layer)["lr"] for layer in lenet} == {(1.0, 2.0)}
    assert networks.multipliers(networks.dense(5)) == {"lr": (1.0, 1.0), "decay": (1.0, 1.0)}
    with pytest.raises(networks.SpecError, match="unknown multiplier"):
        networks.dense(5, lr_multiplier=2)


PARAMS = """
import importlib, json, sys
from dlbench.spec import networks
from dlbench.frameworks import registry
adapter = importlib.import_module("dlbench.frameworks." + sys.argv[1]).ADAPTER
lacks = set(registry.get(sys.argv[1]).cannot_build)
print(json.dumps({net: adapter.params(networks.resolve(net, 10), shape) for net, shape in networks.INPUT_SHAPES.items()
                  if not networks.kinds(networks.NETWORKS[net]) & lacks}))
"""


@pytest.mark.long
@pytest.mark.parametrize("framework", registry.names())
def test_every_framework_builds_the_parameters_of_the_spec(env_python, framework):
    """Each adapter's own count of the network it builds (a masked conv: its connected weights) is the spec's."""
    env = {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ["HOME"],
           "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([env_python(framework), "-c", PARAMS, framework], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    lacks = set(registry.get(framework).cannot_build)  # refused before training (tests/test_resnet.py)
    assert counts == {net: networks.param_count(networks.resolve(net, 10), shape)
                      for net, shape in networks.INPUT_SHAPES.items()
                      if not networks.kinds(networks.NETWORKS[net]) & lacks}
    assert counts["lenet"] == 431_080 and counts["torch_cifar10"] == 846_890
