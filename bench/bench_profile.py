"""Where the cold single-setting path spends its time, per method, against its GEMM floor.

    python bench/bench_profile.py [--methods a,b] [--repeats 20] [--epsilon 1] [--delta 1e-5] [--runs 1]

Each method runs in a fresh process (so everything is cold: imports, data, eigenbasis, the
non-private model) and reports, in seconds: the data load, the tensors, the eigenbasis, the
calibration, the mixed-precision solver, the float64 certification/polish, the noise draws (with
DP-SGD's batch sampling), the evaluation (test logits) and the rest of the method's own work.

The GEMM floor: the same evaluation is run once more under ``torch.profiler`` to list every matrix
product it executes (mm/bmm/addmm/baddbmm with shapes and dtypes); each distinct product is then
timed bare, on fresh contiguous operands, in the same process, and the floor is the sum over the
list. ``x floor`` is (eigenbasis + the method's evaluation) / floor: 1x would be a method that does
nothing but its matrix products. The first line prints the load average.

``--point`` instead profiles what the dashboard's recommendation waits for: the Explore page's
first spec with every control at its default (``ui.setting.explore_plan``: every method at the
current setting, as the server's warm-up computes it), cold, in one fresh process, with an empty
result cache. It prints that sweep's wall time and the GEMM floor of its matrix products (listed
by the profiler, each timed bare, as above): no code can bring the recommendation below
Streamlit's own first paint plus that floor on this machine without doing less arithmetic. It also
prints the profiler's operator time (self time of every operator, summed) and the eight largest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Shared by both children: the matrix products ``prof`` (a torch.profiler run with shapes) recorded,
#: each timed bare on fresh operands -> ``counts``, ``floor`` (seconds), ``flops``.
GEMM_FLOOR = r"""
GEMMS = {"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm"}
counts = {}
for e in prof.events():
    if e.name in GEMMS:
        shapes = [tuple(x) for x in e.input_shapes if x]
        if e.name in ("aten::addmm", "aten::baddbmm"):
            shapes = shapes[1:3]
        key = (e.name, tuple(shapes[:2]), e.input_dtypes[-1])
        counts[key] = counts.get(key, 0) + 1
DT = {"float": torch.float32, "double": torch.float64}
floor, flops = 0.0, 0.0
for (name, (sa, sb), dt), k in counts.items():
    a = torch.randn(*sa, dtype=DT.get(dt, torch.float32))
    b = torch.randn(*sb, dtype=DT.get(dt, torch.float32))
    op = torch.mm if len(sa) == 2 else torch.bmm
    best = float("inf")
    for _ in range(3):
        s = time.perf_counter()
        op(a, b)
        best = min(best, time.perf_counter() - s)
    floor += k * best
    batch = sa[0] if len(sa) == 3 else 1
    flops += k * 2.0 * batch * sa[-2] * sa[-1] * sb[-1]
"""

CHILD = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
t0 = time.perf_counter()
import torch
import privcore.context as context_mod
import privcore.solver as solver_mod
import privcore.methods.base as base_mod
import privcore.methods.dpsgd as dpsgd_mod
import privcore.methods.loss_perturbation as lp_mod
from privcore.data import load_dataset
from privcore.methods import get_method
from privcore.types import PrivacyBudget, Problem
t_import = time.perf_counter() - t0
args = json.loads(sys.argv[1])
buckets = {}

def timed(name, fn):
    def wrapper(*a, **k):
        s = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            buckets[name] = buckets.get(name, 0.0) + time.perf_counter() - s
    return wrapper

context_mod.solve_softmax = timed("solver", context_mod.solve_softmax)
solver_mod.solve_softmax = timed("solver", solver_mod.solve_softmax)  # the student imports it at call time
context_mod.certify = timed("certification", context_mod.certify)
base_mod.unit_noise = timed("noise", base_mod.unit_noise)
lp_mod.unit_noise = timed("noise", lp_mod.unit_noise)
dpsgd_mod._draw_chunk = timed("noise", dpsgd_mod._draw_chunk)  # batch masks and Gaussian noise
context_mod.TrainContext.logits = timed("evaluation", context_mod.TrainContext.logits)

s = time.perf_counter()
ds = load_dataset(args["data"], n=args["n"], seed=args["seed"])
t_data = time.perf_counter() - s
problem = Problem(n=ds.n, dim=ds.dim, classes=ds.classes, budget=args["budget"])
s = time.perf_counter()
ctx = context_mod.TrainContext.from_dataset(ds, problem, args["seed"], torch.device("cpu"))
t_tensors = time.perf_counter() - s
s = time.perf_counter()
ctx.preconditioner
t_basis = time.perf_counter() - s
m = get_method(args["method"])
s = time.perf_counter()
scales = [m.calibrate(PrivacyBudget(args["epsilon"], args["delta"]), problem, "corrected")]
t_cal = time.perf_counter() - s
uses_theta = m.name in ("model_sensitivity", "prediction_sensitivity", "loss_perturbation")
t_np = 0.0
if uses_theta:
    s = time.perf_counter()
    ctx.nonprivate_theta(problem.lam, released=m.name != "loss_perturbation")
    t_np = time.perf_counter() - s
np_buckets = dict(buckets)
buckets.clear()
s = time.perf_counter()
m.evaluate(ctx, scales, args["repeats"])
t_eval = time.perf_counter() - s
method_buckets = dict(buckets)

# The GEMM floor: list the matrix products of the same cold work, then time each bare.
from torch.profiler import ProfilerActivity, profile
ctx2 = context_mod.TrainContext.from_dataset(ds, problem, args["seed"], torch.device("cpu"))
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    ctx2.preconditioner
    if uses_theta:
        ctx2.nonprivate_theta(problem.lam, released=m.name != "loss_perturbation")
    m.evaluate(ctx2, scales, args["repeats"])
""" + GEMM_FLOOR + r"""
print(json.dumps({"import": t_import, "data": t_data, "tensors": t_tensors, "eigenbasis": t_basis, "calibration": t_cal,
                  "nonprivate": t_np, "np_buckets": np_buckets, "evaluate": t_eval, "buckets": method_buckets,
                  "floor": floor, "gflop": flops / 1e9, "gemm_calls": sum(counts.values()),
                  "threads": torch.get_num_threads()}))
"""

