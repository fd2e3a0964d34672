"""The time model's pieces one method at a time: predicted against measured seconds (prints figures).

    OMP_NUM_THREADS=1 python bench/bench_cost_pieces.py [--only teachers,student,pate_dd,lam_auto,lp_lambda,leakage]

Each section runs in a fresh process on an empty result cache (mnist-5k, Explore's defaults otherwise)
and prints, per setting, the cost model's prediction (privcore/engine/cost.py, made just before the run,
so it sees what the process already holds) and the wall seconds the run took:

* ``teachers``: subsample-and-aggregate alone (it pays the teachers), T = 16 / 40 / 100, N = 4,000 and
  T = 16, N = 1,000, lambda = 1e-6 ... 1e-1, one repetition;
* ``student``: the PATE student alone with its teachers held, lambda = 1e-5 / 1e-3 / 0.1, one release,
  20 repetitions, 20 repetitions x 5 epsilons;
* ``pate_dd``: Confident-GNMax alone with its teachers held, B = 1 ... 10,000, one and six epsilons
  (its data-dependent epsilon grows with B);
* ``lam_auto``: the private-lambda methods alone at lambda = auto, Explore's point and 7-epsilon curve,
  with the lambda each epsilon chose;
* ``lp_lambda``: loss perturbation alone (its non-private solve held), lambda = 1e-6 ... 1e-2, one and
  seven epsilons;
* ``leakage``: the Measured leakage page's default measurements one by one
  (privcore/leakage/cost.py's estimate against the run).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("teachers", "student", "pate_dd", "lam_auto", "lp_lambda", "leakage")

COMMON = r"""
import sys, time, warnings
warnings.filterwarnings("ignore")
from dataclasses import replace
from ui.setting import build_data_info, explore_specs
from privcore.engine.runner import run_sweep
from privcore.engine import cost
from privcore.engine.specs import DataSpec
info = build_data_info("mnist-5k")
point, curve = explore_specs(info, {})

def timed(spec):
    est = cost.estimate_spec(spec).seconds
    t = time.perf_counter()
    res = run_sweep(spec, use_cache=False)
    return est, time.perf_counter() - t, res

def one(method, **kw):
    return replace(point, methods=(method,), baseline=False, **kw)

run_sweep(one("model_sensitivity", repeats=1), use_cache=False)  # imports and the process's first solve
"""

CODE = {
    "teachers": r"""
for t, n in ((16, 4000), (40, 4000), (100, 4000), (16, 1000)):
    out = []
    for lam in (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1):
        est, sec, _ = timed(one("subsample_aggregate", lam=lam, repeats=1, teachers=t, data=DataSpec(n=n)))
        out.append(f"{lam:g}: {est:.2f}/{sec:.2f}")
    print(f"T = {t}, N = {n} (predicted/measured s): " + " | ".join(out), flush=True)
""",
    "student": r"""
for lam in (1e-5, 1e-3, 1e-1):
    run_sweep(one("subsample_aggregate", lam=lam, repeats=1), use_cache=False)  # the teachers, held
    out = []
    for reps, eps in ((1, (3.0,)), (20, (3.0,)), (20, (0.3, 1.0, 3.0, 10.0, 30.0))):
        est, sec, _ = timed(one("pate_student", lam=lam, repeats=reps, epsilons=eps))
        out.append(f"R = {reps}, {len(eps)} eps: {est:.2f}/{sec:.2f}")
    print(f"lambda = {lam:g} (predicted/measured s): " + " | ".join(out), flush=True)
""",
    "pate_dd": r"""
from ui.state import DEFAULTS
run_sweep(one("subsample_aggregate", repeats=1), use_cache=False)  # the teachers, held
for eps in ((3.0,), tuple(sorted(DEFAULTS["map_eps"]))):
    out = []
    for b in (1, 10, 100, 1000, 10000):
        est, sec, _ = timed(one("confident_gnmax", budget=b, epsilons=eps))
        out.append(f"B = {b}: {est:.2f}/{sec:.2f}")
    print(f"{len(eps)} epsilon(s) (predicted/measured s): " + " | ".join(out), flush=True)
""",
    "lam_auto": r"""
point_a, curve_a = explore_specs(info, {"lam": "auto"})
for m in ("model_sensitivity", "loss_perturbation", "subsample_aggregate", "confident_gnmax", "pate_student"):
    for spec in (point_a, curve_a):
        est, sec, res = timed(replace(spec, methods=(m,), baseline=False))
        chosen = [r.lam for r in res.rows if r.method == m]
        print(f"{m}, {len(spec.epsilons)} eps: predicted {est:.2f} s, measured {sec:.2f} s; lambdas chosen {chosen}",
              flush=True)
""",
    "lp_lambda": r"""
for lam in (1e-6, 1e-5, 1e-4, 1e-3, 1e-2):
    run_sweep(one("model_sensitivity", lam=lam, repeats=1), use_cache=False)  # its non-private solve, held
    out = []
    for eps in ((3.0,), (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)):
        est, sec, _ = timed(one("loss_perturbation", lam=lam, epsilons=eps))
        out.append(f"{len(eps)} eps: {est:.2f}/{sec:.2f}")
    print(f"lambda = {lam:g} (predicted/measured s): " + " | ".join(out), flush=True)
""",
    "leakage": r"""
from ui.setting import SidebarSettings, setting_from_values
from ui.state import DEFAULTS
from ui import leakage as lk
from privcore.leakage import run_leakage
from privcore.leakage.cost import estimate_seconds
v = dict(DEFAULTS)
side = SidebarSettings(v["dataset"], None, int(v["repeats"]), v["accounting"], v["device"], info)
specs, _ = lk.specs_for(side, setting_from_values(v), references=16, audit_trials=64)
quick, slow = lk.split_quick(specs)
sizes = cost.DataSizes(info.n_train, info.dim, info.classes)
order = quick + slow
parts = {"quick": [0.0, 0.0], "per release": [0.0, 0.0]}
for i, spec in enumerate(order):
    p = estimate_seconds(order[:i + 1], sizes) - estimate_seconds(order[:i], sizes)
    t = time.perf_counter(); run_leakage(spec, use_cache=False); a = time.perf_counter() - t
    part = parts["quick" if spec in quick else "per release"]
    part[0] += p; part[1] += a
    print(f"{spec.method}: predicted {p:.2f} s, measured {a:.2f} s", flush=True)
for name, (p, a) in parts.items():
    print(f"{name} part: predicted {p:.1f} s, measured {a:.1f} s")
""",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections")
    args = ap.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in CODE]
    if unknown:
        ap.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    for name in names:
        print(f"\n## {name} (load {os.getloadavg()[0]:.2f}; PRIVCORE_SLOWDOWN=1: predictions unscaled)", flush=True)
        env = {**os.environ, "PRIVCORE_CACHE": tempfile.mkdtemp(), "PRIVCORE_SLOWDOWN": "1"}
        res = subprocess.run([sys.executable, "-c", COMMON + CODE[name]], cwd=ROOT, env=env)
        if res.returncode != 0:
            raise SystemExit(f"section {name} failed (exit {res.returncode})")
    print(f"\n# load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
