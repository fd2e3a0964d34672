"""The in-process executor against a local Dask cluster of 1 and 2 workers, in one run.

Every kind of job (privcore/engine/jobkinds.py), each from an empty result cache, per executor:

* sweep Figure 1 (b): the paper's five methods x 10 epsilons at delta = 1e-5, B = 100, on mnist-5k;
* sweep Figure 4: accuracy against N (500 ... 4,000 by default) at epsilon = 1, delta = 0, four methods;
* leakage: the measured leakage of the paper's five methods at epsilon = 1, delta = 1e-5 (the page's
  defaults: 16 reference models, 2 worlds), one job per method;
* deep: Figure 7's two panels at the ``cpu-small`` preset (Fashion-MNIST; skipped, with the reason,
  where the images cannot be loaded), one unit per training.

For the Dask runs it also times what is not computing: starting the cluster, the first import of
privcore (and torch) in the workers, and the gap between the sweep's wall time and the busiest
worker's compute time (planning on the driver, scheduling, moving results, idle workers at the
end). Dask's worker processes run torch on 1 thread each; the in-process runs use torch's default
and 1 thread (to tell the effect of threads from the effect of the executor).
Each configuration runs in a fresh process (nothing memoised carries over: data, solves, the
DP-SGD accountant's searches). The load average is printed with every line: on a shared machine,
compare runs of the same load.

    python bench/bench_cluster.py [--repeats 5] [--ns 500,1000,2000,4000] [--jobs sweep,leakage,deep]
                                  [--json bench/out/cluster.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from privcore.engine import context
from privcore.engine.plan import variant_data
from privcore.engine.cache import ResultCache
from privcore.engine.executor import DaskExecutor, LocalExecutor
from privcore.engine.specs import SweepSpec
from privcore.methods import REGISTRY

EPSILONS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
FIVE = tuple(m for m in REGISTRY if REGISTRY[m].from_paper)


def specs(repeats: int, ns: tuple[int, ...]) -> dict[str, SweepSpec]:
    return {
        "fig1b": SweepSpec(methods=FIVE, epsilons=EPSILONS, delta=1e-5, budget=100, repeats=repeats, device="cpu"),
        "fig4": SweepSpec(methods=tuple(m for m in FIVE if REGISTRY[m].supports(0.0)), epsilons=(1.0,), delta=0.0,
                          budget=100, repeats=repeats, device="cpu", vary="n", values=ns),
    }


class Timed:
    """Wraps an executor: records each unit's compute seconds and where it ran."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.busy: dict[str, float] = defaultdict(float)
        self.units = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, units, work, poll, note):
        for outcome in self.inner.run(units, work, poll, note):
            self.busy[outcome.where] += outcome.seconds
            self.units += 1
            yield outcome


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def jobs(kinds: tuple[str, ...], repeats: int, ns: tuple[int, ...]) -> dict[str, list]:
    """name -> the specs of one job of each kind asked for (a sweep, a leakage measurement per method, a deep run)."""
    out: dict[str, list] = {}
    if "sweep" in kinds:
        out.update({name: [spec] for name, spec in specs(repeats, ns).items()})
    if "leakage" in kinds:
        from privcore.leakage.spec import LeakageSpec

        out["leakage"] = [LeakageSpec(method=m, epsilon=1.0, delta=1e-5, device="cpu") for m in FIVE]
    if "deep" in kinds:
        from privcore.deep.spec import figure7_specs

        out["deep"] = [replace(s, device="cpu") for s in figure7_specs("cpu-small")]
    return out


def one(name: str, job_specs: list, executor) -> dict:
    from privcore.engine.jobkinds import run_job

    context.clear()  # no solve from an earlier run of this process
    timed = Timed(executor)
    before = load()
    t0 = time.perf_counter()
    rows = 0
    with tempfile.TemporaryDirectory() as tmp:
        for spec in job_specs:
            result = run_job(spec, cache=ResultCache(tmp), executor=timed)
            rows += len(result.rows) if hasattr(result, "rows") else 1
    wall = time.perf_counter() - t0
    busiest = max(timed.busy.values()) if timed.busy else 0.0
    return {"sweep": name, "rows": rows, "units": timed.units, "wall_s": round(wall, 2),
            "compute_s": round(sum(timed.busy.values()), 2), "busiest_worker_s": round(busiest, 2),
            "not_computing_s": round(wall - busiest, 2), "workers_used": len(timed.busy), "load_before": before,
            "load_after": load()}


