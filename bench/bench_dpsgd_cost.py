"""DP-SGD's time-model constants, measured directly (prints figures and the constants to use).

    OMP_NUM_THREADS=1 python bench/bench_dpsgd_cost.py [--runs 2] [--quick]

bench_cost.py fits every kind of piece at once and rescales the fit to a median ratio of 1 over all
methods' runs, so DP-SGD's two constants come out wherever the other methods' errors put them (a joint
fit predicted DP-SGD alone well short of its time, worst at 50 epochs). Here DP-SGD runs
alone on mnist-5k (Explore's defaults otherwise, 20 repetitions, no result cache, the calibration memo
off, the accountant imported by a warm-up run) over a grid of epochs (5, 20, 50), expected batch sizes
(64, 256, 1024: the per-step overhead against the per-example work) and numbers of epsilons (1, 5).
Each time is the fastest of ``--runs``. The measured calibration (``calibrate`` per epsilon) is
subtracted, then ``sgd``, ``sgd_batch`` and ``sgd_steps`` are fitted by least squares on relative error, for each
per-epsilon share s in 0.10, 0.12, ..., 0.40 (each further epsilon costs s of a repetition); the
share with the smallest worst error is printed with its constants and each run's predicted/measured.
privcore/methods/dpsgd.py's ``cost_parts`` and privcore/engine/cost.py's DEFAULT_COEFFS take them.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from dataclasses import replace


EPOCHS = (5, 20, 50)
BATCHES = (64, 256, 1024)
EPSILON_SETS = ((1.0,), (0.1, 0.3, 1.0, 3.0, 10.0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="epochs 5 and 20 only, one run each")
    args = ap.parse_args()
    os.environ["PRIVCORE_CALIBRATION_MEMO"] = "off"
    warnings.filterwarnings("ignore")
    import numpy as np

    from privcore.engine import cost
    from privcore.engine.runner import run_sweep
    from privcore.methods import dpsgd as dpsgd_mod
    from privcore.methods import get_method
    from ui.setting import build_data_info, explore_specs

    dpsgd = "dpsgd"  # the one method this benchmark times
    default_share = dpsgd_mod.EPSILON_SHARE
    info = build_data_info("mnist-5k")
    _, curve = explore_specs(info, {})
    base = replace(curve, methods=(dpsgd,), baseline=False)
    print(f"# DP-SGD alone, mnist-5k, {base.repeats} repetitions; load {os.getloadavg()[0]:.2f}")
    run_sweep(replace(base, epsilons=(2.0,), epochs=1, repeats=2), use_cache=False)  # imports, accountant
    epochs_grid = EPOCHS[:2] if args.quick else EPOCHS
    runs = 1 if args.quick else args.runs
    rows = []
    for epochs in epochs_grid:
        for batch in BATCHES:
            for eps in EPSILON_SETS:
                spec = replace(base, epochs=epochs, batch_size=batch, epsilons=eps)
                best = float("inf")
                for _ in range(runs):
                    t0 = time.perf_counter()
                    run_sweep(spec, use_cache=False)
                    best = min(best, time.perf_counter() - t0)
                sizes = cost.data_sizes(spec)
                rows.append((epochs, batch, len(eps), best,
                             cost._problem(spec, sizes.n, sizes.dim, sizes.classes, float(spec.lam))))
                print(f"epochs {epochs:3d}  batch {batch:5d}  epsilons {len(eps)}: {best:6.2f} s", flush=True)
    calib = cost.DEFAULT_COEFFS["calibrate"]
    kinds = ("sgd", "sgd_batch", "sgd_steps")
    best_fit = None
    for share in np.arange(0.10, 0.401, 0.02):
        dpsgd_mod.EPSILON_SHARE = float(share)
        work = []
        for epochs, batch, e, sec, problem in rows:
            parts = get_method(dpsgd).cost_parts(problem, e, base.repeats)
            work.append([sum(p.work for p in parts if p.kind == k) for k in kinds])
        work = np.array(work)
        secs = np.array([r[3] for r in rows])
        calib_s = calib * np.array([r[2] for r in rows])
        coef, *_ = np.linalg.lstsq(work / secs[:, None], 1.0 - calib_s / secs, rcond=None)  # relative error
        coef = np.maximum(coef, 0.0)
        ratios = (work @ coef + calib_s) / secs
        worst = float(max(ratios.max(), 1.0 / ratios.min()))
        if best_fit is None or worst < best_fit[0]:
            best_fit = (worst, float(share), coef, ratios)
    worst, share, coef, ratios = best_fit
    print(f"\nEPSILON_SHARE = {share:.2f}; " + ", ".join(f"{k} {c:.4f}" for k, c in zip(kinds, coef))
          + " (defaults now: " + ", ".join(f"{k} {cost.DEFAULT_COEFFS.get(k, 0.0)}" for k in kinds)
          + f", share {default_share}); worst factor {worst:.2f}")
    # A joint fit's constants (bench_cost.py: sgd 0.4262, sgd_steps 0.1286, no batch term, each further
    # epsilon 0.2 of a repetition), on the same runs, for comparison.
    dpsgd_mod.EPSILON_SHARE = 0.2
    before = []
    for epochs, batch, e, sec, problem in rows:
        parts = get_method(dpsgd).cost_parts(problem, e, base.repeats)
        units = {k: sum(p.work for p in parts if p.kind == k) for k in kinds}
        before.append((0.4262 * units["sgd"] + 0.1286 * units["sgd_steps"] + calib * e) / sec)
    dpsgd_mod.EPSILON_SHARE = default_share
    now = []
    for epochs, batch, e, sec, problem in rows:
        parts = get_method(dpsgd).cost_parts(problem, e, base.repeats)
        now.append((sum(cost.DEFAULT_COEFFS.get(p.kind, 0.0) * p.work for p in parts if p.kind in kinds) + calib * e) / sec)
    print(f"the constants in cost.py now, on the same runs: predicted / measured {min(now):.2f} to {max(now):.2f}")
    print(f"the joint fit's constants on the same runs: predicted / measured {min(before):.2f} to {max(before):.2f}")
    print("| epochs | batch | epsilons | measured s | predicted / measured | joint fit's |\n|---|---|---|---|---|---|")
    for (epochs, batch, e, sec, _), r, b in zip(rows, ratios, before):
        print(f"| {epochs} | {batch} | {e} | {sec:.2f} | {r:.2f} | {b:.2f} |")
    print(f"# load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
