"""Each framework's own way of training its own-defaults network, the yardstick of bench/script_parity.py.

Run inside the framework's environment (bench/script_parity.py starts it there):

    ENV_PYTHON bench/own_ways.py FRAMEWORK DATASET_DIR ITERATIONS THREADS

Prints one JSON line: train_time_s (every training step, the first included, nothing else: no data
loading, no graph building, no tests), accuracy on the whole test split, final loss.

- tensorflow: the study's mnist_deep.py as TensorFlow 1 ran it, in graph mode under tf.compat.v1:
  placeholders fed from numpy every step, conv 5x5 SAME 32 and 64 with ReLU and 2x2 SAME max pooling,
  dense 1024 ReLU, dropout (keep 0.5), dense 10, softmax cross-entropy, AdamOptimizer(1e-4), batches of
  50 drawn like its reader's next_batch (a new permutation each epoch), the first 5,000 training images
  kept apart, pixels / 255, truncated normals of 0.1 and biases of 0.1. Written here from reading the
  script; what the script does beside training (its training-accuracy print every 100 steps, a
  summary writer) is left out, as dlbench's training time leaves out its tests. The session takes the
  point's intra-op threads and TensorFlow's own default inter-op pool (one thread per core), as the
  script's plain tf.Session() does.
- pytorch: a bare loop of Torch's MNIST example network (torch_mnist: 32x32 inputs standardised per
  split, conv 32 5x5 tanh, 3x3 max pooling stride 3 pad 1, conv 64 5x5 tanh, 2x2 max pooling, dense 200
  tanh, dense 10) with SGD at 0.05 and Torch's learningRateDecay 5e-7, batch 10, the images in file order,
  the first 2,000 training and 1,000 test images (the preset's subset).
- jax: Flax's MNIST example (examples/mnist, Linen) as its train.py runs it: conv 32 3x3 SAME, ReLU, 2x2
  average pooling, conv 64 3x3 SAME, ReLU, 2x2 average pooling, dense 256 ReLU, dense 10; optax.sgd(0.1,
  momentum 0.9); batches of 128 cut from a new permutation each epoch in numpy and fed to a jitted
  step (value_and_grad, apply_gradients); pixels / 255. The step is compiled before the clock starts,
  as dlbench's compiled points compile in their `compile` phase.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np


def load(dataset_dir: str):
    with np.load(f"{dataset_dir}/data.npz") as z:
        return z["train_x"], z["train_y"], z["test_x"], z["test_y"]


def tensorflow_v1(dataset_dir: str, iterations: int, threads: int) -> dict:
    import tensorflow as tf

    v1 = tf.compat.v1
    v1.disable_eager_execution()
    train_x, train_y, test_x, test_y = load(dataset_dir)
    train_x = train_x[5000:].reshape(-1, 784).astype(np.float32) / 255.0  # the reader keeps 5,000 apart
    train_y = train_y[5000:]
    test_x = test_x.reshape(-1, 784).astype(np.float32) / 255.0
    v1.set_random_seed(1)

    def weight(shape):
        return tf.Variable(v1.truncated_normal(shape, stddev=0.1))

    def bias(shape):
        return tf.Variable(tf.constant(0.1, shape=shape))

    x = v1.placeholder(tf.float32, [None, 784])
    y = v1.placeholder(tf.int64, [None])
    keep = v1.placeholder(tf.float32)
    h = tf.reshape(x, [-1, 28, 28, 1])
    for c_in, c_out in ((1, 32), (32, 64)):
        h = tf.nn.relu(tf.nn.conv2d(h, weight([5, 5, c_in, c_out]), [1, 1, 1, 1], "SAME") + bias([c_out]))
        h = tf.nn.max_pool2d(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    h = tf.nn.relu(tf.matmul(tf.reshape(h, [-1, 7 * 7 * 64]), weight([7 * 7 * 64, 1024])) + bias([1024]))
    h = v1.nn.dropout(h, keep_prob=keep)
    logits = tf.matmul(h, weight([1024, 10])) + bias([10])
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train_op = v1.train.AdamOptimizer(1e-4).minimize(loss)
    correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.int64))
    config = v1.ConfigProto(intra_op_parallelism_threads=threads)  # inter-op: TensorFlow's default
    rng = np.random.RandomState(1)
    order = np.empty(0, np.int64)
    batches = []
    for _ in range(iterations):  # next_batch: a new permutation each epoch
        if len(order) < 50:
            order = np.concatenate([order, rng.permutation(len(train_y))])
        batches.append(order[:50])
        order = order[50:]
    with v1.Session(config=config) as sess:
        sess.run(v1.global_variables_initializer())
        t0 = time.perf_counter()
        for b in batches:
            _, last = sess.run([train_op, loss], feed_dict={x: train_x[b], y: train_y[b], keep: 0.5})
        took = time.perf_counter() - t0
        right = sum(sess.run(correct, feed_dict={x: test_x[i:i + 1000], y: test_y[i:i + 1000], keep: 1.0})
                    for i in range(0, len(test_y), 1000))
    return {"train_time_s": took, "accuracy": right / len(test_y), "final_loss": float(last),
            "inter_op_threads": "TensorFlow's default"}


def pytorch_loop(dataset_dir: str, iterations: int, threads: int) -> dict:
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.set_num_threads(threads)
    torch.manual_seed(1)
    train_x, train_y, test_x, test_y = load(dataset_dir)

    def prepared(x: np.ndarray, n: int) -> torch.Tensor:
        x = np.pad(x[:n].astype(np.float32) / 255.0, ((0, 0), (0, 0), (2, 2), (2, 2)))
        return torch.from_numpy((x - x.mean()) / x.std())  # each split by its own mean and std

    xs, ys = prepared(train_x, 2000), torch.from_numpy(train_y[:2000].astype(np.int64))
    xt, yt = prepared(test_x, 1000), torch.from_numpy(test_y[:1000].astype(np.int64))
    model = nn.Sequential(nn.Conv2d(1, 32, 5), nn.Tanh(), nn.MaxPool2d(3, 3, padding=1), nn.Conv2d(32, 64, 5),
                          nn.Tanh(), nn.MaxPool2d(2, 2), nn.Flatten(), nn.Linear(576, 200), nn.Tanh(),
                          nn.Linear(200, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = [torch.arange(i * 10 % 2000, i * 10 % 2000 + 10) for i in range(iterations)]  # file order
    t0 = time.perf_counter()
    for i, b in enumerate(batches):
        for group in opt.param_groups:
            group["lr"] = 0.05 / (1 + i * 5e-7)
        loss = F.cross_entropy(model(xs[b]), ys[b])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    took = time.perf_counter() - t0
    with torch.no_grad():
        right = int((model(xt).argmax(1) == yt).sum())
    return {"train_time_s": took, "accuracy": right / len(yt), "final_loss": float(loss)}


def flax_example(dataset_dir: str, iterations: int, threads: int) -> dict:
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax
    from flax.training import train_state

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.avg_pool(nn.relu(nn.Conv(32, (3, 3))(x)), (2, 2), (2, 2))
            x = nn.avg_pool(nn.relu(nn.Conv(64, (3, 3))(x)), (2, 2), (2, 2))
            x = nn.relu(nn.Dense(256)(x.reshape((x.shape[0], -1))))
            return nn.Dense(10)(x)

    train_x, train_y, test_x, test_y = load(dataset_dir)
    train_x = train_x.transpose(0, 2, 3, 1).astype(np.float32) / 255.0  # NHWC, as the example's tfds images
    test_x = test_x.transpose(0, 2, 3, 1).astype(np.float32) / 255.0
    model = CNN()
    params = model.init(jax.random.PRNGKey(1), jnp.ones((1, 28, 28, 1)))["params"]
    state = train_state.TrainState.create(apply_fn=model.apply, params=params, tx=optax.sgd(0.1, 0.9))

    def step(state, images, labels):
        def loss_fn(params):
            logits = state.apply_fn({"params": params}, images)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        return state.apply_gradients(grads=grads), loss

    rng = np.random.RandomState(1)
    steps_per_epoch = len(train_y) // 128  # the example drops the last incomplete batch
    batches = []
    while len(batches) < iterations:
        perm = rng.permutation(len(train_y))[:steps_per_epoch * 128].reshape(steps_per_epoch, 128)
        batches.extend(perm)
    batches = batches[:iterations]
    compiled = jax.jit(step).lower(state, train_x[batches[0]], train_y[batches[0]].astype(np.int32)).compile()
    t0 = time.perf_counter()
    for b in batches:
        state, loss = compiled(state, train_x[b], train_y[b].astype(np.int32))
    loss = float(loss)  # waits for the last step
    took = time.perf_counter() - t0
    logits = model.apply({"params": state.params}, test_x)
    right = int((np.asarray(logits).argmax(1) == test_y).sum())
    return {"train_time_s": took, "accuracy": right / len(test_y), "final_loss": loss}


OWN_WAYS = {"tensorflow": tensorflow_v1, "pytorch": pytorch_loop, "jax": flax_example}


def main(argv: list[str]) -> int:
    framework, dataset_dir, iterations, threads = argv
    got = OWN_WAYS[framework](dataset_dir, int(iterations), int(threads))
    print(json.dumps({"framework": framework, "iterations": int(iterations), **got}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
