"""N = 1,000,000 on the CPU: time, CPU time and peak memory of the 4-method sweep.

    python bench/bench_large_n.py [--n 250000 500000 1000000] [--device cpu]

Each N runs in a fresh process: it builds the augmented mnist-5k training set (InfiMNIST-style
deformations, D = 784), then runs the sweep bench_engine.py times at this size (model sensitivity,
loss perturbation, prediction sensitivity and subsample-and-aggregate at eps = 1, delta = 0,
B = 100, 20 repetitions, nothing cached). Prints wall and process CPU seconds of each part and the
process's peak resident memory (``ru_maxrss``), with the load average before and after, then the
sweep's CPU seconds per step: the eigenbasis, each method's own work, and within them the
mixed-precision solver, the certification (float64 check, Newton steps, polish) and the teachers.

``--products N`` only times the data-gradient product x^T r both ways ((r^T x)^T is what the solver
uses) on random [N, 651] float32 data, for P C = 10, 50 and 200 columns.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time, warnings
warnings.filterwarnings("ignore")
import privcore.context as context_mod
import privcore.solver as solver_mod
from privcore.data import load_dataset
from privcore.engine.runner import run_sweep
from privcore.engine.specs import DataSpec, SweepSpec
from privcore.methods import REGISTRY

def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime

steps = {}
def timed(name, fn):
    def wrapper(*a, **k):
        s = cpu()
        try:
            return fn(*a, **k)
        finally:
            steps[name] = steps.get(name, 0.0) + cpu() - s
    return wrapper

init = solver_mod.Preconditioner.__init__
solver_mod.Preconditioner.__init__ = timed("eigenbasis", init)
context_mod.solve_softmax = timed("solver", context_mod.solve_softmax)
context_mod.certify = timed("certification", context_mod.certify)
context_mod.TrainContext.teacher_thetas = timed("teachers", context_mod.TrainContext.teacher_thetas)
for name, m in REGISTRY.items():
    m.evaluate = timed("method " + name, m.evaluate)

n, device, only = int(sys.argv[1]), sys.argv[2], sys.argv[3]
w0, c0 = time.perf_counter(), cpu()
load_dataset("mnist-5k", n=n, seed=11)
w1, c1 = time.perf_counter(), cpu()
rss_data = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
methods = tuple(m for m in REGISTRY if REGISTRY[m].from_paper and REGISTRY[m].supports(0.0)
                and (only == "all" or m in only.split(",")))
res = run_sweep(SweepSpec(data=DataSpec(n=n), epsilons=(1.0,), delta=0.0, repeats=20, seed=11, device=device,
                          methods=methods), use_cache=False)
w2, c2 = time.perf_counter(), cpu()
print(json.dumps({"n": n, "methods": list(methods), "data_wall": w1 - w0, "data_cpu": c1 - c0,
                  "sweep_wall": w2 - w1, "sweep_cpu": c2 - c1, "rss_after_data_mb": rss_data,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
                  "accuracy": {r.method: round(r.accuracy_mean, 4) for r in res.rows}, "steps": steps}))
"""

PRODUCTS = r"""
import resource, sys, torch
def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime
n = int(sys.argv[1])
x = torch.rand(n, 651, generator=torch.Generator().manual_seed(0))
for k in (10, 50, 200):
    r = torch.randn(n, k, generator=torch.Generator().manual_seed(1))
    for name, fn in (("x^T r", lambda: x.T @ r), ("(r^T x)^T", lambda: (r.T @ x).T)):
        fn()
        s = cpu()
        for _ in range(3):
            fn()
        print(f"| {n:,} | {k} | {name} | {(cpu() - s) / 3:.3f} |")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, nargs="+", default=[250_000, 1_000_000])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--methods", default="all", help="comma-separated subset of the four (a quicker memory probe)")
    ap.add_argument("--products", type=int, default=0, help="only time x^T r against (r^T x)^T at this N")
    args = ap.parse_args()
    env = {**os.environ, "PRIVCORE_CACHE": tempfile.mkdtemp(prefix="privcore-bench-")}
    if args.products:
        print(f"load average {os.getloadavg()[0]:.2f}, {os.environ.get('OMP_NUM_THREADS', 'default')} threads")
        print("| N | columns P C | product | CPU s |")
        print("|---|---|---|---|")
        subprocess.run([sys.executable, "-c", PRODUCTS, str(args.products)], cwd=ROOT, env=env, check=True)
        return
    print("| N | load before | data build wall / CPU s | sweep wall / CPU s | peak RSS MB | load after |")
    print("|---|---|---|---|---|---|")
    for n in args.n:
        before = os.getloadavg()[0]
        out = subprocess.run([sys.executable, "-c", CHILD, str(n), args.device, args.methods], cwd=ROOT, env=env,
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(f"| {n:,} | {before:.2f} | failed: {out.stderr.strip().splitlines()[-1:]} |")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {n:,} | {before:.2f} | {r['data_wall']:.1f} / {r['data_cpu']:.1f} | {r['sweep_wall']:.1f} / "
              f"{r['sweep_cpu']:.1f} | {r['peak_rss_mb']:,.0f} | {os.getloadavg()[0]:.2f} |")
        print(f"  accuracies: {r['accuracy']}; RSS after the data build {r['rss_after_data_mb']:,.0f} MB")
        print("  sweep CPU s by step (solver, certification and teachers are parts of the methods' own work): "
              + ", ".join(f"{k} {v:.1f}" for k, v in sorted(r["steps"].items())))


if __name__ == "__main__":
    main()
