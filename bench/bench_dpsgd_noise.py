"""DP-SGD's unit noise: privcore.tails.gaussian_noise (tails not cut off) against torch.randn (prints a table).

    python bench/bench_dpsgd_noise.py [--rounds 15] [--device cpu]

Sizes: one linear DP-SGD step on mnist-5k's features (784 x 10), the small CNN's and ResNet-20's parameter
counts, and 1e6. Each round times both samplers in turn (interleaved, so drift hits both); the medians and
their ratio are printed, with the machine's load. For the cost inside a whole sweep, time
``run_sweep`` of DP-SGD before and after with farm-bench (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from privcore import tails

SIZES = (("linear step, 784 x 10", 7_840), ("small CNN", 26_000), ("ResNet-20", 272_000), ("1e6", 1_000_000))


def _time(fn, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    g = torch.Generator(device=device).manual_seed(0)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"# {name}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.2f}, {args.rounds} rounds")
    print("| size | torch.randn (ms) | gaussian_noise (ms) | ratio |")
    print("|---|---|---|---|")
    for label, n in SIZES:
        a, b = [], []
        for _ in range(args.rounds + 1):  # the first round warms up
            a.append(_time(lambda: torch.randn(n, generator=g, device=device), device))
            b.append(_time(lambda: tails.gaussian_noise(n, g), device))
        ma, mb = statistics.median(a[1:]), statistics.median(b[1:])
        print(f"| {label} ({n:,}) | {ma * 1e3:.3f} | {mb * 1e3:.3f} | {mb / ma:.1f} |")


if __name__ == "__main__":
    main()
