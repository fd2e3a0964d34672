"""One linear DP-SGD sweep at Explore's defaults on mnist-5k, timed in-process (prints seconds; not a test).

    python bench/bench_dpsgd_sweep.py [EPOCHS]          # default 20

For an A/B of two versions, run it from each checkout under farm-bench, e.g.
    farm-bench -n 7 --timeout 900 --vs "sh -c 'cd OLD && PYTHONPATH=OLD exec python bench/bench_dpsgd_sweep.py'" \
        -- sh -c 'cd NEW && exec python bench/bench_dpsgd_sweep.py'
No result cache; the calibration memo on (the same calibrations on both sides); a warm-up run first imports
the accountant, so the printed time is the sweep's own.
"""

from __future__ import annotations

import sys
import time
import warnings
from dataclasses import replace


def main() -> None:
    warnings.filterwarnings("ignore")
    from privcore.engine.runner import run_sweep
    from ui.setting import build_data_info, explore_specs

    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    _, curve = explore_specs(build_data_info("mnist-5k"), {})
    base = replace(curve, methods=("dpsgd",), baseline=False)
    run_sweep(replace(base, epsilons=(2.0,), epochs=1, repeats=2), use_cache=False)  # imports, accountant
    t = time.perf_counter()
    run_sweep(replace(base, epochs=epochs), use_cache=False)
    print(f"{time.perf_counter() - t:.2f}")


if __name__ == "__main__":
    main()
