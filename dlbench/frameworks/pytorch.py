"""PyTorch: an nn.Module built from the spec and a tight training loop.

On the CPU with oneDNN (mkldnn) on, a convolutional network's weights are laid out channels last
(torch.channels_last): oneDNN's convolutions and pooling then run without reordering between
layers, about 1.5x faster for LeNet on one core than the default layout (bench/adapter_speed.py,
docs/performance.md). The data stay NCHW: the first convolution takes them as they are, and
Flatten gives the dense layers the same order as in NCHW, so the arithmetic is the network's.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from dlbench import models
from dlbench.frameworks.base import SteppedAdapter, Unavailable


def build_module(layers: list[dict], input_shape: tuple[int, int, int]) -> nn.Sequential:
    mods: list[nn.Module] = []
    prev = input_shape
    for layer, shape in zip(layers, models.shapes(layers, input_shape)):
        kind = layer["type"]
        if kind == "conv":
            mods.append(nn.Conv2d(prev[0], layer["filters"], layer["kernel"], layer.get("stride", 1),
                                  layer.get("pad", 0)))
        elif kind == "pool":
            cls = nn.MaxPool2d if layer["mode"] == "max" else nn.AvgPool2d
            mods.append(cls(layer["kernel"], layer["stride"], layer.get("pad", 0), ceil_mode=True))
        elif kind == "dense":
            if len(prev) == 3:
                mods.append(nn.Flatten())
            mods.append(nn.Linear(int(np.prod(prev)), layer["units"]))
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
            raise models.SpecError(f"PyTorch adapter: unknown layer type {kind!r}")
        prev = shape
    net = nn.Sequential(*mods)
    for mod in net:
        if isinstance(mod, (nn.Conv2d, nn.Linear)):
            limit = models.xavier_limit(mod.weight[0].numel())
            nn.init.uniform_(mod.weight, -limit, limit)
            nn.init.zeros_(mod.bias)
    return net


def blas_info() -> str:
    for line in torch.__config__.show().splitlines():
        if "BLAS_INFO" in line:
            return line.split("BLAS_INFO=")[-1].split(",")[0].strip()
    return "unknown"


class TorchAdapter(SteppedAdapter):
    @staticmethod
    def versions() -> dict:
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        return {"framework_version": torch.__version__, "cuda_version": torch.version.cuda,
                "cudnn_version": str(cudnn) if cudnn else None}

    def prepare(self) -> None:
        point = self.point
        torch.manual_seed(point["seed"])
        torch.set_num_threads(point["threads"])
        if point.get("library") == "no_onednn":
            torch.backends.mkldnn.enabled = False
        if point["device"] == "gpu":
            if not torch.cuda.is_available():
                raise Unavailable("no CUDA device is visible to PyTorch "
                                  f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'none'})")
            self.device = torch.device("cuda", 0)
        else:
            self.device = torch.device("cpu")

    def load(self):
        loaded = super().load()
        # Channels last pays off only where oneDNN runs the convolutions (with mkldnn off, PyTorch's own
        # kernels are a little slower in it), and only for image inputs.
        self.channels_last = (self.device.type == "cpu" and len(self.inputs.shape) == 3
                              and torch.backends.mkldnn.enabled and torch.backends.mkldnn.is_available())
        return loaded

    def info(self) -> dict:
        gpu = torch.cuda.get_device_name(0) if self.device.type == "cuda" else None
        return {
            "framework": "pytorch",
            "framework_version": torch.__version__,
            "numpy_version": np.__version__,
            "blas": blas_info(),
            "build": {"mkldnn": torch.backends.mkldnn.is_available(), "mkl": torch.backends.mkl.is_available(),
                      "openmp": torch.backends.openmp.is_available(), "cuda": torch.version.cuda,
                      "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
                      "memory_format": "channels_last" if self.channels_last else "contiguous"},
            "threads_in_effect": torch.get_num_threads(),
            "interop_threads_in_effect": torch.get_num_interop_threads(),
            "library_in_effect": "mkldnn" if torch.backends.mkldnn.enabled and torch.backends.mkldnn.is_available()
            else "native",
            "device_name": gpu or "cpu",
        }

    def build(self) -> None:
        p = self.point
        self.model = build_module(p["layers"], self.inputs.shape).to(self.device)
        if self.channels_last:
            self.model = self.model.to(memory_format=torch.channels_last)
        if p["optimizer"] == "adam":
            self.opt = torch.optim.Adam(self.model.parameters(), lr=p["learning_rate"], eps=1e-8,
                                        weight_decay=p["weight_decay"])
        else:
            self.opt = torch.optim.SGD(self.model.parameters(), lr=p["learning_rate"], momentum=p["momentum"],
                                       weight_decay=p["weight_decay"])
        self.train_x = torch.from_numpy(self.inputs.train_x).to(self.device)
        self.train_y = torch.from_numpy(self.inputs.train_y).to(self.device)
        self.test_x = torch.from_numpy(self.inputs.test_x).to(self.device)
        self.test_y = torch.from_numpy(self.inputs.test_y).to(self.device)
        self.loss_sum = torch.zeros((), device=self.device)
        self.loss_n = 0
        self.model.train()

    def train_step(self, batch: np.ndarray, lr: float) -> None:
        idx = torch.from_numpy(batch).to(self.device, non_blocking=True)
        for group in self.opt.param_groups:
            group["lr"] = lr
        loss = F.cross_entropy(self.model(self.train_x[idx]), self.train_y[idx])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.loss_sum += loss.detach()
        self.loss_n += 1

    def take_loss(self) -> float:
        mean = float(self.loss_sum) / max(1, self.loss_n)
        self.loss_sum.zero_()
        self.loss_n = 0
        return mean

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        self.model.eval()
        correct, loss_sum = 0, 0.0
        n = len(self.test_y)
        bs = self.point["test_batch_size"]
        for start in range(0, n, bs):
            logits = self.model(self.test_x[start:start + bs])
            y = self.test_y[start:start + bs]
            loss_sum += float(F.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(1) == y).sum())
        self.model.train()
        return correct / n, loss_sum / n

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def set_train_data(self, x: np.ndarray) -> None:
        self.train_x = torch.from_numpy(x).to(self.device)

    @staticmethod
    def forward(layers, weights, x, y):
        torch.set_num_threads(1)
        model = build_module(layers, x.shape[1:])
        params = [m for m in model if isinstance(m, (nn.Conv2d, nn.Linear))]
        assert len(params) == len(weights), (len(params), len(weights))
        with torch.no_grad():
            for mod, (w, b) in zip(params, weights):
                mod.weight.copy_(torch.from_numpy(w))
                mod.bias.copy_(torch.from_numpy(b))
            model.eval()
            logits = model(torch.from_numpy(x))
            loss = F.cross_entropy(logits, torch.from_numpy(y))
        return logits.numpy(), float(loss)


ADAPTER = TorchAdapter
