"""The linear DP-SGD step's clipped sum: one float32 product against partial sums (prints milliseconds).

    python bench/bench_clipped_sum.py [R B EC D]      # default: Explore's defaults, 20 x 290 x 70 x 784

The sum over the batch of R models' clipped gradients, [R, EC, b] x [R, b, D]: as one float32 product (what
the step did before privcore.roundoff; its rounding is bounded only by gamma_b b C) and as float32 partial sums
of 32, 64 and 128 examples added in float64 (privcore.methods.dpsgd._clipped_sum, bounded by gamma_{k+2} b C).
Medians of 9 interleaved rounds. Not a test.
"""

from __future__ import annotations

import statistics
import sys
import time

import torch

from privcore.methods.dpsgd import _clipped_sum


def main() -> None:
    r, b, ec, d = (int(v) for v in sys.argv[1:5]) if len(sys.argv) > 4 else (20, 290, 70, 784)
    gen = torch.Generator().manual_seed(0)
    clipped, xb = torch.randn(r, b, ec, generator=gen), torch.randn(r, b, d, generator=gen)
    at = clipped.transpose(1, 2).contiguous()
    out, buf = torch.zeros(r, ec, d, dtype=torch.float64), torch.empty(r, ec, d)
    runs = {"one float32 product": lambda: torch.bmm(at, xb)}
    for k in (32, 64, 128):
        runs[f"partial sums of {k}"] = lambda k=k: _clipped_sum(clipped, xb, k, out, buf)
    for f in runs.values():
        f()
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(9):
        for name, f in runs.items():
            t = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t)
    base = statistics.median(times["one float32 product"])
    print(f"R={r} b={b} EC={ec} D={d}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    for name, v in times.items():
        print(f"{name:>22}: {statistics.median(v) * 1e3:7.1f} ms ({statistics.median(v) / base:.2f}x)")


if __name__ == "__main__":
    main()
