"""The deep models, written here: a GroupNorm ResNet-20 with type-A shortcuts and a small CNN.

ResNet-20 (He et al. 2016, Section 4.2): a 3x3 convolution to 16 channels, three stages of three
basic blocks (16, 32, 64 channels; the second and third start with stride 2), global average
pooling and a linear layer; 0.27M parameters. BatchNorm is replaced by GroupNorm (Wu and He 2018),
as in the paper's Section 4.3, so that one example's gradient does not depend on the others in
its batch (per-example clipping needs that). Type-A shortcuts: the identity, subsampled by the
stride and zero-padded to the new width (no parameters).

Parameters are initialised from an explicit generator (:func:`init_parameters`); modules are built
on the ``meta`` device first so that building one draws nothing from torch's global generator.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["MODEL_NAMES", "ResNet20", "SmallCNN", "build_model", "init_parameters", "count_parameters"]

from .spec import MODEL_NAMES  # declared with the spec (light: the CLI's --help needs no torch)


def _gn(channels: int, groups: int) -> nn.GroupNorm:
    return nn.GroupNorm(min(groups, channels), channels)


class _Block(nn.Module):
    """Basic block: conv-GN-ReLU-conv-GN, plus the type-A shortcut, then ReLU."""

    def __init__(self, cin: int, cout: int, stride: int, groups: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.gn1 = _gn(cout, groups)
        self.conv2 = nn.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.gn2 = _gn(cout, groups)
        self.stride, self.extra = stride, cout - cin

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride != 1:
            x = x[:, :, :: self.stride, :: self.stride]
        if self.extra:
            x = F.pad(x, (0, 0, 0, 0, self.extra // 2, self.extra - self.extra // 2))
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.gn1(self.conv1(x)))
        out = self.gn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet20(nn.Module):
    """ResNet-20 with GroupNorm (``groups`` groups per layer) for ``channels``-channel images."""

    def __init__(self, channels: int = 3, classes: int = 10, groups: int = 8, blocks: int = 3) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, 16, 3, padding=1, bias=False)
        self.gn = _gn(16, groups)
        layers, cin = [], 16
        for width, stride in ((16, 1), (32, 2), (64, 2)):
            for b in range(blocks):
                layers.append(_Block(cin, width, stride if b == 0 else 1, groups))
                cin = width
        self.blocks = nn.Sequential(*layers)
        self.fc = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.gn(self.conv(x)))
        out = self.blocks(out)
        return self.fc(out.mean(dim=(2, 3)))


class SmallCNN(nn.Module):
    """Two stride-2 3x3 convolutions (16, 32 channels) with GroupNorm and ReLU, then a linear layer on
    the flattened maps: ~21k parameters at 28 x 28; trains in seconds on a CPU."""

    def __init__(self, channels: int = 1, classes: int = 10, size: int = 28, groups: int = 4) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 16, 3, stride=2, padding=1)
        self.gn1 = _gn(16, groups)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.gn2 = _gn(32, groups)
        side = (size + 1) // 2
        side = (side + 1) // 2
        self.fc = nn.Linear(32 * side * side, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.gn1(self.conv1(x)))
        x = F.relu(self.gn2(self.conv2(x)))
        return self.fc(x.flatten(1))


def init_parameters(model: nn.Module, generator: torch.Generator) -> nn.Module:
    """He-normal convolutions, uniform linear layers (PyTorch's bound), zero biases, unit GroupNorm
    scales: every draw from ``generator`` (on the model's device), in parameter order."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Conv2d):
                fan_out = module.out_channels * module.kernel_size[0] * module.kernel_size[1]
                w = torch.randn(module.weight.shape, generator=generator, device=module.weight.device)
                module.weight.copy_(w * math.sqrt(2.0 / fan_out))
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, nn.Linear):
                bound = 1.0 / math.sqrt(module.in_features)
                u = torch.rand(module.weight.shape, generator=generator, device=module.weight.device)
                module.weight.copy_((2.0 * u - 1.0) * bound)
                module.bias.zero_()
            elif isinstance(module, nn.GroupNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
    return model


def build_model(name: str, channels: int, classes: int, generator: torch.Generator,
                device: torch.device | str = "cpu", size: int = 28) -> nn.Module:
    """Model ``name`` (one of :data:`MODEL_NAMES`) for ``size`` x ``size`` images with ``channels``
    channels, on ``device``, initialised from ``generator``."""
    if name not in MODEL_NAMES:
        raise ValueError(f"model must be one of {', '.join(MODEL_NAMES)}, got {name!r}")
    if isinstance(channels, bool) or not isinstance(channels, int) or channels not in (1, 3):
        raise ValueError(f"channels must be 1 or 3, got {channels!r}")
    with torch.device("meta"):
        model = ResNet20(channels, classes) if name == "resnet20" else SmallCNN(channels, classes, size)
    model = model.to_empty(device=device)
    return init_parameters(model, generator)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
