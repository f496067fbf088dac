"""Caffe's prototxt, generated as text: the net (HDF5Data layers, the spec's layers, SoftmaxWithLoss, Accuracy in
TEST) and the solver (the point's settings in Caffe's terms). Pure text, no Caffe: dlbench.frameworks.caffe runs it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from dlbench.spec import networks

if TYPE_CHECKING:
    from dlbench.frameworks.base import Plan

ACTIVATION_TYPES = {"relu": "ReLU", "tanh": "TanH", "sigmoid": "Sigmoid"}
LAYER_NAMES = {"conv": "conv", "pool": "pool", "dense": "ip", "relu": "relu", "tanh": "tanh", "sigmoid": "sigmoid",
               "dropout": "drop", "lrn": "norm", "batchnorm": "bn", "gap": "gap", "residual": "res"}
# A spec's batchnorm is two Caffe layers: BatchNorm bn<k> (the statistics) and Scale scale<k> (gamma, beta).
SCALE_NAME = "scale"


def names(layers: list[dict], counts: dict[str, int] | None = None) -> list[tuple[dict, str]]:
    """(layer, Caffe name) of every layer in the order the net holds them: a residual block's body, its shortcut,
    then the block itself (its Eltwise). Its parametrised layers thus come in the spec's order (networks.trainable)."""
    counts = {} if counts is None else counts
    out = []
    for layer in layers:
        kind = layer["type"]
        if kind not in LAYER_NAMES:
            raise networks.SpecError(f"Caffe adapter: unknown layer type {kind!r}")
        if kind == "residual":
            out += names(layer["body"], counts) + names(layer["shortcut"], counts)
        counts[kind] = counts.get(kind, 0) + 1
        out.append((layer, f"{LAYER_NAMES[kind]}{counts[kind]}"))
    return out


def unit_names(layers: list[dict]) -> list[str]:
    """The Caffe name of every conv, dense and batchnorm layer, in the spec's order (a batchnorm's: its BatchNorm
    layer's, bn<k>; its Scale layer is scale<k>)."""
    return [name for layer, name in names(layers) if layer["type"] in ("conv", "dense", "batchnorm")]


def scale_name(bn_name: str) -> str:
    return SCALE_NAME + bn_name[len(LAYER_NAMES["batchnorm"]):]


