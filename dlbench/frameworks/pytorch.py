"""PyTorch: an nn.Module built from the spec and a tight training loop.

The weights keep PyTorch's default layout (contiguous, NCHW), as a PyTorch user gets them.
`memory_format: channels_last` lays the network's 4-d weights out channels last (torch.channels_last), an
opt-in under which oneDNN's convolutions and pooling run without reordering between layers (about 1.45x the
throughput for LeNet on the CPU: bench/adapter_speed.py, docs/performance.md). The data stay NCHW: the first
convolution takes them as they are, and Flatten gives the dense layers the same order as in NCHW, so the
arithmetic is the network's. A network without 4-d weights has nothing to lay out: it runs contiguous.

A sparse convolution (a conv with a connection table) is a Conv2d whose weight is multiplied by the
table's 0/1 mask in every forward pass. The unconnected weights start at 0 and, the product
rule giving them a gradient of exactly 0, stay 0 whatever the optimizer (momentum, weight decay
and Adam of a zero with a zero gradient are zero), and even if one moved it could not act.

`compile: compiled`: the training step's forward pass and loss go through torch.compile (the default
inductor back end: C++ kernels compiled with the machine's g++), and so does their backward pass
(AOTAutograd); the optimizer's update runs as in eager mode. The `compile` phase runs one step on the
first batch, forward, backward and the optimizer at learning rate 0, then puts back the optimizer's
state and the random state, so that nothing is updated and the compilation is timed apart from the
training. A GPU point takes that step in eager mode too (stepped.warms_up). Testing runs the same module
eagerly.
`precision: bf16`: the forward passes run under torch.autocast with bfloat16 (convolutions and
matrix products in bfloat16, oneDNN's native kernels where the CPU has AVX-512 BF16 or AMX); the
parameters, gradients and optimizer stay float32, and the loss is taken on float32 logits.
`precision: fp64`: the module, its data, gradients, optimizer and moving average in float64 (Torch7's
default tensor type, in which the study's Torch scripts trained).

A transformer's layers (networks.py): the position embedding a module adding its parameter to the conv's maps
flattened to tokens; layer normalisation PyTorch's LayerNorm with the spec's epsilon; attention four Linear
projections around F.scaled_dot_product_attention with the spec's scale; GELU PyTorch's exact one.
`optimizer: adamw` is torch.optim.AdamW (Loshchilov and Hutter's decoupled weight decay, each parameter's decay
multiplied by its group's rate).

Batch normalisation is PyTorch's BatchNorm2d with momentum = 1 - the spec's decay (networks.py: PyTorch's
running variance follows the unbiased batch variance, the spec's definition as it stands); a residual block
is a module adding its body's and its shortcut's outputs (an empty shortcut: the identity); global average
pooling the mean over H and W. The untimed step of the `compile` phase puts the running statistics back too.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dlbench.frameworks.base import initial_weights, no_gpu, parameter_groups
from dlbench.frameworks.stepped import SteppedAdapter, ema_rate, warms_up
from dlbench.record.fields import Info
from dlbench.spec import networks
from dlbench.spec.initial_weights import connection_mask


class MaskedConv2d(nn.Conv2d):
    """A sparse convolution: the weight times the connection table's mask, (out, in, 1, 1), in every pass."""

    def __init__(self, planes_in: int, layer: dict):
        super().__init__(planes_in, layer["filters"], layer["kernel"], layer.get("stride", 1), layer.get("pad", 0))
        self.register_buffer("mask", torch.from_numpy(connection_mask(layer, planes_in)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(x, self.weight * self.mask, self.bias)

    def connected_weights(self) -> int:
        return int(self.mask.sum()) * self.kernel_size[0] * self.kernel_size[1]


class Residual(nn.Module):
    """A residual block: body(x) + shortcut(x); an empty shortcut (an empty nn.Sequential) is the identity."""

    def __init__(self, body: nn.Sequential, shortcut: nn.Sequential):
        super().__init__()
        self.body, self.shortcut = body, shortcut  # registered in this order: modules() walks the spec's order

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) + self.shortcut(x)


class GlobalAvgPool(nn.Module):
    """The mean over H and W of maps (N, C, H, W), or over the tokens of a sequence (N, T, D)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=(2, 3)) if x.dim() == 4 else x.mean(dim=1)


class Tokens(nn.Module):
    """A conv's maps (N, C, H, W) as H * W tokens of C features, row by row, plus the learned position embedding."""

    def __init__(self, count: int, dim: int):
        super().__init__()
        self.pos = nn.Parameter(torch.zeros(count, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(2).transpose(1, 2) + self.pos


class Attention(nn.Module):
    """Multi-head self-attention (networks.py): q, k and v projections, PyTorch's fused scaled_dot_product_attention
    with the spec's scale, the output projection (as timm's ViT Attention, with q, k, v apart)."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.scale = heads, networks.attention_scale(dim, heads)
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        q, k, v = (proj(x).view(n, t, self.heads, d // self.heads).transpose(1, 2) for proj in (self.q, self.k, self.v))
        out = F.scaled_dot_product_attention(q, k, v, scale=self.scale)
        return self.o(out.transpose(1, 2).reshape(n, t, d))

    def arrays(self) -> list[torch.Tensor]:
        return [t for proj in (self.q, self.k, self.v, self.o) for t in (proj.weight, proj.bias)]


UNITS = (nn.Conv2d, nn.Linear, nn.BatchNorm2d, nn.LayerNorm, Tokens, Attention)  # a parametrised layer of the spec


def build_module(layers: list[dict], input_shape: tuple[int, int, int]) -> nn.Sequential:
    """The spec as an nn.Sequential (its weights as PyTorch draws them: load_weights sets the point's)."""
    mods: list[nn.Module] = []
    prev = input_shape
    for layer, shape in zip(layers, networks.shapes(layers, input_shape)):
        kind = layer["type"]
        if kind == "conv" and "table" in layer:
            mods.append(MaskedConv2d(prev[0], layer))
        elif kind == "conv":
            mods.append(nn.Conv2d(prev[0], layer["filters"], layer["kernel"], layer.get("stride", 1),
                                  layer.get("pad", 0), bias=networks.has_bias(layer)))
        elif kind == "batchnorm":
            mods.append(nn.BatchNorm2d(prev[0], eps=layer["eps"], momentum=1.0 - layer["decay"]))
        elif kind == "residual":
            mods.append(Residual(build_module(layer["body"], prev), build_module(layer["shortcut"], prev)))
        elif kind == "gap":
            mods.append(GlobalAvgPool())
        elif kind == "pool":
            cls = nn.MaxPool2d if layer["mode"] == "max" else nn.AvgPool2d
            mods.append(cls(layer["kernel"], layer["stride"], layer.get("pad", 0), ceil_mode=True))
        elif kind == "dense":
            if len(prev) == 3:
                mods.append(nn.Flatten())
            mods.append(nn.Linear(networks.fan_in(layer, prev), layer["units"]))  # on tokens: on each token
        elif kind == "tokens":
            mods.append(Tokens(shape[0], shape[1]))
        elif kind == "layernorm":
            mods.append(nn.LayerNorm(prev[-1], eps=layer["eps"]))
        elif kind == "attention":
            mods.append(Attention(prev[-1], layer["heads"]))
        elif kind == "gelu":
            mods.append(nn.GELU())  # the exact form (erf), PyTorch's default
        elif kind == "relu":
            mods.append(nn.ReLU())
        elif kind == "tanh":
            mods.append(nn.Tanh())
        elif kind == "sigmoid":
            mods.append(nn.Sigmoid())
        elif kind == "dropout":
            mods.append(nn.Dropout(layer["rate"]))
        elif kind == "lrn":
            mods.append(nn.LocalResponseNorm(layer["size"], layer["alpha"], layer["beta"], layer.get("k", 1.0)))
        else:
            raise networks.SpecError(f"PyTorch adapter: unknown layer type {kind!r}")
        prev = shape
    return nn.Sequential(*mods)


def trainable_modules(model: nn.Module) -> list[nn.Module]:
    """The modules of the spec's parametrised layers in the spec's order (networks.trainable: residual blocks depth
    first); an attention layer is one (its four projections are its arrays)."""
    out = []
    for m in model.children():
        out += [m] if isinstance(m, UNITS) else trainable_modules(m)
    return out


def trained_tensors(mod: nn.Module) -> list[torch.Tensor]:
    """The module's parameters in the canonical order: weight (or gamma), then bias (or beta) where it has one; a
    position embedding's pos; an attention's Wq bq Wk bk Wv bv Wo bo."""
    if isinstance(mod, Tokens):
        return [mod.pos]
    if isinstance(mod, Attention):
        return mod.arrays()
    return [mod.weight] + ([mod.bias] if mod.bias is not None else [])


def canonical_tensors(mod: nn.Module) -> list[torch.Tensor]:
    """Its canonical arrays (networks.arrays): the parameters, and a batchnorm's running mean and variance."""
    extra = [mod.running_mean, mod.running_var] if isinstance(mod, nn.BatchNorm2d) else []
    return trained_tensors(mod) + extra


def load_weights(model: nn.Module, weights: list[tuple[np.ndarray, ...]]) -> None:
    """Canonical arrays per conv, dense and batchnorm layer into the module: PyTorch's own layout, nothing to
    convert."""
    mods = trainable_modules(model)
    assert len(mods) == len(weights), (len(mods), len(weights))
    with torch.no_grad():
        for mod, arrays in zip(mods, weights):
            tensors = canonical_tensors(mod)
            assert len(tensors) == len(arrays), (mod, len(arrays))
            for t, a in zip(tensors, arrays):
                t.copy_(torch.from_numpy(np.asarray(a)))


def count_params(model: nn.Module) -> int:
    """Trainable parameters; a masked convolution counts its connected weights only."""
    n = 0
    for mod in trainable_modules(model):
        tensors = trained_tensors(mod)
        n += mod.connected_weights() if isinstance(mod, MaskedConv2d) else tensors[0].numel()
        n += sum(t.numel() for t in tensors[1:])
    return n


def blas_info() -> str:
    for line in torch.__config__.show().splitlines():
        if "BLAS_INFO" in line:
            return line.split("BLAS_INFO=")[-1].split(",")[0].strip()
    return "unknown"


def memory_format_of(model: nn.Module) -> str:
    """The layout of a module's 4-d weights, read from them: channels_last or contiguous (also where it has none)."""
    weights = [t for t in model.parameters() if t.dim() == 4]
    # a 1x1 kernel's weight is both at once: it is channels last only beside one that tells the layouts apart
    if (weights and all(t.is_contiguous(memory_format=torch.channels_last) for t in weights)
            and not all(t.is_contiguous() for t in weights)):
        return "channels_last"
    return "contiguous"


class TorchAdapter(SteppedAdapter):
    @staticmethod
    def versions() -> dict:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        return {"framework_version": torch.__version__, "cuda_version": torch.version.cuda,
                "cudnn_version": str(cudnn) if cudnn else None}

    def prepare(self) -> None:
        point = self.point
        self.compiled = point.get("compile") == "compiled"
        self.bf16 = point.get("precision") == "bf16"
        self.dtype = torch.float64 if point.get("precision") == "fp64" else torch.float32
        self.channels_last = point.get("memory_format") == "channels_last"  # an opt-in: never by default
        torch.manual_seed(point["seed"])
        torch.set_num_threads(point["threads"])
        if point.get("library") == "no_onednn":
            torch.backends.mkldnn.enabled = False
        if point["device"] == "gpu":
            if not torch.cuda.is_available():
                raise no_gpu(bool(torch.version.cuda), "no CUDA device is visible to PyTorch "
                             f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'none'})")
            self.device = torch.device("cuda", 0)
        else:
            self.device = torch.device("cpu")

    def info(self) -> Info:
        gpu = torch.cuda.get_device_name(0) if self.device.type == "cuda" else None
        return {
            "framework": "pytorch",
            "framework_version": torch.__version__,
            "numpy_version": np.__version__,
            "blas": blas_info(),
            "build": {"mkldnn": torch.backends.mkldnn.is_available(), "mkl": torch.backends.mkl.is_available(),
                      "openmp": torch.backends.openmp.is_available(), "cuda": torch.version.cuda,
                      "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None},
            "threads_in_effect": torch.get_num_threads(),
            "interop_threads_in_effect": torch.get_num_interop_threads(),
            "library_in_effect": "mkldnn" if torch.backends.mkldnn.enabled and torch.backends.mkldnn.is_available()
            else "native",
            "device_name": gpu or "cpu",
            "compile_in_effect": "torch.compile (inductor)" if self.compiled else "eager",
            "precision_in_effect": self._precision_in_effect(),
        }

    def _autocast(self):
        """Mixed precision for the forward passes of a bf16 point; nothing otherwise."""
        if self.bf16:
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _precision_in_effect(self) -> str:
        """What a matrix product computes in under this point's autocast, on parameters of its dtype."""
        weight = torch.ones(2, 2, device=self.device, dtype=self.dtype)
        with self._autocast():
            computed = F.linear(torch.ones(1, 2, device=self.device, dtype=self.dtype), weight).dtype
        return f"{str(computed).removeprefix('torch.')} compute, {str(weight.dtype).removeprefix('torch.')} weights"

    def _loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = self.model(x)
        return F.cross_entropy(logits.float() if self.bf16 else logits, y)

    def build(self) -> None:
        p = self.point
        model = build_module(p["layers"], self.inputs.shape)
        load_weights(model, initial_weights(p, self.inputs.shape))
        self.model = model.to(self.device, self.dtype)
        if self.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        self.reporter.emit("info", memory_format_in_effect=memory_format_of(self.model))  # as built, before training
        # One parameter group per parameter: the spec's lr and decay multipliers (W0, b0, W1, b1, ...).
        params = [t for m in trainable_modules(self.model) for t in trained_tensors(m)]
        groups = [{"params": [t], "lr_mult": lr_mult, "weight_decay": p["weight_decay"] * decay_mult}
                  for t, (lr_mult, decay_mult) in zip(params, parameter_groups(p["layers"]))]
        if p["optimizer"] == "adam":
            self.opt = torch.optim.Adam(groups, lr=p["learning_rate"], eps=1e-8)
        elif p["optimizer"] == "adamw":  # decoupled decay: w -= lr x weight_decay x w, beside Adam's step
            self.opt = torch.optim.AdamW(groups, lr=p["learning_rate"], eps=1e-8)
        else:
            self.opt = torch.optim.SGD(groups, lr=p["learning_rate"], momentum=p["momentum"])
        self.names = [name for name, _ in self.model.named_parameters()]
        self.ema = [t.detach().clone() for t in self.model.parameters()] if p.get("ema_decay") else None
        self.ema_updates = 0
        inputs = self.inputs
        splits = {"train": (inputs.train_x, inputs.train_y), "test": (inputs.test_x, inputs.test_y)}
        if inputs.val_y is not None:
            splits["validation"] = (inputs.val_x, inputs.val_y)
        self.data = {k: (torch.from_numpy(x).to(self.device, self.dtype), torch.from_numpy(y).to(self.device))
                     for k, (x, y) in splits.items()}
        self.train_x, self.train_y = self.data["train"]
        self.loss_sum = torch.zeros((), device=self.device, dtype=self.dtype)
        self.loss_n = 0
        self.model.train()
        self.loss_fn = self._loss

    def compile(self) -> None:
        if self.compiled:
            self.loss_fn = torch.compile(self._loss)
        if self.compiled or warms_up(self.point):
            self._untimed_step()

    def _untimed_step(self) -> None:
        """One step that changes nothing: it compiles the step of a compiled point and pays a GPU's one-time
        costs. At learning rate 0 the optimizer leaves every weight as it is (its update is scaled by it);
        its state (momentum, Adam's moments), the gradients and the random state are then put back."""
        cuda = [self.device.index or 0] if self.device.type == "cuda" else []
        buffers = {name: b.detach().clone() for name, b in self.model.named_buffers()}  # batchnorm's statistics
        with torch.random.fork_rng(devices=cuda):
            idx = torch.arange(self.point["batch_size"], device=self.device) % len(self.train_y)
            with self._autocast():
                loss = self.loss_fn(self.train_x[idx], self.train_y[idx])
            loss.backward()
            rates = [group["lr"] for group in self.opt.param_groups]
            for group in self.opt.param_groups:
                group["lr"] = 0.0
            self.opt.step()
            for group, rate in zip(self.opt.param_groups, rates):
                group["lr"] = rate
            self.opt.zero_grad(set_to_none=True)
            self.opt.state.clear()
            with torch.no_grad():
                for name, b in self.model.named_buffers():
                    b.copy_(buffers[name])
            self.sync()

    def train_step(self, batch: np.ndarray, lr: float) -> None:
        idx = torch.from_numpy(batch).to(self.device, non_blocking=True)
        for group in self.opt.param_groups:
            group["lr"] = lr * group["lr_mult"]
        with self._autocast():
            loss = self.loss_fn(self.train_x[idx], self.train_y[idx])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        if self.ema is not None:
            self.ema_updates += 1
            weight = 1.0 - ema_rate(self.point["ema_decay"], self.ema_updates)
            with torch.no_grad():
                for shadow, param in zip(self.ema, self.model.parameters()):
                    shadow.lerp_(param, weight)  # shadow -= (1 - decay) * (shadow - param)
        self.loss_sum += loss.detach()
        self.loss_n += 1

    def take_loss(self) -> float:
        mean = float(self.loss_sum) / max(1, self.loss_n)
        self.loss_sum.zero_()
        self.loss_n = 0
        return mean

    @torch.no_grad()
    def evaluate(self, split: str = "test") -> tuple[float, float]:
        self.model.eval()
        xs, ys = self.data[split]
        weights = dict(zip(self.names, self.ema)) if self.ema is not None else None
        correct, loss_sum = 0, 0.0
        n = len(ys)
        bs = self.point["test_batch_size"]
        for start in range(0, n, bs):
            x = xs[start:start + bs]
            with self._autocast():
                logits = self.model(x) if weights is None else torch.func.functional_call(self.model, weights, (x,))
            logits = logits.float() if self.bf16 else logits
            y = ys[start:start + bs]
            loss_sum += float(F.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(1) == y).sum())
        self.model.train()
        return correct / n, loss_sum / n

    def weights(self):
        return [tuple(t.detach().cpu().contiguous().numpy().copy() for t in canonical_tensors(m))
                for m in trainable_modules(self.model)]

    def _judged(self) -> list[torch.Tensor]:
        """The tensors evaluate() reads: the moving average where there is one, else the parameters."""
        return self.ema if self.ema is not None else list(self.model.parameters())

    def keep_best(self) -> None:
        self.best = [t.detach().clone() for t in self._judged()]

    def restore_best(self) -> None:
        with torch.no_grad():
            for t, kept in zip(self._judged(), self.best):
                t.copy_(kept)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def set_train_data(self, x: np.ndarray) -> None:
        self.train_x = torch.from_numpy(x).to(self.device, self.dtype)

    @staticmethod
    def forward(layers, weights, x, y, train=False):
        """(`train`: batch normalisation by the batch's statistics; dropout stays off.)"""
        torch.set_num_threads(1)
        model = build_module(layers, x.shape[1:])
        load_weights(model, weights)
        with torch.no_grad():
            model.eval()
            for mod in model.modules():
                if train and isinstance(mod, nn.BatchNorm2d):
                    mod.train()
            logits = model(torch.from_numpy(x))
            loss = F.cross_entropy(logits, torch.from_numpy(y))
        return logits.numpy(), float(loss)

    @staticmethod
    def train_then_infer(layers, weights, x, y):
        """A training-mode pass (batch normalisation by the batch's statistics, updating the running ones as
        BatchNorm2d does), then an inference-mode pass with what it left: (train logits, inference logits, the
        canonical arrays after them)."""
        torch.set_num_threads(1)
        model = build_module(layers, x.shape[1:])
        load_weights(model, weights)
        with torch.no_grad():
            model.train()
            trained = model(torch.from_numpy(x)).numpy()
            model.eval()
            inferred = model(torch.from_numpy(x)).numpy()
        after = [tuple(t.detach().numpy().copy() for t in canonical_tensors(m)) for m in trainable_modules(model)]
        return trained, inferred, after

    @staticmethod
    def params(layers, input_shape):
        return count_params(build_module(layers, tuple(input_shape)))


ADAPTER = TorchAdapter
