"""Where a sweep's units of work run: in this process (the default) or on a Dask cluster.

The runner (:mod:`privcore.engine.runner`) plans a sweep on the driver: it loads each variant's
data set (for its fingerprint), looks every point up in the result cache and turns the misses of
one method in one variant into a :class:`WorkUnit` (that method's missing epsilons x all
repetitions: the batch that makes the engine fast). An executor runs the units and hands back
:class:`UnitOutcome` values: (key, plain-dict value) pairs, numbers only. Only the driver writes
to the result cache (SQLite must not be shared over a network file system).

* :class:`LocalExecutor` runs each unit in the calling thread, as soon as it is planned, with the
  runner's progress and cancel callback inside the batch: exactly the behaviour and speed of a
  sweep without an executor.
Every kind of job runs through this seam: a sweep's :class:`WorkUnit`, a leakage measurement
(:class:`privcore.leakage.run.LeakageUnit`) and a deep run's trainings
(:class:`privcore.deep.run.DeepUnit`, which asks for a GPU worker on CUDA). A unit has an ``index``
and a ``method`` (for messages) and may name Dask worker ``resources``; its work function is
module-level, so a worker can import it.

* :class:`DaskExecutor` submits every unit to a ``distributed`` cluster (an existing scheduler, or
  a ``LocalCluster`` it starts) and collects the outcomes as they finish, polling the runner's
  progress and cancel callback at least 4 times a second. Cancel stops submitting and cancels the
  units not yet finished (a unit already running on a worker runs to its end there; its result is
  dropped). The scheduler re-runs a lost worker's units elsewhere; a unit that raises an
  unexpected error is retried ``retries`` times.

A cluster that fails ends the sweep with one :class:`ClusterError` (an OSError: the CLI's exit 2),
never a hang: before the first unit, the workers must answer a probe (privcore importable there, the
driver's version and cache schema); a cluster left without workers for ``worker_wait`` seconds, or a
lost connection to the scheduler, stops the wait. Units that came back before are already in the
driver's cache (:mod:`privcore.engine.cluster_health`). A local cluster listens on 127.0.0.1 only.

Dask is an optional extra (``requirements-cluster.txt``): this module imports it only when a
:class:`DaskExecutor` is used.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import time
import uuid
from concurrent.futures import CancelledError
from typing import Any, Callable, Iterable, Iterator

from .cluster_health import WORKER_WAIT_S, ClusterError, Watch, check_workers, local_cluster_kwargs, one_line, quiet_logs
from .work import Poll, UnitOutcome, Work, WorkUnit

__all__ = ["WorkUnit", "UnitOutcome", "ClusterError", "Executor", "LocalExecutor", "DaskExecutor", "EXECUTOR_CHOICES",
           "add_executor_args", "executor_from_args", "local_cluster_kwargs", "DASK_MISSING", "WORKER_WAIT_S"]

EXECUTOR_CHOICES: tuple[str, ...] = ("local", "dask")

DASK_MISSING = ("the dask executor needs the optional cluster packages: pip install -r requirements-cluster.txt")

class Executor:
    """Runs units and yields their outcomes (the order may differ from the submission order)."""

    name = "local"
    #: Whether the driver resolves the sweep's device itself (False: the workers do).
    local_device = True
    #: Whether units run elsewhere while the driver waits (progress is then reported as they come back).
    concurrent = False

    def run(self, units: Iterable[WorkUnit], work: Work, poll: Poll, note: Callable[[str], None]) -> Iterator[UnitOutcome]:
        """Run every unit of ``units`` (a list, or a lazy iterable consumed as units are handed out).

        ``poll`` must be called often while waiting (it raises on cancel); ``note`` sets the
        progress message.
        """
        raise NotImplementedError

    def describe(self) -> str:
        return self.name

    def close(self) -> None:
        """Release what the executor started (a local cluster)."""

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalExecutor(Executor):
    """Each unit in the calling thread, one after the other, with the run's progress and cancel inside it."""

    name = "local"

    def run(self, units: Iterable[WorkUnit], work: Work, poll: Poll, note: Callable[[str], None]) -> Iterator[UnitOutcome]:
        for unit in units:
            yield work(unit, poll)


