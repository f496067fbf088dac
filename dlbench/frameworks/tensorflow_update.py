"""The optimizer's update as TensorFlow's fused training kernels, for the TensorFlow adapter's step.

`optimizer: adamw`: each variable first decays by rate x its weight decay (decoupled, as torch.optim.AdamW), then
takes the fused Adam update with epsilon x sqrt(1 - b2^t) in the kernel's place of epsilon: m_hat / (sqrt(v_hat) +
epsilon), PyTorch's and Optax's form (the kernel's own adds epsilon to sqrt(v), before the bias correction:
TensorFlow 1's AdamOptimizer, which `adam` keeps for the study's mnist_deep).
"""

from __future__ import annotations

import tensorflow as tf


class FusedUpdate:
    """The optimizer's update as TensorFlow's fused training kernels, one op per variable, with its slots.

    adam: ResourceApplyAdam, the kernel tf.compat.v1.train.AdamOptimizer runs (the study's mnist_deep.py):
    m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, w -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps),
    with b1 0.9, b2 0.999, eps 1e-8. sgd: ResourceApplyKerasMomentum (v = m v - lr g, w += v: the rate inside
    the velocity, as Keras' SGD and Caffe), or ResourceApplyGradientDescent without momentum. The arithmetic
    is Keras' optimizers'; Keras spells it as several element-wise ops per variable, each a pass over the
    weights, and on mnist_deep (3.2 M weights in its first dense layer) its Adam took about a third of the step
    (bench/script_parity.py, docs/performance.md).
    """

    def __init__(self, variables: list, optimizer: str, momentum: float, lr_mults: list[float],
                 decays: list[float] | None = None):
        self.variables, self.optimizer, self.momentum = variables, optimizer, float(momentum)
        self.lr_mults = lr_mults
        self.decays = decays if optimizer == "adamw" else None  # adamw's decoupled decay, per variable
        dtype = variables[0].dtype
        self.steps = tf.Variable(tf.zeros((), dtype), trainable=False, name="update_steps")
        self.slots: list[list[tf.Variable]] = []  # per variable: Adam's m and v, or the velocity
        for i, v in enumerate(variables):
            if optimizer in ("adam", "adamw"):
                self.slots.append([tf.Variable(tf.zeros_like(v), trainable=False, name=f"adam_m_{i}"),
                                   tf.Variable(tf.zeros_like(v), trainable=False, name=f"adam_v_{i}")])
            elif self.momentum:
                self.slots.append([tf.Variable(tf.zeros_like(v), trainable=False, name=f"velocity_{i}")])
            else:
                self.slots.append([])

    def state(self) -> list[tf.Variable]:
        """Every variable the update moves besides the weights (what a compile call must put back)."""
        return [self.steps, *(slot for slots in self.slots for slot in slots)]

    def apply(self, grads: list, lr) -> None:
        """One update at the base rate `lr` (a scalar tensor), each variable at lr x its multiplier (in the step)."""
        dtype = self.variables[0].dtype
        lr = tf.cast(lr, dtype)
        t = self.steps.assign_add(tf.ones((), dtype))
        adam = self.optimizer in ("adam", "adamw")
        if adam:
            b1, b2 = tf.constant(0.9, dtype), tf.constant(0.999, dtype)
            b1_power, b2_power = tf.pow(b1, t), tf.pow(b2, t)
            eps = tf.constant(1e-8, dtype)
            if self.optimizer == "adamw":  # eps added to sqrt of the bias-corrected v, as torch.optim.AdamW and Optax
                eps = eps * tf.sqrt(1 - b2_power)
        for i, (v, g, slots, mult) in enumerate(zip(self.variables, grads, self.slots, self.lr_mults)):
            rate = lr * tf.constant(mult, dtype)
            if self.decays is not None and self.decays[i]:  # AdamW: w -= rate x decay x w, as torch.optim.AdamW
                v.assign_sub(rate * tf.constant(self.decays[i], dtype) * v)
            if adam:
                tf.raw_ops.ResourceApplyAdam(var=v.handle, m=slots[0].handle, v=slots[1].handle,
                                             beta1_power=b1_power, beta2_power=b2_power, lr=rate, beta1=b1,
                                             beta2=b2, epsilon=eps, grad=g)
            elif slots:
                tf.raw_ops.ResourceApplyKerasMomentum(var=v.handle, accum=slots[0].handle, lr=rate, grad=g,
                                                      momentum=tf.constant(self.momentum, dtype))
            else:
                tf.raw_ops.ResourceApplyGradientDescent(var=v.handle, alpha=rate, delta=g)
