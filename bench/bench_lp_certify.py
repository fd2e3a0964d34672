"""Where loss perturbation's certified solves spend their CPU at large N.

    python bench/bench_lp_certify.py [--n 250000] [--seed 11]

Builds the augmented mnist-5k training set at N (D = 784), then, in this one process, times
(CPU seconds): the eigenbasis, the certified non-private model and loss perturbation's 20
perturbed solves at eps = 1, delta = 0. Within each: the mixed-precision solver, the whole
certification, its float64 passes over the data (count), its Newton steps and their float32
Hessian-vector products (count). Prints the load average before and after, and the data's rank.
"""

from __future__ import annotations

import argparse
import os
import resource
import warnings


def cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=250_000)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    import torch

    import privcore.certify as cert
    import privcore.context as cm
    from privcore.data import load_dataset
    from privcore.methods import REGISTRY
    from privcore.types import PrivacyBudget, Problem

    seconds: dict[str, float] = {}
    counts = {"float64 passes": 0, "Hessian products": 0, "Newton steps": 0}

    def timed(name, fn, count=None):
        def wrapper(*a, **k):
            s = cpu()
            if count:
                counts[count] += 1
            try:
                return fn(*a, **k)
            finally:
                seconds[name] = seconds.get(name, 0.0) + cpu() - s
        return wrapper

    cert.exact_objective = timed("float64 passes", cert.exact_objective, "float64 passes")
    cert._hessian_product = timed("Hessian products", cert._hessian_product, "Hessian products")
    cert._newton_step = timed("Newton steps", cert._newton_step, "Newton steps")
    cm.solve_softmax = timed("mixed-precision solver", cm.solve_softmax)
    cm.certify = timed("certification", cm.certify)

    def report(label: str, total: float) -> None:
        parts = ", ".join(f"{k} {v:.1f}" + (f" ({counts[k]})" if k in counts else "") for k, v in seconds.items())
        print(f"{label}: {total:.1f} s CPU; {parts}; solver iterations {ctx.stats.get('solver_iterations', 0):.0f}")
        seconds.clear()
        counts.update({k: 0 for k in counts})

    print(f"load average {os.getloadavg()[0]:.2f}, {torch.get_num_threads()} threads, N = {args.n:,}")
    ds = load_dataset("mnist-5k", n=args.n, seed=args.seed)
    pb = Problem(n=ds.n, dim=ds.dim, classes=ds.classes, budget=100)
    ctx = cm.TrainContext.from_dataset(ds, pb, args.seed, torch.device("cpu"))
    s = cpu()
    ctx.preconditioner
    print(f"eigenbasis: {cpu() - s:.1f} s CPU, rank {ctx.preconditioner.basis.shape[1]} of {ds.dim}")
    s = cpu()
    ctx.nonprivate_theta(pb.lam, released=False)
    report("certified non-private model", cpu() - s)
    ctx.stats.clear()
    m = REGISTRY["loss_perturbation"]
    scales = [m.calibrate(PrivacyBudget(1.0, 0.0), pb, "corrected")]
    s = cpu()
    m.evaluate(ctx, scales, 20)
    report("loss perturbation, 20 releases", cpu() - s)
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
