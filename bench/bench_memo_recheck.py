"""Cost and slack of the DP-SGD memo's re-check (privcore/accounting/pld_approx.py ``recheck``); prints figures.

    OMP_NUM_THREADS=1 python bench/bench_memo_recheck.py

For DP-SGD settings from the defaults to MNIST-sized runs, calibrates the replace-one multiplier z
(memo off), then times the re-check a memo hit pays (pld_approx with the stdlib normal CDF, no scipy
import) and prints approx epsilon(z) / target (the re-check accepts up to RECHECK_SLACK) and the
same ratio at 0.99 z (what a multiplier 1 % too small would show).
"""

from __future__ import annotations

import math
import os
import time


SETTINGS = [  # (epsilon, delta, N, batch, epochs)
    (1.0, 1e-5, 4000, 256, 5), (0.1, 1e-5, 4000, 256, 5), (10.0, 1e-5, 4000, 256, 5), (100.0, 1e-5, 4000, 256, 5),
    (1.0, 1e-5, 60000, 256, 50), (0.1, 1e-5, 60000, 256, 5), (10.0, 1e-5, 60000, 1024, 20), (1.0, 1e-6, 1000, 500, 5),
]


def main() -> None:
    os.environ["PRIVCORE_CALIBRATION_MEMO"] = "off"
    from privcore.accounting import dpsgd
    from privcore.accounting.pld_approx import RECHECK_SLACK, approx_epsilon, recheck

    print(f"slack accepted: {RECHECK_SLACK}")
    print("eps      delta   N      batch epochs steps  z          ratio(z)  ratio(0.99 z)  re-check ms")
    for eps, dlt, n, batch, epochs in SETTINGS:
        q, k = batch / n, math.ceil(epochs * n / batch)
        z = dpsgd.dpsgd_noise_multiplier(eps, dlt, q, k)
        h = eps * 1e-2 / math.sqrt(k)
        t = time.perf_counter()
        ok = recheck(z, eps, dlt, q, k)
        ms = (time.perf_counter() - t) * 1e3
        r1 = approx_epsilon(z, q, k, dlt, h, stdlib=True) / eps
        r2 = approx_epsilon(0.99 * z, q, k, dlt, h, stdlib=True) / eps
        print(f"{eps:<8g} {dlt:<7g} {n:<6d} {batch:<5d} {epochs:<6d} {k:<6d} {z:<10.5g} {r1:<9.5f} {r2:<14.5f} "
              f"{ms:.1f}{'' if ok else '  REFUSED'}")


if __name__ == "__main__":
    main()