POINT_CHILD = r"""
import json, time, warnings
warnings.filterwarnings("ignore")
import torch
from privcore.engine.runner import run_sweep
from ui.setting import build_data_info, explore_plan
from torch.profiler import ProfilerActivity, profile
spec = explore_plan(build_data_info("mnist-5k"))[0]
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    s = time.perf_counter()
    result = run_sweep(spec)
    wall = time.perf_counter() - s
""" + GEMM_FLOOR + r"""
ops = sorted(((e.key, e.self_cpu_time_total / 1e6) for e in prof.key_averages()), key=lambda kv: -kv[1])
print(json.dumps({"methods": len(spec.methods), "points": result.computed, "wall_profiled": wall, "floor": floor,
                  "gflop": flops / 1e9, "gemm_calls": sum(counts.values()), "threads": torch.get_num_threads(),
                  "operators_s": sum(v for _, v in ops), "top_operators_s": {k: round(v, 3) for k, v in ops[:8]}}))
"""


def point_floor() -> dict:
    """The default Explore point, cold in a fresh process (empty cache): its wall time under the
    profiler and the GEMM floor of its matrix products."""
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        out = subprocess.run([sys.executable, "-c", POINT_CHILD], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, "PRIVCORE_CACHE": cache})
    if out.returncode != 0:
        raise SystemExit(f"the default point failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


PAPER_FIVE = ("model_sensitivity", "loss_perturbation", "dpsgd", "prediction_sensitivity", "subsample_aggregate")
PHASES = ("solver", "certification", "noise", "evaluation")


def run_child(args: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PRIVCORE_CALIBRATION_MEMO": "off"})  # cold: no memo
    if out.returncode != 0:
        raise SystemExit(f"{args['method']} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--methods", default=",".join(PAPER_FIVE))
    ap.add_argument("--data", default="mnist-5k")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--seed", type=int, default=100)
    ap.add_argument("--runs", type=int, default=1, help="fresh processes per method (medians are printed)")
    ap.add_argument("--point", action="store_true",
                    help="the dashboard's default point (every method) in one process: its GEMM floor")
    args = ap.parse_args()
    if args.point:
        print(f"# the Explore page's default point, cold, one process, CPU; load average {os.getloadavg()[0]:.2f}")
        for _ in range(args.runs):
            r = point_floor()
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}), flush=True)
        print(f"(seconds; 'wall_profiled' includes the profiler's overhead; load average after {os.getloadavg()[0]:.2f})")
        return
    print(f"# cold single-setting path per method: {args.data} n={args.n or 'all'}, eps={args.epsilon}, "
          f"delta={args.delta}, {args.repeats} repetitions, CPU; load average {os.getloadavg()[0]:.2f}")
    head = ("method", "data", "tensors", "eigenbasis", "calibration", "non-private model", "solver", "certification",
            "noise", "evaluation", "other", "method total", "GEMM floor", "x floor", "GFLOP")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name in args.methods.split(","):
        runs = [run_child({"method": name, "data": args.data, "n": args.n, "repeats": args.repeats,
                           "epsilon": args.epsilon, "delta": args.delta, "budget": args.budget, "seed": args.seed})
                for _ in range(args.runs)]

        def med(get):
            return statistics.median(get(r) for r in runs)

        phase = {p: med(lambda r, p=p: r["buckets"].get(p, 0.0) + r["np_buckets"].get(p, 0.0)) for p in PHASES}
        total = med(lambda r: r["eigenbasis"] + r["calibration"] + r["nonprivate"] + r["evaluate"])
        work = med(lambda r: r["eigenbasis"] + r["nonprivate"] + r["evaluate"])
        other = med(lambda r: r["nonprivate"] + r["evaluate"]) - sum(phase.values())
        floor = med(lambda r: r["floor"])
        cells = [name, med(lambda r: r["data"]), med(lambda r: r["tensors"]), med(lambda r: r["eigenbasis"]),
                 med(lambda r: r["calibration"]), med(lambda r: r["nonprivate"]), *phase.values(), other, total, floor]
        print("| " + " | ".join(c if isinstance(c, str) else f"{c:.3f}" for c in cells)
              + f" | {work / floor:.1f}x | {med(lambda r: r['gflop']):.2f} |")
    print(f"(seconds; 'non-private model' is theta*(lam) incl. its solver and certification, also counted in those "
          f"columns; 'x floor' = (eigenbasis + non-private model + evaluation) / GEMM floor; load average after "
          f"{os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
