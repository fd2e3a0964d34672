"""Time PATE's data-dependent epsilon (privcore.accounting.pate_dd) with its smooth sensitivity.

Prints seconds per call for a few vote sets (Dirichlet-multinomial votes, seeded), and the load
average. Run: ``OMP_NUM_THREADS=1 python bench/bench_pate_dd.py``.
"""

from __future__ import annotations

import os
import time

import numpy as np


from privcore.accounting.pate_dd import confident_gnmax_data_dependent

CASES = [  # teachers, classes, sigma_2, queries, Dirichlet concentration
    (250, 10, 40.0, 10_000, 0.3),
    (100, 10, 10.0, 2_000, 0.2),
    (25, 10, 2.0, 2_000, 0.2),
]


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.2f}")
    rng = np.random.default_rng(0)
    for t, c, sigma, m, conc in CASES:
        votes = np.stack([rng.multinomial(t, rng.dirichlet(np.full(c, conc))) for _ in range(m)]).astype(float)
        answered = votes.max(1) + 3.75 * sigma * rng.standard_normal((3, m)) >= 0.8 * t
        start = time.perf_counter()
        dd = confident_gnmax_data_dependent(votes, answered, sigma, 3.75 * sigma, 0.8 * t, 1000, 1e-5)
        took = time.perf_counter() - start
        print(f"T={t} C={c} sigma={sigma:g} M={m}: {took:.2f} s  eps_dd={dd.epsilon:.3f} "
              f"SS={dd.smooth_sensitivity:.4f} eps_published={dd.epsilon_published:.3f}")


if __name__ == "__main__":
    main()
