"""The tuned comparison on one data set: every method as configured, at its best knobs on held-out data
(optimistic, not private) and at the knobs a private selection picked (its cost inside each epsilon).

Prints a Markdown table (accuracy mean over the repetitions, abstentions wrong; the knobs picked) and
the wall time of each variant, for docs/benchmarks.md. Results are cached like any sweep: a second
run reads them back (pass --no-cache for timings of a cold run).

    python bench/bench_tuned.py --dataset mnist-5k --epsilons 0.3 1 3 10 --repeats 10
"""

from __future__ import annotations

import argparse
import os
import time

from privcore.engine.cache import ResultCache
from privcore.engine.rows import knobs_picked
from privcore.engine.runner import run_sweep
from privcore.engine.specs import TUNING_MODES, DataSpec, SweepSpec
from privcore.methods import METHOD_NAMES, get_method


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="mnist-5k")
    ap.add_argument("--methods", nargs="+", default=list(METHOD_NAMES))
    ap.add_argument("--epsilons", nargs="+", type=float, default=[0.3, 1.0, 3.0, 10.0])
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--budget", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--no-cache", action="store_true")
    args = ap.parse_args()
    cache = ResultCache(enabled=not args.no_cache)
    table: dict[tuple[str, float], dict[str, str]] = {}
    for mode in TUNING_MODES:
        spec = SweepSpec(data=DataSpec(name=args.dataset), methods=tuple(args.methods), epsilons=tuple(args.epsilons),
                         delta=args.delta, budget=args.budget, repeats=args.repeats, device="cpu", tuning=mode)
        load = os.getloadavg()[0]
        start = time.perf_counter()
        result = run_sweep(spec, cache=cache)
        took = time.perf_counter() - start
        print(f"{mode}: {took:.1f} s wall, load {load:.1f} -> {os.getloadavg()[0]:.1f}, "
              f"{result.computed} computed, {result.cached} cached", flush=True)
        for w in dict.fromkeys(result.warnings):
            print(f"  warning: {w}")
        for r in result.rows:
            cell = f"{r.accuracy_mean:.3f}"
            if mode != "configured" and r.tuned:
                cell += f" ({knobs_picked(r.tuned) or 'as configured: no private selection for it'})"
            table.setdefault((r.method, r.epsilon), {})[mode] = cell
    print()
    print(f"{args.dataset}, δ = {args.delta:g}, B = {args.budget}, R = {args.repeats}, corrected accounting")
    print()
    print("| method | ε | as configured | tuned: best on held-out (not private) | tuned: selected privately |")
    print("|---|---|---|---|---|")
    for (method, eps), cells in table.items():
        label = get_method(method).label
        print(f"| {label} | {eps:g} | " + " | ".join(cells.get(m, "-") for m in TUNING_MODES) + " |")


if __name__ == "__main__":
    main()