def _scheduler_file_address(path: str) -> str:
    """The ``address`` a ``dask scheduler --scheduler-file`` JSON file holds; ValueError naming the file."""
    import json
    import os

    name = os.path.basename(path)
    try:
        with open(path, encoding="utf-8") as fh:
            info = json.loads(fh.read(1_000_000))
    except FileNotFoundError:
        raise ValueError(f"scheduler file {name!r} does not exist: start the scheduler with "
                         "--scheduler-file first, or give its address tcp://host:8786") from None
    except (OSError, ValueError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else "not valid JSON"
        raise ValueError(f"scheduler file {name!r} cannot be read: {reason}") from None
    address = info.get("address") if isinstance(info, dict) else None
    if not isinstance(address, str) or "://" not in address:
        raise ValueError(f"scheduler file {name!r} holds no scheduler address (a JSON object with "
                         "\"address\": \"tcp://host:port\")")
    return address


class DaskExecutor(Executor):
    """Units as tasks on a Dask ``distributed`` cluster.

    ``scheduler``: address of a running scheduler (``tcp://host:8786``) or its scheduler file
    (``*.json``, written by ``dask scheduler --scheduler-file``), or None to start a
    ``LocalCluster`` of ``workers`` workers (``threads`` threads each, separate processes unless
    ``processes=False``). ``client``: an existing ``distributed.Client`` to use instead (not closed
    by :meth:`close`). ``retries``: re-runs of a unit that raised (a lost worker's units are
    re-run by the scheduler in any case, up to its ``allowed-failures``).
    """

    name = "dask"
    local_device = False
    concurrent = True

    def __init__(self, scheduler: str | None = None, workers: int = 2, *, threads: int = 1, processes: bool = True,
                 client: Any = None, retries: int = 2, worker_wait: float = WORKER_WAIT_S, quiet: bool = False) -> None:
        try:
            importlib.import_module("distributed")  # only whether it is installed
        except ImportError:
            raise ValueError(DASK_MISSING) from None
        if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
            raise ValueError(f"scheduler must be an address such as tcp://host:8786, got {scheduler!r}")
        for what, value in (("workers", workers), ("threads", threads), ("retries", retries)):
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if what == "retries" else 1):
                raise ValueError(f"{what} must be an integer >= {0 if what == 'retries' else 1}, got {value!r}")
        if (isinstance(worker_wait, bool) or not isinstance(worker_wait, (int, float))
                or not 0 < worker_wait <= 86_400):
            raise ValueError(f"worker_wait must be a number of seconds in (0, 86400], got {worker_wait!r}")
        self.scheduler = scheduler
        self.workers = workers
        self.threads = threads
        self.processes = processes
        self.retries = retries
        self.worker_wait = float(worker_wait)
        #: Hide distributed's own log lines (its tracebacks when a cluster fails) while this executor
        #: runs: the command line reports a failure in one line of its own.
        self.quiet = quiet
        self._client = client
        self._own_client = client is None
        self._cluster = None
        self._checked: Any = None  # the client whose workers answered the probe
        self._address: str | None = None  # the scheduler's, kept for messages after the connection is lost

    # ------------------------------------------------------------ connection

    @property
    def client(self) -> Any:
        if self._client is None:
            from distributed import Client, LocalCluster

            with self._logs():
                if self.scheduler is not None and self.scheduler.endswith(".json"):  # dask scheduler --scheduler-file
                    # Read here: distributed waits forever for a missing file and fails obscurely on a bad one.
                    self._client = Client(_scheduler_file_address(self.scheduler), timeout="30s")
                elif self.scheduler is not None:
                    self._client = Client(self.scheduler, timeout="30s")
                else:
                    import dask

                    # Dask's nannies set MALLOC_TRIM_THRESHOLD_ in their workers, which turns off glibc's
                    # adaptive mmap threshold: every large tensor is then mapped and unmapped afresh, and
                    # the batched solves ran twice as slowly (loss perturbation: 11 s instead of 5.5 s).
                    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}):
                        self._cluster = LocalCluster(**local_cluster_kwargs(self.workers, self.threads, self.processes,
                                                                            quiet=self.quiet))
                    self._client = Client(self._cluster)
        return self._client

    def describe(self) -> str:
        if self.scheduler is not None:
            return f"dask at {self.scheduler}"
        if self._client is not None and self._cluster is None and not self._own_client:
            return "dask"
        return f"dask (local cluster, {self.workers} worker{'s' if self.workers != 1 else ''})"

    def close(self) -> None:
        # A dead scheduler must not make closing wait or print: bounded, and errors ignored.
        with self._logs():
            if self._own_client and self._client is not None:
                with contextlib.suppress(Exception):
                    self._client.close(timeout=10)
                self._client = None
            if self._cluster is not None:
                with contextlib.suppress(Exception):
                    self._cluster.close(timeout=10)
                self._cluster = None

    def _logs(self):  # noqa: ANN202 - a context manager
        return quiet_logs(self.quiet)

    def _where(self, client: Any) -> str:
        address = self.scheduler or getattr(getattr(client, "scheduler", None), "address", None) or self._address
        return f"the scheduler at {address}" if address else "the scheduler"

    def _check_workers(self, client: Any) -> None:
        if self._checked is not client:
            self._address = getattr(getattr(client, "scheduler", None), "address", None)
            check_workers(client, self.worker_wait, self._where(client))
            self._checked = client

    # ------------------------------------------------------------ running

    def run(self, units: Iterable[WorkUnit], work: Work, poll: Poll, note: Callable[[str], None]) -> Iterator[UnitOutcome]:
        with self._logs():
            yield from self._run(units, work, poll, note)

    def _run(self, units: Iterable[WorkUnit], work: Work, poll: Poll, note: Callable[[str], None]) -> Iterator[UnitOutcome]:
        client = self.client
        token = uuid.uuid4().hex[:12]
        pending: dict[Any, WorkUnit] = {}
        submitted = finished = 0
        watch = Watch(client, self.worker_wait, self._where(client))
        try:
            for unit in units:  # submit each unit as soon as it is known (a lazy iterable: as the driver makes it)
                self._check_workers(client)  # once, before the first unit
                # A unit that needs a GPU names it (``resources``): only workers started with
                # ``--resources GPU=1`` take it, one at a time each.
                fut = client.submit(_on_worker, work, unit, key=f"privcore-unit-{token}-{unit.index}", pure=False,
                                    retries=self.retries, resources=getattr(unit, "resources", None))
                pending[fut] = unit
                submitted += 1
                for outcome in self._collect(pending, client, finished, submitted):
                    finished += 1
                    yield outcome
            while pending:
                note(f"{finished} of {submitted} units done on {self.describe()}")
                ready = list(self._collect(pending, client, finished, submitted))
                for outcome in ready:
                    finished += 1
                    yield outcome
                poll(None)  # progress, and JobCancelled on cancel
                if pending:
                    watch.check(finished, submitted)  # ClusterError: the scheduler or every worker gone
                if not ready:
                    time.sleep(0.05)
        finally:
            if pending and client.status == "running":  # cancelled, or an error: nothing more is computed
                with contextlib.suppress(Exception):
                    client.cancel(list(pending))

    def _collect(self, pending: dict[Any, WorkUnit], client: Any, finished: int, submitted: int) -> Iterator[UnitOutcome]:
        for fut in [f for f in pending if f.done()]:
            unit = pending.pop(fut)
            if fut.status == "error":
                err = fut.exception()
                from distributed import KilledWorker

                if isinstance(err, KilledWorker):
                    raise ClusterError(f"unit {unit.index} ({unit.method}) was lost with its worker too many times "
                                       f"({one_line(err)}); the {finished} units finished of {submitted} sent "
                                       "are cached") from None
                if isinstance(err, ImportError) or type(err).__name__ == "UnpicklingError":
                    raise ClusterError(f"a worker could not unpack or run unit {unit.index} ({type(err).__name__}: "
                                       f"{one_line(err)}): install the driver's privcore version on every worker "
                                       "(docs/cluster.md)") from None
                raise err
            try:
                if fut.status == "cancelled":
                    raise CancelledError
                outcome = fut.result(timeout=self.worker_wait)
            except TimeoutError:  # done, but its result left with its worker: rescheduled; the watch sees
                pending[fut] = unit  # whether any worker is left to compute it again
                continue
            except CancelledError:  # also distributed's FutureCancelledError (the state may change meanwhile)
                if client.status != "running":  # the scheduler is gone: say so
                    Watch(client, self.worker_wait, self._where(client)).check(finished, submitted)
                raise ClusterError(f"unit {unit.index} ({unit.method}) was cancelled by the cluster; the {finished} "
                                   f"units finished of {submitted} sent are cached") from None
            yield outcome  # the runner checks that it answers for this unit's points


