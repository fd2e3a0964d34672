"""Interleaved before/after cold seconds per method (prints medians): this checkout vs another one.

    OMP_NUM_THREADS=1 python bench/bench_before_after.py --before /path/to/old/checkout \
        [--rounds 3] [--which point] [--lam 1e-6] [--epochs 50] [--methods a,b]

Each round runs ``bench/bench_method_times.py`` (this checkout's copy, pointed at each tree) once
for the old tree and once for this one, alternating which goes first, every run in a fresh process
on an empty result cache. Prints the load average before each run and the median per method of
the wall and the CPU seconds (the process's own CPU time: steadier than wall time under load).
Make the old tree with ``git archive <commit> | tar -x -C DIR``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def run(tree: Path, args: list[str]) -> dict[str, tuple[float, float]]:
    """{method: (wall s, CPU s)} of one fresh-process run of bench_method_times.py on ``tree``."""
    env = dict(os.environ, PRIVCORE_CACHE=tempfile.mkdtemp(prefix="privcore-bench-"), PYTHONPATH=str(tree))
    script = HERE / "bench" / "bench_method_times.py"
    out = subprocess.run([sys.executable, str(script), *args], env=env, cwd=tree,
                         capture_output=True, text=True, check=True).stdout
    times = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] != "load":
            times[parts[0]] = (float(parts[1]), float(parts[2]))
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    a, rest = ap.parse_known_args()
    results: dict[str, dict[str, list[tuple[float, float]]]] = {"before": {}, "after": {}}
    for k in range(a.rounds):
        order = [("before", a.before), ("after", HERE)]
        for label, tree in (order if k % 2 == 0 else order[::-1]):
            print(f"round {k + 1} {label}: load average {os.getloadavg()[0]:.2f}", flush=True)
            for m, t in run(tree, rest).items():
                results[label].setdefault(m, []).append(t)
    print(f"medians of {a.rounds} rounds, seconds; args {' '.join(rest)}")
    print(f"{'':24s} {'wall before':>12s} {'after':>7s} {'ratio':>6s}   {'CPU before':>11s} {'after':>7s} {'ratio':>6s}")
    for m in results["after"]:
        line = f"{m:24s}"
        for i in (0, 1):
            b = statistics.median(t[i] for t in results["before"].get(m, [(math.nan, math.nan)]))
            n = statistics.median(t[i] for t in results["after"][m])
            line += f" {b:{12 if i == 0 else 14}.2f} {n:7.2f} {b / n if n else math.nan:5.2f}x"
        print(line)


if __name__ == "__main__":
    main()
