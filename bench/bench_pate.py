"""Figure-1-style sweep time with the three methods beyond the paper added.

5 or 8 methods x 10 epsilons x delta in {0, 1e-5} x 20 repetitions on mnist-5k, results not
cached; the single-setting refresh (all 8 methods, one epsilon, delta = 1e-5, 20 repetitions,
median of 3 moves of epsilon, warm process); and the warm refresh per new method (Confident-GNMax's
includes its data-dependent epsilon). Prints and saves bench/out/pate.json with the load average.
Run with OMP_NUM_THREADS=1 on a shared machine.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path


from privcore.engine.runner import run_sweep
from privcore.engine.specs import SweepSpec
from privcore.methods import REGISTRY

EPSILONS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
FIVE = tuple(m for m in REGISTRY if REGISTRY[m].from_paper)
NEW = tuple(m for m in REGISTRY if not REGISTRY[m].from_paper)


def sweep(methods: tuple[str, ...], seed: int) -> float:
    t0 = time.perf_counter()
    for delta in (0.0, 1e-5):
        run_sweep(SweepSpec(methods=methods, epsilons=EPSILONS, delta=delta, repeats=20, seed=seed), use_cache=False)
    return time.perf_counter() - t0


def main() -> None:
    out = {"load_before": os.getloadavg(), "five_s": sweep(FIVE, 0), "eight_s": sweep(FIVE + NEW, 1)}
    run_sweep(SweepSpec(epsilons=(3.0,), delta=1e-5, repeats=20, seed=100, methods=FIVE + NEW), use_cache=False)
    moves = []
    for i in range(3):
        t0 = time.perf_counter()
        run_sweep(SweepSpec(epsilons=(3.5 + i,), delta=1e-5, repeats=20, seed=100, methods=FIVE + NEW), use_cache=False)
        moves.append(time.perf_counter() - t0)
    out["refresh_eight_s"] = statistics.median(moves)
    out["refresh_s"] = {}
    for m in NEW:
        times = []
        for i in range(3):
            t0 = time.perf_counter()
            run_sweep(SweepSpec(epsilons=(4.5 + i,), delta=1e-5, repeats=20, seed=100, methods=(m,), baseline=False),
                      use_cache=False)
            times.append(time.perf_counter() - t0)
        out["refresh_s"][m] = statistics.median(times)
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=2))
    path = Path(__file__).resolve().parent / "out" / "pate.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
