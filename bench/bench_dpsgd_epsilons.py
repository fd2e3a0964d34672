"""What each further epsilon adds to a DP-SGD run (the time model's per-epsilon share; prints figures).

    OMP_NUM_THREADS=1 python bench/bench_dpsgd_epsilons.py [--epochs 20] [--runs 2]

On mnist-5k's Explore defaults with ``--epochs``, DP-SGD alone, no result cache and the calibration memo
off: seconds (fastest of ``--runs``) for 1, 4 and 7 epsilons after one warm-up run, and the share of
a repetition each further epsilon costs, ((t_E / t_1) - 1) / (E - 1). privcore/methods/dpsgd.py's
``cost_parts`` uses that share.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from dataclasses import replace


EPSILONS = ((1.0,), (0.3, 1.0, 3.0, 10.0), (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    os.environ["PRIVCORE_CALIBRATION_MEMO"] = "off"
    warnings.filterwarnings("ignore")
    from privcore.engine.runner import run_sweep
    from ui.setting import build_data_info, explore_specs

    _, curve = explore_specs(build_data_info("mnist-5k"), {"epochs": args.epochs})
    spec = replace(curve, methods=("dpsgd",))
    print(f"# DP-SGD, mnist-5k, {args.epochs} epochs, {spec.repeats} repetitions; load {os.getloadavg()[0]:.2f}")
    run_sweep(replace(spec, epsilons=(1.0,)), use_cache=False)  # imports, accountant, first calls
    first = None
    for eps in EPSILONS:
        best = float("inf")
        for _ in range(args.runs):
            t0 = time.perf_counter()
            run_sweep(replace(spec, epsilons=eps), use_cache=False)
            best = min(best, time.perf_counter() - t0)
        first = first or best
        share = (best / first - 1) / (len(eps) - 1) if len(eps) > 1 else 0.0
        print(f"{len(eps)} epsilon(s): {best:6.2f} s   each further epsilon: {share:.2f} of a repetition")
    print(f"# load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
