"""Run a sweep: plan it once, batch the misses per method, store plain numbers.

The plan (:mod:`privcore.engine.plan`) loads each variant's data once, names and keys every point and
looks it up in the cache; the cost model prices the same plan (:mod:`privcore.engine.cost`). For each
method of each variant all missing epsilons x repetitions are one unit of work
(:class:`~privcore.engine.work.WorkUnit`, carrying its points and keys), run by an executor: in this
thread by default, or on a Dask cluster. :func:`execute_unit` computes one unit and returns plain dicts;
only :func:`run_sweep`, on the driver, writes to the cache. Progress is reported through a callback; a
cancel callable is polled between batches and inside them, at every solver iteration and DP-SGD step
(what is done by then is already cached, so nothing is lost).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from ..device import resolve_device
from ..jobs import JobCancelled, ProgressFn, check_callbacks
from ..methods import get_method
from ..types import Problem
from .cache import SCHEMA_VERSION, ResultCache
from .cluster_health import ClusterError
from .executor import Executor, LocalExecutor
from .plan import PlannedJob, SweepPlan, make_plan
from .progress import RunProgress, job_weights
from .rows import ResultRow, SweepResult, result_columns
from .specs import SweepSpec
from .units import execute_unit
from .work import WorkUnit

__all__ = ["run_sweep", "running_elsewhere", "read_cached", "all_cached", "execute_unit", "SweepResult", "SweepCancelled", "ProgressFn",
           "result_columns"]  # RESULT_COLUMNS: module __getattr__ below


def __getattr__(name: str) -> Any:
    if name == "RESULT_COLUMNS":  # the registry's columns now (privcore.engine.rows.result_columns)
        return result_columns()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: Above this final gradient norm a solve is reported as not (numerically) exact.
GRAD_NORM_WARN = 1e-3
_NOISE_FIELDS = ("noise", "sigma", "beta", "rho", "noise_multiplier", "per_query_epsilon", "formula", "solver_tolerance",
                 "sensitivity")

#: (lock, holders + waiters) per (spec, cache directory) being run in this process: identical
#: sweeps run once, one after the other (the later ones then read the cache).
_RUNNING: dict[tuple[str, str], list] = {}
_RUNNING_LOCK = threading.Lock()


#: Raised when the cancel callable returned True; finished points are already cached. The one
#: cancellation of every job kind (:class:`privcore.jobs.JobCancelled`), under the sweep's old name.
SweepCancelled = JobCancelled


def _row(method: str, eps: float, spec: SweepSpec, problem: Problem, vary: str | None, vary_value: Any,
         stored: dict[str, Any], cached: bool) -> ResultRow:
    scale = stored.get("scale", {})
    # The lambda a row reports: the one its result was computed with (lam = "auto" stores the choice)
    # for a method that uses lambda; this sweep's for one that does not (a cache hit across lambdas).
    entry = get_method(method)
    lam = stored.get("lam", problem.lam) if "lam" in entry.uses else problem.lam
    from ..accounting.forward import real_guarantee

    real, guarantee = real_guarantee(method, scale, _with_lam(problem, lam), spec.delta, spec.accounting)
    return ResultRow(
        method=method, epsilon=eps, delta=spec.delta, budget=spec.budget, n=problem.n, dim=problem.dim,
        classes=problem.classes, lam=lam, teachers=problem.teachers,
        accounting=spec.accounting, vary=vary, value=vary_value, repeats=spec.repeats,
        accuracy_mean=stored["accuracy_mean"], accuracy_std=stored["accuracy_std"],
        seconds=0.0 if cached else stored["seconds"], device=stored["device"], cached=cached,
        note=stored.get("note") or None, solver_grad_norm=stored.get("solver_grad_norm"),
        **{key: scale.get(key) for key in _NOISE_FIELDS}, real_epsilon=real, guarantee=guarantee,
        # The method's own columns, as it declares them: from the noise scale or measured.
        extras={f.name: (scale if f.on_scale else stored).get(f.name) for f in entry.result_fields})


def _with_lam(problem: Problem, lam: Any) -> Problem:
    """``problem`` at the lambda the row's result used (lam = "auto" stores its private choice)."""
    if not isinstance(lam, (int, float)) or float(lam) == problem.lam:
        return problem
    import dataclasses

    return dataclasses.replace(problem, lam=float(lam))


