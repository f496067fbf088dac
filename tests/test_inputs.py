"""The presets' input handling: the same numpy code feeds every framework."""

import numpy as np
import pytest

from dlbench.spec import inputs


def test_pad_and_centre_crop_are_inverse():
    x = np.random.rand(2, 1, 28, 28).astype(np.float32)
    padded = inputs.pad_to(x, 32)
    assert padded.shape == (2, 1, 32, 32) and padded[:, :, :2].max() == 0
    assert np.array_equal(inputs.center_crop(padded, 28), x)


def test_yuv_of_grey_has_no_colour():
    grey = np.full((1, 3, 4, 4), 0.5, dtype=np.float32)
    yuv = inputs.rgb_to_yuv(grey)
    assert np.allclose(yuv[:, 0], 0.5, atol=1e-6) and np.allclose(yuv[:, 1:], 0, atol=1e-5)


def test_local_contrast_normalisation_centres_and_scales():
    rng = np.random.RandomState(0)
    x = (rng.rand(3, 32, 32) * 5 + 10).astype(np.float32)
    out = inputs.local_contrast_normalise(x)
    assert abs(out.mean()) < 0.1 and 0.5 < out.std() < 2.0
    flat = inputs.local_contrast_normalise(np.full((1, 8, 8), 3.0, dtype=np.float32))
    assert np.allclose(flat, 0, atol=1e-2)  # nothing to normalise in a flat image


def test_lcn_kernel_is_torchs_gaussian1d_of_seven():
    # image.gaussian1D(7): sigma 0.25 x 7 = 1.75 px around the middle tap, normalised by the module
    k = inputs._gaussian_kernel()
    assert k.sum() == pytest.approx(1.0) and np.argmax(k) == 3 and np.allclose(k, k[::-1])
    assert k[3] / k[2] == pytest.approx(np.exp(0.5 / 1.75**2))
    assert k[3] / k[0] == pytest.approx(np.exp(0.5 * 9 / 1.75**2))


def _lcn_by_hand(img: np.ndarray, i: int, j: int) -> float:
    """nn.SpatialContrastiveNormalization at one pixel, written out with the 2-D kernel (zero padding, each
    sum divided by the sum of the kernel taps that fall inside the image)."""
    g = np.exp(-0.5 * ((np.arange(7) - 3) / 1.75) ** 2)
    k2 = np.outer(g, g) / np.outer(g, g).sum()
    h, w = img.shape

    def local(values: np.ndarray, a: int, b: int) -> tuple[float, float]:
        total = inside = 0.0
        for di in range(-3, 4):
            for dj in range(-3, 4):
                if 0 <= a + di < h and 0 <= b + dj < w:
                    total += k2[di + 3, dj + 3] * values[a + di, b + dj]
                    inside += k2[di + 3, dj + 3]
        return total, inside

    centred = np.empty_like(img, dtype=np.float64)
    for a in range(h):
        for b in range(w):
            total, inside = local(img, a, b)
            centred[a, b] = img[a, b] - total / inside
    total, inside = local(centred**2, i, j)
    std = np.sqrt(total) / inside  # the coefficient divides outside the root, as the module does
    return centred[i, j] / (std if std > 1e-4 else 1e-4)


def test_lcn_is_torchs_module_at_the_border_and_inside():
    rng = np.random.RandomState(0)
    img = rng.rand(12, 12) * 255  # the script's value range: Y of 0-255 pixels
    out = inputs.local_contrast_normalise(img[None].astype(np.float32))[0]
    for i, j in ((0, 0), (0, 5), (6, 6), (11, 3)):
        assert out[i, j] == pytest.approx(_lcn_by_hand(img, i, j), rel=1e-4)


def test_lcn_has_no_mean_floor_and_thresholds_at_1e_4():
    # a faint image (std ~1e-3) is scaled up to unit contrast: no floor at a larger mean std
    rng = np.random.RandomState(1)
    faint = (rng.rand(1, 16, 16) * 1e-2).astype(np.float64)
    out = inputs.local_contrast_normalise(faint)
    assert 0.5 < out[:, 4:12, 4:12].std() < 2.0
    # below the threshold the local std is replaced by 1e-4: the output is the centred image x 1e4
    tiny = faint * 1e-4
    assert np.abs(inputs.local_contrast_normalise(tiny)).max() < 1e-2


def test_per_image_standardisation():
    x = np.random.rand(4, 3, 8, 8).astype(np.float32) * 255
    out = inputs.per_image_standardise(x)
    assert np.allclose(out.mean(axis=(1, 2, 3)), 0, atol=1e-4)
    assert np.allclose(out.std(axis=(1, 2, 3)), 1, atol=1e-3)


def test_static_subset_scale_and_standardise():
    x = np.arange(10 * 4, dtype=np.uint8).reshape(10, 1, 2, 2)
    y = np.arange(10)
    tx, ty, vx, vy = inputs.static(x, y, x, y, {"train_samples": 6, "test_samples": 3, "scale": 0.5})
    assert tx.shape[0] == 6 and vx.shape[0] == 3 and tx.dtype == np.float32
    assert tx[1, 0, 0, 0] == pytest.approx(2.0)
    tx, *_ = inputs.static(x, y, x, y, {"standardize": True})
    assert abs(tx.mean()) < 1e-5 and tx.std() == pytest.approx(1.0, abs=1e-4)


