"""The network specs: shapes, parameter counts and FLOPs computed from the spec alone."""

import pytest

from dlbench import models


def test_lenet_shapes_and_parameters():
    layers = models.resolve("lenet", 10)
    assert models.shapes(layers, (1, 28, 28))[-1] == (10,)
    assert models.shapes(layers, (1, 28, 28))[1] == (20, 12, 12)
    # Caffe's LeNet: 520 + 25,050 + 400,500 + 5,010
    assert models.param_count(layers, (1, 28, 28)) == 431_080


def test_mnist_deep_parameters():
    # TensorFlow's mnist_deep: 832 + 51,264 + 3,212,288 + 10,250
    assert models.param_count(models.resolve("mnist_deep", 10), (1, 28, 28)) == 3_274_634


def test_pooling_rounds_up_like_caffe():
    assert models.pool_out(32, 3, 2, 0) == 16  # cifar10_quick: floor rounding would give 15
    assert models.pool_out(24, 2, 2, 0) == 12
    assert models.pool_out(28, 3, 3, 0) == 10


def test_torch_mnist_matches_the_published_576_inputs_of_its_first_dense_layer():
    layers = models.resolve("torch_mnist", 10)
    shapes = models.shapes(layers, (1, 32, 32))
    dense_at = next(i for i, layer in enumerate(layers) if layer["type"] == "dense")
    c, h, w = shapes[dense_at - 1]
    assert c * h * w == 576


def test_flops_of_lenet():
    flops = models.flops_per_image(models.resolve("lenet", 10), (1, 28, 28))
    # conv1 2*20*24*24*25, conv2 2*50*8*8*500, fc1 2*800*500, fc2 2*500*10
    assert flops["forward"] == 2 * (20 * 24 * 24 * 25 + 50 * 8 * 8 * 500 + 800 * 500 + 500 * 10)
    assert flops["train"] == 3 * flops["forward"]


def test_resolve_sizes_the_logits_and_rejects_unknown_networks():
    assert models.resolve("lenet", 7)[-1]["units"] == 7
    with pytest.raises(models.SpecError, match="unknown network"):
        models.resolve("resnet", 10)


def test_a_network_too_deep_for_its_input_is_refused():
    with pytest.raises(models.SpecError, match="no pixels"):
        models.shapes(models.resolve("lenet", 10), (1, 8, 8))