def run_sweep(spec: SweepSpec, *, progress: ProgressFn | None = None, cancel: Callable[[], bool] | None = None,
              cache: ResultCache | None = None, use_cache: bool = True,
              executor: Executor | None = None, plan: SweepPlan | None = None) -> SweepResult:
    """Compute (or fetch) test accuracy mean/std for every point of ``spec``.

    Returns a :class:`SweepResult` whose rows hold plain numbers (see :func:`result_columns`),
    plus a ``non_private`` row per variant when ``spec.baseline``. Unsupported points (DP-SGD at
    delta = 0) are skipped with a warning, never an exception. When another thread of this process
    is already running the same spec on the same cache (two browser sessions, or the dashboard's
    start-up warm-up), this call waits for it and then reads its results from the cache, still
    polling ``cancel`` and reporting progress while it waits.

    ``plan``: the spec's :class:`~privcore.engine.plan.SweepPlan` against this cache when the caller
    made one already (a page that showed its time estimate); planned again after waiting for another
    thread's identical sweep. ``executor`` decides where the batches run
    (:mod:`privcore.engine.executor`): None or a :class:`LocalExecutor` computes them in this thread;
    a ``DaskExecutor`` on a cluster. Either way only this process writes to the cache, and the rows
    are the same, bit for bit.
    """
    if not isinstance(spec, SweepSpec):
        raise TypeError(f"spec must be a SweepSpec, got {type(spec).__name__}")
    check_callbacks(progress, cancel)
    if executor is not None and not isinstance(executor, Executor):
        raise TypeError(f"executor must be a LocalExecutor or DaskExecutor (privcore.engine.executor) or None, got "
                        f"{type(executor).__name__}")
    if cache is not None and not isinstance(cache, ResultCache):
        raise TypeError(f"cache must be a ResultCache or None, got {type(cache).__name__}")
    if spec.tuning != "configured":  # each method at the best point of its grid: sweeps of it (engine.tuned)
        from .tuned import run_tuned

        return run_tuned(spec, progress=progress, cancel=cancel, executor=executor,
                         cache=cache if cache is not None else ResultCache(enabled=use_cache), run=run_sweep)
    if plan is not None and (not isinstance(plan, SweepPlan) or plan.spec != spec or not plan.complete):
        raise ValueError("plan must be a complete SweepPlan of this spec (privcore.engine.plan.make_plan)")
    if cache is None and plan is not None and use_cache and plan.cache is not None and plan.cache.enabled:
        cache = plan.cache  # the cache it was planned against
    store = cache if cache is not None else ResultCache(enabled=use_cache)
    if plan is not None and (plan.cache is None or str(plan.cache.directory) != str(store.directory)
                             or plan.cache.enabled != store.enabled):
        plan = None  # planned against another cache: plan again
    if spec.secure_noise:  # a cached row is a reproducible one; a secure one is for this call only
        store = ResultCache(enabled=False)
    if not store.enabled:
        return _run_sweep(spec, progress, cancel, store, executor, plan)
    key = (spec.key, str(store.directory))
    with _RUNNING_LOCK:  # an entry lives while anyone holds or waits for it (a count, not lock.locked())
        entry = _RUNNING.setdefault(key, [threading.Lock(), 0])
        entry[1] += 1
    lock = entry[0]
    try:
        while not lock.acquire(timeout=0.25):
            plan = None  # the other run changes what is cached
            if progress is not None:
                progress(0.0, "waiting for the same sweep, already being computed in this process")
            if cancel is not None and cancel():
                raise SweepCancelled("sweep cancelled; finished points are cached")
        try:
            return _run_sweep(spec, progress, cancel, store, executor, plan)
        finally:
            lock.release()
    finally:
        with _RUNNING_LOCK:
            entry[1] -= 1
            if entry[1] == 0:
                _RUNNING.pop(key, None)


def running_elsewhere(spec: SweepSpec, cache: ResultCache | None = None) -> bool:
    """Whether a thread of this process is computing ``spec`` on this cache right now (the
    dashboard's start-up warm-up, or another browser session): :func:`run_sweep` would wait for it.
    The dashboard then polls for the result instead of waiting inside a page run (ui/progress.py)."""
    from .cache import default_results_dir  # the directory only: no cache is opened (polled every second)

    directory = cache.directory if cache is not None else default_results_dir()
    with _RUNNING_LOCK:
        entry = _RUNNING.get((spec.key, str(directory)))
        return entry is not None and entry[0].locked()


def all_cached(spec: SweepSpec, cache: ResultCache | None = None) -> bool:
    """Whether :func:`run_sweep` would find every point of ``spec`` in the cache (see :func:`read_cached`)."""
    return read_cached(spec, cache) is not None


def read_cached(spec: SweepSpec, cache: ResultCache | None = None, *, plan: SweepPlan | None = None
                ) -> SweepResult | None:
    """The result of ``spec`` when every point is already cached, else None. Trains nothing.

    Plans ``spec`` (loading, memoised, each variant's data set to fingerprint it) up to its first
    miss, unless given its ``plan``. Points :func:`run_sweep` skips (a method without a guarantee at
    the sweep's delta) do not count.
    """
    if getattr(spec, "tuning", "configured") != "configured":  # its sweeps and selections are read by run_sweep (cheap once cached)
        return None
    if not isinstance(spec, SweepSpec):
        raise TypeError(f"spec must be a SweepSpec, got {type(spec).__name__}")
    if cache is not None and not isinstance(cache, ResultCache):
        raise TypeError(f"cache must be a ResultCache or None, got {type(cache).__name__}")
    store = cache if cache is not None else ResultCache()
    if not store.enabled or spec.secure_noise:  # secure rows are never cached
        return None
    plan = plan if plan is not None else make_plan(spec, store, stop_at_miss=True)
    if not plan.all_cached():
        return None
    result = SweepResult(spec=spec, device=str(resolve_device(spec.device)))
    result.warnings.extend(job.warning for job in plan.jobs if job.warning)
    _finish(result, plan, store)
    return result


