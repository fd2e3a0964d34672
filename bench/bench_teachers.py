"""Time the T teachers' solves of the teacher-vote methods (TrainContext.teacher_thetas).

Prints, per data set and T, the median wall time of ``--rounds`` fresh solves (a new context each
round, so nothing is cached), the largest iteration count and the teachers' mean test accuracy.
Uses the public API only, so the same script times an older checkout (PYTHONPATH=<checkout>).

    python bench/bench_teachers.py --data mnist-5k --teachers 4 16 64 256
    python bench/bench_teachers.py --n 60000 --teachers 16 64 256 --rounds 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from privcore.context import TrainContext
from privcore.data import load_dataset
from privcore.types import Problem


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=["mnist-5k"])
    ap.add_argument("--teachers", type=int, nargs="+", default=[4, 16, 64, 256])
    ap.add_argument("--n", type=int, default=None, help="training rows (mnist-5k grows by deformed copies)")
    ap.add_argument("--lam", type=float, default=1e-3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()[0]:.2f}")
    print("data        N       T    median s   (min-max)        max iters  teacher acc")
    for name in args.data:
        ds = load_dataset(name, seed=3, n=args.n)
        warm = TrainContext.from_dataset(ds, Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=args.lam),
                                         seed=0, device=device)
        warm.teacher_thetas(2, args.lam)  # first-call overheads (LAPACK, allocator) outside the timings
        for t in args.teachers:
            times, iters = [], 0.0
            for r in range(args.rounds):
                pb = Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=args.lam, teachers=t)
                ctx = TrainContext.from_dataset(ds, pb, seed=r, device=device)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                theta = ctx.teacher_thetas(t, args.lam)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
                iters = max(iters, ctx.stats.get("solver_iterations", 0.0))
            acc = float((ctx.logits(theta).argmax(2) == ctx.y_test).double().mean())
            print(f"{name:10s} {ds.n:7d} {t:5d} {statistics.median(times):9.3f}   "
                  f"({min(times):.3f}-{max(times):.3f})   {iters:9.0f}  {acc:.4f}")
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
