"""The dashboard's time estimates against the actual time, at the machine's load now (prints figures).

    python bench/bench_estimates.py [--only explore,lam_1e-6,epochs_50,who_wins,leakage] [--load 4] [--settle 150] [--threads N]

Each scenario runs in a fresh Python process on an empty result cache, with the dashboard's threads
(no OMP_NUM_THREADS: the cores free when the run starts, :func:`privcore.threads.use_threads`) and its load factor (:func:`privcore.engine.cost.slowdown`, read just before the
run, as the page does), and computes what the page computes after its "Compute (about N s)" click:

* ``explore``: Explore at its defaults (the current setting, then the accuracy-vs-epsilon curve);
* ``lam_1e-6``, ``epochs_50``: Explore's current setting and curve with that one knob changed;
* ``who_wins``: the Who wins page's two maps (epsilon x B, epsilon x N) at its defaults;
* ``leakage``: the Measured leakage page's default measurements (every method, 16 reference models);
* ``leakage_methods`` (not in the default list): each Measured leakage spec alone, one thread, its share of
  the estimate against its CPU seconds;
* ``methods`` (not in the default list): each method of Explore's first view alone, its prediction without
  the load factor against the process's CPU seconds on one thread (what a quiet machine's wall time would
  be, measured on a loaded one): which method is mispriced.

Prints, per spec: the load average and the load factor when predicted, the predicted and the actual
seconds and their ratio (the target: 0.67 to 1.5). ``--load N`` runs N busy single-threaded
processes beside the scenarios (started and stopped by this script) to measure at a known load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ("explore", "lam_1e-6", "epochs_50", "who_wins", "leakage")

CHILD = r"""
import json, os, sys, time, warnings
warnings.filterwarnings("ignore")
from ui.setting import SidebarSettings, build_data_info, explore_specs, setting_from_values
from ui.state import DEFAULTS
from privcore.engine import cost
from privcore.engine.runner import run_sweep
name = sys.argv[1]
info = build_data_info("mnist-5k")
out = []

from privcore import threads

def record(label, predicted, slow, load, actual):
    out.append({"spec": label, "predicted_s": predicted, "slowdown": slow, "load": load, "actual_s": actual,
                "threads": threads.planned_threads() if name.endswith("methods") else USED})

USED = 0

def start():  # what the page's runner does after the click: take the free cores
    global USED
    USED = threads.use_threads()

if name == "methods":  # each method of Explore's first view alone, in the runner's order: unscaled CPU seconds
    from dataclasses import replace
    spec = explore_specs(info, {})[0]
    est = cost.estimate_spec(spec).jobs  # PRIVCORE_SLOWDOWN=1: no load factor
    for m in list(spec.methods) + ["non_private"]:
        one = replace(spec, methods=(m,) if m != "non_private" else spec.methods[:1], baseline=m == "non_private")
        t0 = time.process_time()
        run_sweep(one)
        record(m, est.get((0, m), 0.0), 1.0, os.getloadavg()[0], time.process_time() - t0)
elif name == "leakage_methods":  # each Measured leakage spec alone, one thread: unscaled CPU seconds
    from ui import leakage as lk
    from privcore.leakage import run_leakage
    from privcore.leakage.cost import estimate_seconds
    v = dict(DEFAULTS)
    side = SidebarSettings(v["dataset"], None, int(v["repeats"]), v["accounting"], v["device"], info)
    specs, _ = lk.specs_for(side, setting_from_values(v), references=16, audit_trials=64)
    sizes = cost.data_sizes(__import__("privcore.engine.specs", fromlist=["SweepSpec"]).SweepSpec(
        data=specs[0].data, seed=specs[0].seed))
    done = []
    for spec in specs:  # the increment of the estimate: what this spec adds to the ones before it
        before = estimate_seconds(done, sizes)
        done.append(spec)
        predicted = estimate_seconds(done, sizes) - before
        t0 = time.process_time()
        run_leakage(spec)
        record(spec.method, predicted, 1.0, os.getloadavg()[0], time.process_time() - t0)
