"""Deep models: DP-SGD throughput against Opacus, teachers vmapped against a loop, the
small preset end to end.

    python bench/bench_deep.py --batches 64 --skip-teachers --skip-preset   # CPU, ResNet-20 + small CNN
    python bench/bench_deep.py --device cuda --fast                          # on a GPU: batches 600 and 2,048
    python bench/bench_deep.py --plan                                        # each convolution's route

1. DP-SGD step throughput (examples/s) on one fixed batch, interleaved round by round, medians; ends
   with the issue's table (markdown). ``non_private``: forward and backward of the summed loss and the
   momentum step, no clipping or noise (the ceiling). privcore's routes, each with clip, sum, Gaussian
   noise and momentum step: ``torch_func`` (vmap(grad) with functional_call), ``ghost`` (book-keeping
   ghost clipping with the device's rule, what clipping="ghost" runs), ``ghost_norm`` (the Gram ghost
   norm for every convolution), ``mixed`` (clipping="mixed": each convolution by cost,
   privcore/deep/routes.py); ``--fast`` adds mixed with channels-last, and with channels-last and a
   bfloat16 forward (CUDA; the clipping arithmetic stays float32). Opacus 1.6 through
   ``PrivacyEngine.make_private`` (SGD with momentum, flat clipping, its own noise), grad_sample_mode
   ``hooks`` and ``ghost``, with PyTorch's default flags (cuDNN may use TF32); Opacus is imported only
   here. ``--gpu-variants`` (CUDA): ghost clipping's older settings and the norms left to TF32 (unsound,
   see privcore/precision.py). (torch.compile is not offered: it breaks the forward hooks that ghost
   clipping records layer outputs with.)
2. S&A teachers: T = 16 teachers, one epoch each, trained vmapped (stack_module_state + vmap) and
   one by one; examples/s (medians of interleaved rounds).
3. The ``cpu-small`` preset's Figure 7 (both panels) end to end in a fresh cache.
Prints one JSON object; the full Figure 7 on a GPU is bench/figure7_deep.sh.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import warnings
import time


import numpy as np
import torch
from torch.nn import functional as F

from privcore.deep.dpsgd import SGDConfig, add_noise, channels_last, clipped_sum, scale
from privcore.deep.ghost import ghost_clip_and_sum
from privcore.deep.images import ImageData
from privcore.deep.loop import momentum_step
from privcore.deep.models import build_model
from privcore.deep.teachers import train_teachers
from privcore.device import resolve_device

warnings.filterwarnings("ignore", message="Full backward hook is firing")
warnings.filterwarnings("ignore", message=".*[Ss]ecure RNG.*")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _gen(seed: int, device: torch.device) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def _opacus_step(kind: str, model_name: str, channels: int, size: int, x: torch.Tensor, y: torch.Tensor,
                 clip: float, sigma: float, lr: float, device: torch.device):
    """One Opacus DP-SGD step (``PrivacyEngine.make_private``, grad_sample_mode "hooks" or "ghost", flat
    clipping, noise, SGD with momentum) on the fixed batch; Opacus is imported here only."""
    from opacus import PrivacyEngine

    model = build_model(model_name, channels, 10, _gen(0, device), device, size=size)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=x.shape[0])
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    criterion = torch.nn.CrossEntropyLoss(reduction="sum")
    out = PrivacyEngine().make_private(module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=sigma,
                                       max_grad_norm=clip, poisson_sampling=False, loss_reduction="sum",
                                       grad_sample_mode=kind, **({"criterion": criterion} if kind == "ghost" else {}))
    module, opt = out[0], out[1]
    crit = out[2] if kind == "ghost" else criterion

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        crit(module(x), y).backward()
        opt.step()

    return step


def dpsgd_throughput(model_name: str, channels: int, size: int, batch: int, rounds: int, device: torch.device,
                     steps: int, fast: bool = False, gpu_variants: bool = False) -> dict:
    """Examples/s of one DP-SGD step by each route, and of the non-private step, interleaved round by round."""
    x = torch.randn(batch, channels, size, size, generator=_gen(1, device), device=device)
    y = torch.randint(0, 10, (batch,), generator=_gen(2, device), device=device)
    clip, sigma, lr = 1.0, 1.0, 0.05
    ours_model = build_model(model_name, channels, 10, _gen(0, device), device, size=size)

    def private(method: str, *, amp: bool = False, cl: bool = False, route: str | None = None):
        p = {k: v.detach().clone() for k, v in ours_model.named_parameters()}
        p = channels_last(p) if cl else p
        buf = {k: torch.zeros_like(v) for k, v in p.items()}
        gen, xin = _gen(3, device), (x.contiguous(memory_format=torch.channels_last) if cl else x)

        def step() -> None:
            if route is not None:
                summed, _ = ghost_clip_and_sum(ours_model, p, {}, xin, y, clip, amp, route)
            else:
                summed, _ = clipped_sum(ours_model, p, {}, xin, y, clip, method, amp)
            momentum_step(p, scale(add_noise(summed, sigma * clip, gen), batch), buf, lr, 0.9)
        return step

    np_params = {k: v.detach().clone().requires_grad_(True) for k, v in ours_model.named_parameters()}
    np_buf = {k: torch.zeros_like(v) for k, v in np_params.items()}

    def non_private() -> None:  # the ceiling: one forward and backward of the summed loss, no clipping or noise
        loss = F.cross_entropy(torch.func.functional_call(ours_model, np_params, (x,)), y, reduction="sum")
        grads = torch.autograd.grad(loss, list(np_params.values()))
        with torch.no_grad():
            momentum_step(np_params, {k: g / batch for k, g in zip(np_params, grads)}, np_buf, lr, 0.9)

    fns = {"non_private": non_private, "torch_func": private("torch-func"), "ghost": private("ghost"),
           "ghost_norm": private("ghost", route="gram"), "mixed": private("mixed")}
    if fast:  # the forward in bfloat16 (CUDA) and channels-last; clipping arithmetic in full float32
        fns["mixed_cl"] = private("mixed", cl=True)
        fns["mixed_cl_bf16"] = private("mixed", cl=True, amp=True)
    if device.type == "cuda" and gpu_variants:  # ghost clipping's older settings, each timed on the same batch
        fns.update(_gpu_variants(ours_model, x, y, clip, sigma, lr, batch))
    fns["opacus_hooks"] = _opacus_step("hooks", model_name, channels, size, x, y, clip, sigma, lr, device)
    fns["opacus_ghost"] = _opacus_step("ghost", model_name, channels, size, x, y, clip, sigma, lr, device)
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
    return {"model": model_name, "batch": batch, "rounds": rounds, "steps_per_round": steps,
            "examples_per_s": {k: batch / v for k, v in med.items()},
            "share_of_non_private": {k: med["non_private"] / v for k, v in med.items()},
            "ratio_over_opacus_hooks": {k: med["opacus_hooks"] / v for k, v in med.items()}}


def _gpu_variants(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float, sigma: float, lr: float,
                  batch: int) -> dict:
    """Ghost clipping with the device rule changed (unfold, factors) and the norms left to TF32 (unsound)."""
    import contextlib
    from privcore.deep import ghost as ghost_module

    params = {k: v.detach().clone() for k, v in model.named_parameters()}
    buf = {k: torch.zeros_like(v) for k, v in params.items()}
    gen = _gen(3, x.device)

    def with_settings(factor=None, route=None, tf32=False):
        def step() -> None:
            saved = (dict(ghost_module.GHOST_FACTOR), dict(ghost_module.PER_EXAMPLE_ROUTE), ghost_module.exact_fp32)
            try:
                if factor is not None:
                    ghost_module.GHOST_FACTOR["cuda"] = factor
                if route is not None:
                    ghost_module.PER_EXAMPLE_ROUTE["cuda"] = route
                if tf32:  # the norms and sums left to TF32 (unsound; only to show what the fix costs)
                    ghost_module.exact_fp32 = lambda _d: contextlib.nullcontext()
                summed, _ = ghost_clip_and_sum(model, params, {}, x, y, clip)
                momentum_step(params, scale(add_noise(summed, sigma * clip, gen), batch), buf, lr, 0.9)
            finally:
                ghost_module.GHOST_FACTOR.clear()
                ghost_module.GHOST_FACTOR.update(saved[0])
                ghost_module.PER_EXAMPLE_ROUTE.clear()
                ghost_module.PER_EXAMPLE_ROUTE.update(saved[1])
                ghost_module.exact_fp32 = saved[2]
        return step

    return {"ghost_unfold": with_settings(route="unfold"), "ghost_mixed_f1": with_settings(factor=1.0),
            "ghost_tf32_unsound": with_settings(tf32=True)}


#: The issue's table: its columns, in order (``--fast`` adds the channels-last / bfloat16 rows at the end).
TABLE = (("non_private", "non-private step"), ("torch_func", "privcore torch.func"), ("ghost", "privcore ghost"),
         ("ghost_norm", "privcore ghost norm (Gram) throughout"), ("mixed", "privcore mixed"),
         ("mixed_cl", "privcore mixed, channels-last"), ("mixed_cl_bf16", "privcore mixed, channels-last + bf16"),
         ("opacus_hooks", "Opacus make_private hooks"), ("opacus_ghost", "Opacus ghost mode"))


def markdown_table(results: list[dict]) -> str:
    """One row per (model, batch): examples/s of each step, privcore's as a share of the non-private step."""
    cols = [(k, label) for k, label in TABLE if any(k in r["examples_per_s"] for r in results)]
    lines = ["| model, batch | " + " | ".join(label for _, label in cols) + " |",
             "|---" * (len(cols) + 1) + "|"]
    for r in results:
        cells = []
        for k, _ in cols:
            eps = r["examples_per_s"].get(k)
            if eps is None:
                cells.append("")
            elif k == "non_private" or k.startswith("opacus"):
                cells.append(f"{eps:,.0f}")
            else:
                cells.append(f"{eps:,.0f} ({100 * r['share_of_non_private'][k]:.0f} %)")
        lines.append(f"| {r['model']}, {r['batch']:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


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
    p.add_argument("--models", default="resnet20,small-cnn")
    p.add_argument("--batches", default=None,
                   help="DP-SGD batches, comma-separated (default 600,2048 on a GPU, 600 on a CPU)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=None,
                   help="steps per round (default 3 on a GPU; on a CPU 1 for ResNet-20, 10 for the small CNN)")
    p.add_argument("--skip-preset", action="store_true")
    p.add_argument("--skip-teachers", action="store_true")
    p.add_argument("--fast", action="store_true",
                   help="also time the mixed route with channels-last, and with channels-last and a bfloat16 forward")
    p.add_argument("--gpu-variants", action="store_true",
                   help="on CUDA, also time ghost clipping's older settings (unfold, the factor-1 rule) and the norms "
                        "left to TF32 (unsound: the cost of full float32)")
    p.add_argument("--plan", action="store_true", help="print each convolution's route by cost and stop")
    args = p.parse_args()
    if args.plan:
        from privcore.deep.routes import layer_plan

        for name in args.models.split(","):
            shape = (3, 32, 32) if name == "resnet20" else (1, 28, 28)
            for r in layer_plan(build_model(name, shape[0], 10, _gen(0, torch.device("cpu")), size=shape[1]), shape):
                print(f"{name} {r.name}: T={r.shape.T} d={r.shape.d} p={r.shape.p} ghost {r.shape.ghost_cost(1):,} "
                      f"per-example {r.shape.per_example_cost(1):,} -> {r.route}")
        return
    device = resolve_device(args.device)
    gpu = device.type == "cuda"
    batches = [int(b) for b in (args.batches or ("600,2048" if gpu else "600")).split(",")]
    steps_default = {"resnet20": 3 if gpu else 1, "small-cnn": 3 if gpu else 10}  # a CPU round of ~1 s or more
    out: dict = {"device": torch.cuda.get_device_name(device) if gpu else f"cpu ({torch.get_num_threads()} threads)",
                 "torch": torch.__version__, "load_average_before": os.getloadavg(), "dpsgd": [], "teachers": []}
    t0 = time.perf_counter()
    for name in args.models.split(","):
        size, channels = (32, 3) if name == "resnet20" else (28, 1)
        for b in batches:
            out["dpsgd"].append(dpsgd_throughput(name, channels, size, b, args.rounds, device,
                                                 args.steps or steps_default[name], args.fast, args.gpu_variants))
            print(json.dumps(out["dpsgd"][-1]), file=sys.stderr)
        if not args.skip_teachers:
            per = 600 if gpu else (64 if name == "resnet20" else 256)
            out["teachers"].append(teachers_throughput(name, channels, size, 16, per, 64 if not gpu else 600,
                                                       max(1, args.rounds // 2), device))
            print(json.dumps(out["teachers"][-1]), file=sys.stderr)
    if not args.skip_preset:
        out["small_preset_figure7"] = small_preset(args.device)
    out["seconds"] = time.perf_counter() - t0
    out["load_average_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))
    print(f"\n{out['device']}, torch {out['torch']}; examples per second, medians of {args.rounds} interleaved rounds "
          f"(steps per round: {', '.join(f'{r}: {r_steps}' for r, r_steps in ((d['model'], d['steps_per_round']) for d in out['dpsgd']))}); load average before {out['load_average_before'][0]:.2f}, after "
          f"{out['load_average_after'][0]:.2f}\n")
    print(markdown_table(out["dpsgd"]))


if __name__ == "__main__":
    main()
