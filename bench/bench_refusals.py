"""Time the requests privcore must refuse quickly (moved here from the tests: timing is not a test).

    python bench/bench_refusals.py

Prints each refusal's seconds and exits 1 when one takes longer than its limit: a tight-accounting
S&A calibration at B = 10^12 (limit 5 s) and a sweep on 3,000-feature data without PCA (limit 10 s).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _timed(fn) -> float:
    t0 = time.perf_counter()
    try:
        fn()
    except (ValueError, SystemExit):
        pass
    return time.perf_counter() - t0


def main() -> int:
    import numpy as np

    from privcore.cli import main as cli
    from privcore.engine.cache import ResultCache
    from privcore.engine.runner import run_sweep
    from privcore.engine.specs import DataSpec, SweepSpec

    results = []
    results.append(("calibrate S&A tight at B = 10^12", 5.0, _timed(lambda: cli(
        ["calibrate", "--method", "subsample_aggregate", "--epsilon", "1", "--delta", "1e-5",
         "--budget", "1000000000000", "--accounting", "tight"]))))
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(0)
        x, y = rng.normal(size=(60, 3000)), np.arange(60) % 2
        path = Path(tmp) / "wide.csv"
        path.write_text(",".join(f"f{j}" for j in range(3000)) + ",label\n"
                        + "\n".join(",".join(map(str, r)) + f",{label}" for r, label in zip(x, y)) + "\n")
        spec = SweepSpec(data=DataSpec(name="file", data_file=str(path)), methods=("model_sensitivity",),
                         epsilons=(1.0,), delta=1e-5, repeats=2, teachers=2, batch_size=8, device="cpu")
        results.append(("sweep on 3,000 features without PCA", 10.0,
                        _timed(lambda: run_sweep(spec, cache=ResultCache(Path(tmp) / "c")))))
    slow = False
    for name, limit, seconds in results:
        slow |= seconds > limit
        print(f"{name}: {seconds:.2f} s (limit {limit:.0f} s)")
    return 1 if slow else 0


if __name__ == "__main__":
    raise SystemExit(main())