elif name == "leakage":
    from ui import leakage as lk
    from privcore.leakage import run_leakage
    from privcore.leakage.cost import estimate_seconds
    v = dict(DEFAULTS)
    side = SidebarSettings(v["dataset"], None, int(v["repeats"]), v["accounting"], v["device"], info)
    specs, _ = lk.specs_for(side, setting_from_values(v), references=16, audit_trials=64)
    quick, slow = lk.split_quick(specs)
    sizes = cost.DataSizes(info.n_train, info.dim, info.classes)
    for label, part in (("quick", quick), ("per release", slow)):
        load, factor = os.getloadavg()[0], cost.slowdown()
        predicted = estimate_seconds(part, sizes)
        start()
        t0 = time.perf_counter()
        for spec in part:
            run_leakage(spec)
        record(label, predicted, factor, load, time.perf_counter() - t0)
else:
    if name == "who_wins":  # the Who wins page's two maps at its defaults
        from ui.setting import who_wins_specs
        specs = who_wins_specs(info)
    else:
        changes = {"explore": {}, "lam_1e-6": {"lam": 1e-6}, "epochs_50": {"epochs": 50}}[name]
        specs = list(zip(("point", "curve"), explore_specs(info, changes)))
    for label, spec in specs:
        load, factor = os.getloadavg()[0], cost.slowdown()
        predicted = cost.estimate_spec(spec).seconds
        start()
        t0 = time.perf_counter()
        run_sweep(spec)
        record(label, predicted, factor, load, time.perf_counter() - t0)
print(json.dumps(out))
"""


@contextmanager
def busy(n: int) -> Iterator[None]:
    """``n`` single-threaded busy loops (the load other sessions put on a shared machine) while the block
    runs, started 60 s before it (the 1-minute load average sees them, as it sees other sessions' jobs)."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        if loops:
            time.sleep(60)
        yield
    finally:
        for p in loops:
            p.kill()
            p.wait()


def settle(seconds: float) -> None:
    """Wait until other jobs' load (the last scenario's lingers in the load average) is below a quarter
    of a core, at most ``seconds``."""
    from privcore.threads import others_load

    end = time.monotonic() + seconds
    while time.monotonic() < end and others_load() >= 0.25:
        time.sleep(5)


THREADS = 0  # --threads


def run(name: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PRIVCORE_SLOWDOWN", "PRIVCORE_THREADS")}
    if THREADS:
        env["PRIVCORE_THREADS"] = str(THREADS)  # the runs' torch threads fixed, whatever the load
    if name in ("methods", "leakage_methods"):  # CPU seconds of one thread stand for a quiet machine's wall time
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PRIVCORE_SLOWDOWN="1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the dashboard's entry script sets it (app.py)
    env["PRIVCORE_CACHE"] = tempfile.mkdtemp()
    res = subprocess.run([sys.executable, "-c", CHILD, name], cwd=ROOT, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"{name} failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios (or methods)")
    ap.add_argument("--load", type=int, default=0, help="busy processes to run beside the scenarios")
    ap.add_argument("--settle", type=float, default=0.0,
                    help="before each scenario, wait up to this many seconds for the load of the previous one "
                         "to leave the 1-minute load average (others' load < 0.25), so that it picks every core")
    ap.add_argument("--threads", type=int, default=0,
                    help="fix the runs' torch threads (PRIVCORE_THREADS) instead of the free cores")
    args = ap.parse_args()
    global THREADS
    THREADS = args.threads
    with busy(args.load):
        print(f"# estimates vs actual ({os.cpu_count()} cores, {args.load} busy processes added; "
              f"load average {os.getloadavg()[0]:.2f})")
        print(f"{'scenario':10s} {'spec':12s} {'load':>5s} {'threads':>7s} {'factor':>6s} {'predicted s':>11s} "
              f"{'actual s':>9s} {'ratio':>6s}")
        worst = 1.0
        for name in args.only.split(","):
            settle(args.settle)
            for r in run(name.strip()):
                ratio = r["predicted_s"] / r["actual_s"] if r["actual_s"] > 0 else float("nan")
                if r["predicted_s"] > 0 and r["actual_s"] > 1.0:  # under a second: not what a user waits for
                    worst = max(worst, ratio, 1 / ratio)
                print(f"{name:10s} {r['spec']:12s} {r['load']:5.2f} {r['threads']:7d} {r['slowdown']:6.2f} "
                      f"{r['predicted_s']:11.1f} "
                      f"{r['actual_s']:9.1f} {ratio:6.2f}", flush=True)
        print(f"# worst factor {worst:.2f} (target <= 1.5); load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
