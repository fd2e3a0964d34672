"""DP-SGD steps as training runs them: Poisson batches split at the physical batch, against one call.

    python bench/bench_deep_steps.py --device cuda                      # ResNet-20 and the small CNN, batch 600
    python bench/bench_deep_steps.py --models small-cnn --steps 5       # a CPU

``bench/bench_deep.py`` times one step on a fixed batch. A training step draws a Poisson batch (Binomial(N, q),
about 600 +- 24 at the paper's settings) and ``dpsgd_step`` splits it into calls of at most ``physical_batch``
examples, each with its fixed cost; so a physical batch of 600 (the paper preset's before) makes about half the
steps two calls, one of them a handful of examples. This times ``dpsgd_step`` plus the momentum step on N
synthetic images, for each physical batch asked (default 600 and 1,024), with the same sampling, noise and
augmentation generators for each (the same batches), interleaved round by round; medians of the rounds'
milliseconds per step, and how many steps took more than one call. Prints one JSON object and a table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

import numpy as np
import torch

from privcore.deep.dpsgd import SGDConfig, dpsgd_step
from privcore.deep.images import ImageData
from privcore.deep.loop import momentum_step
from privcore.deep.models import build_model
from privcore.device import make_generator, resolve_device


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def steps_timing(model_name: str, n: int, batch: int, physical: list[int], rounds: int, steps: int,
                 device: torch.device) -> dict:
    channels, size = (3, 32) if model_name == "resnet20" else (1, 28)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (n + 10, channels, size, size)).astype(np.uint8)
    y = (np.arange(n + 10) % 10).astype(np.int64)
    data = ImageData("bench", x[:n], y[:n], x[n:], y[n:], 10, (0.5,) * channels, (0.5,) * channels)
    x_u8, y_t = torch.tensor(data.x_train, device=device), torch.as_tensor(data.y_train, device=device)
    model = build_model(model_name, channels, 10, make_generator(0, "bench", device=device), device, size=size)
    clip, sigma, lr = 1.0, 1.0, 0.05
    runs = {}
    for pb in physical:
        cfg = SGDConfig(epochs=1, batch_size=batch, physical_batch=pb, augment=True)
        params = {k: v.detach().clone() for k, v in model.named_parameters()}
        runs[pb] = (cfg, params, {k: torch.zeros_like(v) for k, v in params.items()},
                    {g: make_generator(1, "bench-steps", g, device=device) for g in ("sample", "noise", "augment")})

    def step(pb: int) -> None:
        cfg, params, buf, gens = runs[pb]
        g = dpsgd_step(model, params, {}, x_u8, y_t, data, cfg, clip, sigma * clip, gens)
        momentum_step(params, g, buf, lr, 0.9)

    for pb in physical:  # warm-up
        step(pb)
    times: dict[int, list[float]] = {pb: [] for pb in physical}
    for _ in range(rounds):
        for pb in physical:
            _sync(device)
            t0 = time.perf_counter()
            for _ in range(steps):
                step(pb)
            _sync(device)
            times[pb].append(1000 * (time.perf_counter() - t0) / steps)
    q = batch / n
    sizes = torch.distributions.Binomial(n, torch.tensor(q)).sample((100_000,), )
    med = {pb: statistics.median(v) for pb, v in times.items()}
    return {"model": model_name, "n": n, "batch": batch, "rounds": rounds, "steps_per_round": steps,
            "ms_per_step": med,
            "share_of_steps_split": {pb: float((sizes > pb).float().mean()) for pb in physical},
            "speedup_over_first": {pb: med[physical[0]] / med[pb] for pb in physical}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))
    p.add_argument("--models", default="resnet20,small-cnn")
    p.add_argument("--n", type=int, default=60_000, help="training images (default 60,000, Fashion-MNIST's)")
    p.add_argument("--batch", type=int, default=600, help="expected Poisson batch (default 600, the paper's)")
    p.add_argument("--physical", default="600,1024", help="physical batches to compare, comma-separated")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=20, help="steps per round")
    args = p.parse_args()
    device = resolve_device(args.device)
    physical = [int(v) for v in args.physical.split(",")]
    out = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else
           f"cpu ({torch.get_num_threads()} threads)", "torch": torch.__version__,
           "load_average_before": os.getloadavg(), "runs": []}
    for name in args.models.split(","):
        out["runs"].append(steps_timing(name, args.n, args.batch, physical, args.rounds, args.steps, device))
    out["load_average_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))
    print(f"\n{out['device']}, torch {out['torch']}; ms per DP-SGD step (Poisson batch, augmentation, noise, momentum), "
          f"medians of {args.rounds} interleaved rounds of {args.steps} steps; load {out['load_average_before'][0]:.2f}"
          f" before, {out['load_average_after'][0]:.2f} after\n")
    print("| model, N, batch | " + " | ".join(f"physical {pb:,}" for pb in physical) + " |")
    print("|---" * (len(physical) + 1) + "|")
    for r in out["runs"]:
        cells = [f"{r['ms_per_step'][pb]:.1f} ms ({100 * r['share_of_steps_split'][pb]:.0f} % split"
                 + ("" if pb == physical[0] else f", {r['speedup_over_first'][pb]:.2f}x") + ")" for pb in physical]
        print(f"| {r['model']}, {r['n']:,}, {r['batch']:,} | " + " | ".join(cells) + " |")
    if not math.isfinite(sum(sum(r["ms_per_step"].values()) for r in out["runs"])):
        raise SystemExit("a timing was not finite")


if __name__ == "__main__":
    main()
