"""Every kind of job on CUDA, in-process and on a Dask cluster whose worker holds the GPU (a device check).

    python bench/gpu_jobs_check.py

A sweep (digits, three methods), a leakage measurement (digits) and a deep run (small CNN, the
teacher-vote methods and the non-private reference, on a generated Fashion-MNIST-format folder) are
run on CUDA in this process and then through ``DaskExecutor`` on an in-process ``LocalCluster`` of one
worker declaring the resource ``GPU=1``; the deep units ask for it (``DeepUnit.resources``). Prints
whether each kind's rows are the same, bit for bit, and the seconds. DP-SGD is included only where
dp_accounting is installed. Exits 1 when a kind differs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
#: DEVICE=cpu checks the script itself on a machine without a GPU.
DEVICE = os.environ.get("DEVICE", "cuda")


def leakage_fingerprints() -> list[str]:
    """The data fingerprints of the leakage games this process keeps."""
    from privcore.leakage import run as leakage_run

    return [key[0] for key in leakage_run.kept_games()]


def main() -> int:
    os.environ["PRIVCORE_CACHE"] = tempfile.mkdtemp(prefix="gpu_jobs_")
    folder = tempfile.mkdtemp(prefix="gpu_jobs_fashion_")
    from bench.bench_call_path import _fake_fashion

    _fake_fashion(folder)
    import torch

    from privcore.deep import fashion

    os.environ[fashion.FASHION_ENV] = folder
    torch.set_num_threads(1)
    import distributed

    from privcore.deep.spec import DeepSpec
    from privcore.deep.votes import dpsgd_methods, vote_methods
    from privcore.engine import context, tuning
    from privcore.engine.cache import ResultCache
    from privcore.leakage import run as leakage_run
    from privcore.engine.executor import DaskExecutor, LocalExecutor
    from privcore.engine.jobkinds import run_job
    from privcore.engine.specs import DataSpec, SweepSpec
    from privcore.leakage.spec import LeakageSpec

    have_pld = importlib.util.find_spec("dp_accounting") is not None
    sweep_methods = ("model_sensitivity", "loss_perturbation", "subsample_aggregate") + (("dpsgd",) if have_pld else ())
    deep_methods = vote_methods() + (dpsgd_methods() if have_pld else ())
    jobs = {
        "sweep": SweepSpec(data=DataSpec(name="digits", n=600), methods=sweep_methods, epsilons=(1.0, 8.0), delta=1e-5,
                           repeats=2, teachers=8, epochs=2, device=DEVICE),
        "leakage": LeakageSpec(method="model_sensitivity", epsilon=1.0, data=DataSpec(name="digits", n=400), delta=1e-5,
                               references=4, canaries=4, worlds=2, repeats=2, audit_trials=16, device=DEVICE),
        "deep": DeepSpec(n_train=None, n_test=None, epochs=1, batch_size=40, teachers=4, teacher_epochs=1,
                         teacher_batch=20, epsilons=(1.0,), budgets=(1, 10), repeats=2, device=DEVICE,
                         methods=deep_methods),
    }

    def numbers(result):
        rows = result.rows if hasattr(result, "rows") else [result]
        return [{k: v for k, v in r.to_dict().items() if k not in ("seconds", "cached", "device")} for r in rows]

    gpu = torch.cuda.get_device_name(0) if DEVICE == "cuda" else "no GPU (DEVICE=cpu)"
    print(f"torch {torch.__version__}, {gpu}; dp_accounting: {have_pld}", flush=True)
    bad = 0
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, resources={"GPU": 1},
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        for name, spec in jobs.items():
            out = {}
            for where, executor in (("local", LocalExecutor()), ("dask", DaskExecutor(client=client))):
                # Nothing carried over: a cache folder of its own (results, the teachers' predictions) and no
                # training context, selection context or leakage game kept by this process (the worker's).
                os.environ["PRIVCORE_CACHE"] = tempfile.mkdtemp(prefix=f"gpu_jobs_{name}_{where}_")
                context.clear()
                tuning.clear_selection_context()
                leakage_run.forget(leakage_fingerprints())
                t0 = time.perf_counter()
                result = run_job(spec, cache=ResultCache(), executor=executor)
                out[where] = (numbers(result), time.perf_counter() - t0)
            same = out["local"][0] == out["dask"][0]
            bad += not same
            print(json.dumps({"job": name, "rows": len(out["local"][0]), "same_bit_for_bit": same,
                              "local_s": round(out["local"][1], 2), "dask_gpu_worker_s": round(out["dask"][1], 2)}),
                  flush=True)
            if not same:
                for a, b in zip(*(out[w][0] for w in ("local", "dask"))):
                    if a != b:
                        print("  differs:", {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k)}, flush=True)
                        break
        # a CUDA deep unit asks for the GPU resource: the spec's units carry it
        from privcore.deep.run import DeepUnit

        unit = DeepUnit(0, replace(jobs["deep"]), ("teachers",), "k", "f", 0, resources={"GPU": 1})
        print(json.dumps({"deep_unit_resources": unit.resources}), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
