"""Cold updates of the dashboard's expensive settings: predicted vs actual seconds (prints figures).

    OMP_NUM_THREADS=1 python bench/bench_cold_updates.py [--only lam_1e-6,lam_auto] [--repo PATH]

Each scenario runs in a fresh Python process on an empty result cache and computes what the page
computes, one spec after the other, with the engine (no browser):

* ``first_visit``: Explore at its defaults (the current setting, then the accuracy-vs-epsilon curve);
* ``lam_1e-6``, ``lam_auto``, ``epochs_50``: Explore with that one knob changed;
* ``who_wins``: the Who wins page's two maps (epsilon x B, epsilon x N) at its defaults.

For each spec it prints the cost model's prediction (:func:`privcore.engine.cost.estimate_spec`,
made just before the run, so it sees what the earlier specs left cached) and the measured seconds,
and the ETA the dashboard's progress bar would show (:func:`privcore.engine.cost.eta` over the
runner's progress fraction) divided by the true time left, when 10, 25, 50 and 75 % of the run's
true time has passed (1.00 = exact; the target is within a factor 1.5, 0.67 to 1.5). ``--repo`` runs another checkout (e.g. one before a speed-up, made with
``git worktree add``): without the cost model it prints the actual seconds only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SCENARIOS = ("first_visit", "lam_1e-6", "lam_auto", "epochs_50", "who_wins")

CHILD = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
from dataclasses import replace
from ui.setting import SidebarSettings, build_data_info, explore_specs, make_spec, setting_from_values
from ui.state import DEFAULTS
from privcore.engine.runner import run_sweep
try:
    from privcore.engine import cost
except ImportError:
    cost = None
name = sys.argv[1]
info = build_data_info("mnist-5k")
changes = {"first_visit": {}, "lam_1e-6": {"lam": 1e-6}, "lam_auto": {"lam": "auto"}, "epochs_50": {"epochs": 50}}
if name in changes:
    specs = list(zip(("point", "curve"), explore_specs(info, changes[name])))
else:  # Who wins: its two maps at the page's defaults
    from ui.setting import who_wins_specs
    specs = who_wins_specs(info)
clock = time.process_time if "--cpu" in sys.argv else time.perf_counter  # CPU seconds: a quiet machine's
try:  # the runner's progress inside a unit runs on the same clock
    from privcore.engine import progress as _progress
    _progress.CLOCK = clock
except ImportError:
    pass
out = []
for label, spec in specs:
    est = cost.estimate_spec(spec) if cost is not None else None
    predicted = est.seconds if est is not None else None
    trace = []
    t0 = clock()
    run_sweep(spec, progress=lambda f, m: trace.append((clock() - t0, f, m)))
    actual = clock() - t0
    etas = {}
    if predicted is not None:  # the bar's ETA when 10 %, 25 %, 50 % and 75 % of the true time has passed
        for share in (0.1, 0.25, 0.5, 0.75):
            seen = [(e, f) for e, f, _ in trace if e <= share * actual]
            if seen and actual > 2.0:
                elapsed, f = seen[-1]
                etas[share] = cost.eta(predicted, f, elapsed) / (actual - elapsed)
    out.append({"spec": label, "predicted_s": predicted, "actual_s": actual, "etas": etas,
                "trace": trace if "--trace" in sys.argv else None,
                "jobs": [[vi, m, v] for (vi, m), v in est.jobs.items()] if est is not None else None})
print(json.dumps(out))
"""


def run(name: str, repo: Path, trace: bool = False, cpu: bool = False) -> list[dict]:
    env = {**os.environ, "PRIVCORE_CACHE": tempfile.mkdtemp()}  # cwd=repo below: the tree timed
    if cpu:  # the process's CPU seconds stand for a quiet machine's wall time: no load factor
        env.update(PRIVCORE_SLOWDOWN="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    calib = os.environ.get("PRIVCORE_COST_MODEL")  # a bench_cost.py file to use in the fresh caches
    if calib:
        Path(env["PRIVCORE_CACHE"], "cost_model.json").write_text(Path(calib).read_text())
    res = subprocess.run([sys.executable, "-c", CHILD, name] + (["--trace"] if trace else []) + (["--cpu"] if cpu else []), cwd=repo, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"{name} failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--trace", type=Path, default=None,
                    help="write each run's (elapsed s, progress fraction, message) trace to this JSON file")
    ap.add_argument("--cpu", action="store_true",
                    help="time in the process's CPU seconds with no load factor (PRIVCORE_SLOWDOWN=1, one thread): "
                         "what a quiet machine would show, measured on a loaded one")
    args = ap.parse_args()
    traces = {}
    clock = "CPU seconds, no load factor" if args.cpu else "wall seconds"
    print(f"# cold updates of {args.repo} (fresh process and empty cache per scenario; {clock}; "
          f"load {os.getloadavg()[0]:.2f})")
    print(f"{'scenario':12s} {'spec':6s} {'predicted s':>11s} {'actual s':>9s} {'ratio':>6s}   "
          "ETA / true time left at 10, 25, 50, 75 % of the run")
    for name in args.only.split(","):
        for r in run(name.strip(), args.repo, trace=args.trace is not None, cpu=args.cpu):
            traces[f"{name.strip()} {r['spec']}"] = {k: r.get(k) for k in ("predicted_s", "actual_s", "trace", "jobs")}
            p, a = r["predicted_s"], r["actual_s"]
            ratio = f"{p / a:6.2f}" if p else "     -"
            etas = "  ".join(f"{v:4.2f}" for v in r["etas"].values()) or "-"
            print(f"{name:12s} {r['spec']:6s} {p if p is not None else float('nan'):11.1f} {a:9.1f} {ratio}   {etas}",
                  flush=True)
    print(f"# load average after: {os.getloadavg()[0]:.2f}")
    if args.trace is not None:
        args.trace.write_text(json.dumps(traces))


if __name__ == "__main__":
    main()
