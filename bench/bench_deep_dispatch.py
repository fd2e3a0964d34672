"""A run of private DP-SGD steps of a deep model on fixed inputs, for whole-process A/B timings of two versions of
privcore (docs/benchmarks.md, "Deep models: operations per step"):

    farm-bench -n 11 --vs 'env PYTHONPATH=OLD python bench/bench_deep_dispatch.py resnet20 2 60' \\
        -- env PYTHONPATH=NEW python bench/bench_deep_dispatch.py resnet20 2 60
    # where dispatch dominates: 8 x 8 images, batch 1
    ... bench/bench_deep_dispatch.py resnet20 1 300 8

Arguments: model (resnet20, small-cnn), batch, steps, and optionally the image size (default 32 for ResNet-20,
28 for the small CNN). One torch thread; the mixed clipping route, noise, scaling and the momentum step.
"""

from __future__ import annotations

import sys

import torch

from privcore.deep.dpsgd import add_noise, clipped_sum, scale
from privcore.deep.loop import momentum_step
from privcore.deep.models import build_model


def main() -> None:
    name, batch, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    channels, size = (3, 32) if name == "resnet20" else (1, 28)
    size = int(sys.argv[4]) if len(sys.argv) > 4 else size
    torch.set_num_threads(1)
    model = build_model(name, channels, 10, torch.Generator().manual_seed(0), size=size)
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    buf = {k: torch.zeros_like(v) for k, v in params.items()}
    x, y = torch.randn(batch, channels, size, size), torch.randint(0, 10, (batch,))
    gen = torch.Generator().manual_seed(1)
    for _ in range(steps):
        summed, _ = clipped_sum(model, params, {}, x, y, 1.0, "mixed")
        momentum_step(params, scale(add_noise(summed, 1.0, gen), float(batch)), buf, 0.05, 0.9)


if __name__ == "__main__":
    main()
