"""A Dask cluster that fails: a clear message and a bounded wait, never a hang or a traceback.

:class:`~privcore.engine.executor.DaskExecutor` uses these pieces:

* :func:`check_workers` before the first unit: at least one worker within the wait, and every
  worker able to run privcore's units (privcore importable there, the driver's version and cache
  schema). A worker that cannot import privcore dies while unpacking a unit (distributed unpickles
  a task before it runs it) and the sweep used to wait for it forever.
* :class:`Watch` while waiting for units: the connection to the scheduler lost, or no worker for
  the whole wait, ends the sweep with :class:`ClusterError`. Units that came back before are in
  the driver's cache.
* :func:`local_cluster_kwargs`: a local cluster that listens on 127.0.0.1 only (whoever reaches a
  scheduler can run code on its workers).
* :func:`quiet_logs`: distributed's own log lines (its tracebacks when a cluster fails) hidden
  while the command line reports the failure in one line.

Nothing here imports Dask at module level.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Iterator

__all__ = ["ClusterError", "WORKER_WAIT_S", "check_workers", "Watch", "local_cluster_kwargs", "quiet_logs", "one_line"]

#: Seconds a sweep waits for a worker (at the start, or after every worker has gone) before it stops.
WORKER_WAIT_S = 60.0
_CLUSTER_LOGGERS = ("distributed", "tornado", "asyncio")


class ClusterError(OSError):
    """A unit could not be computed where it was sent: a worker with other data or another privcore
    version, a unit lost with its worker too many times, a cluster without workers or a lost
    scheduler (an OSError: the CLI reports it in one line, exit code 2)."""


def one_line(err: object) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def local_cluster_kwargs(workers: int, threads: int = 1, processes: bool = True, *, quiet: bool = False) -> dict:
    """``distributed.LocalCluster`` options of a cluster on this machine that the network cannot reach:
    the scheduler, the workers and their HTTP servers (health and metrics; the dashboard's pages are
    off) on 127.0.0.1. distributed's default for the HTTP servers is every interface (0.0.0.0).
    In-process workers (``processes=False``) talk to the scheduler through memory."""
    kwargs: dict[str, Any] = dict(n_workers=workers, threads_per_worker=threads, processes=processes,
                                  dashboard_address="127.0.0.1:0", scheduler_kwargs={"dashboard": False})
    if processes:
        kwargs["host"] = "127.0.0.1"  # the worker processes listen there too
    else:  # in-process workers' own HTTP servers listen on 0.0.0.0 unless told
        kwargs["worker_dashboard_address"] = "127.0.0.1:0"
    if quiet:
        kwargs["silence_logs"] = logging.CRITICAL
    return kwargs


@contextlib.contextmanager
def quiet_logs(quiet: bool = True) -> Iterator[None]:
    """With ``quiet``: distributed's, tornado's and asyncio's loggers silenced for the duration (restored after)."""
    if not quiet:
        yield
        return
    loggers = [logging.getLogger(name) for name in _CLUSTER_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _probe() -> tuple[str, Any, Any]:
    """Runs on each worker. Only builtins inside: it is sent by value (see :func:`check_workers`)."""
    try:
        import privcore
        from privcore.engine.cache import SCHEMA_VERSION as schema
    except Exception as exc:  # noqa: BLE001 - reported by name on the driver
        return ("missing", f"{type(exc).__name__}: {exc}", None)
    return ("ok", getattr(privcore, "__version__", "?"), schema)


def check_workers(client: Any, wait: float, where: str) -> None:
    """At least one worker within ``wait`` seconds, and every worker answering the probe with the
    driver's privcore version and cache schema; :class:`ClusterError` naming the worker otherwise.
    ``where`` names the scheduler in messages."""
    from .. import __version__
    from .cache import SCHEMA_VERSION

    try:
        client.wait_for_workers(1, timeout=wait)
    except (TimeoutError, OSError) as err:
        if isinstance(err, OSError) and client.status == "running":
            raise
        raise ClusterError(f"no worker joined {where} within {wait:g} s: start workers (dask worker ADDRESS), or "
                           "check that they can reach it (docs/cluster.md)") from None
    # A copy of the probe without a module: cloudpickle then sends its code by value, so a worker
    # unpacks it even where privcore cannot be imported, and reports that instead of dying.
    probe = type(_probe)(_probe.__code__, {"__builtins__": __builtins__}, "privcore_probe")
    probe.__module__ = None  # type: ignore[assignment]
    try:
        answers = client.run(probe, on_error="return", callback_timeout=wait)
    except (TimeoutError, OSError) as err:
        raise ClusterError(f"the workers of {where} did not answer a probe within {wait:g} s ({one_line(err)})") from None
    for worker, answer in sorted(answers.items()):
        if isinstance(answer, BaseException) or not isinstance(answer, tuple) or len(answer) != 3:
            raise ClusterError(f"worker {worker} could not run a probe ({one_line(answer)}): check that it runs the "
                               "driver's Python version and packages (docs/cluster.md)")
        status, version, schema = answer
        if status != "ok":
            raise ClusterError(f"worker {worker} cannot import privcore ({one_line(version)}): install privcore "
                               f"{__version__} in the workers' Python environment, as on this machine (docs/cluster.md)")
        if version != __version__ or schema != SCHEMA_VERSION:
            raise ClusterError(f"worker {worker} runs privcore {version} (cache schema {schema}), this machine "
                               f"{__version__} (schema {SCHEMA_VERSION}): install the same version on both")


class Watch:
    """The cluster's health while a sweep waits for units: :meth:`check` raises :class:`ClusterError`
    when the scheduler is gone, or when no worker has been there for ``wait`` seconds (asked at most
    once a second, each question bounded too)."""

    def __init__(self, client: Any, wait: float, where: str) -> None:
        self.client, self.wait, self.where = client, wait, where
        self._asked = 0.0
        self._seen = time.monotonic()

    def check(self, finished: int, submitted: int) -> None:
        client = self.client
        kept = (f"{finished} of {submitted} units finished and are kept in the cache; run the same command again "
                "to compute the rest")
        if client.status not in ("running", "newly-created"):
            raise ClusterError(f"lost the connection to {self.where} (it stopped, or the network failed): {kept}")
        now = time.monotonic()
        if now - self._asked < 1.0:
            return
        self._asked = now
        try:
            info = client.sync(client.scheduler.identity, n_workers=0, callback_timeout=min(10.0, self.wait))
            workers = int(info.get("n_workers", 0))
        except (TimeoutError, OSError):
            if now - self._seen > self.wait:
                raise ClusterError(f"{self.where} has not answered for {self.wait:g} s: {kept}") from None
            return
        if workers > 0:
            self._seen = now
        elif now - self._seen > self.wait:
            raise ClusterError(f"no worker has been left on {self.where} for {self.wait:g} s (they stopped or were "
                               f"killed): {kept}")
