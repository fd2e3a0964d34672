"""Cold, in-process seconds per method for one Explore setting (prints figures).

    OMP_NUM_THREADS=1 python bench/bench_method_times.py [point|curve] [--lam 1e-6] [--epochs 50] [--methods a,b]
        (PYTHONPATH=PATH times the checkout at PATH with this script: see bench/bench_before_after.py)

Run from the repository root with ``PRIVCORE_CACHE=$(mktemp -d)``. Every method runs with the
cache off, in this order, in one process (so the first method pays the shared imports; the
``imports`` and ``data`` lines say how much). Each method's line gives wall and CPU seconds (the
process's own CPU time, steadier than wall time on a loaded machine). The first line prints the
load average. ``--again`` runs each method a second time right after its first run, still with the
result cache off: what a moved slider costs once the data-only work (eigenbases, non-private
solves, teacher votes) is kept in the process; the second run's wall and CPU seconds follow.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from dataclasses import replace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", nargs="?", default="point", choices=("point", "curve"))
    ap.add_argument("--lam", type=float, default=None)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--methods", default="")
    ap.add_argument("--again", action="store_true", help="run each method twice (the second: a warm process)")
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    t = time.perf_counter()
    from privcore.engine.runner import run_sweep
    from ui.setting import build_data_info, explore_specs
    print("imports", round(time.perf_counter() - t, 2))
    t = time.perf_counter()
    info = build_data_info("mnist-5k")
    print("data", round(time.perf_counter() - t, 2))
    changes = {k: v for k, v in (("lam", a.lam), ("epochs", a.epochs)) if v is not None}
    point, curve = explore_specs(info, changes)
    spec = point if a.which == "point" else curve
    methods = [m for m in spec.methods if not a.methods or m in a.methods.split(",")]
    total = 0.0
    cpu_total = 0.0
    for m in methods:
        t, c = time.perf_counter(), time.process_time()
        run_sweep(replace(spec, methods=(m,)), use_cache=False)
        dt, dc = time.perf_counter() - t, time.process_time() - c
        total, cpu_total = total + dt, cpu_total + dc
        line = f"{m} {dt:.2f} {dc:.2f}"
        if a.again:
            t, c = time.perf_counter(), time.process_time()
            run_sweep(replace(spec, methods=(m,)), use_cache=False)
            line += f" again {time.perf_counter() - t:.2f} {time.process_time() - c:.2f}"
        print(line, flush=True)
    print(f"total {total:.2f} {cpu_total:.2f}")


if __name__ == "__main__":
    main()
