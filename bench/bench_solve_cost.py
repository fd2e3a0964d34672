"""The non-private solve's time-model constant and the first solve's warm-up (prints figures).

    OMP_NUM_THREADS=1 python bench/bench_solve_cost.py [--runs 3]

In a fresh process, on mnist-5k's Explore defaults (model sensitivity alone, 20 repetitions, no
result cache), timed in the process's CPU seconds (a quiet machine's wall time, also on a busy one):
the first solve at lambda = 1e-3 (the process's first), then the same solve warm (lambda = 1.0001e-3,
a new problem of the same cost), then warm solves over lambda = 1e-6 ... 0.5. The eigenbasis, built
inside the first solve, is timed apart and left out. Prints each solve's seconds per unit of the
model's work (privcore/methods/base.py ``solver_iterations``: 1 at 1e-3), their median (the
``solve`` constant of privcore/engine/cost.py) and the first solve's extra seconds (``FIRST_SOLVE_S``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from dataclasses import replace


LAMS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 0.5)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.parse_args()
    warnings.filterwarnings("ignore")
    clock = time.process_time
    import privcore.context as context_mod
    import privcore.solver as solver_mod
    from privcore.engine.runner import run_sweep
    from privcore.methods.base import solver_iterations
    from ui.setting import build_data_info, explore_specs

    spent = {"eig": 0.0, "solve": 0.0}

    def timed(name, fn):
        def wrapper(*a, **k):
            s = clock()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += clock() - s
        return wrapper

    solver_mod.Preconditioner.__init__ = timed("eig", solver_mod.Preconditioner.__init__)
    context_mod.TrainContext.solve = timed("solve", context_mod.TrainContext.solve)
    point, _ = explore_specs(build_data_info("mnist-5k"), {})
    spec = replace(point, methods=("model_sensitivity",), baseline=False)

    def solve_seconds(lam: float) -> float:
        spent.update(eig=0.0, solve=0.0)
        run_sweep(replace(spec, lam=lam), use_cache=False)
        return spent["solve"] - spent["eig"]

    print(f"# model sensitivity's non-private solve, mnist-5k, CPU seconds; load {os.getloadavg()[0]:.2f}")
    first = solve_seconds(1e-3)
    again = solve_seconds(1.0001e-3)
    print(f"first solve of the process (lambda = 1e-3): {first:.3f} s; the same solve warm: {again:.3f} s; "
          f"warm-up {first - again:.3f} s")
    per_unit = []
    for lam in LAMS:
        sec = solve_seconds(lam * 1.0002)  # a new problem (the cached 1e-3 solves are not reused)
        unit = sec / solver_iterations(lam)
        per_unit.append(unit)
        print(f"lambda = {lam:g}: {sec:.3f} s, {solver_iterations(lam):.2f} units, {unit:.3f} s per unit")
    print(f"solve constant (median s per unit): {statistics.median(per_unit):.3f}; FIRST_SOLVE_S: {first - again:.2f}")
    print(f"# load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
