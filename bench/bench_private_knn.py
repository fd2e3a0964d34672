"""Private-kNN's test accuracy (abstentions wrong) and answered fraction at epsilon = 1, 3, 10, delta = 1e-5.

Per data set and budget B: ``--repeats`` releases on the test queries at the registered k and gamma,
``corrected`` accounting; the non-private limit (the subsample's plain majority) beside them.
Fashion-MNIST: the first ``--n`` training and first 1,000 test images of Debian's
dataset-fashion-mnist, pixels / 255, each row scaled into the unit ball on its own (a fixed map).

    python bench/bench_private_knn.py --data mnist-5k digits fashion --budgets 10 100
"""

from __future__ import annotations

import argparse
import time

import torch

from privcore.context import TrainContext
from privcore.data import load_dataset
from privcore.methods.private_knn import PrivateKNN
from privcore.types import PrivacyBudget, Problem

EPSILONS = (1.0, 3.0, 10.0, float("inf"))


def _fashion(n: int, m: int):
    from privcore.deep.fashion import load_fashion_mnist

    data = load_fashion_mnist()

    def rows(x):
        x = torch.from_numpy(x.reshape(x.shape[0], -1).astype("float32") / 255.0)
        return x / x.norm(dim=1, keepdim=True).clamp(min=1.0)

    return (rows(data.x_train[:n]), torch.from_numpy(data.y_train[:n].astype("int64")),
            rows(data.x_test[:m]), torch.from_numpy(data.y_test[:m].astype("int64")), 10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=["mnist-5k", "digits", "fashion"])
    ap.add_argument("--budgets", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--n", type=int, default=4000, help="Fashion-MNIST training rows")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    m = PrivateKNN()
    print(f"k = {m.neighbours}, gamma = {m.sample_rate:g}; accuracy (answered fraction), mean of {args.repeats} releases")
    for name in args.data:
        if name == "fashion":
            xtr, ytr, xte, yte, c = _fashion(args.n, 1000)
        else:
            ds = load_dataset(name)
            base = TrainContext.from_dataset(ds, Problem(n=ds.n, dim=ds.dim, classes=ds.classes), args.seed,
                                             torch.device("cpu"))
            xtr, ytr, xte, yte, c = base.x_train, base.y_train, base.x_test, base.y_test, ds.classes
        for b in args.budgets:
            problem = Problem(n=xtr.shape[0], dim=xtr.shape[1], classes=c, budget=b)
            ctx = TrainContext(xtr, ytr, xte, yte, c, problem, args.seed, torch.device("cpu"))
            scales = [m.calibrate(PrivacyBudget(e, 1e-5), problem, "corrected") for e in EPSILONS]
            t = time.perf_counter()
            out = m.release(ctx, scales, args.repeats)
            dt = time.perf_counter() - t
            acc = (out == yte).double().mean(dim=(1, 2)).tolist()
            ans = (out >= 0).double().mean(dim=(1, 2)).tolist()
            cells = "  ".join(f"eps={e:g}: {a:.3f} ({f:.2f})" for e, a, f in zip(EPSILONS, acc, ans))
            print(f"{name:9s} N={xtr.shape[0]} M={xte.shape[0]} B={b:<4d} {cells}  [{dt:.1f} s]", flush=True)


if __name__ == "__main__":
    main()
