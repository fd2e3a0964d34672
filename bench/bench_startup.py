"""Start-up of the light CLI: median wall time of fresh interpreters vs a bare one.

    python bench/bench_startup.py [--runs 7] [--repo PATH] [--against PATH] [--no-inprocess]

Prints, for each command, the median of ``--runs`` fresh processes and the median of its ratio to
a bare ``python -c "import numpy"`` timed just before it in the same round, so that a load that
comes and goes moves both (the target is at most 3x). ``calibrate`` without data imports neither
torch nor scipy for any method but DP-SGD: pure DP, and the Gaussian ones (analytic Gaussian,
loss perturbation's chi quantile, PATE's zCDP conversion) in the standard library. DP-SGD loads
``dp_accounting`` (its replace-one PLD accountant, timed bare below) unless the on-disk memo
(privcore/accounting/memo.py) already holds the answer: "cold" runs with the memo off (and so
without the table shipped with privcore), "shipped table" on an empty cache at the defaults (the
table of privcore/accounting/bundle.py answers), "memo hit" after one call has written it. ``--repo`` times another checkout instead of this one;
``--against`` times a second checkout in the same rounds (e.g. ``git archive <old commit>``
unpacked in a folder; commands it lacks just fail fast). Last, in one process: DP-SGD's
replace-one calibration at mnist-5k's defaults (q = 0.064, 79 steps) for Explore's curve
epsilons, PLD evaluations and seconds, with the approximate start (privcore/accounting/pld_approx.py)
and with the previous start (CLT guess + coarse pass). Load averages are printed before and after.
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


def _once(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def median_time(argv: list[str], runs: int, env: dict[str, str], cwd: Path = ROOT) -> float:
    return statistics.median(_once(argv, env, cwd) for _ in range(runs))


def paired(argv: list[str], runs: int, env: dict[str, str], repos: list[Path]) -> list[tuple[float, float]]:
    """Per repo: (median seconds, median ratio to a numpy start timed just before, in the same round).

    Each round times ``python -c "import numpy"`` and then the command in every repo, back to back,
    so that a load that comes and goes moves the reference and the command together.
    """
    py = sys.executable
    times: list[list[float]] = [[] for _ in repos]
    ratios: list[list[float]] = [[] for _ in repos]
    for _ in range(runs):
        ref = _once([py, "-c", "import numpy"], env, ROOT)
        for i, repo in enumerate(repos):
            t = _once(argv, env, repo)
            times[i].append(t)
            ratios[i].append(t / ref)
    return [(statistics.median(t), statistics.median(r)) for t, r in zip(times, ratios)]


def inprocess() -> None:
    """PLD evaluations and seconds per epsilon of DP-SGD's calibration, approximate vs previous start."""
    from functools import lru_cache

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
    parser.add_argument("--against", type=Path, default=None,
                        help="another checkout timed in the same rounds (e.g. an export of an older commit)")
    parser.add_argument("--no-inprocess", action="store_true", help="skip the in-process DP-SGD calibration table")
    args = parser.parse_args()
    env = dict(os.environ, PRIVCORE_CACHE=tempfile.mkdtemp(prefix="privcore-bench-"))
    py = sys.executable
    print(f"{args.repo}: load average {os.getloadavg()[0]:.2f}, {args.runs} rounds; median seconds and median "
          "ratio to a numpy start timed in the same round")
    bare = median_time([py, "-c", "pass"], args.runs, env)
    numpy = median_time([py, "-c", "import numpy"], args.runs, env)
    print(f"{'bare python -c pass':<62} {bare:6.3f} s")
    ref = 'bare python -c "import numpy" (the 1x reference)'
    print(f"{ref:<62} {numpy:6.3f} s")
    repos = [args.repo] + ([args.against] if args.against else [])
    if args.against:
        print(f"each row: this checkout, then {args.against} (same rounds)")

    def row(label: str, argv: list[str], run_env: dict[str, str] = env) -> None:
        got = paired(argv, args.runs, run_env, repos)
        text = "   ".join(f"{t:6.3f} s {r:5.2f}x" for t, r in got)
        print(f"{label:<62} {text}")

    for title, group in (("no heavy import", LIGHT), ("Gaussian, standard library (no scipy)", GAUSSIAN)):
        print(f"-- {title}")
        for label, argv in group.items():
            row(label, [py, "-m", "privcore", *argv])
    print("-- DP-SGD (replace-one PLD, dp_accounting)")
    row("python -c 'import dp_accounting' (the accountant's import)", [py, "-c", "import dp_accounting"])
    row("calibrate dpsgd (delta = 1e-5), cold: memo off", [py, "-m", "privcore", *DPSGD],
        dict(env, PRIVCORE_CALIBRATION_MEMO="off"))
    # An empty cache with the table shipped with privcore (privcore/accounting/bundle.py): a first
    # call at the defaults reads it and writes nothing, so every round is a first call.
    row("calibrate dpsgd (delta = 1e-5), first call, empty cache: shipped table", [py, "-m", "privcore", *DPSGD],
        dict(env, PRIVCORE_CACHE=tempfile.mkdtemp(prefix="privcore-bench-empty-")))
    for repo in repos:  # writes the memo (where the checkout has one)
        _once([py, "-m", "privcore", *DPSGD], env, repo)
    row("calibrate dpsgd (delta = 1e-5), repeated: memo hit", [py, "-m", "privcore", *DPSGD])
    if not args.no_inprocess and args.repo == ROOT:
        inprocess()
    print(f"load average {os.getloadavg()[0]:.2f} (after)")


if __name__ == "__main__":
    main()
