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
* :class:`DaskExecutor` submits every unit to a ``distributed`` cluster (an existing scheduler, or
  a ``LocalCluster`` it starts) and collects the outcomes as they finish, polling the runner's
  progress and cancel callback at least 4 times a second. Cancel stops submitting and cancels the
  units not yet finished (a unit already running on a worker runs to its end there; its result is
  dropped). The scheduler re-runs a lost worker's units elsewhere; a unit that raises an
  unexpected error is retried ``retries`` times.

Dask is an optional extra (``requirements-cluster.txt``): this module imports it only when a
:class:`DaskExecutor` is used.
"""

from __future__ import annotations

import argparse
import importlib
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

__all__ = ["WorkUnit", "UnitOutcome", "ClusterError", "Executor", "LocalExecutor", "DaskExecutor", "EXECUTOR_CHOICES",
           "add_executor_args", "executor_from_args", "DASK_MISSING"]

EXECUTOR_CHOICES: tuple[str, ...] = ("local", "dask")
DASK_MISSING = ("the dask executor needs the optional cluster packages: pip install -r requirements-cluster.txt")

#: Poll = the runner's in-batch callback: called with the fraction done of the current unit (or
#: None), reports progress and raises :class:`~privcore.engine.runner.SweepCancelled` on cancel.
Poll = Callable[[Any], None]


class ClusterError(OSError):
    """A unit could not be computed where it was sent: a worker with other data or another privcore
    version, or a unit lost with its worker too many times (an OSError: the CLI reports it in one line)."""


@dataclass(frozen=True)
class WorkUnit:
    """One method's missing epsilons x all repetitions in one variant of a sweep (plain, picklable data).

    ``spec_json``: the variant's :class:`~privcore.engine.specs.SweepSpec` (no varied axis);
    ``epsilons``: the missing epsilons (``float('inf')`` for the baseline); ``points``: their cache
    identities (see ``runner._point``), aligned with ``epsilons``; ``fingerprint``: the data set the
    driver planned with (a worker that loads other data refuses the unit); ``schema``: the
    driver's cache schema version (a worker with other code refuses the unit).
    """

    index: int
    spec_json: str
    method: str
    epsilons: tuple[float, ...]
    points: tuple[dict, ...]
    fingerprint: str
    schema: int
    label: str = ""


@dataclass
class UnitOutcome:
    """What a unit sends back: ``results`` is one (key, value) per epsilon of the unit, value a plain
    JSON-able dict or None (not computed: see ``warnings``); ``seconds`` the unit's wall time where it ran."""

    index: int
    results: list[tuple[str, dict | None]]
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    where: str = "local"


#: work(unit, poll) -> outcome; the runner's ``execute_unit`` (module-level, so a worker can import it).
Work = Callable[[WorkUnit, Any], UnitOutcome]


class Executor:
    """Runs units and yields their outcomes (the order may differ from the submission order)."""

    name = "local"
    #: Whether the driver resolves the sweep's device itself (False: the workers do).
    local_device = True
    #: Whether units run elsewhere while the driver waits (progress is then reported as they come back).
    concurrent = False

    def run(self, units: Iterable[WorkUnit], work: Work, poll: Poll, note: Callable[[str], None]) -> Iterator[UnitOutcome]:
        """Run every unit of ``units`` (a lazy iterable: the driver plans while it is consumed).

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
    """Each unit in the calling thread, as soon as the runner has planned it (today's behaviour)."""

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
                 client: Any = None, retries: int = 2) -> None:
        try:
            importlib.import_module("distributed")  # only whether it is installed
        except ImportError:
            raise ValueError(DASK_MISSING) from None
        if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
            raise ValueError(f"scheduler must be an address such as tcp://host:8786, got {scheduler!r}")
        for what, value in (("workers", workers), ("threads", threads), ("retries", retries)):
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if what == "retries" else 1):
                raise ValueError(f"{what} must be an integer >= {0 if what == 'retries' else 1}, got {value!r}")
        self.scheduler = scheduler
        self.workers = workers
        self.threads = threads
        self.processes = processes
        self.retries = retries
        self._client = client
        self._own_client = client is None
        self._cluster = None

    # ------------------------------------------------------------ connection

    @property
    def client(self) -> Any:
        if self._client is None:
            from distributed import Client, LocalCluster

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
                    self._cluster = LocalCluster(n_workers=self.workers, threads_per_worker=self.threads,
                                                 processes=self.processes, dashboard_address=":0",
                                                 scheduler_kwargs={"dashboard": False})
                self._client = Client(self._cluster)
        return self._client

    def describe(self) -> str:
        if self.scheduler is not None:
            return f"dask at {self.scheduler}"
        if self._client is not None and self._cluster is None and not self._own_client:
            return "dask"
        return f"dask (local cluster, {self.workers} worker{'s' if self.workers != 1 else ''})"

    def close(self) -> None:
        if self._own_client and self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    # ------------------------------------------------------------ running

    def run(self, units: Iterable[WorkUnit], work: Work, poll: Poll, note: Callable[[str], None]) -> Iterator[UnitOutcome]:
        client = self.client
        token = uuid.uuid4().hex[:12]
        pending: dict[Any, WorkUnit] = {}
        submitted = finished = 0
        try:
            for unit in units:  # plans lazily on the driver: submit each unit as soon as it is known
                fut = client.submit(_on_worker, work, unit, key=f"privcore-unit-{token}-{unit.index}", pure=False,
                                    retries=self.retries)
                pending[fut] = unit
                submitted += 1
                for outcome in self._collect(pending):
                    finished += 1
                    yield outcome
            while pending:
                note(f"{finished} of {submitted} units done on {self.describe()}")
                ready = list(self._collect(pending))
                for outcome in ready:
                    finished += 1
                    yield outcome
                poll(None)  # progress, and SweepCancelled on cancel
                if not ready:
                    time.sleep(0.05)
        finally:
            if pending:  # cancelled, or an error: nothing more is computed for this sweep
                client.cancel(list(pending))

    @staticmethod
    def _collect(pending: dict[Any, WorkUnit]) -> Iterator[UnitOutcome]:
        for fut in [f for f in pending if f.done()]:
            unit = pending.pop(fut)
            if fut.status == "error":
                err = fut.exception()
                from distributed import KilledWorker

                if isinstance(err, KilledWorker):
                    raise ClusterError(f"unit {unit.index} ({unit.method}) was lost with its worker too many times "
                                       f"({err}); finished units are cached") from None
                raise err
            if fut.status == "cancelled":
                raise ClusterError(f"unit {unit.index} ({unit.method}) was cancelled by the cluster")
            yield fut.result()  # the runner checks that it answers for this unit's points


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
    return DaskExecutor(scheduler=scheduler, workers=2 if workers is None else workers)
