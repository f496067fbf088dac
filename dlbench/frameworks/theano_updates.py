"""The optimizers' and the moving average's updates as Theano update pairs, for the compiled training function."""

from __future__ import annotations

import numpy as np

from dlbench.frameworks.theano_config import T, constant, floatx, theano


def sgd_updates(params, grads, lr, momentum: float, lr_mults: list[float] | None = None) -> list:
    """torch.optim.SGD: v = momentum * v + g; w -= lr * lr_mult * v (no velocity when momentum is 0)."""
    updates = []
    for p, g, mult in zip(params, grads, lr_mults or [1.0] * len(params)):
        rate = lr * constant(mult) if mult != 1.0 else lr
        if momentum:
            v = theano.shared(np.zeros_like(p.get_value(borrow=True)), name=f"v_{p.name}", borrow=True)
            v_new = constant(momentum) * v + g
            updates += [(v, v_new), (p, p - rate * v_new)]
        else:
            updates.append((p, p - rate * g))
    return updates


def ema_updates(params, updates: list, decay: float) -> tuple[list, list]:
    """Shadows of the parameters, moved towards their updated values after every step (stepped.ema_rate):
    (the shadows, the updates that do it, counter included)."""
    new_value = dict(updates)
    count = theano.shared(floatx(0.0), name="ema_updates")
    n = count + constant(1.0)
    rate = T.minimum(constant(decay), (constant(1.0) + n) / (constant(10.0) + n))
    shadows, out = [], [(count, n)]
    for p in params:
        shadow = theano.shared(p.get_value(borrow=False), name=f"ema_{p.name}", borrow=True)
        shadows.append(shadow)
        out.append((shadow, shadow - (constant(1.0) - rate) * (shadow - new_value[p])))
    return shadows, out


def adam_updates(params, grads, lr, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                 lr_mults: list[float] | None = None) -> list:
    """torch.optim.Adam: bias-corrected moments, w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)."""
    t = theano.shared(floatx(0.0), name="adam_t")
    t_new = t + constant(1.0)
    step = lr / (constant(1.0) - constant(beta1) ** t_new)
    root_c2 = T.sqrt(constant(1.0) - constant(beta2) ** t_new)
    updates = [(t, t_new)]
    for p, g, mult in zip(params, grads, lr_mults or [1.0] * len(params)):
        m = theano.shared(np.zeros_like(p.get_value(borrow=True)), name=f"m_{p.name}", borrow=True)
        v = theano.shared(np.zeros_like(p.get_value(borrow=True)), name=f"v_{p.name}", borrow=True)
        m_new = constant(beta1) * m + constant(1.0 - beta1) * g
        v_new = constant(beta2) * v + constant(1.0 - beta2) * T.sqr(g)
        rate = step * constant(mult) if mult != 1.0 else step
        updates += [(m, m_new), (v, v_new), (p, p - rate * m_new / (T.sqrt(v_new) / root_c2 + constant(eps)))]
    return updates
