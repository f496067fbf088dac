"""The numpy reference of the forward pass (dlbench.testing.forward.numpy_forward), layer by layer, against
values worked out by hand: what every framework's pass is held to in tests/test_forward.py."""

import math

import numpy as np
import pytest

from dlbench.spec import networks
from dlbench.testing.forward import numpy_forward, softmax_xent

X = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)  # 0 1 2 / 3 4 5 / 6 7 8


def test_conv_is_a_cross_correlation_with_stride_and_padding():
    w = np.array([[[[1.0, 2.0], [3.0, 4.0]]]])  # top-left 1, top-right 2, bottom-left 3, bottom-right 4
    out = numpy_forward([networks.conv(1, 2)], [(w, np.array([0.5]))], X)
    # 0*1 + 1*2 + 3*3 + 4*4 = 27 at the top left (not flipped, as a convolution would be); +0.5
    assert out[0, 0].tolist() == [[27.5, 37.5], [57.5, 67.5]]
    padded = numpy_forward([networks.conv(1, 2, stride=2, pad=1)], [(w, np.zeros(1))], X)
    # windows at (-1,-1), (-1,1), (1,-1), (1,1) of the zero-padded 5x5: only their in-image cells count
    assert padded[0, 0].tolist() == [[0 * 4, 1 * 3 + 2 * 4], [3 * 2 + 6 * 4, 4 * 1 + 5 * 2 + 7 * 3 + 8 * 4]]


def test_a_connection_table_feeds_only_its_planes():
    x = np.stack([np.ones((2, 2)), 10 * np.ones((2, 2))])[None]  # plane 0 all 1, plane 1 all 10
    w = np.ones((2, 2, 1, 1))  # every weight 1, the unlisted ones too
    out = numpy_forward([networks.conv(2, 1, table=[[1], [0]])], [(w, np.zeros(2))], x)
    assert out[0, :, 0, 0].tolist() == [10.0, 1.0]  # map 0 sees plane 1 only, map 1 plane 0 only


def test_pooling_rounds_up_as_caffe_does():
    # 3x3 max pooling, stride 2, on 3x3: ceil((3 - 3) / 2) + 1 = 1 ... on 4x4: ceil(1 / 2) + 1 = 2 windows
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    assert numpy_forward([networks.pool("max", 3, 2)], [], x)[0, 0].tolist() == [[10.0, 11.0], [14.0, 15.0]]
    # average: the last window hangs over the edge and counts only the cells inside (no padding to count)
    avg = numpy_forward([networks.pool("avg", 3, 2)], [], x)[0, 0]
    assert avg[0, 0] == pytest.approx((0 + 1 + 2 + 4 + 5 + 6 + 8 + 9 + 10) / 9)
    assert avg[1, 1] == pytest.approx((10 + 11 + 14 + 15) / 4)
    # max pooling over padding ignores the padded cells: -1s everywhere, padded by 1, 2x2 windows
    neg = numpy_forward([networks.pool("max", 2, 2, pad=1)], [], -np.ones((1, 1, 2, 2)))
    assert neg[0, 0].tolist() == [[-1.0, -1.0], [-1.0, -1.0]]
    # average over padding counts the padded cells of the window: (1) / 4 at each corner of a 2x2 of ones
    ones = numpy_forward([networks.pool("avg", 2, 2, pad=1)], [], np.ones((1, 1, 2, 2)))
    assert ones[0, 0].tolist() == [[0.25, 0.25], [0.25, 0.25]]


def test_lrn_across_channels_and_dense_on_the_c_h_w_order():
    x = np.array([1.0, 2.0, 3.0]).reshape(1, 3, 1, 1)
    out = numpy_forward([networks.lrn(3, 0.3, 0.75, 1.0)], [], x)[0, :, 0, 0]
    # channel 1 sees channels 0..2: 1 + 0.3 / 3 * (1 + 4 + 9) = 2.4; channel 0 sees 0..1: 1 + 0.1 * 5 = 1.5
    assert out.tolist() == pytest.approx([1 / 1.5 ** 0.75, 2 / 2.4 ** 0.75, 3 / 2.3 ** 0.75])
    x = np.arange(8.0).reshape(1, 2, 2, 2)  # C, H, W order: 0..3 plane 0, 4..7 plane 1
    w = np.zeros((2, 8))
    w[0, 4], w[1, 1] = 1.0, 1.0  # unit 0 reads plane 1's first cell, unit 1 plane 0's second
    assert numpy_forward([networks.dense(2)], [(w, np.array([0.0, 0.5]))], x).tolist() == [[4.0, 1.5]]


def test_activations_dropout_and_the_loss():
    x = np.array([-1.0, 0.0, 2.0]).reshape(1, 3, 1, 1)
    assert numpy_forward([networks.act("relu")], [], x).ravel().tolist() == [0.0, 0.0, 2.0]
    assert numpy_forward([networks.act("tanh")], [], x).ravel().tolist() == pytest.approx(np.tanh([-1, 0, 2]))
    assert numpy_forward([networks.act("sigmoid")], [], x).ravel()[1] == 0.5
    assert numpy_forward([networks.dropout(0.5)], [], x).ravel().tolist() == [-1.0, 0.0, 2.0]  # off: inference
    # two classes, equal logits: ln 2; logits (0, ln 3): the second class has p 3/4
    assert softmax_xent(np.array([[0.0, 0.0]]), np.array([0])) == pytest.approx(math.log(2))
    assert softmax_xent(np.array([[0.0, math.log(3)]]), np.array([1])) == pytest.approx(-math.log(0.75))
    with pytest.raises(ValueError, match="knows no layer 'softmax'"):
        numpy_forward([{"type": "softmax"}], [], x)


def test_every_network_of_the_study_runs_to_its_logits():
    rng = np.random.default_rng(0)
    for name, shape in networks.INPUT_SHAPES.items():
        layers = networks.resolve(name, 10)
        weights = [tuple(np.abs(rng.normal(1, 0.05, want)) if array in ("gamma", "var") else rng.normal(0, 0.05, want)
                         for array, want in networks.arrays(layer, prev))
                   for _, layer, prev in networks.trainable(layers, shape)]
        assert numpy_forward(layers, weights, rng.normal(size=(2, *shape))).shape == (2, 10), name
