"""Input handling of the presets, the same numpy code for every framework.

Static transforms (done once): subsets, pixel scale, Caffe's mean subtraction, Torch's
standardisation and 32x32 padding, Torch CIFAR-10's YUV with local contrast
normalisation, and a centre crop of the test images where the preset crops.
Augmentation (TensorFlow's CIFAR-10 tutorial: random 24x24 crops, flips, brightness
and contrast, per-image standardisation) is redrawn every epoch by `Augmenter`.

Runs inside framework environments: numpy only.
"""

from __future__ import annotations

import numpy as np

AUGMENTING = ("crop", "flip", "brightness", "contrast")


def model_input_shape(point: dict) -> tuple[int, int, int]:
    """(channels, height, width) the point's network sees: the dataset's, padded or cropped as its input says."""
    from dlbench.datasets import catalog

    c, h, w = catalog.INFO[point["dataset"]]["shape"]
    size = point.get("input", {}).get("pad_to") or point.get("input", {}).get("crop")
    return (c, size, size) if size else (c, h, w)


def subset(x: np.ndarray, y: np.ndarray, n: int | None) -> tuple[np.ndarray, np.ndarray]:
    return (x, y) if not n else (x[:n], y[:n])


def pad_to(x: np.ndarray, size: int) -> np.ndarray:
    h, w = x.shape[2:]
    top, left = (size - h) // 2, (size - w) // 2
    return np.pad(x, ((0, 0), (0, 0), (top, size - h - top), (left, size - w - left)))


def center_crop(x: np.ndarray, size: int) -> np.ndarray:
    h, w = x.shape[2:]
    top, left = (h - size) // 2, (w - size) // 2
    return x[:, :, top:top + size, left:left + size]


def rgb_to_yuv(x: np.ndarray) -> np.ndarray:
    """Torch's image.rgb2yuv (BT.601 coefficients), channels first."""
    r, g, b = x[:, 0], x[:, 1], x[:, 2]
    y = 0.299 * r + 0.587 * g + 0.114 * b
    u = -0.14713 * r - 0.28886 * g + 0.436 * b
    v = 0.615 * r - 0.51499 * g - 0.10001 * b
    return np.stack([y, u, v], axis=1).astype(np.float32)


