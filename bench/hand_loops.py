"""Minimal hand-written LeNet training loops, one per framework: the yardstick for dlbench's adapters.

Run inside the framework's own environment (bench/adapter_speed.py starts it there, with the same
thread variables the runner gives a trainer):

    ENV_PYTHON bench/hand_loops.py FRAMEWORK VARIANT DATASET_DIR ITERATIONS BATCH THREADS

FRAMEWORK/VARIANT: pytorch/loop (PyTorch's own layout, contiguous), pytorch/channels_last (the opt-in layout,
paired with dlbench's `memory_format: channels_last` point), tensorflow/function, tensorflow/function_xla,
tensorflow/fit, theano/givens. Prints one JSON line: train_time_s and throughput_img_s (every
iteration), steady_time_s and steady_throughput_img_s (the iterations after the first), final loss.

Same network (Caffe's LeNet: conv20-pool-conv50-pool-ip500-relu-ip10), same data (the prepared
dataset, scaled by 1/256 as the caffe preset does), SGD with momentum 0.9 and weight decay 5e-4
at a fixed rate 0.01, random batches drawn before the clock starts. What is timed is what
dlbench's train_time_s times: every training iteration after the model is built and
traced/compiled, the first one (graph optimisation, oneDNN primitives) included. Keras fit traces
in its first step, so for fit only the steady state (the steps after the first) is timed.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

SCALE = 0.00390625
LR, MOMENTUM, WD = 0.01, 0.9, 5e-4


def load(dataset_dir: str) -> tuple[np.ndarray, np.ndarray]:
    with np.load(os.path.join(dataset_dir, "data.npz")) as z:
        return z["train_x"].astype(np.float32) * np.float32(SCALE), z["train_y"].astype(np.int64)


def batches(n: int, batch: int, iterations: int, seed: int = 1) -> np.ndarray:
    rng = np.random.RandomState(seed)
    need = batch * iterations
    order = np.concatenate([rng.permutation(n) for _ in range(need // n + 1)])[:need]
    return order.reshape(iterations, batch)


def pytorch(variant: str, x: np.ndarray, y: np.ndarray, idx: np.ndarray, threads: int) -> tuple[float, float]:
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2), nn.Conv2d(20, 50, 5), nn.MaxPool2d(2, 2),
                          nn.Flatten(), nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    if variant == "channels_last":
        model = model.to(memory_format=torch.channels_last)
        xt = xt.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    it = [torch.from_numpy(b) for b in idx]
    t0 = time.perf_counter()
    for i, b in enumerate(it):
        loss = F.cross_entropy(model(xt[b]), yt[b])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i == 0:
            t1 = time.perf_counter()
    t2 = time.perf_counter()
    return t2 - t0, t2 - t1, float(loss.detach())


def _keras_lenet(tf):
    keras = tf.keras
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(20, 5), keras.layers.MaxPooling2D(2, 2),
        keras.layers.Conv2D(50, 5), keras.layers.MaxPooling2D(2, 2),
        keras.layers.Flatten(), keras.layers.Dense(500, activation="relu"), keras.layers.Dense(10),
    ])


def tensorflow(variant: str, x: np.ndarray, y: np.ndarray, idx: np.ndarray, threads: int) -> tuple[float, float]:
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.random.set_seed(1)
    keras = tf.keras
    model = _keras_lenet(tf)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if variant == "fit":
        # Keras' own loop: the rows in batch order, no shuffling by fit (the order is already random).
        opt = keras.optimizers.SGD(learning_rate=LR, momentum=MOMENTUM)
        model.compile(optimizer=opt, loss=loss_fn)
        flat = idx.reshape(-1)
        xs, ys = xh[flat], y[flat]
        times = []

        class Clock(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                if batch == 1:  # after the first step, which traces the step function
                    times.append(time.perf_counter())

            def on_train_end(self, logs=None):
                times.append(time.perf_counter())

        hist = model.fit(xs, ys, batch_size=idx.shape[1], epochs=1, shuffle=False, verbose=0, callbacks=[Clock()])
        # The first step traces the step function, which cannot be timed apart: steady state only.
        return None, times[1] - times[0], float(hist.history["loss"][-1])
    opt = keras.optimizers.SGD(learning_rate=LR, momentum=MOMENTUM)
    opt.build(model.trainable_variables)
    xv, yv = tf.constant(xh), tf.constant(y)

    @tf.function(jit_compile=variant == "function_xla")
    def step(b):
        with tf.GradientTape() as tape:
            loss = loss_fn(tf.gather(yv, b), model(tf.gather(xv, b), training=True))
        variables = model.trainable_variables
        grads = tape.gradient(loss, variables)
        opt.apply_gradients([(g + WD * v, v) for g, v in zip(grads, variables)])
        return loss

    it = [tf.constant(b) for b in idx]
    step.get_concrete_function(it[0])  # trace before the clock, as dlbench's compile phase does
    t0 = time.perf_counter()
    for i, b in enumerate(it):
        loss = step(b)
        if i == 0:
            loss.numpy()  # the first step done (its graph optimisation included)
            t1 = time.perf_counter()
    loss = float(loss)  # waits for the last step
    t2 = time.perf_counter()
    return t2 - t0, t2 - t1, loss


def theano(variant: str, x: np.ndarray, y: np.ndarray, idx: np.ndarray, threads: int) -> tuple[float, float]:
    # The same configuration the adapter gives Theano (and the same compile cache).
    cache = os.path.join(sys.prefix, "theano-cache")
    os.environ["THEANO_FLAGS"] = (f"device=cpu,floatX=float32,blas__ldflags=-lopenblas,openmp=False,"
                                  f"base_compiledir={cache}")
    import theano
    import theano.tensor as T
    from theano.tensor.nnet import conv2d
    from theano.tensor.signal.pool import pool_2d

    rng = np.random.RandomState(1)

    def shared(shape, fan_in):
        limit = np.sqrt(3.0 / fan_in)
        return theano.shared(rng.uniform(-limit, limit, shape).astype("float32"), borrow=True)

    def zeros(n):
        return theano.shared(np.zeros(n, "float32"), borrow=True)

    w1, b1 = shared((20, 1, 5, 5), 25), zeros(20)
    w2, b2 = shared((50, 20, 5, 5), 500), zeros(50)
    w3, b3 = shared((800, 500), 800), zeros(500)
    w4, b4 = shared((500, 10), 500), zeros(10)
    params = [w1, b1, w2, b2, w3, b3, w4, b4]
    xs = theano.shared(x, borrow=True)
    ys = theano.shared(y.astype(np.int32), borrow=True)
    xv, yv, bi = T.tensor4("x"), T.ivector("y"), T.lvector("b")
    # Shapes given, as the tutorial's LeNetConvPoolLayer gives them (image_shape, filter_shape).
    h = conv2d(xv, w1, input_shape=(None, 1, 28, 28), filter_shape=(20, 1, 5, 5), filter_flip=False)
    h = pool_2d(h + b1.dimshuffle("x", 0, "x", "x"), (2, 2), ignore_border=True)
    h = conv2d(h, w2, input_shape=(None, 20, 12, 12), filter_shape=(50, 20, 5, 5), filter_flip=False)
    h = pool_2d(h + b2.dimshuffle("x", 0, "x", "x"), (2, 2), ignore_border=True)
    h = T.nnet.relu(T.dot(h.flatten(2), w3) + b3)
    logits = T.dot(h, w4) + b4
    loss = T.mean(T.nnet.categorical_crossentropy(T.nnet.softmax(logits), yv))
    grads = T.grad(loss, params)
    updates = []
    for p, g in zip(params, grads):
        v = theano.shared(np.zeros_like(p.get_value()), borrow=True)
        v_new = np.float32(MOMENTUM) * v + g + np.float32(WD) * p
        updates += [(v, v_new), (p, p - np.float32(LR) * v_new)]
    train = theano.function([bi], loss, updates=updates, givens={xv: xs[bi], yv: ys[bi]})
    t0 = time.perf_counter()
    for i, b in enumerate(idx):
        out = train(b)
        if i == 0:
            t1 = time.perf_counter()
    t2 = time.perf_counter()
    return t2 - t0, t2 - t1, float(out)


def main(argv: list[str]) -> int:
    framework, variant, dataset_dir, iterations, batch, threads = argv
    iterations, batch, threads = int(iterations), int(batch), int(threads)
    x, y = load(dataset_dir)
    idx = batches(len(y), batch, iterations)
    took, steady, loss = {"pytorch": pytorch, "tensorflow": tensorflow, "theano": theano}[framework](
        variant, x, y, idx, threads)
    print(json.dumps({"framework": framework, "variant": variant, "iterations": iterations, "batch_size": batch,
                      "threads": threads, "train_time_s": took,
                      "throughput_img_s": iterations * batch / took if took else None,
                      "steady_time_s": steady, "steady_throughput_img_s": (iterations - 1) * batch / steady,
                      "final_loss": loss}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
