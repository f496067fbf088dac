"""Input handling of the presets, the same numpy code for every framework.

Static transforms (done once): subsets, a validation hold-out, pixel scale, Caffe's mean
subtraction, Torch's 32x32 padding and standardisation, Torch CIFAR-10's YUV with local
contrast normalisation, and a centre crop of the test images where the preset crops.
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


def size_problem(input_cfg: dict, shape, of: str = "") -> str | None:
    """Why `pad_to` or `crop` cannot be applied to images of `shape` (channels, height, width), as "<key>: ..."; None
    where both can (`of`: " of <dataset>", for the words). Padding cannot shrink an image, and a crop larger than
    the (padded) image would slice past its edge: numpy's slicing gives a sliver (a 29 crop of 28 rows is one row),
    not an error."""
    _, h, w = shape
    pad, crop = input_cfg.get("pad_to"), input_cfg.get("crop")
    if pad is not None and pad < max(h, w):
        return (f"pad_to: {pad} is smaller than the {h}x{w} images{of}, and padding cannot shrink them; give at "
                f"least {max(h, w)}, or remove it")
    side, size = (pad, f"{pad}x{pad} padded") if pad is not None else (min(h, w), f"{h}x{w}")
    if crop is not None and crop > side:
        return f"crop: {crop} is larger than the {size} images{of}; give at most {side}"
    return None


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


# Torch's image.gaussian1D(7): sigma 0.25 of the size (1.75 px), centred at mean 0.5 of the size, then
# normalised to sum 1 by the normalisation module that takes it.
LCN_SIZE, LCN_SIGMA_OF_SIZE = 7, 0.25
# nn.SpatialDivisiveNormalization's default threshold: a local std at or below it is replaced by it.
LCN_THRESHOLD = 1e-4


def _gaussian_kernel(size: int = LCN_SIZE, sigma_of_size: float = LCN_SIGMA_OF_SIZE) -> np.ndarray:
    centre = 0.5 * size + 0.5  # 1-based, as image.gaussian1D counts
    k = np.exp(-0.5 * ((np.arange(1, size + 1) - centre) / (sigma_of_size * size)) ** 2)
    return k / k.sum()


def _blur_sum(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """Separable convolution of (N, H, W) with the kernel along both axes, zero padding (no border correction)."""
    r = len(kernel) // 2

    def along(a: np.ndarray, axis: int) -> np.ndarray:
        padded = np.pad(a, [(0, 0)] + [(r, r) if ax == axis else (0, 0) for ax in (1, 2)])
        out = np.zeros_like(a)
        n = a.shape[axis]
        for i, k in enumerate(kernel):
            out += k * (padded[:, i:i + n] if axis == 1 else padded[:, :, i:i + n])
        return out

    return along(along(x, 1), 2)


def local_contrast_normalise(x: np.ndarray) -> np.ndarray:
    """Torch's nn.SpatialContrastiveNormalization(1, image.gaussian1D(7)) on one channel (N, H, W), in float64.

    Subtractive: x minus its local mean, the zero-padded blur divided by the blur of ones (the module's
    border coefficient). Divisive: the square root of the blurred square, divided by the same
    coefficient (outside the root, as the module divides), thresholded at 1e-4 (nn.Threshold: at or
    below it becomes 1e-4). No floor at the image's mean std: that is image.lcn's, not the module's.
    """
    k = _gaussian_kernel()
    x = x.astype(np.float64)
    coef = _blur_sum(np.ones((1,) + x.shape[1:]), k)
    centred = x - _blur_sum(x, k) / coef
    local_std = np.sqrt(_blur_sum(centred**2, k)) / coef
    local_std = np.where(local_std > LCN_THRESHOLD, local_std, LCN_THRESHOLD)
    return (centred / local_std).astype(np.float32)


def per_image_standardise(x: np.ndarray) -> np.ndarray:
    """tf.image.per_image_standardization: zero mean, unit variance per image."""
    n = np.prod(x.shape[1:])
    mean = x.mean(axis=(1, 2, 3), keepdims=True)
    std = np.maximum(x.std(axis=(1, 2, 3), keepdims=True), 1.0 / np.sqrt(n))
    return ((x - mean) / std).astype(np.float32)


def hold_out(x: np.ndarray, y: np.ndarray, fraction: float) -> tuple[tuple[np.ndarray, np.ndarray], tuple]:
    """The last `fraction` of the training images set apart for validation (the Theano tutorial's
    mnist.pkl.gz: the last 10,000 of MNIST's 60,000 training images, 1/6)."""
    n = round(len(y) * fraction)
    if not 0 < n < len(y):
        raise ValueError(f"a validation hold-out of {fraction:g} of {len(y)} training images leaves "
                         f"{len(y) - n} to train on and {n} to validate")
    return (x[:-n], y[:-n]), (x[-n:], y[-n:])


def splits(train_x, train_y, test_x, test_y, cfg: dict, holdout: float = 0.0) -> dict[str, tuple]:
    """The once-only transforms of every split: {"train", "test"[, "validation"]: (float32 x, int64 y)}.

    The training images are those after the first `skip_first` fraction (TensorFlow's MNIST reader
    keeps the first 5,000 of 60,000, 1/12, apart for a validation its script never runs), the first
    `train_samples` of them, less the last `holdout` fraction for validation. Every
    statistic (mean image, global mean and std) comes from what remains for training, except with
    `standardize: per_split`, where each split is standardised with its own (Torch's MNIST script).
    """
    skip = round(len(train_y) * cfg.get("skip_first", 0.0))
    train_x, train_y = train_x[skip:], train_y[skip:]
    train_x, train_y = subset(train_x, train_y, cfg.get("train_samples"))
    test_x, test_y = subset(test_x, test_y, cfg.get("test_samples"))
    evals = {"test": (test_x, test_y)}
    if holdout:
        (train_x, train_y), evals["validation"] = hold_out(train_x, train_y, holdout)
    scale = np.float32(cfg.get("scale", 1.0 / 255.0))
    train_f = train_x.astype(np.float32)
    train_f *= scale  # in place: a second 200 MB array for Fashion-MNIST would cost more than the scaling
    xs = {}
    for name, (x, _) in evals.items():
        xs[name] = x.astype(np.float32)
        xs[name] *= scale
    if cfg.get("mean_subtract"):  # Caffe's mean file: the per-pixel training mean
        mean = train_f.mean(axis=0, keepdims=True)
        train_f, xs = train_f - mean, {k: v - mean for k, v in xs.items()}
    if cfg.get("yuv"):
        train_f, xs = rgb_to_yuv(train_f), {k: rgb_to_yuv(v) for k, v in xs.items()}
    if cfg.get("lcn"):  # Torch CIFAR-10: local normalisation of Y, global of U and V
        for arr in (train_f, *xs.values()):
            arr[:, 0] = local_contrast_normalise(arr[:, 0])
        for c in range(1, train_f.shape[1]):
            # The script subtracts the training mean and divides by MINUS the training std (its
            # `:div(-std)`), so U and V enter with their sign flipped; kept, as the script ran. Torch's
            # std() is the unbiased one (n - 1).
            mean, std = train_f[:, c].mean(), train_f[:, c].std(ddof=1) or 1.0
            for arr in (train_f, *xs.values()):
                arr[:, c] = (arr[:, c] - mean) / -std
    if "pad_to" in cfg:  # before standardising: Torch's 32x32 MNIST files hold the padding as pixels
        train_f, xs = pad_to(train_f, cfg["pad_to"]), {k: pad_to(v, cfg["pad_to"]) for k, v in xs.items()}
    if cfg.get("standardize") == "per_split":  # Torch MNIST: each set by its own global mean and std
        train_f, xs = _standardised(train_f, train_f), {k: _standardised(v, v) for k, v in xs.items()}
    elif cfg.get("standardize"):  # global mean and std of the training set
        train_f, xs = _standardised(train_f, train_f), {k: _standardised(v, train_f) for k, v in xs.items()}
    if "crop" in cfg:
        xs = {k: center_crop(v, cfg["crop"]) for k, v in xs.items()}
    if cfg.get("standardize_image"):
        xs = {k: per_image_standardise(v) for k, v in xs.items()}
    out = {"train": (np.ascontiguousarray(train_f, dtype=np.float32), train_y.astype(np.int64))}
    for name, (_, y) in evals.items():
        out[name] = (np.ascontiguousarray(xs[name], dtype=np.float32), y.astype(np.int64))
    return out


def _standardised(x: np.ndarray, by: np.ndarray) -> np.ndarray:
    mean, std = by.mean(), by.std() or 1.0
    return (x - mean) / std


def static(train_x, train_y, test_x, test_y, cfg: dict):
    """The once-only transforms of the training and test splits (`splits` without a hold-out), as a 4-tuple."""
    out = splits(train_x, train_y, test_x, test_y, cfg)
    return (*out["train"], *out["test"])


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
