"""TensorFlow: a Keras model built from the spec, trained by a tf.function step.

Images are NHWC (TensorFlow's CPU convolutions and oneDNN want channels last).
The step gathers its batch from tensors already in memory, applies the point's
learning rate (an argument, so there is one trace) and adds L2 weight decay to the
gradients as Caffe and PyTorch do.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from dlbench import models
from dlbench.frameworks.base import SteppedAdapter, Unavailable

keras = tf.keras


def nhwc(x: np.ndarray) -> np.ndarray:
    """Channels last: TensorFlow's CPU convolutions (and oneDNN) want it."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


def _pool_layers(layer: dict, size_in: int, size_out: int) -> list:
    """Keras layers reproducing the spec's pooling (Caffe's windows: start at -pad, ceil-rounded count).

    'valid' where floor rounding already gives the size; 'same' where its padding all falls after
    the input (Caffe's overhanging last window); otherwise, for max pooling, explicit padding with
    -inf (pad before, pad plus overhang after) and 'valid'. SAME would centre its padding and shift
    every window by a pixel (torch_mnist's 3x3 stride-3 pooling on 28 pixels).
    """
    k, s, pad = layer["kernel"], layer["stride"], layer.get("pad", 0)
    cls = keras.layers.MaxPooling2D if layer["mode"] == "max" else keras.layers.AveragePooling2D
    if pad == 0 and (size_in - k) // s + 1 == size_out:
        return [cls(k, s, padding="valid")]
    same_total = max((size_out - 1) * s + k - size_in, 0)
    if pad == 0 and -(-size_in // s) == size_out and same_total // 2 == 0:
        return [cls(k, s, padding="same")]
    if layer["mode"] == "max":
        after = (size_out - 1) * s + k - size_in - pad
        padding = ((0, 0), (pad, after), (pad, after), (0, 0))
        return [keras.layers.Lambda(lambda x: tf.pad(x, padding, constant_values=float("-inf"))),
                cls(k, s, padding="valid")]
    raise models.SpecError(f"TensorFlow adapter: cannot reproduce pooling {layer} from {size_in} to {size_out}")


def build_model(layers: list[dict], input_shape: tuple[int, int, int], seed: int) -> keras.Sequential:
    c, h, w = input_shape
    model = keras.Sequential([keras.Input((h, w, c))])
    prev = input_shape
    for i, (layer, shape) in enumerate(zip(layers, models.shapes(layers, input_shape))):
        kind = layer["type"]
        init = None
        if kind in ("conv", "dense"):
            limit = models.xavier_limit(models.fan_in(layer, prev))
            init = keras.initializers.RandomUniform(-limit, limit, seed=seed + i)
        if kind == "conv":
            k, pad, stride = layer["kernel"], layer.get("pad", 0), layer.get("stride", 1)
            padding = "valid"
            if pad and stride == 1 and 2 * pad == k - 1:
                padding = "same"
            elif pad:
                model.add(keras.layers.ZeroPadding2D(pad))
            model.add(keras.layers.Conv2D(layer["filters"], k, stride, padding=padding,
                                          kernel_initializer=init, bias_initializer="zeros"))
        elif kind == "pool":
            for pooling in _pool_layers(layer, prev[1], shape[1]):
                model.add(pooling)
        elif kind == "dense":
            if len(prev) == 3:
                model.add(keras.layers.Flatten())
            model.add(keras.layers.Dense(layer["units"], kernel_initializer=init, bias_initializer="zeros"))
        elif kind in models.ACTIVATIONS:
            model.add(keras.layers.Activation(kind))
        elif kind == "dropout":
            model.add(keras.layers.Dropout(layer["rate"], seed=seed + i))
        elif kind == "lrn":
            radius, size = (layer["size"] - 1) // 2, layer["size"]
            model.add(keras.layers.Lambda(lambda x, r=radius, L=layer, n=size: tf.nn.local_response_normalization(
                x, depth_radius=r, bias=L.get("k", 1.0), alpha=L["alpha"] / n, beta=L["beta"])))
        else:
            raise models.SpecError(f"TensorFlow adapter: unknown layer type {kind!r}")
        prev = shape
    return model


class TFAdapter(SteppedAdapter):
    @staticmethod
    def versions() -> dict:
        build = tf.sysconfig.get_build_info()  # the CUDA and cuDNN it was built for; none in a CPU build
        return {"framework_version": tf.__version__, "cuda_version": build.get("cuda_version"),
                "cudnn_version": build.get("cudnn_version")}

    def prepare(self) -> None:
        point = self.point
        tf.config.threading.set_intra_op_parallelism_threads(point["threads"])
        # One inter-op thread unless the point sweeps them (`interop_threads`).
        tf.config.threading.set_inter_op_parallelism_threads(point.get("interop_threads") or 1)
        tf.random.set_seed(point["seed"])
        if point["device"] == "gpu":
            if not tf.config.list_physical_devices("GPU"):
                raise Unavailable(f"TensorFlow {tf.__version__} sees no GPU "
                                  f"(built with CUDA: {tf.test.is_built_with_cuda()})")
            self.device = "/GPU:0"
        else:
            self.device = "/CPU:0"

    def info(self) -> dict:
        build = dict(tf.sysconfig.get_build_info())
        onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") != "0"
        return {
            "framework": "tensorflow",
            "framework_version": tf.__version__,
            "numpy_version": np.__version__,
            "blas": "onednn" if onednn else "eigen",
            "build": {k: build.get(k) for k in ("is_cuda_build", "cuda_version", "cudnn_version")} | {
                "keras": keras.__version__ if hasattr(keras, "__version__") else None},
            "threads_in_effect": tf.config.threading.get_intra_op_parallelism_threads(),
            "interop_threads_in_effect": tf.config.threading.get_inter_op_parallelism_threads(),
            "library_in_effect": "onednn" if onednn else "eigen",
            "device_name": self.device,
        }

    def build(self) -> None:
        p = self.point
        with tf.device(self.device):
            self.model = build_model(p["layers"], self.inputs.shape, p["seed"])
            if p["optimizer"] == "adam":
                self.opt = keras.optimizers.Adam(learning_rate=p["learning_rate"], epsilon=1e-8)
            else:
                self.opt = keras.optimizers.SGD(learning_rate=p["learning_rate"], momentum=p["momentum"])
            self.opt.build(self.model.trainable_variables)
            # A variable, so that a new augmented view can be assigned without retracing the step.
            self.train_x = tf.Variable(nhwc(self.inputs.train_x), trainable=False)
            self.test_x = tf.constant(nhwc(self.inputs.test_x))
            self.train_y = tf.constant(self.inputs.train_y)
            self.test_y = tf.constant(self.inputs.test_y)
        self.losses: list[tf.Tensor] = []  # each step's loss since the last take_loss
        wd = float(p["weight_decay"])
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

        # Every training batch has the point's size (batch_order): the step is traced for that shape.
        @tf.function(input_signature=[tf.TensorSpec([p["batch_size"]], tf.int64), tf.TensorSpec([], tf.float32)],
                     jit_compile=False)
        def step(idx, lr):
            x = tf.gather(self.train_x, idx)
            y = tf.gather(self.train_y, idx)
            with tf.GradientTape() as tape:
                loss = loss_fn(y, self.model(x, training=True))
            variables = self.model.trainable_variables
            grads = tape.gradient(loss, variables)
            if wd:
                grads = [g + wd * v for g, v in zip(grads, variables)]
            self.opt.learning_rate.assign(lr)
            self.opt.apply_gradients(zip(grads, variables))
            return loss

        @tf.function(input_signature=[tf.TensorSpec([None, *self.test_x.shape[1:]], tf.float32),
                                      tf.TensorSpec([None], tf.int64)])
        def eval_batch(x, y):
            logits = self.model(x, training=False)
            correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.int64))
            loss = tf.reduce_sum(keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
            return correct, loss

        self.step, self.eval_batch = step, eval_batch

    def compile(self) -> None:
        # Trace both functions now, so tracing is reported as compile time, not training time.
        self.step.get_concrete_function()
        self.eval_batch.get_concrete_function()

    def train_step(self, batch: np.ndarray, lr: float) -> None:
        with tf.device(self.device):
            # The step returns its loss, kept as a tensor: counting it in graph variables cost
            # two more ops a step and four eager ops a report (about 1.5 ms each report on LeNet).
            self.losses.append(self.step(tf.constant(batch), tf.constant(lr, tf.float32)))

    def take_loss(self) -> float:
        if not self.losses:  # drive asks only after a step; as before, nothing taken reads 0
            return 0.0
        # Read one by one (a few microseconds each): an eager add_n would cost more than the reading.
        mean = sum(float(loss) for loss in self.losses) / len(self.losses)
        self.losses.clear()
        return mean

    def evaluate(self) -> tuple[float, float]:
        n = len(self.inputs.test_y)
        bs = self.point["test_batch_size"]
        correct, loss = 0, 0.0
        with tf.device(self.device):
            for start in range(0, n, bs):
                c, s = self.eval_batch(self.test_x[start:start + bs], self.test_y[start:start + bs])
                correct += int(c)
                loss += float(s)
        return correct / n, loss / n

    def sync(self) -> None:
        # Reading a value waits for the queued steps (a no-op cost on CPU).
        if self.losses:
            self.losses[-1].numpy()

    def set_train_data(self, x: np.ndarray) -> None:
        with tf.device(self.device):
            self.train_x.assign(nhwc(x))

    @staticmethod
    def forward(layers, weights, x, y):
        model = build_model(layers, x.shape[1:], 1)
        params = [m for m in model.layers if isinstance(m, (keras.layers.Conv2D, keras.layers.Dense))]
        shapes = [x.shape[1:], *models.shapes(layers, x.shape[1:])]
        specs = [(layer, shapes[i]) for i, layer in enumerate(layers) if layer["type"] in ("conv", "dense")]
        assert len(params) == len(weights) == len(specs), (len(params), len(weights))
        for mod, (w, b), (layer, prev) in zip(params, weights, specs):
            if layer["type"] == "conv":
                kernel = w.transpose(2, 3, 1, 0)  # (out, in, kh, kw) -> (kh, kw, in, out)
            else:
                kernel = (chw_rows_to_hwc(w, prev) if len(prev) == 3 else w).T
            mod.set_weights([np.ascontiguousarray(kernel), b])
        logits = model(tf.constant(nhwc(x)), training=False)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(tf.constant(y), logits)
        return logits.numpy(), float(loss)


def chw_rows_to_hwc(w: np.ndarray, chw: tuple[int, int, int]) -> np.ndarray:
    """A dense W (out, C*H*W) whose input columns follow C, H, W order, reordered to H, W, C (Flatten of NHWC)."""
    c, h, wd = chw
    return np.ascontiguousarray(w.reshape(w.shape[0], c, h, wd).transpose(0, 2, 3, 1).reshape(w.shape[0], -1))


ADAPTER = TFAdapter