def _num(v) -> str:
    """A number as protobuf's text format reads it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


def _block(name: str, body: list[str]) -> list[str]:
    return [f"{name} {{"] + ["  " + line for line in body] + ["}"]


def _filler(bias: bool = True) -> list[str]:
    """Fillers Caffe runs when it builds the net; the point's initial weights (the solver state's) replace them."""
    out = _block("weight_filler", ['type: "xavier"'])
    return out + _block("bias_filler", ['type: "constant"', "value: 0"]) if bias else out


def _mults(spec: dict) -> list[str]:
    """The layer's lr_mult and decay_mult: weights, then biases (none for a conv without bias; a batchnorm's Scale:
    gamma, then beta)."""
    m = networks.multipliers(spec)
    blobs = (0,) if spec["type"] == "conv" and not networks.has_bias(spec) else (0, 1)
    return [line for i in blobs for line in _block("param", [f"lr_mult: {_num(m['lr'][i])}",
                                                             f"decay_mult: {_num(m['decay'][i])}"])]


def _gather_planes(lname: str, bottom: str, spec: dict, planes_in: int) -> tuple[list[list[str]], str]:
    """A sparse conv's input: every input plane apart (Slice), then each output map's planes in table order
    (Concat), for a Convolution with one group per output map. Planes no map reads end in a Silence layer."""
    planes = [f"{lname}_plane{i}" for i in range(planes_in)]
    layers = [[f'name: "{lname}_planes"', 'type: "Slice"', f'bottom: "{bottom}"', *[f'top: "{p}"' for p in planes],
               *_block("slice_param", ["axis: 1"])]]
    used = {i for row in spec["table"] for i in row}
    unused = [planes[i] for i in range(planes_in) if i not in used]
    if unused:
        layers.append([f'name: "{lname}_unused"', 'type: "Silence"', *[f'bottom: "{p}"' for p in unused]])
    gathered = f"{lname}_gathered"
    layers.append([f'name: "{lname}_gather"', 'type: "Concat"',
                   *[f'bottom: "{planes[i]}"' for row in spec["table"] for i in row], f'top: "{gathered}"',
                   *_block("concat_param", ["axis: 1"])])
    return layers, gathered


def net_prototxt(layers: list[dict], train_list: str, test_list: str | None, batch_size: int,
                 test_batch_size: int, name: str = "dlbench", shuffle: bool = True,
                 input_shape: tuple[int, int, int] | None = None, batch_statistics: bool | None = None) -> str:
    """The network of the spec, between HDF5Data layers and SoftmaxWithLoss (+ Accuracy in TEST).

    input_shape is needed where a conv has a connection table (the planes its input has).

    A batchnorm is a BatchNorm layer (the statistics: blobs mean, variance and Caffe's scale factor, never trained)
    and a Scale layer with bias_term (gamma and beta, trained with the spec's multipliers). BatchNorm's
    use_global_stats is Caffe's own by phase (false in TRAIN: the batch's statistics, the running ones updated;
    true in TEST: the running ones) unless `batch_statistics` sets it for both (True: use_global_stats false).
    Its moving_average_fraction is the spec's decay: with the scale factor kept at 1 / (1 - decay) (caffe.py), Caffe's
    update is the spec's running average (see caffe.py's caffe_blobs). A residual block is its body and its
    shortcut from the same bottom, added by an Eltwise SUM (an empty shortcut: the bottom itself); gap is a
    Pooling AVE with global_pooling.
    """
    out = [f'name: "{name}"']

    def layer(body: list[str]) -> None:
        out.extend(_block("layer", body))

    at = {path: prev for path, _, prev, _ in networks.walk(layers, tuple(input_shape))} if input_shape else None
    layer(['name: "data"', 'type: "HDF5Data"', 'top: "data"', 'top: "label"', "include { phase: TRAIN }",
           *_block("hdf5_data_param", [f'source: "{train_list}"', f"batch_size: {batch_size}",
                                       f"shuffle: {'true' if shuffle else 'false'}"])])
    if test_list is not None:
        layer(['name: "data"', 'type: "HDF5Data"', 'top: "data"', 'top: "label"', "include { phase: TEST }",
               *_block("hdf5_data_param", [f'source: "{test_list}"', f"batch_size: {test_batch_size}"])])
    named = iter(names(layers))

    def emit(specs: list[dict], bottom: str, prefix: str) -> str:
        for index, spec in enumerate(specs):
            kind, path = spec["type"], f"{prefix}{index}"
            if kind == "residual":
                body = emit(spec["body"], bottom, f"{path}_body")
                short = emit(spec["shortcut"], bottom, f"{path}_shortcut")
                _, lname = next(named)
                layer([f'name: "{lname}"', 'type: "Eltwise"', f'bottom: "{body}"', f'bottom: "{short}"',
                       f'top: "{lname}"', *_block("eltwise_param", ["operation: SUM"])])
                bottom = lname
                continue
            _, lname = next(named)
            in_place = kind in ACTIVATION_TYPES or kind == "dropout"
            top = bottom if in_place and bottom != "data" else lname
            head = [f'name: "{lname}"']
            io = [f'bottom: "{bottom}"', f'top: "{top}"']
            if kind == "conv":
                group = []
                if "table" in spec:
                    if at is None:
                        raise networks.SpecError("Caffe adapter: a conv with a connection table needs the input shape")
                    gathering, gathered = _gather_planes(lname, bottom, spec, at[path][0])
                    for body in gathering:
                        layer(body)
                    io = [f'bottom: "{gathered}"', f'top: "{top}"']
                    group = [f"group: {spec['filters']}"]
                bias = networks.has_bias(spec)
                layer([*head, 'type: "Convolution"', *io, *_mults(spec),
                       *_block("convolution_param", [f"num_output: {spec['filters']}",
                                                     f"kernel_size: {spec['kernel']}",
                                                     f"stride: {spec.get('stride', 1)}", f"pad: {spec.get('pad', 0)}",
                                                     *group, *([] if bias else ["bias_term: false"]),
                                                     *_filler(bias)])])
            elif kind == "batchnorm":
                fixed = [line for _ in range(3) for line in _block("param", ["lr_mult: 0", "decay_mult: 0"])]
                stats = [] if batch_statistics is None else [f"use_global_stats: {_num(not batch_statistics)}"]
                layer([*head, 'type: "BatchNorm"', *io, *fixed,
                       *_block("batch_norm_param", [f"moving_average_fraction: {_num(spec['decay'])}",
                                                    f"eps: {_num(spec['eps'])}", *stats])])
                top = scale_name(lname)
                layer([f'name: "{top}"', 'type: "Scale"', f'bottom: "{lname}"', f'top: "{top}"', *_mults(spec),
                       *_block("scale_param", ["bias_term: true"])])
            elif kind == "gap":
                layer([*head, 'type: "Pooling"', *io, *_block("pooling_param", ["pool: AVE", "global_pooling: true"])])
            elif kind == "pool":
                mode = {"max": "MAX", "avg": "AVE"}[spec["mode"]]
                layer([*head, 'type: "Pooling"', *io,
                       *_block("pooling_param", [f"pool: {mode}", f"kernel_size: {spec['kernel']}",
                                                 f"stride: {spec['stride']}", f"pad: {spec.get('pad', 0)}"])])
            elif kind == "dense":
                layer([*head, 'type: "InnerProduct"', *io, *_mults(spec),
                       *_block("inner_product_param", [f"num_output: {spec['units']}", *_filler()])])
            elif kind in ACTIVATION_TYPES:
                layer([*head, f'type: "{ACTIVATION_TYPES[kind]}"', *io])
            elif kind == "dropout":
                layer([*head, 'type: "Dropout"', *io,
                       *_block("dropout_param", [f"dropout_ratio: {_num(spec['rate'])}"])])
            elif kind == "lrn":
                layer([*head, 'type: "LRN"', *io,
                       *_block("lrn_param", [f"local_size: {spec['size']}", f"alpha: {_num(spec['alpha'])}",
                                             f"beta: {_num(spec['beta'])}", f"k: {_num(spec.get('k', 1.0))}",
                                             "norm_region: ACROSS_CHANNELS"])])
            else:
                raise networks.SpecError(f"Caffe adapter: no {kind} layer")
            bottom = top
        return bottom

    bottom = emit(layers, "data", "")
    if test_list is not None:
        layer(['name: "accuracy"', 'type: "Accuracy"', f'bottom: "{bottom}"', 'bottom: "label"', 'top: "accuracy"',
               "include { phase: TEST }"])
    layer(['name: "loss"', 'type: "SoftmaxWithLoss"', f'bottom: "{bottom}"', 'bottom: "label"', 'top: "loss"'])
    return "\n".join(out) + "\n"


def lr_lines(policy: dict) -> list[str]:
    """dlbench.spec.lr_policies's policy (normalised: iterations, not epochs) in Caffe's solver terms."""
    name = policy.get("name", "fixed")
    if name == "fixed":
        return ['lr_policy: "fixed"']
    if name == "inv":
        return ['lr_policy: "inv"', f"gamma: {_num(policy['gamma'])}", f"power: {_num(policy['power'])}"]
    if name == "decay":  # Torch's lr / (1 + it * decay) is Caffe's inv with power 1
        return ['lr_policy: "inv"', f"gamma: {_num(policy['decay'])}", "power: 1.0"]
    if name == "step":
        return ['lr_policy: "step"', f"gamma: {_num(policy['factor'])}", f"stepsize: {int(policy['step_iterations'])}"]
    if name == "multistep":
        return ['lr_policy: "multistep"', f"gamma: {_num(policy['factor'])}",
                *[f"stepvalue: {int(at)}" for at in sorted(policy["at_iterations"])]]
    raise ValueError(f"Caffe adapter: unknown learning-rate policy {name!r}")


def test_interval_of(plan: Plan) -> tuple[int, bool]:
    """(test_interval, whether Caffe's own final test is the final test) for a plan.

    Caffe tests at the top of iterations k * test_interval (0 < k * ti < max_iter) and once
    after its loop if test_interval divides max_iter.
    """
    if plan.test_every is None:
        return plan.total_iterations, True
    return plan.test_every, plan.total_iterations % plan.test_every == 0


def solver_prototxt(point: dict, plan: Plan, net_path: str, test_samples: int | None, snapshot_prefix: str, *,
                    gpu: bool = False, snapshot_after_train: bool = False) -> str:
    lines = [f'net: "{net_path}"']
    if test_samples is not None:
        interval, _ = test_interval_of(plan)
        lines += [f"test_iter: {math.ceil(test_samples / point['test_batch_size'])}", f"test_interval: {interval}",
                  "test_initialization: false"]
    lines += [f"base_lr: {_num(point['learning_rate'])}", *lr_lines(plan.lr_policy)]
    if point["optimizer"] == "adam":
        lines += ['type: "Adam"', "momentum: 0.9", "momentum2: 0.999", "delta: 1e-08"]
    elif point["optimizer"] == "sgd":
        lines += ['type: "SGD"', f"momentum: {_num(point.get('momentum', 0.0))}"]
    else:
        raise ValueError(f"Caffe adapter: unknown optimizer {point['optimizer']!r}")
    lines += [f"weight_decay: {_num(point.get('weight_decay', 0.0))}", 'regularization_type: "L2"',
              f"display: {plan.display_every}", f"average_loss: {plan.display_every}",
              f"max_iter: {plan.total_iterations}", "snapshot: 0",
              f"snapshot_after_train: {'true' if snapshot_after_train else 'false'}",
              f'snapshot_prefix: "{snapshot_prefix}"', "snapshot_format: HDF5",
              f"solver_mode: {'GPU' if gpu else 'CPU'}", f"random_seed: {int(point['seed'])}"]
    return "\n".join(lines) + "\n"


# Caffe prints the outputs of its test net only: an identity Power layer makes the logits an output
# besides the loss, read from its log (6 significant digits: glog's default).
LOGITS_BLOB = "dlbench_logits"


def net_with_logits(layers: list[dict], data_list: str, batch: int, input_shape: tuple[int, int, int],
                    batch_statistics: bool | None = None) -> str:
    """The adapter's net prototxt (TEST phase reads data_list) plus an identity copy of the logits as an output.
    batch_statistics: batch normalisation by the batch's statistics (training mode) in the TEST phase too."""
    net = net_prototxt(layers, data_list, data_list, batch, batch, input_shape=input_shape,
                       batch_statistics=batch_statistics)
    logits = names(layers)[-1][1]  # the last layer is dense and never in place
    if f'top: "{logits}"' not in net:
        raise RuntimeError(f"the Caffe net has no blob {logits!r}")
    extra = _block("layer", [f'name: "{LOGITS_BLOB}"', 'type: "Power"', f'bottom: "{logits}"',
                             f'top: "{LOGITS_BLOB}"', "include { phase: TEST }"])
    return net + "\n".join(extra) + "\n"