def test_caffe_mean_subtraction_uses_the_training_mean():
    x = np.stack([np.full((1, 2, 2), v, dtype=np.uint8) for v in (10, 20, 30)])
    tx, _, vx, _ = inputs.static(x, np.zeros(3), x[:1], np.zeros(1), {"scale": 1.0, "mean_subtract": True})
    assert np.allclose(tx.mean(axis=0), 0) and np.allclose(vx, -10)


def test_a_validation_hold_out_is_the_last_training_images_and_takes_no_part_in_the_statistics():
    x = np.arange(12, dtype=np.uint8).reshape(12, 1, 1, 1) * 10
    y = np.arange(12)
    out = inputs.splits(x, y, x[:2], y[:2], {"scale": 1.0, "mean_subtract": True}, holdout=1 / 6)
    assert list(out["train"][1]) == list(range(10)) and list(out["validation"][1]) == [10, 11]
    mean = 45.0  # of the ten training images only
    assert np.allclose(out["validation"][0].ravel(), [100 - mean, 110 - mean])
    assert np.allclose(out["test"][0].ravel(), [0 - mean, 10 - mean])
    with pytest.raises(ValueError, match="leaves 0 to train on"):
        inputs.splits(x, y, x, y, {}, holdout=0.99)


def test_the_first_fraction_can_be_skipped_as_tensorflows_reader_does():
    x = np.zeros((60, 1, 2, 2), np.uint8)
    y = np.arange(60)
    train = inputs.splits(x, y, x, y, {"skip_first": 1 / 12})["train"]
    assert list(train[1]) == list(range(5, 60))


def test_torch_mnist_pads_then_standardises_each_split_by_its_own_statistics():
    rng = np.random.RandomState(0)
    train = (rng.rand(20, 1, 28, 28) * 255).astype(np.uint8)
    test = (rng.rand(10, 1, 28, 28) * 100).astype(np.uint8)  # another brightness: its own mean and std
    cfg = {"scale": 1 / 255, "pad_to": 32, "standardize": "per_split"}
    tx, _, vx, _ = inputs.static(train, np.zeros(20), test, np.zeros(10), cfg)
    assert tx.shape == (20, 1, 32, 32)
    for arr in (tx, vx):  # the padding is part of the images the statistics come from
        assert abs(arr.mean()) < 1e-4 and arr.std() == pytest.approx(1.0, abs=1e-4)
        assert arr[0, 0, 0, 0] < 0 and np.allclose(arr[:, :, :2], arr[0, 0, 0, 0])
    _, _, by_train, _ = inputs.static(train, np.zeros(20), test, np.zeros(10), {**cfg, "standardize": True})
    assert by_train.mean() < -0.5  # the darker test set, by the training statistics


def test_torch_cifar10_divides_u_and_v_by_minus_their_std():
    rng = np.random.RandomState(0)
    x = (rng.rand(8, 3, 32, 32) * 255).astype(np.uint8)
    tx, *_ = inputs.static(x, np.zeros(8), x, np.zeros(8), {"yuv": True, "lcn": True})
    yuv = inputs.rgb_to_yuv(x.astype(np.float32) / 255)
    u = yuv[:, 1]
    assert np.allclose(tx[:, 1], -(u - u.mean()) / u.std(ddof=1), atol=1e-4)


def test_augmenter_crops_flips_and_redraws_each_epoch():
    rng = np.random.RandomState(1)
    src = rng.rand(50, 3, 32, 32).astype(np.float32)
    cfg = {"crop": 24, "flip": True, "brightness": 63, "contrast": [0.2, 1.8], "standardize_image": True}
    aug = inputs.Augmenter(src, cfg, seed=3)
    a, b = aug(), aug()
    assert a.shape == (50, 3, 24, 24) and not np.allclose(a, b)
    assert np.allclose(a.mean(axis=(1, 2, 3)), 0, atol=1e-4)
    again = inputs.Augmenter(src, cfg, seed=3)()
    assert np.array_equal(again, a)  # the same seed draws the same views
    crop_only = inputs.Augmenter(src, {"crop": 24}, seed=0)()
    # every crop is a window of its source image
    found = any(np.array_equal(crop_only[0], src[0, :, i:i + 24, j:j + 24]) for i in range(9) for j in range(9))
    assert found


def test_test_images_are_centre_cropped_where_training_crops():
    x = np.zeros((2, 3, 32, 32), dtype=np.uint8)
    _, _, vx, _ = inputs.static(x, np.zeros(2), x, np.zeros(2), {"crop": 24})
    assert vx.shape == (2, 3, 24, 24)


def test_the_data_load_turns_hugepage_advice_off_and_back_on():
    from numpy._core import multiarray

    from dlbench.node import hugepages

    before = multiarray._get_madvise_hugepage()
    with hugepages.no_hugepage_advice():
        assert multiarray._get_madvise_hugepage() is False
    assert multiarray._get_madvise_hugepage() == before
