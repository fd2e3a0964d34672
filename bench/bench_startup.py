"""Start-up of the light CLI (issue 16): median wall time of fresh interpreters vs a bare one.

    python bench/bench_startup.py [--runs 7] [--repo PATH]

Prints, for each command, the median of ``--runs`` fresh processes and its ratio to a bare
``python -c "import numpy"`` (the target is at most 3x). ``calibrate`` without data imports neither
torch nor scipy for the pure-DP and Laplace methods; the Gaussian ones load ``scipy.special``
(log-space normal tails) and DP-SGD loads ``dp_accounting`` (its replace-one PLD accountant): those
are listed separately. ``--repo`` times another checkout (e.g. a ``git worktree`` of an older
commit) the same way. The first line prints the load average: compare figures at similar load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LIGHT = {
    "python -m privcore --help": ["--help"],
    "python -m privcore calibrate --help": ["calibrate", "--help"],
    "calibrate model_sensitivity (delta = 0)": ["calibrate", "--method", "model_sensitivity", "--epsilon", "1"],
    "calibrate subsample_aggregate (delta = 1e-5)": ["calibrate", "--method", "subsample_aggregate", "--epsilon", "1",
                                                     "--delta", "1e-5"],
}
ACCOUNTANTS = {
    "calibrate model_sensitivity (delta = 1e-5, scipy.special)": ["calibrate", "--method", "model_sensitivity",
                                                                  "--epsilon", "1", "--delta", "1e-5"],
    "calibrate dpsgd (delta = 1e-5, dp_accounting PLD)": ["calibrate", "--method", "dpsgd", "--epsilon", "1",
                                                          "--delta", "1e-5"],
}


def median_time(argv: list[str], runs: int, env: dict[str, str], cwd: Path = ROOT) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout to time (default: this one)")
    args = parser.parse_args()
    env = dict(os.environ, PRIVCORE_CACHE=tempfile.mkdtemp(prefix="privcore-bench-"))
    py = sys.executable
    print(f"{args.repo}: load average {os.getloadavg()[0]:.2f}, {args.runs} runs each, median seconds")
    bare = median_time([py, "-c", "pass"], args.runs, env)
    numpy = median_time([py, "-c", "import numpy"], args.runs, env)
    print(f"{'bare python -c pass':<62} {bare:6.3f} s")
    ref = 'bare python -c "import numpy" (the 1x reference)'
    print(f"{ref:<62} {numpy:6.3f} s")
    for title, group in (("no heavy import", LIGHT), ("with its accountant", ACCOUNTANTS)):
        print(f"-- {title}")
        for label, argv in group.items():
            t = median_time([py, "-m", "privcore", *argv], args.runs, env, args.repo)
            print(f"{label:<62} {t:6.3f} s  {t / numpy:5.2f}x numpy start")
    print(f"load average {os.getloadavg()[0]:.2f} (after)")


if __name__ == "__main__":
    main()