CONFIGS = ("in-process", "in-process-1-thread", "dask-1", "dask-2")


def run_config(config: str, repeats: int, ns: tuple[int, ...], kinds: tuple[str, ...] = ("sweep",)) -> list[dict]:
    """Every job under one configuration, in this (fresh) process."""
    sweeps = jobs(kinds, repeats, ns)
    for name in specs(repeats, ns):  # load (and memoise) the data sets first: every executor then plans alike
        for _, vspec in (sweeps[name][0].variants() if name in sweeps else ()):
            variant_data(vspec)
    if "deep" in sweeps:
        from privcore.deep.data import load_images

        try:
            for s in sweeps["deep"]:
                load_images(s.dataset, s.n_train, s.n_test)
        except (RuntimeError, OSError, ValueError) as err:  # offline, no Fashion-MNIST here
            print(f"deep skipped: {' '.join(str(err).split())[:200]}", file=sys.stderr)
            del sweeps["deep"]
    import torch

    records = []
    if config.startswith("in-process"):
        if config.endswith("1-thread"):
            torch.set_num_threads(1)  # as each Dask worker process runs it (OMP_NUM_THREADS=1)
        label = f"in-process, {torch.get_num_threads()} torch thread{'s' if torch.get_num_threads() > 1 else ''}"
        for name, spec in sweeps.items():
            records.append({"executor": label, **one(name, spec, LocalExecutor())})
        return records
    workers = int(config.split("-")[1])
    label = f"dask, {workers} worker{'s' if workers > 1 else ''} (1 torch thread each)"
    t0 = time.perf_counter()
    ex = DaskExecutor(workers=workers)
    ex.client.wait_for_workers(workers)
    started = time.perf_counter() - t0
    t0 = time.perf_counter()
    # The first unit would pay this; 0 when the worker processes already imported this script's
    # imports (multiprocessing's spawn re-imports the main script: then cluster_start_s has it).
    ex.client.run(lambda: __import__("privcore.engine.runner"))
    records.append({"executor": label, "cluster_start_s": round(started, 2),
                    "worker_import_s": round(time.perf_counter() - t0, 2), "load": load()})
    for name, spec in sweeps.items():
        records.append({"executor": label, **one(name, spec, ex)})
    t0 = time.perf_counter()
    ex.close()
    records.append({"executor": label, "cluster_close_s": round(time.perf_counter() - t0, 2)})
    return records


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ns", default="500,1000,2000,4000")
    ap.add_argument("--jobs", default="sweep,leakage,deep", help="kinds of job to time (comma list)")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--config", choices=CONFIGS, default=None,
                    help="run one configuration in this process (default: each in a fresh process, in turn)")
    args = ap.parse_args()
    ns = tuple(int(v) for v in args.ns.split(","))
    kinds = tuple(k.strip() for k in args.jobs.split(",") if k.strip())
    if args.config is not None:
        for rec in run_config(args.config, args.repeats, ns, kinds):
            print("RECORD " + json.dumps(rec), flush=True)
        return
    # A fresh process per configuration: nothing memoised (data, solves, DP-SGD accountants) carries over.
    out = {"cpus": os.cpu_count(), "repeats": args.repeats, "ns": ns, "runs": []}
    print(f"{os.cpu_count()} CPUs; load average (1/5/15 min) {load()}; {args.repeats} repetitions", flush=True)
    for config in CONFIGS:
        done = subprocess.run([sys.executable, __file__, "--config", config, "--repeats", str(args.repeats),
                               "--ns", args.ns, "--jobs", args.jobs], capture_output=True, text=True, check=False)
        records = [json.loads(line[7:]) for line in done.stdout.splitlines() if line.startswith("RECORD ")]
        if done.returncode != 0:
            print(f"{config} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
        for rec in records:
            out["runs"].append(rec)
            print(json.dumps(rec), flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
