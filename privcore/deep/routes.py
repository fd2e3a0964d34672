"""Which route each convolution's per-example norm takes: ghost norm or per-example gradients, by cost.

Mixed ghost clipping (Bu, Mao and Xu, "Scalable and efficient training of large convolutional neural
networks with differential privacy", NeurIPS 2022): for a Conv2d layer with T output positions,
d = C_in k k inputs per position and p = C_out outputs, example i's weight gradient is
g_i = b_i a_i^T with a_i unfolded to [d, T] and b_i to [p, T]. Its squared norm can be had

- by the ghost norm <a_i^T a_i, b_i^T b_i>: two T x T Gram matrices, about 2 B T^2 (d + p) operations for
  a batch of B, memory B T^2; or
- from the per-example gradients g_i themselves: about 2 B T d p operations, memory B d p,

and each layer takes the cheaper (:func:`conv_route`). The two give the same norm in exact arithmetic;
the choice moves only time and memory (tests/deep/test_deep_routes.py checks every route against a
float64 loop over examples). Where the spatial size is small against the channels (T (d + p) < d p,
late ResNet stages on small images) the ghost norm wins; on the paper's 32 x 32 and 28 x 28 images
every layer of ResNet-20 and of the small CNN is cheaper by per-example gradients (:func:`layer_plan`
lists the choice and the two costs of every layer, ``bench/bench_deep.py --plan`` prints it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["ConvShape", "conv_route", "layer_plan", "GRAM_CHUNK_ELEMENTS"]

#: Largest number of Gram-matrix entries (examples x T x T) formed at once on the ghost-norm route: the
#: batch is split into chunks below it, so memory stays bounded as the batch grows (2^26 float32 entries
#: = 256 MiB per matrix).
GRAM_CHUNK_ELEMENTS = 1 << 26


@dataclass(frozen=True)
class ConvShape:
    """One convolution as the cost model sees it: T output positions, d = C_in k k, p = C_out."""

    T: int
    d: int
    p: int

    def ghost_cost(self, batch: int) -> int:
        """Multiply-adds x 2 of the ghost norm: two T x T Gram matrices per example."""
        return 2 * batch * self.T * self.T * (self.d + self.p)

    def per_example_cost(self, batch: int) -> int:
        """Multiply-adds x 2 of forming every example's weight gradient [p, d]."""
        return 2 * batch * self.T * self.d * self.p

    @property
    def route(self) -> str:
        return conv_route(self.T, self.d, self.p)


def conv_route(T: int, d: int, p: int) -> str:
    """"ghost" when 2 B T^2 (d + p) < 2 B T d p (the batch cancels), else "per-example" (ties too: its
    norm and clipped sum come from one tensor, and it needs no second weight-gradient pass)."""
    for name, value in (("T", T), ("d", d), ("p", p)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return "ghost" if T * (d + p) < d * p else "per-example"


def conv_shape(module: nn.Conv2d, output: torch.Tensor | torch.Size) -> ConvShape:
    """The :class:`ConvShape` of ``module`` given its output (or the output's shape) [B, C_out, H, W]."""
    shape = output.shape if isinstance(output, torch.Tensor) else output
    T = int(shape[-1]) * int(shape[-2])
    return ConvShape(T, module.in_channels // module.groups * module.kernel_size[0] * module.kernel_size[1],
                     module.out_channels)


@dataclass(frozen=True)
class LayerRoute:
    name: str
    shape: ConvShape
    route: str


def layer_plan(model: nn.Module, input_shape: tuple[int, ...]) -> list[LayerRoute]:
    """Every Conv2d of ``model`` with its shape and route for images of ``input_shape`` (C, H, W), in call
    order (one forward of a meta tensor: nothing is computed)."""
    names = {m: n for n, m in model.named_modules() if isinstance(m, nn.Conv2d)}
    seen: list[LayerRoute] = []

    def hook(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        shape = conv_shape(module, output)
        seen.append(LayerRoute(names[module], shape, shape.route))

    handles = [m.register_forward_hook(hook) for m in names]
    try:
        params = {k: torch.empty_like(v, device="meta") for k, v in model.named_parameters()}
        buffers = {k: torch.empty_like(v, device="meta") for k, v in model.named_buffers()}
        with torch.no_grad():
            torch.func.functional_call(model, (params, buffers), (torch.empty(1, *input_shape, device="meta"),))
    finally:
        for h in handles:
            h.remove()
    return seen
