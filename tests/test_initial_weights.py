"""The initial weights: each example's scheme, drawn once in numpy, the same numbers for every framework."""

import math

import numpy as np
import pytest

from dlbench.spec import initial_weights, networks
from dlbench.study import presets


def draw(net: str, init, seed: int = 1):
    return initial_weights.draw(networks.resolve(net, 10), networks.INPUT_SHAPES[net], init, seed)


def test_the_same_seed_gives_the_same_weights_and_another_seed_others():
    a, b, c = draw("lenet", "xavier", 1), draw("lenet", "xavier", 1), draw("lenet", "xavier", 2)
    assert all(np.array_equal(wa, wb) for (wa, _), (wb, _) in zip(a, b))
    assert not np.array_equal(a[0][0], c[0][0])
    assert [w.shape for w, _ in a] == [(20, 1, 5, 5), (50, 20, 5, 5), (500, 800), (10, 500)]
    assert all(w.dtype == np.float32 and bias.dtype == np.float32 for w, bias in a)


def test_xavier_is_caffes_filler():
    weights = draw("lenet", "xavier")
    for (w, bias), fan_in in zip(weights, (25, 500, 800, 500)):
        limit = math.sqrt(3 / fan_in)
        assert np.abs(w).max() <= limit and np.abs(w).max() > 0.9 * limit
        assert not bias.any()


def test_torch_draws_weights_and_biases_within_one_over_root_fan_in():
    weights = draw("torch_mnist", "torch")
    for (w, bias), fan_in in zip(weights, (25, 800, 576, 200)):
        limit = 1 / math.sqrt(fan_in)
        assert np.abs(w).max() <= limit and np.abs(bias).max() <= limit and np.abs(bias).max() > 0
    # a sparse conv's fan-in is its connections x kernel area: 1 x 25 and 4 x 25
    sparse = draw("torch_cifar10", "torch")
    assert np.abs(sparse[0][0]).max() == pytest.approx(0.2, rel=0.05)
    assert 0.09 < np.abs(sparse[1][0]).max() <= 0.1


def test_a_sparse_convs_unconnected_weights_start_at_zero():
    layers = networks.resolve("torch_cifar10", 10)
    w = draw("torch_cifar10", "torch")[1][0]
    mask = initial_weights.connection_mask(layers[3], 16)[:, :, 0, 0].astype(bool)
    assert np.count_nonzero(w[~mask]) == 0 and np.count_nonzero(w[mask]) == w[mask].size == 256 * 4 * 25


def test_theano_follows_the_tutorial():
    weights = draw("lenet5_tanh", "theano")
    # conv: fan_out = filters * 25 // 4 (2x2 pooling, integer division as the tutorial's `//`: 312, not
    # 312.5, for the second conv); hidden: n_in + n_out; the logistic layer starts at 0
    bounds = [math.sqrt(6 / (25 + 20 * 25 // 4)), math.sqrt(6 / (500 + 50 * 25 // 4)), math.sqrt(6 / 1300)]
    rng = np.random.RandomState(1)  # the draws in layer order, from the point's seed
    for (w, bias), bound in zip(weights, bounds):
        assert np.array_equal(w, rng.uniform(-bound, bound, w.shape).astype(np.float32)) and not bias.any()
    assert not weights[-1][0].any() and not weights[-1][1].any()


def test_truncated_normals_stay_within_two_standard_deviations_with_per_layer_numbers():
    init = presets.study_presets()["cifar10"]["tensorflow"]["init"]
    weights = draw("tf_cifar10", init)
    for (w, bias), std, b in zip(weights, init["std"], init["bias"]):
        assert np.abs(w).max() <= 2 * std and np.abs(w).max() > 1.8 * std
        assert w.std() == pytest.approx(0.88 * std, rel=0.1)  # a normal cut at 2 std keeps 88 % of its spread
        assert np.all(bias == np.float32(b))


def test_gaussian_with_random_biases_is_the_reslab_tutorials():
    weights = draw("reslab_cifar10", {"name": "gaussian", "std": 0.1, "bias_std": 0.1})
    everything = np.concatenate([np.concatenate([w.ravel(), bias]) for w, bias in weights])
    assert everything.std() == pytest.approx(0.1, rel=0.03) and abs(everything.mean()) < 0.005
    quick = draw("cifar10_quick", {"name": "gaussian", "std": [0.0001, 0.01, 0.01, 0.1, 0.1]})
    assert quick[0][0].std() == pytest.approx(0.0001, rel=0.1) and quick[3][0].std() == pytest.approx(0.1, rel=0.1)


def test_lists_must_have_one_value_per_layer_and_names_must_be_known():
    with pytest.raises(initial_weights.InitError, match="lists 2 values for 4"):
        initial_weights.check({"name": "gaussian", "std": [0.1, 0.2]}, networks.NETWORKS["lenet"])
    with pytest.raises(initial_weights.InitError, match="unknown initialiser 'kaiming'"):
        initial_weights.normalise("kaiming")
    assert initial_weights.normalise(None) == {"name": "xavier"}
    described = initial_weights.describe({"name": "gaussian", "std": 0.1, "bias_std": 0.1})
    assert described == "gaussian(bias_std=0.1, std=0.1)"


@pytest.mark.parametrize("family", ["mnist", "cifar10"])
def test_every_study_preset_names_an_initialiser_that_fits_its_network(family):
    for name, preset in presets.study_presets()[family].items():
        assert "init" in preset, name
        layers = networks.resolve(preset["network"], 10)
        shape = networks.INPUT_SHAPES[preset["network"]]
        weights = initial_weights.draw(layers, shape, preset["init"], 1)
        assert len(weights) == len(networks.trainable(layers, shape)), name  # conv, dense and batchnorm
