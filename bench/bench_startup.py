"""Start-up of the light CLI (issue 16): median wall time of fresh interpreters vs a bare one.

    python bench/bench_startup.py [--runs 7] [--repo PATH] [--no-inprocess]

Prints, for each command, the median of ``--runs`` fresh processes and its ratio to a bare
``python -c "import numpy"`` (the target is at most 3x). ``calibrate`` without data imports neither
torch nor scipy for any method but DP-SGD: pure DP, and the Gaussian ones (analytic Gaussian,
loss perturbation's chi quantile, PATE's zCDP conversion) in the standard library. DP-SGD loads
``dp_accounting`` (its replace-one PLD accountant, about 1 s of imports, timed bare below) unless
the on-disk memo (privcore/accounting/memo.py) already holds the answer: "cold" runs with the memo
off, "memo" runs with a memo written by one call before the timing. ``--repo`` times another
checkout (e.g. a ``git worktree`` of an older commit) the same way (commands it lacks just fail fast).
Last, in one process: DP-SGD's replace-one calibration at mnist-5k's defaults (q = 0.064, 79
steps) for Explore's curve epsilons, PLD evaluations and seconds, with the approximate start
(privcore/accounting/pld_approx.py) and with the previous start (CLT guess + coarse pass).
The first line prints the load average: compare figures at similar load.
"""

from __future__ import annotations

import argparse
import importlib
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
GAUSSIAN = {
    f"calibrate {m} (delta = 1e-5)": ["calibrate", "--method", m, "--epsilon", "1", "--delta", "1e-5"]
    for m in ("model_sensitivity", "loss_perturbation", "confident_gnmax")
}
DPSGD = ["calibrate", "--method", "dpsgd", "--epsilon", "1", "--delta", "1e-5"]
CURVE = (0.1, 0.3, 1.0, 3.0, 10.0)


def median_time(argv: list[str], runs: int, env: dict[str, str], cwd: Path = ROOT) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def inprocess() -> None:
    """PLD evaluations and seconds per epsilon of DP-SGD's calibration, approximate vs previous start."""
    from functools import lru_cache

    sys.path.insert(0, str(ROOT))
    os.environ["PRIVCORE_CALIBRATION_MEMO"] = "off"
    from privcore.accounting import dpsgd
    from privcore.types import Problem

    pb = Problem()
    q, k = pb.sample_rate, pb.steps
    t = time.perf_counter()
    importlib.import_module("dp_accounting.pld.privacy_loss_distribution")  # timed, then paid once
    print(f"-- in process: import dp_accounting.pld {time.perf_counter() - t:.2f} s; mnist-5k defaults q = {q:g}, "
          f"steps = {k}, delta = 1e-5, corrected (moderate grid)")
    dpsgd._pld_epsilon(1.0, 0.1, 1, 1e-5, "replace_one", 0.01)  # first call: lazy library set-up
    raw = dpsgd._pld_epsilon.__wrapped__
    approx = dpsgd._approx_start
    for name, start in (("approximate start", approx), ("previous start", lambda *a: None)):
        dpsgd._approx_start = start
        total_n, total_t = 0, 0.0
        for eps in CURVE:
            calls = []
            dpsgd._pld_epsilon = lru_cache(maxsize=None)(lambda *a: calls.append(a) or raw(*a))
            dpsgd.dpsgd_noise_multiplier.cache_clear()
            t = time.perf_counter()
            z = dpsgd.dpsgd_noise_multiplier(eps, 1e-5, q, k)
            dt = time.perf_counter() - t
            total_n, total_t = total_n + len(calls), total_t + dt
            print(f"{name:<18} eps = {eps:<5g} z = {z:8.5f}  {len(calls):2d} PLD evaluations  {dt:6.3f} s")
        print(f"{name:<18} curve {CURVE}: {total_n} PLD evaluations, {total_t:.2f} s")
    dpsgd._approx_start, dpsgd._pld_epsilon = approx, lru_cache(maxsize=8192)(raw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout to time (default: this one)")
    parser.add_argument("--no-inprocess", action="store_true", help="skip the in-process DP-SGD calibration table")
    args = parser.parse_args()
    env = dict(os.environ, PRIVCORE_CACHE=tempfile.mkdtemp(prefix="privcore-bench-"))
    py = sys.executable
    print(f"{args.repo}: load average {os.getloadavg()[0]:.2f}, {args.runs} runs each, median seconds")
    bare = median_time([py, "-c", "pass"], args.runs, env)
    numpy = median_time([py, "-c", "import numpy"], args.runs, env)
    print(f"{'bare python -c pass':<62} {bare:6.3f} s")
    ref = 'bare python -c "import numpy" (the 1x reference)'
    print(f"{ref:<62} {numpy:6.3f} s")
    def row(label: str, t: float) -> None:
        print(f"{label:<62} {t:6.3f} s  {t / numpy:5.2f}x numpy start")

    for title, group in (("no heavy import", LIGHT), ("Gaussian, standard library (no scipy)", GAUSSIAN)):
        print(f"-- {title}")
        for label, argv in group.items():
            row(label, median_time([py, "-m", "privcore", *argv], args.runs, env, args.repo))
    print("-- DP-SGD (replace-one PLD, dp_accounting)")
    row("python -c 'import dp_accounting' (the accountant's import)",
        median_time([py, "-c", "import dp_accounting"], args.runs, env))
    cold = dict(env, PRIVCORE_CALIBRATION_MEMO="off")
    row("calibrate dpsgd (delta = 1e-5), cold: memo off", median_time([py, "-m", "privcore", *DPSGD], args.runs, cold,
                                                                      args.repo))
    subprocess.run([py, "-m", "privcore", *DPSGD], cwd=args.repo, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)  # writes the memo
    row("calibrate dpsgd (delta = 1e-5), repeated: memo hit", median_time([py, "-m", "privcore", *DPSGD], args.runs,
                                                                          env, args.repo))
    if not args.no_inprocess and args.repo == ROOT:
        inprocess()
    print(f"load average {os.getloadavg()[0]:.2f} (after)")


if __name__ == "__main__":
    main()
