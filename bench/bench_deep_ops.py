"""Operations one DP-SGD step of the deep models dispatches (counted on the CPU; a GPU step of these small
models is bound by their launches, docs/benchmarks.md).

    python bench/bench_deep_ops.py            # ResNet-20 and the small CNN, batch 8, the mixed route

Counts every ``aten`` operation of one step with a ``TorchDispatchMode``: the clipped sum (forward, backward,
norms, sums), the noise and scaling, the momentum step, and the non-private step (forward, backward,
momentum). "kernels" leaves out views, detaches and selects, which launch nothing.
"""

from __future__ import annotations

import argparse
import collections

import torch
from torch.func import functional_call
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from privcore.deep.dpsgd import add_noise, clipped_sum, scale
from privcore.deep.loop import momentum_step
from privcore.deep.models import build_model

#: Operations that only reinterpret memory (no kernel on a GPU).
VIEWS = frozenset({"aten.detach", "aten.view", "aten.select", "aten.unsqueeze", "aten.squeeze_", "aten.expand",
                   "aten.t", "aten.transpose", "aten.slice", "aten.promote_types", "aten._unsafe_view", "aten.alias",
                   "aten.split", "aten.split_with_sizes", "aten.as_strided", "aten.reshape", "aten.permute"})


class Count(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))

    def counts(self) -> tuple[int, int]:
        return sum(self.ops.values()), sum(v for op, v in self.ops.items() if op not in VIEWS)


def count_step(name: str, batch: int, clipping: str) -> dict[str, tuple[int, int]]:
    channels, size = (3, 32) if name == "resnet20" else (1, 28)
    model = build_model(name, channels, 10, torch.Generator().manual_seed(0), size=size)
    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    buf = {k: torch.zeros_like(v) for k, v in params.items()}
    x, y = torch.randn(batch, channels, size, size), torch.randint(0, 10, (batch,))
    out = {}
    with Count() as c:
        summed, _ = clipped_sum(model, params, {}, x, y, 1.0, clipping)
    out["clipped sum"] = c.counts()
    with Count() as c:
        noisy = scale(add_noise(summed, 1.0, torch.Generator().manual_seed(1)), float(batch))
    out["noise and scaling"] = c.counts()
    with Count() as c:
        momentum_step(params, noisy, buf, 0.05, 0.9)
    out["momentum step"] = c.counts()
    out["private step"] = tuple(sum(v[i] for v in out.values()) for i in (0, 1))
    live = {k: v.detach().clone().requires_grad_(True) for k, v in model.named_parameters()}
    np_buf = {k: torch.zeros_like(v) for k, v in live.items()}
    with Count() as c:
        loss = F.cross_entropy(functional_call(model, live, (x,)), y, reduction="sum")
        grads = torch.autograd.grad(loss, list(live.values()))
        with torch.no_grad():
            momentum_step(live, {k: g / batch for k, g in zip(live, grads)}, np_buf, 0.05, 0.9)
    out["non-private step"] = c.counts()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet20,small-cnn")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--clipping", default="mixed", choices=("mixed", "ghost", "torch-func"))
    args = p.parse_args()
    torch.set_num_threads(1)
    counts = {name: count_step(name, args.batch, args.clipping) for name in args.models.split(",")}
    names = list(counts)
    print(f"operations (kernels) per step, batch {args.batch}, clipping {args.clipping}\n")
    print("| step part | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for part in next(iter(counts.values())):
        print(f"| {part} | " + " | ".join(f"{counts[n][part][0]:,} ({counts[n][part][1]:,})" for n in names) + " |")


if __name__ == "__main__":
    main()
