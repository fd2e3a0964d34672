"""DP-SGD calibration time, cold and warm (prints a table; not a test).

    python bench/bench_calibration.py [--runs 3] [--modes corrected,tight] [--quick] [--previous-start]

For each setting (steps, q, epsilon; delta = 1e-5) and accounting mode it times
``dpsgd_noise_multiplier`` as DP-SGD's calibration calls it (corrected: moderate PLD grid;
tight: fine), replace-one: *cold* with every in-process memo cleared (the accountant imports
are paid once, before the table, and reported separately), *warm* when the same call is repeated
(the memo answers). Medians over ``--runs`` cold runs. The machine's load average is printed
before and after: on a shared machine the cold times scale with it. ``evals`` counts the
accountant's PLD evaluations of one cold call (their total is printed last); ``--previous-start``
replaces the approximate start (privcore/accounting/pld_approx.py) with the previous one (CLT
guess and a coarse-grid pass) to compare.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import os
import statistics
import time


STEPS = (10, 100, 500, 2000)
RATES = (0.001, 0.01, 0.064, 0.5)
EPSILONS = (0.1, 1.0, 8.0, 100.0)


os.environ["PRIVCORE_CALIBRATION_MEMO"] = "off"  # time the accountant, not the on-disk memo


CALLS: list[tuple] = []


def _clear() -> None:
    from privcore.accounting import dpsgd

    for f in (dpsgd._pld_epsilon, dpsgd._loss_range, dpsgd._epsilon_cached, dpsgd.dpsgd_noise_multiplier):
        f.cache_clear()
    CALLS.clear()


def _count() -> None:
    """Wrap the accountant's memoised evaluation so that every real evaluation is recorded."""
    from functools import lru_cache

    from privcore.accounting import dpsgd

    raw = dpsgd._pld_epsilon.__wrapped__
    dpsgd._pld_epsilon = lru_cache(maxsize=8192)(lambda *a: CALLS.append(a) or raw(*a))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--modes", default="corrected,tight")
    ap.add_argument("--quick", action="store_true", help="steps 10 and 2000 only")
    ap.add_argument("--previous-start", action="store_true", help="the CLT guess and coarse pass, not pld_approx")
    args = ap.parse_args()
    _count()
    if args.previous_start:
        from privcore.accounting import dpsgd

        dpsgd._approx_start = lambda *a: None

    from privcore.accounting import dpsgd_noise_multiplier
    from privcore.accounting.dpsgd import _pld_epsilon

    t0 = time.perf_counter()
    importlib.import_module("dp_accounting.pld.privacy_loss_distribution")
    imp = time.perf_counter() - t0
    _pld_epsilon(1.0, 0.1, 1, 1e-5, "replace_one", 0.01)  # first call: lazy library set-up

    print(f"# load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; "
          f"dp_accounting import: {imp:.2f} s (paid once per process, before the first calibration)")
    print(f"{'mode':<10}{'steps':>6}{'q':>7}{'eps':>7}{'z':>11}{'cold s':>9}{'evals':>6}{'warm ms':>9}")
    steps = (10, 2000) if args.quick else STEPS
    worst: dict[str, float] = {}
    evals: dict[str, int] = {}
    for mode, k, q, eps in itertools.product(args.modes.split(","), steps, RATES, EPSILONS):
        grid = "fine" if mode == "tight" else "moderate"
        cold = []
        for _ in range(args.runs):
            _clear()
            t = time.perf_counter()
            z = dpsgd_noise_multiplier(eps, 1e-5, q, k, "pld", relation="replace_one", grid=grid)
            cold.append(time.perf_counter() - t)
            n = len(CALLS)
        evals[mode] = evals.get(mode, 0) + n
        t = time.perf_counter()
        dpsgd_noise_multiplier(eps, 1e-5, q, k, "pld", relation="replace_one", grid=grid)
        warm = time.perf_counter() - t
        c = statistics.median(cold)
        worst[mode] = max(worst.get(mode, 0.0), c)
        print(f"{mode:<10}{k:>6}{q:>7g}{eps:>7g}{z:>11.5g}{c:>9.3f}{n:>6d}{warm * 1e3:>9.3f}", flush=True)
    print("# worst cold median: " + ", ".join(f"{m} {w:.2f} s" for m, w in worst.items()))
    start = "previous start (CLT guess + coarse pass)" if args.previous_start else "approximate start (pld_approx)"
    print(f"# PLD evaluations, {start}: " + ", ".join(f"{m} {n}" for m, n in evals.items()))
    print(f"# load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
