"""Benchmarks of the trade-off engine (prints figures; not a test).

    python bench/bench_engine.py [--device auto|cpu|cuda] [--quick] [--loop-fraction F] [--max-n N] [--only-n]

Sections:
1. Figure-1-style sweep: 5 methods x 10 epsilons x delta in {0, 1e-5} x 20 repetitions on mnist-5k,
   batched engine versus the same work done one model at a time (fresh context per run: every run
   re-trains its model, as the paper's code does), in one process. The loop is timed on a
   ``--loop-fraction`` of its runs (evenly spread) and scaled up; 1.0 times all of it.
2. Single-setting refresh: 5 methods, one epsilon, 20 repetitions, uncached (median of 5 moves),
   and per method; L-BFGS iterations for theta*(lam) with either initial scaling.
3. Growth with repetitions R and with N (subsample / augmentation), and peak memory (max RSS).
Results are printed as markdown tables and saved to bench/out/engine.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import time
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")

import torch  # noqa: E402

from privcore.data import load_dataset  # noqa: E402
from privcore.device import resolve_device  # noqa: E402
from privcore.context import TrainContext  # noqa: E402
from privcore.engine.runner import run_sweep  # noqa: E402
from privcore.engine.specs import DataSpec, SweepSpec  # noqa: E402
from privcore.methods import REGISTRY  # noqa: E402

#: The paper's five methods: the figures this benchmark times (the methods added since are timed by bench_pate.py).
METHOD_NAMES = tuple(m for m in REGISTRY if REGISTRY[m].from_paper)
from privcore.types import PrivacyBudget, Problem  # noqa: E402

EPSILONS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
DELTAS = (0.0, 1e-5)


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def figure1_batched(device: str, repeats: int) -> float:
    t0 = time.perf_counter()
    for delta in DELTAS:
        run_sweep(SweepSpec(epsilons=EPSILONS, delta=delta, repeats=repeats, device=device, methods=METHOD_NAMES), use_cache=False)
    return time.perf_counter() - t0


def figure1_looped(device: torch.device, repeats: int, fraction: float) -> tuple[float, int, int]:
    """One model at a time; returns (scaled seconds, runs timed, runs total)."""
    ds = load_dataset("mnist-5k", seed=0)
    base = Problem(n=ds.n, dim=ds.dim, classes=ds.classes)
    runs = [(m, e, d, r) for d in DELTAS for m in METHOD_NAMES for e in EPSILONS for r in range(repeats)
            if REGISTRY[m].supports(d)]
    step = max(1, round(1.0 / fraction))
    picked = runs[::step]
    t0 = time.perf_counter()
    for m, e, d, r in picked:
        ctx = TrainContext.from_dataset(ds, base, r, device)  # fresh context: nothing shared between runs
        method = REGISTRY[m]
        method.evaluate(ctx, [method.calibrate(PrivacyBudget(e, d), base)], 1)
    sync(device)
    spent = time.perf_counter() - t0
    return spent * len(runs) / len(picked), len(picked), len(runs)


def refresh(device: str, moves: int = 5) -> tuple[float, list[float]]:
    """What the dashboard feels when the epsilon slider moves: a cold first call (new seed: data
    split, non-private model and teachers trained), then ``moves`` calls at new epsilons (results
    not cached; the process keeps the data and the non-private models)."""
    t0 = time.perf_counter()
    run_sweep(SweepSpec(epsilons=(3.0,), delta=1e-5, repeats=20, seed=100, device=device, methods=METHOD_NAMES), use_cache=False)
    cold = time.perf_counter() - t0
    times = []
    for i in range(moves):
        t0 = time.perf_counter()
        run_sweep(SweepSpec(epsilons=(3.5 + i,), delta=1e-5, repeats=20, seed=100, device=device, methods=METHOD_NAMES), use_cache=False)
        times.append(time.perf_counter() - t0)
    return cold, times


def refresh_by_method(device: str, moves: int = 3) -> dict[str, float]:
    """Median seconds per method of a warm refresh (new epsilon, 20 reps; calibration included)."""
    run_sweep(SweepSpec(epsilons=(3.0,), delta=1e-5, repeats=20, seed=100, device=device, methods=METHOD_NAMES), use_cache=False)
    out = {}
    for m in METHOD_NAMES:
        times = []
        for i in range(moves):
            t0 = time.perf_counter()
            run_sweep(SweepSpec(epsilons=(4.5 + i,), delta=1e-5, repeats=20, seed=100, device=device, methods=(m,),
                                baseline=False), use_cache=False)
            times.append(time.perf_counter() - t0)
        out[m] = statistics.median(times)
    return out


def solver_iterations(device: str, lams=(1e-2, 1e-3, 1e-4, 1e-5)) -> dict[str, dict[float, int]]:
    """L-BFGS iterations to reach the tolerance for theta*(lam) on mnist-5k, per initial scaling."""
    from privcore.solver import solve_softmax

    ds = load_dataset("mnist-5k", seed=0)
    ctx = TrainContext.from_dataset(ds, Problem(n=ds.n, dim=ds.dim, classes=ds.classes), 0, resolve_device(device))
    out: dict[str, dict[float, int]] = {}
    for scaling in ("diagonal", "bohning"):
        out[scaling] = {}
        for lam in lams:
            lam_t = torch.tensor([lam], dtype=torch.float64, device=ctx.device)
            res = solve_softmax(ctx.x_train, ctx.y_train, lam_t, classes=ctx.classes, precond=ctx.preconditioner,
                                scaling=scaling)
            out[scaling][lam] = int(res.iterations.max())
    return out


def by_repeats(device: str, values=(1, 5, 20, 100)) -> dict[int, float]:
    """Refresh time against R, warm (data and non-private models already in memory)."""
    run_sweep(SweepSpec(epsilons=(2.0,), delta=1e-5, repeats=1, seed=7, device=device, methods=METHOD_NAMES), use_cache=False)
    out = {}
    for r in values:
        t0 = time.perf_counter()
        run_sweep(SweepSpec(epsilons=(3.0,), delta=1e-5, repeats=r, seed=7, device=device, methods=METHOD_NAMES), use_cache=False)
        out[r] = time.perf_counter() - t0
    return out


def by_n(device: str, values) -> dict[int, dict[str, float]]:
    out = {}
    for n in values:
        t0 = time.perf_counter()
        load_dataset("mnist-5k", n=n, seed=11)  # the sweep's seed: it reuses this build (seed 0 made it build again)
        t_data = time.perf_counter() - t0
        t0 = time.perf_counter()
        run_sweep(SweepSpec(data=DataSpec(n=n), epsilons=(1.0,), delta=0.0, repeats=20, seed=11, device=device,
                            methods=tuple(m for m in METHOD_NAMES if REGISTRY[m].supports(0.0))),
                  use_cache=False)
        out[n] = {"data_s": t_data, "sweep_s": time.perf_counter() - t0, "max_rss_mb": max_rss_mb()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--loop-fraction", type=float, default=0.1)
    ap.add_argument("--max-n", type=int, default=64_000)
    ap.add_argument("--quick", action="store_true", help="skip the N-scaling section")
    ap.add_argument("--only-n", action="store_true", help="only the N-scaling section (up to --max-n)")
    args = ap.parse_args()
    device = resolve_device(args.device)
    info = {"device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads()}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
    print(f"# privcore engine benchmark on {info}")
    load_dataset("mnist-5k", seed=0)  # warm the data cache so both sides start equal
    if args.only_n:
        n_values = [n for n in (1_000, 4_000, 16_000, 64_000, 256_000, 1_000_000) if n <= args.max_n]
        print("\n| N | data build s | sweep s (4 methods, eps=1, delta=0, 20 reps) | max RSS MB |\n|---|---|---|---|")
        for n, v in by_n(args.device, n_values).items():
            print(f"| {n:,} | {v['data_s']:.1f} | {v['sweep_s']:.1f} | {v['max_rss_mb']:.0f} |")
        return

    t_batched = figure1_batched(args.device, args.repeats)
    t_loop, timed, total = figure1_looped(device, args.repeats, args.loop_fraction)
    print("\n| Figure-1-style sweep (5 methods x 10 eps x 2 deltas x %d reps) | seconds |" % args.repeats)
    print("|---|---|")
    print(f"| batched engine | {t_batched:.1f} |")
    print(f"| one model at a time ({timed} of {total} runs timed, scaled) | {t_loop:.1f} |")
    print(f"| speed-up | {t_loop / t_batched:.1f}x |")

    cold, times = refresh(args.device)
    print(f"\nSingle-setting refresh (5 methods, one eps, delta = 1e-5, 20 reps, results not cached): cold {cold:.2f} s; "
          f"after moving epsilon: median {statistics.median(times):.2f} s (runs: {', '.join(f'{t:.2f}' for t in times)})")

    per_method = refresh_by_method(args.device)
    print("\n| method (warm refresh, median of 3) | " + " | ".join(per_method) + " |")
    print("|---|" + "---|" * len(per_method))
    print("| seconds | " + " | ".join(f"{v:.2f}" for v in per_method.values()) + " |")

    iters = solver_iterations(args.device)
    lams = list(next(iter(iters.values())))
    print("\n| L-BFGS iterations for theta*(lam), by initial scaling | " + " | ".join(f"{lam:g}" for lam in lams) + " |")
    print("|---|" + "---|" * len(lams))
    for scaling, row in iters.items():
        print(f"| {scaling} | " + " | ".join(str(row[lam]) for lam in lams) + " |")

    reps = by_repeats(args.device)
    print("\n| repetitions R | 1 | 5 | 20 | 100 |\n|---|---|---|---|---|")
    print("| refresh seconds | " + " | ".join(f"{reps[r]:.2f}" for r in (1, 5, 20, 100)) + " |")

    n_values = [] if args.quick else [n for n in (1_000, 4_000, 16_000, 64_000, 256_000, 1_000_000) if n <= args.max_n]
    scaling = by_n(args.device, n_values) if n_values else {}
    if scaling:
        print("\n| N | data build s | sweep s (4 methods, eps=1, delta=0, 20 reps) | max RSS MB |\n|---|---|---|---|")
        for n, v in scaling.items():
            print(f"| {n:,} | {v['data_s']:.1f} | {v['sweep_s']:.1f} | {v['max_rss_mb']:.0f} |")
    print(f"\npeak memory (max RSS): {max_rss_mb():.0f} MB")
    out = Path(__file__).resolve().parent / "out"
    out.mkdir(exist_ok=True)
    (out / "engine.json").write_text(json.dumps({
        "info": info, "figure1_batched_s": t_batched, "figure1_looped_s": t_loop, "looped_timed_runs": timed,
        "looped_total_runs": total, "refresh_cold_s": cold, "refresh_move_eps_s": times, "refresh_by_method_s": per_method,
        "solver_iterations": {k: {str(lam): v for lam, v in row.items()} for k, row in iters.items()}, "by_repeats_s": reps, "by_n": scaling,
        "max_rss_mb": max_rss_mb()}, indent=1))


if __name__ == "__main__":
    main()