def _gaussian_kernel(size: int = 7, sigma: float = 1.591) -> np.ndarray:
    k = np.exp(-0.5 * ((np.arange(size) - size // 2) / sigma) ** 2)
    return (k / k.sum()).astype(np.float32)


def _blur(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """Separable blur of (N, H, W) with zero padding, normalised at the borders as Torch's module does."""
    r = len(kernel) // 2

    def along(a: np.ndarray, axis: int) -> np.ndarray:
        padded = np.pad(a, [(0, 0)] + [(r, r) if ax == axis else (0, 0) for ax in (1, 2)])
        out = np.zeros_like(a)
        n = a.shape[axis]
        for i, k in enumerate(kernel):
            out += k * (padded[:, i:i + n] if axis == 1 else padded[:, :, i:i + n])
        return out

    ones = np.ones((1,) + x.shape[1:], dtype=np.float32)
    return along(along(x, 1), 2) / along(along(ones, 1), 2)


def local_contrast_normalise(x: np.ndarray) -> np.ndarray:
    """Torch's SpatialContrastiveNormalization with a 7-tap Gaussian, on one channel (N, H, W)."""
    k = _gaussian_kernel()
    centred = x - _blur(x, k)
    local_std = np.sqrt(_blur(centred**2, k))
    floor = local_std.mean(axis=(1, 2), keepdims=True)
    return (centred / np.maximum(np.maximum(local_std, floor), 1e-3)).astype(np.float32)


def per_image_standardise(x: np.ndarray) -> np.ndarray:
    """tf.image.per_image_standardization: zero mean, unit variance per image."""
    n = np.prod(x.shape[1:])
    mean = x.mean(axis=(1, 2, 3), keepdims=True)
    std = np.maximum(x.std(axis=(1, 2, 3), keepdims=True), 1.0 / np.sqrt(n))
    return ((x - mean) / std).astype(np.float32)


def static(train_x, train_y, test_x, test_y, cfg: dict):
    """The once-only transforms; returns float32 arrays (train before any augmentation)."""
    train_x, train_y = subset(train_x, train_y, cfg.get("train_samples"))
    test_x, test_y = subset(test_x, test_y, cfg.get("test_samples"))
    scale = np.float32(cfg.get("scale", 1.0 / 255.0))
    train_f, test_f = train_x.astype(np.float32), test_x.astype(np.float32)
    train_f *= scale  # in place: a second 200 MB array for Fashion-MNIST would cost more than the scaling
    test_f *= scale
    if cfg.get("mean_subtract"):  # Caffe's mean file: the per-pixel training mean
        mean = train_f.mean(axis=0, keepdims=True)
        train_f, test_f = train_f - mean, test_f - mean
    if cfg.get("yuv"):
        train_f, test_f = rgb_to_yuv(train_f), rgb_to_yuv(test_f)
    if cfg.get("lcn"):  # Torch CIFAR-10: local normalisation of Y, global of U and V
        for arr in (train_f, test_f):
            arr[:, 0] = local_contrast_normalise(arr[:, 0])
        for c in range(1, train_f.shape[1]):
            mean, std = train_f[:, c].mean(), train_f[:, c].std() or 1.0
            train_f[:, c] = (train_f[:, c] - mean) / std
            test_f[:, c] = (test_f[:, c] - mean) / std
    if cfg.get("standardize"):  # Torch MNIST: global mean and std of the training set
        mean, std = train_f.mean(), train_f.std() or 1.0
        train_f, test_f = (train_f - mean) / std, (test_f - mean) / std
    if "pad_to" in cfg:
        train_f, test_f = pad_to(train_f, cfg["pad_to"]), pad_to(test_f, cfg["pad_to"])
    if "crop" in cfg:
        test_f = center_crop(test_f, cfg["crop"])
    if cfg.get("standardize_image"):
        test_f = per_image_standardise(test_f)
    return (np.ascontiguousarray(train_f, dtype=np.float32), train_y.astype(np.int64),
            np.ascontiguousarray(test_f, dtype=np.float32), test_y.astype(np.int64))


def augments(cfg: dict) -> bool:
    return any(k in cfg for k in AUGMENTING) or bool(cfg.get("standardize_image") and "crop" in cfg)


class Augmenter:
    """A fresh random view of the training images, drawn once per epoch from the seed's stream."""

    def __init__(self, source: np.ndarray, cfg: dict, seed: int):
        self.source = source
        self.cfg = cfg
        self.rng = np.random.RandomState(seed + 7919)

    def __call__(self) -> np.ndarray:
        x, cfg, rng = self.source, self.cfg, self.rng
        n, _, h, w = x.shape
        if "crop" in cfg:
            size = cfg["crop"]
            tops = rng.randint(0, h - size + 1, n)
            lefts = rng.randint(0, w - size + 1, n)
            rows = tops[:, None] + np.arange(size)[None, :]
            cols = lefts[:, None] + np.arange(size)[None, :]
            x = x[np.arange(n)[:, None, None, None], np.arange(x.shape[1])[None, :, None, None],
                  rows[:, None, :, None], cols[:, None, None, :]]
        else:
            x = x.copy()
        if cfg.get("flip"):
            flip = rng.rand(n) < 0.5
            x[flip] = x[flip][..., ::-1]
        if cfg.get("brightness"):
            # the delta is in pixel values (0..255), as the tutorial's max_delta=63
            delta = rng.uniform(-cfg["brightness"], cfg["brightness"], (n, 1, 1, 1)).astype(np.float32)
            x += delta * np.float32(cfg.get("scale", 1.0 / 255.0))
        if cfg.get("contrast"):
            lo, hi = cfg["contrast"]
            factor = rng.uniform(lo, hi, (n, 1, 1, 1)).astype(np.float32)
            mean = x.mean(axis=(2, 3), keepdims=True)
            x = (x - mean) * factor + mean
        if cfg.get("standardize_image"):
            x = per_image_standardise(x)
        return np.ascontiguousarray(x, dtype=np.float32)
