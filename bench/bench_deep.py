"""Deep models: DP-SGD throughput against Opacus, teachers vmapped against a loop, the
small preset end to end.

    OMP_NUM_THREADS=1 python bench/bench_deep.py                    # CPU, small CNN + ResNet-20
    python bench/bench_deep.py --device cuda --batch 600            # on a GPU
    python bench/bench_deep.py --skip-preset --models resnet20      # one part only

1. DP-SGD step throughput (examples/s) on one fixed batch: ours by book-keeping ghost clipping
   (``ghost``: one forward and one backward pass, per-layer norms, no per-example gradients of the
   model) and by torch.func (``torch_func``: vmap(grad) with functional_call), each with clip, sum,
   Gaussian noise and momentum step, against Opacus' GradSampleModule with its standard hooks
   (forward, backward, per-sample gradients from ``grad_sample``, the same clip, noise and step),
   same model, batch and device, interleaved round by round; medians. ``non_private`` (forward and
   backward of the summed loss and the momentum step, no clipping or noise) is the floor that no
   per-example clipping can beat. ``--channels-last`` adds
   the ghost step with channels-last input and weights; ``--gpu-variants`` (CUDA) ghost clipping's
   routes and bf16 autocast, and the norms and sums left to TF32 (unsound, see privcore/precision.py).
   Opacus runs with PyTorch's default flags (cuDNN may use TF32). (torch.compile of the forward is not
   offered: it breaks the forward hooks that ghost clipping records layer outputs with.)
2. S&A teachers: T = 16 teachers, one epoch each, trained vmapped (stack_module_state + vmap) and
   one by one; examples/s (medians of interleaved rounds).
3. The ``cpu-small`` preset's Figure 7 (both panels) end to end in a fresh cache.
Prints one JSON object; the full Figure 7 on a GPU is bench/figure7_deep.sh.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import warnings
import time


import numpy as np
import torch
from torch.nn import functional as F

from privcore.deep.dpsgd import SGDConfig, add_noise, clip_and_sum, per_sample_grads, scale
from privcore.deep.ghost import ghost_clip_and_sum
from privcore.deep.images import ImageData
from privcore.deep.loop import momentum_step
from privcore.deep.models import build_model
from privcore.deep.teachers import train_teachers
from privcore.device import resolve_device

warnings.filterwarnings("ignore", message="Full backward hook is firing")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _gen(seed: int, device: torch.device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def dpsgd_throughput(model_name: str, channels: int, size: int, batch: int, rounds: int, device: torch.device,
                     steps: int, channels_last: bool = False, gpu_variants: bool = False) -> dict:
    x = torch.randn(batch, channels, size, size, generator=_gen(1, device), device=device)
    y = torch.randint(0, 10, (batch,), generator=_gen(2, device), device=device)
    clip, sigma, lr = 1.0, 1.0, 0.05

    ours_model = build_model(model_name, channels, 10, _gen(0, device), device, size=size)
    params = {k: v.detach().clone() for k, v in ours_model.named_parameters()}
    buf = {k: torch.zeros_like(v) for k, v in params.items()}
    noise_gen = _gen(3, device)

    def ours() -> None:
        summed, _ = clip_and_sum(per_sample_grads(ours_model, params, {}, x, y), clip)
        momentum_step(params, scale(add_noise(summed, sigma * clip, noise_gen), batch), buf, lr, 0.9)

    g_params = {k: v.detach().clone() for k, v in ours_model.named_parameters()}
    g_buf = {k: torch.zeros_like(v) for k, v in g_params.items()}
    g_gen = _gen(3, device)

    def ghost_step(model: torch.nn.Module, xin: torch.Tensor, p: dict, b: dict, gen: torch.Generator) -> None:
        summed, _ = ghost_clip_and_sum(model, p, {}, xin, y, clip)
        momentum_step(p, scale(add_noise(summed, sigma * clip, gen), batch), b, lr, 0.9)

    variants = {"ghost": lambda: ghost_step(ours_model, x, g_params, g_buf, g_gen)}
    if device.type == "cuda" and gpu_variants:  # ghost clipping's settings, each timed on the same batch
        import contextlib
        from privcore.deep import ghost as ghost_module

        def with_settings(factor=None, route=None, tf32=False, amp=False):
            def step() -> None:
                saved = (dict(ghost_module.GHOST_FACTOR), dict(ghost_module.PER_EXAMPLE_ROUTE), ghost_module.exact_fp32)
                try:
                    if factor is not None:
                        ghost_module.GHOST_FACTOR["cuda"] = factor
                    if route is not None:
                        ghost_module.PER_EXAMPLE_ROUTE["cuda"] = route
                    if tf32:  # the norms and sums left to TF32 (unsound; only to show what the fix costs)
                        ghost_module.exact_fp32 = lambda _d: contextlib.nullcontext()
                    summed, _ = ghost_clip_and_sum(ours_model, g_params, {}, x, y, clip, amp)
                    momentum_step(g_params, scale(add_noise(summed, sigma * clip, g_gen), batch), g_buf, lr, 0.9)
                finally:
                    ghost_module.GHOST_FACTOR.clear()
                    ghost_module.GHOST_FACTOR.update(saved[0])
                    ghost_module.PER_EXAMPLE_ROUTE.clear()
                    ghost_module.PER_EXAMPLE_ROUTE.update(saved[1])
                    ghost_module.exact_fp32 = saved[2]
            return step

        variants.update({"ghost_unfold": with_settings(route="unfold"), "ghost_gram": with_settings(factor=0.0),
                         "ghost_per_example": with_settings(factor=math.inf),
                         "ghost_unfold_f4": with_settings(factor=4.0, route="unfold"),
                         "ghost_tf32_unsound": with_settings(tf32=True), "ghost_amp": with_settings(amp=True),
                         "ghost_unfold_amp": with_settings(route="unfold", amp=True)})

    np_params = {k: v.detach().clone().requires_grad_(True) for k, v in ours_model.named_parameters()}
    np_buf = {k: torch.zeros_like(v) for k, v in np_params.items()}

    def non_private() -> None:  # the floor: one forward and backward of the summed loss, no clipping or noise
        loss = F.cross_entropy(torch.func.functional_call(ours_model, np_params, (x,)), y, reduction="sum")
        grads = torch.autograd.grad(loss, list(np_params.values()))
        with torch.no_grad():
            momentum_step(np_params, {k: g / batch for k, g in zip(np_params, grads)}, np_buf, lr, 0.9)

    if channels_last:
        cl_params = {k: (v.detach().clone().contiguous(memory_format=torch.channels_last) if v.dim() == 4
                         else v.detach().clone()) for k, v in ours_model.named_parameters()}
        cl_buf = {k: torch.zeros_like(v) for k, v in cl_params.items()}
        x_cl, cl_gen = x.contiguous(memory_format=torch.channels_last), _gen(3, device)
        variants["ghost_channels_last"] = lambda: ghost_step(ours_model, x_cl, cl_params, cl_buf, cl_gen)

    from opacus import GradSampleModule

    op_model = GradSampleModule(build_model(model_name, channels, 10, _gen(0, device), device, size=size),
                                batch_first=True, loss_reduction="sum", force_functorch=False)
    op_params = [p for p in op_model.parameters() if p.requires_grad]
    op_buf = [torch.zeros_like(p) for p in op_params]
    op_gen = _gen(3, device)

    def opacus() -> None:
        for p in op_params:
            p.grad_sample = None
            p.grad = None
        F.cross_entropy(op_model(x), y, reduction="sum").backward()
        gs = [p.grad_sample for p in op_params]
        norms = torch.stack([g.reshape(batch, -1).norm(dim=1) for g in gs]).norm(dim=0)
        factor = torch.clamp(clip / norms.clamp_min(1e-12), max=1.0)
        with torch.no_grad():
            for p, g, b in zip(op_params, gs, op_buf):
                noisy = (torch.einsum("b,b...->...", factor, g)
                         + sigma * clip * torch.randn(p.shape, generator=op_gen, device=device)) / batch
                b.mul_(0.9).add_(noisy)
                p.sub_(lr * b)

    fns = {**variants, "torch_func": ours, "opacus": opacus, "non_private": non_private}
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():  # warm-up
        fn()
    for _ in range(rounds):
        for name, fn in fns.items():
            _sync(device)
            t0 = time.perf_counter()
            for _ in range(steps):
                fn()
            _sync(device)
            times[name].append((time.perf_counter() - t0) / steps)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"model": model_name, "batch": batch, "examples_per_s": {k: batch / v for k, v in med.items()},
            "ratio_over_opacus": {k: med["opacus"] / v for k, v in med.items() if k != "opacus"}}


def teachers_throughput(model_name: str, channels: int, size: int, teachers: int, per_teacher: int, batch: int,
                        rounds: int, device: torch.device) -> dict:
    rng = np.random.default_rng(0)
    n = teachers * per_teacher
    x = rng.integers(0, 256, (n + 10, channels, size, size)).astype(np.uint8)
    y = (np.arange(n + 10) % 10).astype(np.int64)
    data = ImageData("bench", x[:n], y[:n], x[n:], y[n:], 10, (0.5,) * channels, (0.5,) * channels)
    cfg = SGDConfig(epochs=1, batch_size=batch, lr=0.05)

    def fn(g: torch.Generator) -> torch.nn.Module:
        return build_model(model_name, channels, 10, g, device, size=size)

    times: dict[str, list[float]] = {"vmapped": [], "loop": []}
    train_teachers(fn, data, cfg, teachers, 0, device, batched=True)  # warm-up
    for _ in range(rounds):
        for name in ("vmapped", "loop"):
            _sync(device)
            t0 = time.perf_counter()
            train_teachers(fn, data, cfg, teachers, 0, device, batched=name == "vmapped")
            _sync(device)
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"model": model_name, "teachers": teachers, "per_teacher": per_teacher, "batch": batch,
            "examples_per_s": {k: n / v for k, v in med.items()}, "vmapped_over_loop": med["loop"] / med["vmapped"]}


def small_preset(device: str) -> dict:
    from privcore.deep.run import run_deep
    from privcore.deep.spec import figure7_specs

    with tempfile.TemporaryDirectory() as tmp:
        old = os.environ.get("PRIVCORE_CACHE")
        os.environ["PRIVCORE_CACHE"] = tmp
        try:
            t0 = time.perf_counter()
            rows = []
            for spec in figure7_specs("cpu-small", device=device):
                rows += run_deep(spec).rows
            seconds = time.perf_counter() - t0
        finally:
            if old is None:
                os.environ.pop("PRIVCORE_CACHE", None)
            else:
                os.environ["PRIVCORE_CACHE"] = old
    best = {}
    for r in rows:
        if r.budget == 10:
            best.setdefault(r.method, {})[r.epsilon] = round(r.accuracy_mean, 3)
    return {"seconds": seconds, "accuracy_at_B10": best}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))
    p.add_argument("--models", default="small-cnn,resnet20")
    p.add_argument("--batch", type=int, default=None, help="DP-SGD batch (default 128 on CPU, 600 on GPU)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--skip-preset", action="store_true")
    p.add_argument("--skip-teachers", action="store_true")
    p.add_argument("--channels-last", action="store_true", help="also time the ghost step in channels-last")
    p.add_argument("--gpu-variants", action="store_true",
                   help="on CUDA, also time ghost clipping's routes (unfold, Gram, per-example), bf16 autocast and "
                        "the norms left to TF32 (unsound: the cost of full float32)")
    args = p.parse_args()
    device = resolve_device(args.device)
    gpu = device.type == "cuda"
    batch = args.batch or (600 if gpu else 128)
    out: dict = {"device": torch.cuda.get_device_name(device) if gpu else f"cpu ({torch.get_num_threads()} threads)",
                 "torch": torch.__version__, "load_average": os.getloadavg(), "dpsgd": [], "teachers": []}
    for name in args.models.split(","):
        size, channels = (32, 3) if name == "resnet20" else (28, 1)
        b = batch if (gpu or name == "small-cnn") else min(batch, 32)
        steps = 1 if (name == "resnet20" and not gpu) else 3
        out["dpsgd"].append(dpsgd_throughput(name, channels, size, b, args.rounds, device, steps,
                                             args.channels_last, args.gpu_variants))
        print(json.dumps(out["dpsgd"][-1]), file=sys.stderr)
        if not args.skip_teachers:
            per = 600 if gpu else (64 if name == "resnet20" else 256)
            out["teachers"].append(teachers_throughput(name, channels, size, 16, per, 64 if not gpu else 600,
                                                       max(1, args.rounds // 2), device))
            print(json.dumps(out["teachers"][-1]), file=sys.stderr)
    if not args.skip_preset:
        out["small_preset_figure7"] = small_preset(args.device)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
