"""The analytic Gaussian's sigma against 80-digit arithmetic (prints unsafe points and the noise cost; not a test).

    python bench/bench_agm_rounding.py

Over epsilon in 1e-8 .. 10 (19 points) and 30, 100, and ten deltas from 0.1 to 1e-200: whether
``analytic_gaussian_sigma`` meets Theorem 8 of Balle and Wang exactly (mpmath, 80 digits), whether
``analytic_gaussian_epsilon`` at 1.001 sigma does, and how far sigma lies above the exact smallest one
(the price of the rounding allowance), and the calibration before the allowance at one point. Needs mpmath (requirements-dev.txt). About a minute.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np

from privcore.accounting.gaussian import analytic_gaussian_epsilon, analytic_gaussian_sigma

mp.mp.dps = 80


def exact_delta(sigma: float, eps: float):
    s, e = mp.mpf(sigma), mp.mpf(eps)
    return mp.ncdf(1 / (2 * s) - e * s) - mp.exp(e) * mp.ncdf(-1 / (2 * s) - e * s)


def main() -> None:
    unsafe, rows = 0, []
    for eps in [float(e) for e in np.logspace(-8, 1, 19)] + [30.0, 100.0]:
        for delta in (0.1, 1e-5, 1e-8, 1e-11, 1e-15, 1e-20, 1e-30, 1e-50, 1e-100, 1e-200):
            try:
                sigma = analytic_gaussian_sigma(eps, delta)
            except ValueError:
                continue
            if exact_delta(sigma, eps) > delta:
                unsafe += 1
                print(f"UNSAFE sigma at eps={eps:.3g} delta={delta:g}")
            e2 = analytic_gaussian_epsilon(sigma * 1.001, delta)
            if exact_delta(sigma * 1.001, e2) > delta:
                unsafe += 1
                print(f"UNSAFE epsilon at eps={eps:.3g} delta={delta:g}")
            lo, hi = mp.mpf(sigma) * 0.5, mp.mpf(sigma)
            for _ in range(80):
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if exact_delta(mid, eps) <= delta else (mid, hi)
            rows.append((eps, delta, float(sigma / hi - 1)))
    print(f"{len(rows)} points, {unsafe} unsafe")
    for eps, delta, over in sorted(rows, key=lambda r: -r[2])[:5]:
        print(f"sigma above the exact one by {over:.3g} at eps={eps:.3g} delta={delta:g}")
    print(f"largest excess with eps >= 1e-3: {max(o for e, d, o in rows if e >= 1e-3):.3g}")
    # The calibration before the allowance: bisection on the float64 delta alone, 1e-8 margin.
    from privcore.accounting.gaussian import _bisect_decreasing, gaussian_delta

    eps, delta = 1e-8, 1e-100
    old = _bisect_decreasing(lambda x: gaussian_delta(x, eps), delta, 1.0, 2.0 ** 40) * (1.0 + 1e-8)
    new = analytic_gaussian_sigma(eps, delta)
    print(f"old calibration at eps={eps:g} delta={delta:g}: sigma {old:.10g}, exact delta "
          f"{mp.nstr(exact_delta(old, eps), 6)}; now {new:.10g}, exact delta {mp.nstr(exact_delta(new, eps), 6)}")


if __name__ == "__main__":
    main()