def _on_worker(work: Work, unit: WorkUnit) -> UnitOutcome:
    """A Dask task: run ``work`` on one unit (no progress callback there) and name the worker."""
    outcome = work(unit, None)
    try:
        from distributed import get_worker

        outcome.where = f"{get_worker().address} ({outcome.where})"
    except ValueError:  # not inside a worker
        pass
    return outcome


# ---------------------------------------------------------------- command line

def add_executor_args(parser: argparse.ArgumentParser) -> None:
    """The ``--executor``, ``--scheduler`` and ``--workers`` options (an argument group)."""
    group = parser.add_argument_group("where to compute (docs/cluster.md)")
    group.add_argument("--executor", choices=EXECUTOR_CHOICES, default="local",
                       help="local (in this process, the default) or dask")
    group.add_argument("--scheduler", default=None, metavar="ADDRESS",
                       help="a running Dask scheduler: tcp://host:8786, or its --scheduler-file (*.json)")
    group.add_argument("--workers", type=int, default=None, metavar="N",
                       help="start a local Dask cluster of N worker processes (with --executor dask; default 2)")


def executor_from_args(args: argparse.Namespace) -> Executor | None:
    """None for the default local executor, else a :class:`DaskExecutor` (validated)."""
    kind = getattr(args, "executor", "local")
    scheduler, workers = getattr(args, "scheduler", None), getattr(args, "workers", None)
    if kind == "local":
        if scheduler is not None or workers is not None:
            raise ValueError("--scheduler and --workers need --executor dask")
        return None
    if scheduler is not None and workers is not None:
        raise ValueError("give either --scheduler (an existing cluster) or --workers (a local one), not both")
    if workers is not None and not 1 <= workers <= 1024:
        raise ValueError(f"workers must be an integer in [1, 1024], got {workers}")
    return DaskExecutor(scheduler=scheduler, workers=2 if workers is None else workers, quiet=True)
