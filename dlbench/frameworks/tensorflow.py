"""TensorFlow: a Keras model built from the spec, trained by a tf.function step.

Images are NHWC (TensorFlow's CPU convolutions and oneDNN want channels last).
The step gathers its batch from tensors already in memory, applies the point's
learning rate (an argument, so there is one trace) and adds L2 weight decay to the
gradients as Caffe and PyTorch do, each variable with its layer's decay multiplier. The
update is TensorFlow's own fused training kernel, one op per variable (FusedUpdate), at the
rate times the variable's learning-rate multiplier.

`compile: compiled`: the training step is a tf.function with jit_compile=True (XLA); otherwise
(`eager`, TensorFlow's usual mode) a tf.function graph without XLA. XLA compiles at the first
call, so the `compile` phase calls the step once on the first batch and then puts every variable
(weights, optimizer slots and counters, moving averages, random state) back as it was. Testing
runs the graph function without XLA either way. `precision: bf16`: Keras' mixed_bfloat16 policy
(layers compute in bfloat16 on float32 variables); the loss is taken on float32 logits. `precision: fp64`:
Keras' float64 policy (variables, data, loss and moving average in float64).

The network is dlbench.frameworks.tensorflow_layers, the weights' layouts dlbench.frameworks.tensorflow_weights,
the update dlbench.frameworks.tensorflow_update.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from dlbench.frameworks.base import initial_weights, no_gpu, parameter_groups
from dlbench.frameworks.stepped import SteppedAdapter, warms_up
from dlbench.frameworks.tensorflow_layers import Attention, build_model, nhwc, trainable_layers, trained_variables
from dlbench.frameworks.tensorflow_update import FusedUpdate
from dlbench.frameworks.tensorflow_weights import count_params, from_keras, load_weights
from dlbench.record.fields import Info
from dlbench.spec import networks

keras = tf.keras


class TFAdapter(SteppedAdapter):
    @staticmethod
    def versions() -> dict:
        build = tf.sysconfig.get_build_info()  # the CUDA and cuDNN it was built for; none in a CPU build
        return {"framework_version": tf.__version__, "cuda_version": build.get("cuda_version"),
                "cudnn_version": build.get("cudnn_version")}

    def prepare(self) -> None:
        point = self.point
        self.xla = point.get("compile") == "compiled"
        # The policy every layer built from now on takes (mixed: bfloat16 compute, float32 variables).
        policy = {"bf16": "mixed_bfloat16", "fp64": "float64"}.get(point.get("precision"), "float32")
        keras.mixed_precision.set_global_policy(policy)
        self.dtype = tf.float64 if policy == "float64" else tf.float32  # of the data, the loss and the variables
        tf.config.threading.set_intra_op_parallelism_threads(point["threads"])
        # One inter-op thread unless the point sweeps them (`interop_threads`).
        tf.config.threading.set_inter_op_parallelism_threads(point.get("interop_threads") or 1)
        tf.random.set_seed(point["seed"])
        if point["device"] == "gpu":
            if not tf.config.list_physical_devices("GPU"):
                raise no_gpu(tf.test.is_built_with_cuda(), f"TensorFlow {tf.__version__} sees no GPU "
                             f"(built with CUDA: {tf.test.is_built_with_cuda()})")
            self.device = "/GPU:0"
        else:
            self.device = "/CPU:0"

    def info(self) -> Info:
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
            "compile_in_effect": "tf.function + XLA (jit_compile)" if self.xla else "tf.function (graph, no XLA)",
            "precision_in_effect": self._precision_in_effect(),
        }

    @staticmethod
    def _precision_in_effect() -> str:
        policy = keras.mixed_precision.global_policy()
        return f"{policy.compute_dtype} compute, {policy.variable_dtype} weights ({policy.name})"

    def build(self) -> None:
        p = self.point
        with tf.device(self.device):
            self.model = build_model(p["layers"], self.inputs.shape, p["seed"])
            load_weights(self.model, p["layers"], self.inputs.shape, initial_weights(p, self.inputs.shape))
            variables = [v for m in trainable_layers(self.model) for v in trained_variables(m)]
            mults = parameter_groups(p["layers"])
            decays = [float(p["weight_decay"]) * decay_mult for _, decay_mult in mults]
            self.update = FusedUpdate(variables, p["optimizer"], p["momentum"], [lr_mult for lr_mult, _ in mults],
                                      decays)
            self.ema = None
            if p.get("ema_decay"):
                self.ema = [tf.Variable(v, trainable=False, name=f"ema_{i}") for i, v in enumerate(variables)]
                self.ema_updates = tf.Variable(0.0, trainable=False, name="ema_updates")
            self.variables = variables
            # A variable, so that a new augmented view can be assigned without retracing the step.
            self.train_x = tf.Variable(tf.cast(nhwc(self.inputs.train_x), self.dtype), trainable=False)
            self.train_y = tf.constant(self.inputs.train_y)
            self.eval_data = {"test": (tf.constant(nhwc(self.inputs.test_x), self.dtype),
                                       tf.constant(self.inputs.test_y))}
            if self.inputs.val_y is not None:
                self.eval_data["validation"] = (tf.constant(nhwc(self.inputs.val_x), self.dtype),
                                                tf.constant(self.inputs.val_y))
        self.losses: list[tf.Tensor] = []  # each step's loss since the last take_loss
        if p["optimizer"] == "adamw":  # decoupled: in the update, not the gradient
            decays = [0.0] * len(decays)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        ema_decay = float(p.get("ema_decay") or 0.0)
        dtype = self.dtype

        # Every training batch has the point's size (batch_order): the step is traced for that shape.
        @tf.function(input_signature=[tf.TensorSpec([p["batch_size"]], tf.int64), tf.TensorSpec([], tf.float32)],
                     jit_compile=self.xla)
        def step(idx, lr):
            x = tf.gather(self.train_x, idx)
            y = tf.gather(self.train_y, idx)
            with tf.GradientTape() as tape:
                loss = loss_fn(y, tf.cast(self.model(x, training=True), dtype))
            grads = tape.gradient(loss, variables)
            grads = [g + wd * v if wd else g for g, v, wd in zip(grads, variables, decays)]
            self.update.apply(grads, lr)
            if self.ema is not None:
                n = self.ema_updates.assign_add(1.0)
                rate = tf.cast(tf.minimum(ema_decay, (1.0 + n) / (10.0 + n)), dtype)  # stepped.ema_rate
                for shadow, v in zip(self.ema, variables):
                    shadow.assign_sub((1.0 - rate) * (shadow - v))
            return loss

        test_shape = self.eval_data["test"][0].shape[1:]

        @tf.function(input_signature=[tf.TensorSpec([None, *test_shape], dtype),
                                      tf.TensorSpec([None], tf.int64)])
        def eval_batch(x, y):
            logits = tf.cast(self.model(x, training=False), dtype)
            correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.int64))
            loss = tf.reduce_sum(keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
            return correct, loss

        self.step, self.eval_batch = step, eval_batch

    def compile(self) -> None:
        # Trace both functions now, so tracing is reported as compile time, not training time.
        self.step.get_concrete_function()
        self.eval_batch.get_concrete_function()
        # XLA compiles at the first call, and a GPU's first step pays one-time costs (cuDNN handles, kernel
        # loading): take it now, then put back every variable the step moved (the fused update's state too).
        if self.xla or warms_up(self.point):
            variables = [*self.model.variables, *self.update.state(),
                         *(self.ema or []), *([self.ema_updates] if self.ema is not None else [])]
            kept = [v.numpy() for v in variables]
            with tf.device(self.device):
                self.step(tf.range(self.point["batch_size"], dtype=tf.int64) % int(self.train_y.shape[0]),
                          tf.constant(0.0)).numpy()
            for v, value in zip(variables, kept):
                v.assign(value)

    def train_step(self, batch: np.ndarray, lr: float) -> None:
        with tf.device(self.device):
            # The step returns its loss, kept as a tensor: counting it in graph variables cost
            # two more ops a step and four eager ops a report (about 1.5 ms each report on LeNet).
            self.losses.append(self.step(tf.constant(batch), tf.constant(lr, tf.float32)))

    def take_loss(self) -> float:
        if not self.losses:  # the stepped loop asks only after a step; as before, nothing taken reads 0
            return 0.0
        # Read one by one (a few microseconds each): an eager add_n would cost more than the reading.
        mean = sum(float(loss) for loss in self.losses) / len(self.losses)
        self.losses.clear()
        return mean

    def evaluate(self, split: str = "test") -> tuple[float, float]:
        xs, ys = self.eval_data[split]
        n = int(ys.shape[0])
        bs = self.point["test_batch_size"]
        correct, loss = 0, 0.0
        with tf.device(self.device):
            if self.ema is not None:
                self._swap_ema()  # the model holds the moving average while it is judged
            try:
                for start in range(0, n, bs):
                    c, s = self.eval_batch(xs[start:start + bs], ys[start:start + bs])
                    correct += int(c)
                    loss += float(s)
            finally:
                if self.ema is not None:
                    self._swap_ema()
        return correct / n, loss / n

    def weights(self):
        out = []
        for mod, (_, layer, prev) in zip(trainable_layers(self.model), networks.trainable(self.point["layers"],
                                                                                        self.inputs.shape)):
            if isinstance(mod, Attention):
                values = [np.asarray(v) for v in trained_variables(mod)]
            else:
                values = [np.asarray(v) for v in mod.get_weights()]  # a batchnorm's: gamma, beta, mean, var
            out.append(from_keras(layer, prev, values))
        return out

    def _swap_ema(self) -> None:
        for v, shadow in zip(self.variables, self.ema):
            held = tf.identity(v)
            v.assign(shadow)
            shadow.assign(held)

    def _judged(self) -> list:
        return self.ema if self.ema is not None else self.variables

    def keep_best(self) -> None:
        self.best = [tf.identity(v) for v in self._judged()]

    def restore_best(self) -> None:
        for v, kept in zip(self._judged(), self.best):
            v.assign(kept)

    def sync(self) -> None:
        # Reading a value waits for the queued steps (a no-op cost on CPU).
        if self.losses:
            self.losses[-1].numpy()

    def set_train_data(self, x: np.ndarray) -> None:
        with tf.device(self.device):
            self.train_x.assign(tf.cast(nhwc(x), self.dtype))

    @staticmethod
    def forward(layers, weights, x, y, train=False):
        """(`train`: batch normalisation by the batch's statistics; the model has no dropout where it is asked.)"""
        keras.mixed_precision.set_global_policy("float32")
        model = build_model(layers, x.shape[1:], 1)
        load_weights(model, layers, x.shape[1:], weights)
        if train and any(layer["type"] == "dropout" for layer in networks.leaves(layers)):
            raise networks.SpecError("a training-mode forward pass of a network with dropout is not deterministic")
        logits = model(tf.constant(nhwc(x)), training=train)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(tf.constant(y), logits)
        return logits.numpy(), float(loss)

    @staticmethod
    def train_then_infer(layers, weights, x, y):
        """A training-mode pass (BatchNorm's batch statistics, updating its moving ones), then an inference-mode
        pass with what it left: (train logits, inference logits, the canonical arrays after them)."""
        keras.mixed_precision.set_global_policy("float32")
        shape = x.shape[1:]
        model = build_model(layers, shape, 1)
        load_weights(model, layers, shape, weights)
        trained = model(tf.constant(nhwc(x)), training=True).numpy()
        inferred = model(tf.constant(nhwc(x)), training=False).numpy()
        after = [from_keras(layer, prev, [np.asarray(v) for v in (trained_variables(mod) if isinstance(mod, Attention)
                                                                    else mod.get_weights())])
                 for mod, (_, layer, prev) in zip(trainable_layers(model), networks.trainable(layers, shape))]
        return trained, inferred, after

    @staticmethod
    def params(layers, input_shape):
        return count_params(build_model(layers, tuple(input_shape), 1))


ADAPTER = TFAdapter