def _unit(index: int, job: PlannedJob) -> WorkUnit:
    return WorkUnit(index=index, spec=job.vspec, problem=job.problem, method=job.method,
                    epsilons=tuple(job.epsilons[i] for i in job.missing), points=tuple(job.points[i] for i in job.missing),
                    keys=tuple(job.keys[i] for i in job.missing), fingerprint=job.fingerprint, schema=SCHEMA_VERSION,
                    label=f"{job.method}{job.label}")


def _run_sweep(spec: SweepSpec, progress: ProgressFn | None, cancel: Callable[[], bool] | None,
               store: ResultCache, executor: Executor | None, plan: SweepPlan | None) -> SweepResult:
    start = time.perf_counter()
    executor = executor if executor is not None else LocalExecutor()
    # The local executor computes here; a cluster's workers resolve the device themselves.
    where = str(resolve_device(spec.device)) if executor.local_device else executor.describe()
    result = SweepResult(spec=spec, device=where)
    # The one reporter of the run (engine/progress.py): the executor and the unit's loops call it, not us.
    report = RunProgress(progress, cancel)
    if plan is None:
        plan = make_plan(spec, store, tick=report.loading)
    report.weigh(_weights(plan) if progress is not None else {}, len(plan.jobs))
    # Units are made up front, in the plan's order; each job's progress (its message, a cached job
    # counted as done) is taken as the unit before it comes back: a local executor computes each unit
    # then, a concurrent one has them all at once.
    units = [_unit(index, job) for index, job in enumerate(plan.jobs) if job.missing]
    ahead = iter(plan.jobs)

    def advance(to_end: bool = False) -> None:
        for job in ahead:
            report.tick(f"{get_method(job.method).label}{job.label} on {where}")  # the label: UIs show this text
            if job.warning:
                result.warnings.append(job.warning)
            if not job.missing:
                report.finish((job.variant, job.method))
                continue
            report.start((job.variant, job.method))
            if not to_end:
                return

    advance(to_end=executor.concurrent)
    on_wait = lambda message: (report.note(message), report(None))  # noqa: E731 - another process holds the cache's write lock
    for outcome in executor.run(units, execute_unit, report, report.note):
        job = plan.jobs[outcome.index]
        if [k for k, _ in outcome.results] != [job.keys[i] for i in job.missing]:
            raise ClusterError(f"{job.method}: the executor answered for other points than it was given")
        result.warnings.extend(outcome.warnings)
        for i, (key, item) in zip(job.missing, outcome.results):
            if item is None:
                continue
            # Only the driver writes; each point is stored whole, with its identity (results export).
            item = dict(item, point=job.points[i], data=job.fingerprint)
            store.put(key, item, on_wait=on_wait)  # the wait shows as progress and can be cancelled
            job.hits[i] = item
            result.computed += 1
            for other, j in plan.waiting.get(key, []):
                plan.jobs[other].hits[j] = item
        report.finish((job.variant, job.method))
        if executor.concurrent:
            report(None)  # progress (at most 4 times a second) and cancel, as units come back
        else:
            advance()
    advance(to_end=True)
    _finish(result, plan, store)
    report.done()
    result.seconds = time.perf_counter() - start
    return result


def _weights(plan: SweepPlan) -> dict[tuple[int, str], float]:
    """The progress weights: the plan's estimate (the page's "about N s"), made now when it has none."""
    if plan.estimate is not None:
        return job_weights(plan.estimate)
    from .cost import estimate_plan

    try:
        return job_weights(estimate_plan(plan))
    except (ValueError, TypeError, RuntimeError, OSError):  # the run itself reports the problem
        return {}


def _finish(result: SweepResult, plan: SweepPlan, store: ResultCache) -> None:
    """The rows of a plan whose hits are filled in, with the solver's warnings."""
    spec = plan.spec
    for job in plan.jobs:
        for i, (e, stored) in enumerate(zip(job.epsilons, job.hits)):
            if stored is None:
                continue
            grad = stored.get("solver_grad_norm")
            if grad is not None and grad > GRAD_NORM_WARN:
                result.warnings.append(f"{get_method(job.method).label} at ε = {e:g}: the solver stopped at gradient norm {grad:.2g} "
                                       f"(> {GRAD_NORM_WARN:g}); the privacy proof assumes the exact minimiser")
            is_cached = i not in job.missing  # found in the cache, or computed for an earlier variant (shared)
            result.cached += int(is_cached)
            result.rows.append(_row(job.method, e, job.vspec, job.problem, spec.vary, job.vary_value, stored, is_cached))
    result.warnings.extend(m for m in getattr(store, "drain_messages", list)() if m not in result.warnings)


