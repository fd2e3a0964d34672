"""Time the Measured leakage view and LiRA's reference models (prints a table, writes bench/out/leakage.json).

    python bench/bench_leakage.py [--dataset mnist-5k] [--epsilon 3] [--references 16,64]

Cold: an empty result cache in a fresh temporary folder (data loading included, imports not);
cached: the same view again (read from the disk cache). LiRA: the K reference models alone, one
batched solve with per-problem data, on the population of the default view.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="mnist-5k")
    ap.add_argument("--epsilon", type=float, default=3.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--budget", type=int, default=10)
    ap.add_argument("--references", default="16,64")
    ap.add_argument("--audit-trials", type=int, default=64)
    args = ap.parse_args()
    os.environ["PRIVCORE_CACHE"] = tempfile.mkdtemp(prefix="bench_leakage_")

    import torch

    from privcore.engine.cache import ResultCache
    from privcore.engine.specs import DataSpec
    from privcore.leakage import NON_PRIVATE, TARGETS, LeakageSpec, audit_trials_for, run_leakage
    from privcore.leakage.game import build_population, reference_logits, reference_masks
    from privcore.solver import Preconditioner

    data = DataSpec(name=args.dataset, augment=False)
    common = dict(data=data, delta=args.delta, budget=args.budget, references=16)
    specs = [LeakageSpec(method=m, epsilon=1.0 if m == NON_PRIVATE else args.epsilon,
                         audit_trials=audit_trials_for(m, args.audit_trials), **common) for m in TARGETS]
    out: dict = {"device": "cpu", "threads": torch.get_num_threads(), "dataset": args.dataset,
                 "epsilon": args.epsilon, "delta": args.delta, "budget": args.budget, "methods": {}}
    store = ResultCache()
    t0 = time.perf_counter()
    results = []
    for spec in specs:
        t = time.perf_counter()
        results.append(run_leakage(spec, cache=store))
        out["methods"][spec.method] = {"seconds": time.perf_counter() - t, **results[-1].summary()}
    out["cold_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for spec in specs:
        assert run_leakage(spec, cache=store).cached
    out["cached_seconds"] = time.perf_counter() - t0

    from privcore.data import load_dataset

    ds = load_dataset(args.dataset, augment=False)
    t = lambda a, dt: torch.as_tensor(a.copy(), dtype=dt)  # noqa: E731
    pop = build_population(t(ds.x_train, torch.float32), t(ds.y_train, torch.int64), t(ds.x_test, torch.float32),
                           t(ds.y_test, torch.int64), ds.classes, 32, 0)
    pre = Preconditioner(pop.x)
    out["lira"] = {}
    for k in (int(v) for v in args.references.split(",")):
        masks = reference_masks(pop, k, 0)
        t1 = time.perf_counter()
        reference_logits(pop, masks, 1e-3, None, 0, precond=pre)
        out["lira"][k] = time.perf_counter() - t1

    print(f"{'method':24s} {'s':>6s} {'acc':>6s} {'eps_lb':>7s} {'AUC loss':>8s} {'AUC LiRA':>8s} {'AUC can.':>8s} "
          f"{'TPR@0.1% LiRA':>13s} {'TPR@1% can.':>11s}")
    for m, r in out["methods"].items():
        print(f"{m:24s} {r['seconds']:6.1f} {r['accuracy']:6.3f} {r['eps_lower']:7.2f} {r['loss_auc']:8.3f} "
              f"{r['lira_auc']:8.3f} {r.get('canary_auc', float('nan')):8.3f} {r['lira_tpr_at_0.1%']:13.4f} "
              f"{r.get('canary_tpr_at_1%', float('nan')):11.3f}")
    print(f"cold: {out['cold_seconds']:.1f} s, cached: {out['cached_seconds']:.2f} s")
    for k, s in out["lira"].items():
        print(f"LiRA reference models K = {k}: {s:.1f} s")
    dest = Path(__file__).resolve().parent / "out"
    dest.mkdir(exist_ok=True)
    (dest / "leakage.json").write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
