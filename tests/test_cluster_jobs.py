"""Leakage measurements and deep runs through the executor seam: on a Dask cluster (in-process workers,
enough for the seam) the same results as in this process, bit for bit; one cancellation for every kind.

Needs the optional cluster packages (``requirements-cluster.txt``); skipped without them.
"""

from __future__ import annotations


import pytest

distributed = pytest.importorskip("distributed")
import torch  # noqa: E402

from privcore.deep.loop import TrainingCancelled  # noqa: E402
from privcore.deep.run import run_deep  # noqa: E402
from privcore.deep.spec import DeepSpec  # noqa: E402
from privcore.engine.cache import ResultCache  # noqa: E402
from privcore.engine.executor import DaskExecutor, LocalExecutor, local_cluster_kwargs  # noqa: E402
from privcore.engine.runner import SweepCancelled  # noqa: E402
from privcore.engine.specs import DataSpec  # noqa: E402
from privcore.jobs import JobCancelled  # noqa: E402
from privcore.leakage.run import LeakageCancelled, run_leakage  # noqa: E402
from privcore.leakage.spec import LeakageSpec  # noqa: E402

LEAKAGE = LeakageSpec(method="model_sensitivity", epsilon=1.0, data=DataSpec(name="digits", n=300), delta=1e-5,
                      budget=5, teachers=4, batch_size=32, epochs=2, references=4, canaries=4, worlds=2, repeats=2,
                      audit_trials=16, accounting="corrected", device="cpu")
DEEP = dict(n_train=None, n_test=None, epochs=1, batch_size=40, teachers=4, teacher_epochs=1, teacher_batch=20,
            epsilons=(1.0,), budgets=(1, 10), repeats=2, device="cpu")


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Torch on 1 thread, as in the workers (a float sum split differently would move the last digits)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(**local_cluster_kwargs(2, 1, processes=False)) as cluster, \
            distributed.Client(cluster) as c:
        yield c


def test_one_cancellation_for_every_kind_of_job():
    assert SweepCancelled is LeakageCancelled is TrainingCancelled is JobCancelled


def test_a_leakage_measurement_on_the_cluster_is_the_local_one(client, tmp_path):
    local_cache, dask_cache = ResultCache(tmp_path / "local"), ResultCache(tmp_path / "dask")
    local = run_leakage(LEAKAGE, cache=local_cache, executor=LocalExecutor())
    from privcore.leakage import run as leakage_run

    leakage_run.forget({k[0] for k in leakage_run.kept_games()})  # the worker shares this process: no kept game
    remote = run_leakage(LEAKAGE, cache=dask_cache, executor=DaskExecutor(client=client))
    strip = lambda r: {k: v for k, v in r.to_dict().items() if k not in ("seconds", "cached")}  # noqa: E731
    assert strip(remote) == strip(local) and not remote.cached  # == on floats: bit for bit
    (key,) = dask_cache.keys()
    assert local_cache.keys() == [key]
    again = run_leakage(LEAKAGE, cache=dask_cache, executor=DaskExecutor(client=client))
    assert again.cached and strip(again) == strip(local)


def test_a_deep_run_on_the_cluster_is_the_local_one(client, fake_fashion, tmp_path, monkeypatch):
    spec = DeepSpec(**DEEP)
    local = run_deep(spec, cache=ResultCache(tmp_path / "local"), executor=LocalExecutor())
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path / "other"))  # not the teachers' predictions of the local run
    seen = []
    remote = run_deep(spec, cache=ResultCache(tmp_path / "dask"), executor=DaskExecutor(client=client),
                      progress=lambda f, m: seen.append(f))
    strip = lambda res: [{k: v for k, v in r.to_dict().items() if k != "seconds"} for r in res.rows]  # noqa: E731
    assert strip(remote) == strip(local) and remote.computed == local.computed == len(local.rows)
    assert seen and seen[-1] == 1.0


def test_a_cancelled_deep_run_raises_the_one_cancellation(fake_fashion, tmp_path):
    with pytest.raises(JobCancelled):
        run_deep(DeepSpec(**DEEP), cache=ResultCache(tmp_path / "c"), cancel=lambda: True)
