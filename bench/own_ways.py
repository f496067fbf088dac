"""Each framework's own way of training its own-defaults network, the yardstick of bench/script_parity.py.

Run inside the framework's environment (bench/script_parity.py starts it there, with the variables the runner
gives a trainer):

    ENV_PYTHON bench/own_ways.py WAY POINT_JSON DATASET_DIR

WAY is a framework's name (its own way), or one of TensorFlow's two others: tensorflow_migrated (the study's
script as TensorFlow's migration guide has TensorFlow 2 run it) and keras_fit (Keras `fit`, TensorFlow 2's own).

POINT_JSON is the own-defaults point dlbench trains on the other side of the pair: its data (the prepared dataset
after the point's input handling, read by dlbench.datasets.loading as the adapters read it), batch size, learning
rate and number of iterations. The training itself is written here as the framework's own documentation writes
it, not with dlbench's code. Prints one JSON line: train_time_s (every training step, the first included, with what
the documented loop does around each step: fetching the batch, the learning-rate schedule, keeping the loss;
nothing else: no data loading, no graph building or compiling, no tests), accuracy on the test split, final loss,
and the network's trained parameters (params: the spec's count where it is the same network).

- tensorflow: the study's mnist_deep.py as TensorFlow 1 ran it, in graph mode under tf.compat.v1:
  placeholders fed from numpy every step, conv 5x5 SAME 32 and 64 with ReLU and 2x2 SAME max pooling,
  dense 1024 ReLU, dropout (keep 0.5), dense 10, softmax cross-entropy, AdamOptimizer(1e-4), batches of
  50 drawn like its reader's next_batch (a new permutation each epoch), truncated normals of 0.1 and
  biases of 0.1. What the script does beside training (its training-accuracy print every 100 steps, a
  summary writer) is left out, as dlbench's training time leaves out its tests. The session takes the
  point's intra-op threads and TensorFlow's own default inter-op pool, as the script's plain tf.Session() does.
- tensorflow_migrated: the same script as TensorFlow's guide to migrating TensorFlow 1 code writes it for
  TensorFlow 2: the Session and its feed_dict replaced by a tf.function train_step taking the numpy batch as its
  arguments, the same variables, ops and initialisation, and the script's optimizer kept
  (tf.compat.v1.train.AdamOptimizer: the fused ApplyAdam kernel) under a GradientTape; traced before the clock.
- keras_fit: the same network, initialisation and Adam as TensorFlow 2's own documentation trains it (the
  beginner quickstart's `model.compile(optimizer, SparseCategoricalCrossentropy(from_logits=True))` and
  `model.fit` on numpy arrays): a Keras Sequential of Conv2D/MaxPooling2D/Flatten/Dense/Dropout, fit for the
  point's iterations (`steps_per_epoch`) of a shuffled epoch, compiled as fit compiles by default (no XLA on a
  CPU). fit traces its step in its first call: one fit of one batch first, then the weights and the optimizer's
  state put back, and the clock from the first step's start to the epoch's end (its logs read: every step done).
- pytorch: PyTorch's MNIST example (pytorch/examples mnist/main.py) as its train() runs it: a DataLoader over
  the dataset (batches of the point's size, in order, no workers: the example's CPU settings), model.train(),
  then per batch data.to(device), optimizer.zero_grad(), the forward pass, the loss, backward, optimizer.step(),
  and loss.item() every log_interval (10) batches; on the point's network (Torch's MNIST network, torch_mnist:
  conv 32 5x5 tanh, 3x3 max pooling stride 3 pad 1, conv 64 5x5 tanh, 2x2 max pooling, dense 200 tanh, dense
  10) with PyTorch's own initialisation, SGD at the point's rate and Torch's learningRateDecay as a LambdaLR
  schedule stepped every batch.
- jax: Flax's MNIST example (examples/mnist/train.py, Linen) as its train_epoch runs it: the images a jnp array
  on the device, a jax.random.permutation per epoch cut into batches (the last incomplete batch dropped), each
  batch gathered from the device arrays, then apply_model (jitted: value_and_grad of the one-hot softmax
  cross-entropy, and the accuracy) and update_model (jitted: TrainState.apply_gradients), the loss and accuracy
  kept per step; conv 32 3x3 SAME, ReLU, 2x2 average pooling, conv 64 3x3 SAME, ReLU, 2x2 average pooling, dense
  256 ReLU, dense 10; optax.sgd(lr, momentum). The two jitted functions and the gather are called once on the
  first batch before the clock (their compilation), as dlbench's compiled points compile in their `compile` phase.
- theano: the Theano deep learning tutorial's LeNet (convolutional_mlp.py) on the Theano preset's network
  (lenet5_tanh): the data in shared variables, rows of 784 reshaped in the graph, two LeNetConvPoolLayers (conv2d
  with the image and filter shapes given, 2x2 max pooling with ignore_border, tanh of pooled + bias), a tanh
  HiddenLayer of 500, LogisticRegression's softmax and negative log-likelihood, plain SGD updates, and
  train_model = theano.function([index], cost, updates=updates, givens={x: train_set_x[index * batch_size:
  (index + 1) * batch_size], ...}) called once per minibatch index in file order; Theano configured as the
  adapter configures it (its flags, its compile cache, the point's floatX). The tutorial's validation inside
  the loop is left out, as dlbench's training time leaves its validation out.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

from dlbench.datasets.loading import load_inputs


def _expects(point: dict, network: str) -> None:
    if point["network"] != network:
        raise SystemExit(f"this own way trains {network}; the point trains {point['network']} (its own-defaults "
                         "point is the one to compare)")


def next_batches(n: int, bs: int, rng: np.random.RandomState):
    """mnist_deep.py's reader's next_batch: batches of `bs` indices of `n`, a new permutation each epoch."""
    order = np.empty(0, np.int64)
    while True:
        if len(order) < bs:
            order = np.concatenate([order, rng.permutation(n)])
        b, order = order[:bs], order[bs:]
        yield b


def tensorflow_v1(point: dict, dataset_dir: str) -> dict:
    import tensorflow as tf

    _expects(point, "mnist_deep")
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    data = load_inputs(dataset_dir, point)
    train_x, train_y = data.train_x.reshape(len(data.train_y), -1), data.train_y.astype(np.int64)
    test_x, test_y = data.test_x.reshape(len(data.test_y), -1), data.test_y.astype(np.int64)
    v1.set_random_seed(point["seed"])

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
    train_op = v1.train.AdamOptimizer(point["learning_rate"]).minimize(loss)
    correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.int64))
    config = v1.ConfigProto(intra_op_parallelism_threads=point["threads"])  # inter-op: TensorFlow's default
    rng = np.random.RandomState(point["seed"])
    bs = point["batch_size"]
    with v1.Session(config=config) as sess:
        sess.run(v1.global_variables_initializer())
        batches = next_batches(len(train_y), bs, rng)
        t0 = time.perf_counter()
        for _ in range(point["iterations"]):
            b = next(batches)
            sess.run(train_op, feed_dict={x: train_x[b], y: train_y[b], keep: 0.5})  # train_step.run(...)
        took = time.perf_counter() - t0
        last = sess.run(loss, feed_dict={x: train_x[b], y: train_y[b], keep: 1.0})  # the last batch, after it
        right = sum(sess.run(correct, feed_dict={x: test_x[i:i + 1000], y: test_y[i:i + 1000], keep: 1.0})
                    for i in range(0, len(test_y), 1000))
        params = sum(int(np.prod(v.shape)) for v in v1.trainable_variables())
    return {"train_time_s": took, "accuracy": right / len(test_y), "final_loss": float(last), "params": params}


def tensorflow_migrated(point: dict, dataset_dir: str) -> dict:
    import tensorflow as tf

    _expects(point, "mnist_deep")
    tf.config.threading.set_intra_op_parallelism_threads(point["threads"])  # inter-op: TensorFlow's default
    tf.random.set_seed(point["seed"])
    data = load_inputs(dataset_dir, point)
    train_x, train_y = data.train_x.reshape(len(data.train_y), -1), data.train_y.astype(np.int64)
    test_x, test_y = data.test_x.reshape(len(data.test_y), -1), data.test_y.astype(np.int64)
    shapes = ([5, 5, 1, 32], [32], [5, 5, 32, 64], [64], [7 * 7 * 64, 1024], [1024], [1024, 10], [10])
    variables = [tf.Variable(tf.random.truncated_normal(s, stddev=0.1)) if len(s) > 1 else
                 tf.Variable(tf.constant(0.1, shape=s)) for s in shapes]

    def logits_of(x, keep):
        h = tf.reshape(x, [-1, 28, 28, 1])
        for w, b in (variables[0:2], variables[2:4]):
            h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(h, w, [1, 1, 1, 1], "SAME") + b), [1, 2, 2, 1],
                                 [1, 2, 2, 1], "SAME")
        h = tf.nn.relu(tf.matmul(tf.reshape(h, [-1, 7 * 7 * 64]), variables[4]) + variables[5])
        if keep < 1:
            h = tf.nn.dropout(h, rate=1 - keep)
        return tf.matmul(h, variables[6]) + variables[7]

    optimizer = tf.compat.v1.train.AdamOptimizer(point["learning_rate"])

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits_of(x, 0.5)))
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    @tf.function
    def correct(x, y):
        return tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits_of(x, 1.0), 1), y), tf.int64))

    bs = point["batch_size"]
    rng = np.random.RandomState(point["seed"])
    kept = [v.numpy() for v in variables]
    train_step(train_x[:bs], train_y[:bs])  # traces it, and makes the optimizer's slots
    for v, value in zip(variables, kept):
        v.assign(value)
    for v in optimizer.variables():  # its moments and beta powers, as before that step
        v.assign(tf.zeros_like(v) if "power" not in v.name else tf.ones_like(v) * (0.9 if "beta1" in v.name
                                                                                   else 0.999))
    batches = next_batches(len(train_y), bs, rng)
    t0 = time.perf_counter()
    for _ in range(point["iterations"]):
        b = next(batches)
        loss = train_step(train_x[b], train_y[b])
    last = float(loss)  # waits for the last step
    took = time.perf_counter() - t0
    right = sum(int(correct(test_x[i:i + 1000], test_y[i:i + 1000])) for i in range(0, len(test_y), 1000))
    return {"train_time_s": took, "accuracy": right / len(test_y), "final_loss": last,
            "params": sum(int(np.prod(v.shape)) for v in variables)}


def keras_fit(point: dict, dataset_dir: str) -> dict:
    import tensorflow as tf
    from tensorflow import keras

    _expects(point, "mnist_deep")
    tf.config.threading.set_intra_op_parallelism_threads(point["threads"])  # inter-op: TensorFlow's default
    keras.utils.set_random_seed(point["seed"])
    data = load_inputs(dataset_dir, point)
    train_x = np.ascontiguousarray(data.train_x.transpose(0, 2, 3, 1))
    test_x = np.ascontiguousarray(data.test_x.transpose(0, 2, 3, 1))
    train_y, test_y = data.train_y.astype(np.int64), data.test_y.astype(np.int64)
    init = {"kernel_initializer": keras.initializers.TruncatedNormal(stddev=0.1),
            "bias_initializer": keras.initializers.Constant(0.1)}
    model = keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 5, padding="same", activation="relu", **init),
        keras.layers.MaxPooling2D(2, padding="same"),
        keras.layers.Conv2D(64, 5, padding="same", activation="relu", **init),
        keras.layers.MaxPooling2D(2, padding="same"),
        keras.layers.Flatten(),
        keras.layers.Dense(1024, activation="relu", **init),
        keras.layers.Dropout(0.5),
        keras.layers.Dense(10, **init),
    ])
    model.compile(optimizer=keras.optimizers.Adam(point["learning_rate"], epsilon=1e-8),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    bs = point["batch_size"]
    model.optimizer.build(model.trainable_variables)
    initial = [v.numpy() for v in (*model.variables, *model.optimizer.variables)]
    model.fit(train_x[-bs:], train_y[-bs:], batch_size=bs, epochs=1, verbose=0)  # traces fit's step
    for v, value in zip((*model.variables, *model.optimizer.variables), initial):  # as before that step
        v.assign(value)
    times = []

    class Clock(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 0:
                times.append(time.perf_counter())

        def on_epoch_end(self, epoch, logs=None):  # after fit has read the epoch's logs: every step done
            times.append(time.perf_counter())

    hist = model.fit(train_x, train_y, batch_size=bs, epochs=1, steps_per_epoch=point["iterations"],
                     shuffle=point.get("shuffle", True), verbose=0, callbacks=[Clock()])
    logits = model.predict(test_x, batch_size=1000, verbose=0)
    right = int((logits.argmax(1) == test_y).sum())
    return {"train_time_s": times[1] - times[0], "accuracy": right / len(test_y),
            "final_loss": float(hist.history["loss"][-1]), "params": model.count_params(),
            "jit_compile": bool(model.jit_compile)}


def pytorch_example(point: dict, dataset_dir: str) -> dict:
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    _expects(point, "torch_mnist")
    torch.set_num_threads(point["threads"])
    torch.manual_seed(point["seed"])
    device = torch.device("cpu")
    data = load_inputs(dataset_dir, point)
    train = TensorDataset(torch.from_numpy(data.train_x), torch.from_numpy(data.train_y.astype(np.int64)))
    bs, iterations, decay = point["batch_size"], point["iterations"], point["lr_policy"]["decay"]
    model = nn.Sequential(nn.Conv2d(1, 32, 5), nn.Tanh(), nn.MaxPool2d(3, 3, padding=1),
                          nn.Conv2d(32, 64, 5), nn.Tanh(), nn.MaxPool2d(2, 2), nn.Flatten(),
                          nn.Linear(576, 200), nn.Tanh(), nn.Linear(200, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=point["learning_rate"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: 1.0 / (1.0 + i * decay))  # Torch's decay
    loader = DataLoader(train, batch_size=bs, shuffle=point.get("shuffle", True))
    log_interval, done = 10, 0
    model.train()
    t0 = time.perf_counter()
    while done < iterations:
        for batch_idx, (x, target) in enumerate(loader):
            x, target = x.to(device), target.to(device)
            optimizer.zero_grad()
            output = model(x)
            loss = F.cross_entropy(output, target)
            loss.backward()
            optimizer.step()
            scheduler.step()
            if batch_idx % log_interval == 0:
                last = loss.item()
            done += 1
            if done == iterations:
                break
    took = time.perf_counter() - t0
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(data.test_x))
    right = int((logits.argmax(1).numpy() == data.test_y).sum())
    return {"train_time_s": took, "accuracy": right / len(data.test_y), "final_loss": float(last),
            "params": sum(p.numel() for p in model.parameters())}


def flax_example(point: dict, dataset_dir: str) -> dict:
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax
    from flax.training import train_state

    _expects(point, "flax_cnn")

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.avg_pool(nn.relu(nn.Conv(features=32, kernel_size=(3, 3))(x)), window_shape=(2, 2),
                            strides=(2, 2))
            x = nn.avg_pool(nn.relu(nn.Conv(features=64, kernel_size=(3, 3))(x)), window_shape=(2, 2),
                            strides=(2, 2))
            x = nn.relu(nn.Dense(features=256)(x.reshape((x.shape[0], -1))))
            return nn.Dense(features=10)(x)

    @jax.jit
    def apply_model(state, images, labels):
        def loss_fn(params):
            logits = state.apply_fn({"params": params}, images)
            loss = jnp.mean(optax.softmax_cross_entropy(logits=logits, labels=jax.nn.one_hot(labels, 10)))
            return loss, logits

        (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        return grads, loss, jnp.mean(jnp.argmax(logits, -1) == labels)

    @jax.jit
    def update_model(state, grads):
        return state.apply_gradients(grads=grads)

    data = load_inputs(dataset_dir, point)
    train_ds = {"image": jnp.asarray(data.train_x.transpose(0, 2, 3, 1)), "label": jnp.asarray(data.train_y)}
    test_images = jnp.asarray(data.test_x.transpose(0, 2, 3, 1))
    rng = jax.random.PRNGKey(point["seed"])
    rng, init_rng = jax.random.split(rng)
    cnn = CNN()
    params = cnn.init(init_rng, jnp.ones([1, *train_ds["image"].shape[1:]]))["params"]
    state = train_state.TrainState.create(apply_fn=cnn.apply, params=params,
                                          tx=optax.sgd(point["learning_rate"], point["momentum"]))
    bs, iterations = point["batch_size"], point["iterations"]
    steps_per_epoch = len(data.train_y) // bs

    def epoch_batches(key):
        perms = jax.random.permutation(key, len(data.train_y))
        return perms[:steps_per_epoch * bs].reshape((steps_per_epoch, bs))  # the incomplete batch dropped

    # Every function the loop calls compiled now, on a batch whose results are dropped: the permutation, the
    # slicing, the gathers and the two jitted steps (the state is immutable, so nothing trains).
    first = next(iter(epoch_batches(jax.random.PRNGKey(0))[:min(iterations, steps_per_epoch)]))
    jax.block_until_ready(update_model(state, apply_model(state, train_ds["image"][first, ...],
                                                          train_ds["label"][first, ...])[0]))
    done, epoch_loss = 0, []
    t0 = time.perf_counter()
    while done < iterations:
        rng, input_rng = jax.random.split(rng)
        epoch_loss, epoch_accuracy = [], []
        for perm in epoch_batches(input_rng)[:iterations - done]:
            batch_images = train_ds["image"][perm, ...]
            batch_labels = train_ds["label"][perm, ...]
            grads, loss, accuracy = apply_model(state, batch_images, batch_labels)
            state = update_model(state, grads)
            epoch_loss.append(loss)
            epoch_accuracy.append(accuracy)
            done += 1
        train_loss = np.mean(epoch_loss)  # as the example closes each epoch: waits for its steps
    jax.block_until_ready(state)
    took = time.perf_counter() - t0
    logits = cnn.apply({"params": state.params}, test_images)
    right = int((np.asarray(logits).argmax(1) == data.test_y).sum())
    return {"train_time_s": took, "accuracy": right / len(data.test_y), "final_loss": float(train_loss),
            "params": sum(int(leaf.size) for leaf in jax.tree.leaves(state.params))}


def theano_tutorial(point: dict, dataset_dir: str) -> dict:
    # Theano's flags, compile cache and BLAS as the adapter sets them (they are set before Theano is imported)
    from dlbench.frameworks.theano_config import T, conv2d, pool_2d, theano

    _expects(point, "lenet5_tanh")
    floatx = theano.config.floatX
    data = load_inputs(dataset_dir, point)
    batch_size, lr = point["batch_size"], point["learning_rate"]
    train_set_x = theano.shared(np.asarray(data.train_x.reshape(len(data.train_y), -1), dtype=floatx), borrow=True)
    train_set_y = T.cast(theano.shared(np.asarray(data.train_y, dtype=floatx), borrow=True), "int32")
    rng = np.random.RandomState(23455)

    def conv_pool(inp, filter_shape, image_shape):
        fan_in = np.prod(filter_shape[1:])
        fan_out = filter_shape[0] * np.prod(filter_shape[2:]) // 4
        bound = np.sqrt(6.0 / (fan_in + fan_out))
        w = theano.shared(np.asarray(rng.uniform(-bound, bound, filter_shape), dtype=floatx), borrow=True)
        b = theano.shared(np.zeros((filter_shape[0],), dtype=floatx), borrow=True)
        out = conv2d(input=inp, filters=w, filter_shape=filter_shape, input_shape=image_shape)
        pooled = pool_2d(input=out, ws=(2, 2), ignore_border=True)
        return T.tanh(pooled + b.dimshuffle("x", 0, "x", "x")), [w, b]

    def hidden(inp, n_in, n_out):
        bound = np.sqrt(6.0 / (n_in + n_out))
        w = theano.shared(np.asarray(rng.uniform(-bound, bound, (n_in, n_out)), dtype=floatx), borrow=True)
        b = theano.shared(np.zeros((n_out,), dtype=floatx), borrow=True)
        return T.tanh(T.dot(inp, w) + b), [w, b]

    index, x, y = T.lscalar(), T.matrix("x"), T.ivector("y")
    layer0, p0 = conv_pool(x.reshape((batch_size, 1, 28, 28)), (20, 1, 5, 5), (batch_size, 1, 28, 28))
    layer1, p1 = conv_pool(layer0, (50, 20, 5, 5), (batch_size, 20, 12, 12))
    layer2, p2 = hidden(layer1.flatten(2), 50 * 4 * 4, 500)
    w3 = theano.shared(np.zeros((500, 10), dtype=floatx), borrow=True)  # LogisticRegression starts at 0
    b3 = theano.shared(np.zeros((10,), dtype=floatx), borrow=True)
    p_y_given_x = T.nnet.softmax(T.dot(layer2, w3) + b3)
    cost = -T.mean(T.log(p_y_given_x)[T.arange(y.shape[0]), y])
    params = [w3, b3] + p2 + p1 + p0
    grads = T.grad(cost, params)
    updates = [(p, p - np.asarray(lr, dtype=floatx) * g) for p, g in zip(params, grads)]
    train_model = theano.function([index], cost, updates=updates,
                                  givens={x: train_set_x[index * batch_size: (index + 1) * batch_size],
                                          y: train_set_y[index * batch_size: (index + 1) * batch_size]})
    n_train_batches = len(data.train_y) // batch_size
    t0 = time.perf_counter()
    for it in range(point["iterations"]):
        cost_ij = train_model(it % n_train_batches)  # file order, epoch after epoch
    took = time.perf_counter() - t0
    test_x = theano.shared(np.asarray(data.test_x.reshape(len(data.test_y), -1), dtype=floatx), borrow=True)
    predict = theano.function([index], T.argmax(p_y_given_x, axis=1),
                              givens={x: test_x[index * batch_size: (index + 1) * batch_size]})
    whole = len(data.test_y) // batch_size * batch_size  # the tutorial scores whole batches
    right = sum(int((predict(i) == data.test_y[i * batch_size:(i + 1) * batch_size]).sum())
                for i in range(whole // batch_size))
    return {"train_time_s": took, "accuracy": right / whole, "final_loss": float(cost_ij),
            "params": sum(int(p.get_value(borrow=True).size) for p in params)}


OWN_WAYS = {"tensorflow": tensorflow_v1, "tensorflow_migrated": tensorflow_migrated, "keras_fit": keras_fit,
            "pytorch": pytorch_example, "jax": flax_example, "theano": theano_tutorial}
# The ways not named after their framework: the environment each runs in.
FRAMEWORK_OF = {"tensorflow_migrated": "tensorflow", "keras_fit": "tensorflow"}


def main(argv: list[str]) -> int:
    way, point_json, dataset_dir = argv
    with open(point_json) as fh:
        point = json.load(fh)
    got = OWN_WAYS[way](point, dataset_dir)
    print(json.dumps({"way": way, "framework": FRAMEWORK_OF.get(way, way), "iterations": point["iterations"], **got}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
