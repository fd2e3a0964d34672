"""The Dask executor: same rows as the in-process one, bit for bit; a lost worker; cancel; a cluster
that fails (workers without privcore, every worker or the scheduler gone) ends the sweep in one
message, keeping the finished points; a local cluster listens on 127.0.0.1 only.

Needs the optional cluster packages (``requirements-cluster.txt``); skipped without them. Kept
small for a shared 2-core machine: the bundled digits data, 2 repetitions, clusters of 1-2 workers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")
import cloudpickle  # noqa: E402  (a dependency of distributed)
import torch  # noqa: E402

from privcore.cli import main  # noqa: E402
from privcore.engine import context, runner  # noqa: E402
from privcore.engine.cache import ResultCache  # noqa: E402
from privcore.engine.executor import ClusterError, DaskExecutor, LocalExecutor, local_cluster_kwargs  # noqa: E402
from privcore.engine.runner import SweepCancelled, run_sweep  # noqa: E402
from privcore.engine.specs import DataSpec, SweepSpec  # noqa: E402

# Worker processes unpickle the fault-injecting wrappers below by value (this module is not importable there).
cloudpickle.register_pickle_by_value(sys.modules[__name__])

DIGITS = DataSpec(name="digits")
#: Several methods (a solve, a perturbed solve, DP-SGD, teachers) over two variants.
SPEC = SweepSpec(data=DIGITS, methods=("model_sensitivity", "loss_perturbation", "dpsgd", "subsample_aggregate"),
                 epsilons=(1.0, 10.0), delta=1e-5, repeats=2, teachers=4, batch_size=64, epochs=1, device="cpu",
                 vary="budget", values=(1, 10))
SMALL = SweepSpec(data=DIGITS, methods=("model_sensitivity", "subsample_aggregate"), epsilons=(1.0, 10.0),
                  repeats=2, teachers=4, device="cpu", seed=3)


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Torch on 1 thread here, as in Dask's worker processes: with several, a float sum may be split
    differently from one call to the next (MKL and OpenMP adapt their threads to the load), and a
    solver's last digits with it, whatever the executor."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    context.clear()
    yield
    torch.set_num_threads(threads)
    context.clear()


@pytest.fixture(scope="module")
def threads_client():
    """An in-process cluster (2 workers, 1 thread each): quick to start, same torch threads as here."""
    with distributed.LocalCluster(**local_cluster_kwargs(2, 1, processes=False)) as cluster, \
            distributed.Client(cluster) as client:
        yield client


def _stored(cache: ResultCache) -> dict:
    """Every stored point without its timing (the only field that may differ between executors)."""
    return {k: {f: v for f, v in cache.get(k).items() if f != "seconds"} for k in cache.keys()}


def _rows(result) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("seconds", "cached")} for r in result.rows]


def test_dask_rows_are_bit_for_bit_the_local_ones(threads_client, tmp_path):
    local_cache, dask_cache = ResultCache(tmp_path / "local"), ResultCache(tmp_path / "dask")
    local = run_sweep(SPEC, cache=local_cache, executor=LocalExecutor())
    context.clear()  # the workers share this process: make them solve everything again
    seen = []
    remote = run_sweep(SPEC, cache=dask_cache, executor=DaskExecutor(client=threads_client),
                       progress=lambda f, m: seen.append((f, m)))
    # Budget-free methods have the same points in both variants: computed once, also on the cluster.
    assert (remote.computed, remote.cached) == (local.computed, local.cached) == (11, 7)
    assert _rows(remote) == _rows(local)  # == on floats: bit for bit
    assert _stored(dask_cache) == _stored(local_cache)
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    again = run_sweep(SPEC, cache=dask_cache, executor=DaskExecutor(client=threads_client))
    assert again.computed == 0 and _rows(again) == _rows(local)  # read back from the driver's cache


class FailOnce:
    """The unit function, but its first call fails: a killed worker process (``os._exit``) or an error."""

    def __init__(self, work, marker: str, kill: bool) -> None:
        self.work, self.marker, self.kill = work, marker, kill

    def __call__(self, unit, poll):
        try:
            fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # first call only, across processes
        except FileExistsError:
            return self.work(unit, poll)
        os.close(fd)
        if self.kill:
            os._exit(1)  # the worker process dies mid-unit, as when a node is lost
        raise OSError("transient failure")


class FaultyExecutor(DaskExecutor):
    def __init__(self, marker: Path, kill: bool, **kw) -> None:
        super().__init__(**kw)
        self.marker, self.kill = str(marker), kill

    def run(self, units, work, poll, note):
        return super().run(units, FailOnce(work, self.marker, self.kill), poll, note)


def test_a_unit_that_fails_once_is_retried(threads_client, tmp_path):
    reference = run_sweep(SMALL, cache=ResultCache(tmp_path / "ref"))
    cache = ResultCache(tmp_path / "c")
    result = run_sweep(SMALL, cache=cache, executor=FaultyExecutor(tmp_path / "m", kill=False, client=threads_client))
    assert (tmp_path / "m").exists() and result.computed == len(reference.rows)
    assert _rows(result) == _rows(reference)


def test_a_killed_worker_process_loses_nothing(tmp_path):
    """A real worker process dies in its first unit; the scheduler re-runs that unit on a restarted
    worker (whose torch runs on 1 thread, as here: see ``one_torch_thread``)."""
    reference = run_sweep(SMALL, cache=ResultCache(tmp_path / "ref"))
    cache = ResultCache(tmp_path / "c")
    with FaultyExecutor(tmp_path / "m", kill=True, workers=1) as ex:
        result = run_sweep(SMALL, cache=cache, executor=ex)
    assert (tmp_path / "m").exists()
    assert result.computed == len(reference.rows) and len(cache) == len(reference.rows)
    assert _rows(result) == _rows(reference)


def test_cancel_stops_submitting_and_keeps_finished_points(threads_client, tmp_path):
    # 12 units, each with its own solves (lambda changes the problem)
    spec = SweepSpec(data=DIGITS, methods=("model_sensitivity", "loss_perturbation"), epsilons=(1.0,), repeats=2,
                     device="cpu", seed=5, vary="lam", values=(1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3), baseline=False)
    cache = ResultCache(tmp_path / "c")
    with pytest.raises(SweepCancelled):
        run_sweep(spec, cache=cache, executor=DaskExecutor(client=threads_client), cancel=lambda: len(cache) >= 1)
    kept = len(cache)
    assert 1 <= kept < 12
    deadline = time.time() + 20  # pending units were cancelled: the scheduler forgets them
    while time.time() < deadline:
        left = threads_client.run_on_scheduler(lambda dask_scheduler: [str(k) for k in dask_scheduler.tasks
                                                                       if "privcore-unit" in str(k)])
        if not left:
            break
        time.sleep(0.2)
    assert not left
    time.sleep(0.5)
    assert len(cache) == kept  # only the driver writes: nothing arrives after the cancel
    rest = run_sweep(spec, cache=cache, executor=DaskExecutor(client=threads_client))
    assert rest.cached == kept and rest.computed == 12 - kept


def test_cli_sweep_on_an_existing_scheduler(threads_client, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path / "cache"))
    args = ["sweep", "--dataset", "digits", "--methods", "model_sensitivity", "--epsilons", "1,10", "--repeats", "2",
            "--device", "cpu", "--format", "json", "--executor", "dask", "--scheduler", threads_client.scheduler.address]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "3 rows" in err and f"on dask at {threads_client.scheduler.address}" in err, err
    assert main(args[:-4]) == 0  # the same sweep locally: everything from the cache
    assert "(0 computed, 3 from cache)" in capsys.readouterr().err


# ---------------------------------------------------------------- a cluster that fails

#: Four units of one cheap method: a failure is met after the first has come back.
FOUR = SweepSpec(data=DIGITS, methods=("model_sensitivity",), epsilons=(1.0,), repeats=2, device="cpu", seed=7,
                 vary="lam", values=(1e-3, 2e-3, 3e-3, 4e-3), baseline=False)


@contextmanager
def _deadline(seconds: int):
    """Fail instead of hanging (the failures below once waited forever)."""
    def stop(*_):
        raise TimeoutError(f"still waiting after {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@contextmanager
def _scheduler_only():
    """A scheduler in this process on a loopback TCP port, with no workers (they are started apart)."""
    with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1",
                                  dashboard_address=None, scheduler_kwargs={"dashboard": False}) as cluster, \
            distributed.Client(cluster) as client:
        yield cluster, client


def _worker_process(address: str, folder: Path, env: dict | None = None) -> subprocess.Popen:
    """A ``dask worker`` process, started in ``folder`` (``python -m`` puts its working folder first on
    sys.path: not the checkout, whose privcore would shadow a stand-in)."""
    return subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                             "--no-nanny", "--no-dashboard"], env=env, cwd=folder, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def test_workers_that_cannot_import_privcore_get_one_clear_message(tmp_path):
    # Once: the worker died unpacking the first unit (a deserialization traceback) and the sweep waited forever.
    fake = tmp_path / "path" / "privcore"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("No module named privcore (a stand-in)")\n')
    with _scheduler_only() as (cluster, client):
        worker = _worker_process(cluster.scheduler.address, tmp_path, dict(os.environ, PYTHONPATH=str(fake.parent)))
        try:
            client.wait_for_workers(1, timeout=60)
            cache = ResultCache(tmp_path / "c")
            with _deadline(90), pytest.raises(ClusterError, match="cannot import privcore") as info:
                run_sweep(FOUR, cache=cache, executor=DaskExecutor(client=client, worker_wait=10))
            assert "install privcore" in str(info.value) and len(cache) == 0
        finally:
            worker.kill()
            worker.wait()


def test_every_worker_lost_mid_sweep_stops_within_the_wait_and_keeps_finished_points(tmp_path):
    # Once: killing every worker mid-sweep left the sweep waiting forever.
    with _scheduler_only() as (cluster, client):
        worker = _worker_process(cluster.scheduler.address, tmp_path)
        try:
            client.wait_for_workers(1, timeout=60)
            cache = ResultCache(tmp_path / "c")

            def kill_after_first() -> bool:
                if len(cache) >= 1 and worker.poll() is None:
                    worker.kill()
                    worker.wait()
                return False

            start = time.monotonic()
            with _deadline(120), pytest.raises(ClusterError, match="no worker has been left") as info:
                run_sweep(FOUR, cache=cache, executor=DaskExecutor(client=client, worker_wait=3), cancel=kill_after_first)
            assert "kept in the cache" in str(info.value)
            assert time.monotonic() - start < 100
        finally:
            worker.kill()
            worker.wait()
    kept = len(cache)
    assert 1 <= kept < 4
    rest = run_sweep(FOUR, cache=cache)  # the finished points are used: only the rest is computed
    assert rest.cached == kept and rest.computed == 4 - kept


def test_a_lost_scheduler_ends_the_command_in_one_line(tmp_path, monkeypatch, capfd):
    # Once: two tracebacks from distributed when the scheduler was killed mid-sweep.
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path / "cache"))
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                       host="127.0.0.1", dashboard_address=None, scheduler_kwargs={"dashboard": False})
    results = tmp_path / "cache" / "results"
    stop = threading.Event()

    def kill_after_first() -> None:
        while not stop.is_set():
            if results.is_dir() and len(ResultCache(results)) >= 1:
                cluster.close()
                return
            time.sleep(0.2)

    work = runner.execute_unit

    def slow_after_first(unit, poll=None):  # the scheduler goes while the later units run
        # By the unit's own index: Dask sends each task its own copy of this closure, so a list
        # of calls kept here would never grow past one on the worker's side.
        if unit.index > 0:
            time.sleep(2.0)
        return work(unit, poll)

    monkeypatch.setattr(runner, "execute_unit", slow_after_first)
    killer = threading.Thread(target=kill_after_first, daemon=True)
    killer.start()
    args = ["sweep", "--dataset", "digits", "--methods", "model_sensitivity", "--epsilons", "1", "--repeats", "2",
            "--device", "cpu", "--seed", "7", "--vary", "lam", "--values", "1e-3,2e-3,3e-3,4e-3", "--quiet",
            "--executor", "dask", "--scheduler", cluster.scheduler.address]
    try:
        with _deadline(120):
            code = main(args)
    finally:
        stop.set()
        killer.join()
        cluster.close()
    err = capfd.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and err.count("error:") == 1, err
    assert "lost the connection to the scheduler" in err and "kept in the cache" in err, err
    assert len(ResultCache(results)) >= 1


def test_a_local_cluster_listens_on_loopback_only():
    psutil = pytest.importorskip("psutil")
    # Once: --workers N started the HTTP dashboard on 0.0.0.0 (every interface).
    with DaskExecutor(workers=1) as ex:
        client = ex.client
        client.wait_for_workers(1, timeout=60)
        me = psutil.Process()
        listening = [(p.pid, c.laddr) for p in [me] + me.children(recursive=True)
                     for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        assert listening  # the scheduler and the worker listen, on loopback
        assert all(addr.ip == "127.0.0.1" for _, addr in listening), listening
        http = client.scheduler_info().get("services", {}).get("dashboard")  # the HTTP server (health, metrics)
        assert http is None or any(addr.port == http for _, addr in listening)
        assert client.scheduler.address.startswith("tcp://127.0.0.1:")
