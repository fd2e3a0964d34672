"""Run a sweep: look every point up in the cache, batch the misses per method, store plain numbers.

(Over 400 lines: planning, the in-flight sharing of identical sweeps, progress/cancel and the
executor seam belong to one loop; splitting them would scatter its invariants.)

For each variant of the spec (one value of the varied axis) the data set is loaded once, and for
each method all missing epsilons x repetitions are evaluated in one batched call. Progress is
reported through a callback; a cancel callable is polled between batches and inside them, at every
solver iteration and DP-SGD step (what is done by then is already cached, so nothing is lost).

Each batch is a unit of work (:class:`~privcore.engine.executor.WorkUnit`) run by an executor:
in this thread by default, or on a Dask cluster. :func:`execute_unit` computes one unit and
returns plain dicts; only :func:`_run_sweep`, on the driver, writes to the cache.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from .. import device as _device
from .. import knobs
from ..data import Dataset, load_dataset
from ..device import resolve_device
from ..certify import SolverCertificationError
from ..methods import BASELINE, get_method
from ..methods.base import EXTRA_RESULT_KEYS
from ..types import CalibrationError, NoiseScale, PrivacyBudget, Problem
from .cache import SCHEMA_VERSION, ResultCache, point_key
from .executor import ClusterError, Executor, LocalExecutor, UnitOutcome, WorkUnit
from .progress import WorkProgress
from ..context import TrainContext
from .rows import RESULT_COLUMNS, ResultRow
from .specs import SweepSpec
from .tuning import LAM_AUTO_NOTE, choose_lams, release_budget

if TYPE_CHECKING:  # imported by the modules above at run time
    import torch

__all__ = ["run_sweep", "running_elsewhere", "read_cached", "all_cached", "execute_unit", "SweepResult", "SweepCancelled", "ProgressFn",
           "RESULT_COLUMNS"]

ProgressFn = Callable[[float, str], None]

#: The note of a row whose noise came from the operating system's entropy (``secure_noise``).
SECURE_NOTE = ("noise from the operating system's entropy (secure_noise): a fresh secret seed per epsilon, never "
               "shown or stored; the spec's seed fixed only the data splits, so these numbers cannot be reproduced")

#: Above this final gradient norm a solve is reported as not (numerically) exact.
GRAD_NORM_WARN = 1e-3
_NOISE_FIELDS = ("noise", "sigma", "beta", "rho", "noise_multiplier", "per_query_epsilon", "formula", "solver_tolerance",
                 "sensitivity", "threshold")


#: The last training context of this process (see ``context`` in :func:`run_sweep`).
_CONTEXTS: dict[tuple[str, int, str], TrainContext] = {}
_CONTEXTS_LOCK = threading.Lock()
#: (lock, holders + waiters) per (spec, cache directory) being run in this process: identical
#: sweeps run once, one after the other (the later ones then read the cache).
_RUNNING: dict[tuple[str, str], list] = {}
_RUNNING_LOCK = threading.Lock()


class SweepCancelled(RuntimeError):
    """Raised when the cancel callable returned True; finished points are already cached."""


@dataclass
class SweepResult:
    """Rows (typed :class:`ResultRow` values), warnings, timing and cache statistics."""

    spec: SweepSpec
    rows: list[ResultRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    device: str = "cpu"
    computed: int = 0
    cached: int = 0

    def to_frame(self):  # noqa: ANN201 - pandas is optional for the library
        """The rows as a pandas DataFrame with :data:`RESULT_COLUMNS`."""
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.rows], columns=list(RESULT_COLUMNS))


def _problem(ds: Dataset, spec: SweepSpec, lam: float) -> Problem:
    return Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=lam, budget=spec.budget,
                   teachers=spec.teachers, batch_size=spec.batch_size, epochs=spec.epochs,
                   clip=spec.clip, learning_rate=spec.learning_rate)


def _point(method: str, eps: float, spec: SweepSpec, problem: Problem) -> dict[str, Any]:
    """The cache identity of one point: only the settings the method's result depends on."""
    uses = get_method(method).uses
    point = {"method": method, "epsilon": "inf" if math.isinf(eps) else eps, "delta": spec.delta,
             "accounting": spec.accounting, "repeats": spec.repeats, "seed": spec.seed}
    for name in uses:
        point[name] = spec.lam if name == "lam" and spec.lam == "auto" else getattr(problem, name)
    return point


def _row(method: str, eps: float, spec: SweepSpec, problem: Problem, vary: str | None, vary_value: Any,
         stored: dict[str, Any], cached: bool) -> ResultRow:
    scale = stored.get("scale", {})
    # The lambda a row reports: the one its result was computed with (lam = "auto" stores the choice)
    # for a method that uses lambda; this sweep's for one that does not (a cache hit across lambdas).
    lam = stored.get("lam", problem.lam) if "lam" in get_method(method).uses else problem.lam
    from ..accounting.forward import real_guarantee

    real, guarantee = real_guarantee(method, scale, _with_lam(problem, lam), spec.delta, spec.accounting)
    return ResultRow(
        method=method, epsilon=eps, delta=spec.delta, budget=spec.budget, n=problem.n, dim=problem.dim,
        classes=problem.classes, lam=lam, teachers=problem.teachers,
        accounting=spec.accounting, vary=vary, value=vary_value, repeats=spec.repeats,
        accuracy_mean=stored["accuracy_mean"], accuracy_std=stored["accuracy_std"],
        seconds=0.0 if cached else stored["seconds"], device=stored["device"], cached=cached,
        note=stored.get("note") or None, solver_grad_norm=stored.get("solver_grad_norm"),
        answered_fraction=stored.get("answered_fraction"), accuracy_answered=stored.get("accuracy_answered"),
        accuracy_answered_std=stored.get("accuracy_answered_std"),
        **{key: stored.get(key) for key in EXTRA_RESULT_KEYS},
        **{key: scale.get(key) for key in _NOISE_FIELDS}, real_epsilon=real, guarantee=guarantee)


def _with_lam(problem: Problem, lam: Any) -> Problem:
    """``problem`` at the lambda the row's result used (lam = "auto" stores its private choice)."""
    if not isinstance(lam, (int, float)) or float(lam) == problem.lam:
        return problem
    import dataclasses

    return dataclasses.replace(problem, lam=float(lam))


def _stored(acc: np.ndarray, scale: NoiseScale | None, seconds: float, device: str, lam: float, note: str = "",
            grad_norm: float | None = None) -> dict[str, Any]:
    return {"accuracies": [float(a) for a in acc], "accuracy_mean": float(acc.mean()),
            "accuracy_std": float(acc.std(ddof=1)) if acc.size > 1 else 0.0, "seconds": seconds, "device": device,
            "lam": lam, "scale": scale.to_dict() if scale is not None else {"noise": "none"}, "note": note,
            "solver_grad_norm": grad_norm}


def _evaluate(method: str, ctx: TrainContext, budgets: list[PrivacyBudget], accounting: str,
              repeats: int) -> tuple[list[NoiseScale], np.ndarray, np.ndarray | None, np.ndarray | None, list[dict]]:
    """Scales, accuracies [E, R] and, for abstaining methods, answered fractions, accuracies among answered
    and the method's extra numbers per scale (:meth:`Method.extra_results`)."""
    m = get_method(method)
    scales = [m.calibrate(b, ctx.problem, accounting) for b in budgets]
    if not m.abstains:
        return scales, m.evaluate(ctx, scales, repeats).detach().cpu().numpy(), None, None, [{} for _ in scales]
    out = m.release(ctx, scales, repeats)  # [E, R, M], -1 = abstained (counted wrong)
    answered = (out >= 0).double()
    right = (out == ctx.y_test).double()
    among = right.sum(dim=2) / answered.sum(dim=2).clamp(min=1.0)
    extras = m.extra_results(ctx, scales, out)
    return (scales, right.mean(dim=2).cpu().numpy(), answered.mean(dim=2).cpu().numpy(), among.cpu().numpy(), extras)


def run_sweep(spec: SweepSpec, *, progress: ProgressFn | None = None, cancel: Callable[[], bool] | None = None,
              cache: ResultCache | None = None, use_cache: bool = True,
              executor: Executor | None = None) -> SweepResult:
    """Compute (or fetch) test accuracy mean/std for every point of ``spec``.

    Returns a :class:`SweepResult` whose rows hold plain numbers (see :data:`RESULT_COLUMNS`),
    plus a ``non_private`` row per variant when ``spec.baseline``. Unsupported points (DP-SGD at
    delta = 0) are skipped with a warning, never an exception. When another thread of this process
    is already running the same spec on the same cache (two browser sessions, or the dashboard's
    start-up warm-up), this call waits for it and then reads its results from the cache, still
    polling ``cancel`` and reporting progress while it waits.

    ``executor`` decides where the batches run (:mod:`privcore.engine.executor`): None or a
    :class:`LocalExecutor` computes them in this thread; a ``DaskExecutor`` on a cluster. Either
    way only this process writes to the cache, and the rows are the same, bit for bit.
    """
    if not isinstance(spec, SweepSpec):
        raise TypeError(f"spec must be a SweepSpec, got {type(spec).__name__}")
    for name, fn in (("progress", progress), ("cancel", cancel)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be a function or None, got {type(fn).__name__}")
    if executor is not None and not isinstance(executor, Executor):
        raise TypeError(f"executor must be a LocalExecutor or DaskExecutor (privcore.engine.executor) or None, got "
                        f"{type(executor).__name__}")
    if cache is not None and not isinstance(cache, ResultCache):
        raise TypeError(f"cache must be a ResultCache or None, got {type(cache).__name__}")
    if spec.tuning != "configured":  # each method at the best point of its grid: sweeps of it (engine.tuned)
        from .tuned import run_tuned

        return run_tuned(spec, progress=progress, cancel=cancel, executor=executor,
                         cache=cache if cache is not None else ResultCache(enabled=use_cache))
    store = cache if cache is not None else ResultCache(enabled=use_cache)
    if spec.secure_noise:  # a cached row is a reproducible one; a secure one is for this call only
        store = ResultCache(enabled=False)
    if not store.enabled:
        return _run_sweep(spec, progress, cancel, store, executor=executor)
    key = (spec.key, str(store.directory))
    with _RUNNING_LOCK:  # an entry lives while anyone holds or waits for it (a count, not lock.locked())
        entry = _RUNNING.setdefault(key, [threading.Lock(), 0])
        entry[1] += 1
    lock = entry[0]
    try:
        while not lock.acquire(timeout=0.25):
            if progress is not None:
                progress(0.0, "waiting for the same sweep, already being computed in this process")
            if cancel is not None and cancel():
                raise SweepCancelled("sweep cancelled; finished points are cached")
        try:
            return _run_sweep(spec, progress, cancel, store, executor=executor)
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


def check_features(dim: int) -> None:
    """Refuse to train on more features than :func:`privcore.limits.max_features` (the solver
    diagonalises a D x D matrix: 10,000 features took over 12 minutes, uncancellable)."""
    from .. import limits

    limits.check_features(dim)


def _variant_data(vspec: SweepSpec) -> tuple[Dataset, float, Problem]:
    """The data set of one variant (memoised by the loader), its fixed lam and its base problem."""
    d = vspec.data
    ds = load_dataset(d.name, seed=vspec.seed, **d.load_kwargs())
    check_features(ds.dim)
    fixed_lam = knobs.fixed_lam(vspec.lam)
    return ds, fixed_lam, _problem(ds, vspec, fixed_lam)


def _jobs(vspec: SweepSpec) -> list[tuple[str, list[float]]]:
    """(method, epsilons) batches of one variant, the non-private baseline last."""
    jobs = [(m, list(vspec.epsilons)) for m in vspec.methods]
    if vspec.baseline:
        jobs.append((BASELINE.name, [math.inf]))
    return jobs


def all_cached(spec: SweepSpec, cache: ResultCache | None = None) -> bool:
    """Whether :func:`run_sweep` would find every point of ``spec`` in the cache (see :func:`read_cached`)."""
    return read_cached(spec, cache) is not None


class _Miss(Exception):
    """A point of a read-only run is not in the cache."""


def read_cached(spec: SweepSpec, cache: ResultCache | None = None) -> SweepResult | None:
    """The result of ``spec`` when every point is already cached, else None. Trains nothing.

    Loads (memoised) each variant's data set to fingerprint it. Points :func:`run_sweep` skips
    (a method without a guarantee at the sweep's delta) do not count.
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
    try:
        return _run_sweep(spec, None, None, store, compute=False)
    except _Miss:
        return None


@dataclass
class _Job:
    """One method in one variant, as planned on the driver: its points, keys and what the cache held."""

    vary_value: Any
    vspec: SweepSpec
    problem: Problem
    method: str
    epsilons: list[float]
    points: list[dict[str, Any]]
    keys: list[str]
    fingerprint: str
    hits: list[dict[str, Any] | None]
    missing: list[int]  # computed by this job's unit
    shared: list[int] = field(default_factory=list)  # computed by an earlier unit still running
    weight: float = 1.0  # predicted seconds (privcore.engine.cost), for the progress fraction


def _job_weights(spec: SweepSpec, store: ResultCache) -> dict[tuple[int, str], float]:
    """Predicted seconds per job (:mod:`privcore.engine.cost`): the progress fraction is the share
    of predicted work done, so an ETA drawn from it follows the cost model. Empty when unknown."""
    from . import cost

    try:
        est = cost.estimate_spec(spec, store)
    except (ValueError, TypeError, RuntimeError, OSError):  # the run itself reports the problem
        return {}
    floor = 0.02 * max(est.seconds, 1e-9) / max(len(est.jobs), 1)  # cached jobs still take a moment
    return {k: v + floor for k, v in est.jobs.items()} if est.seconds > 0 else {}


def _run_sweep(spec: SweepSpec, progress: ProgressFn | None, cancel: Callable[[], bool] | None,
               store: ResultCache, compute: bool = True, executor: Executor | None = None) -> SweepResult:
    start = time.perf_counter()
    executor = executor if executor is not None else LocalExecutor()
    # The local executor computes here; a cluster's workers resolve the device themselves.
    where = str(resolve_device(spec.device)) if executor.local_device else executor.describe()
    result = SweepResult(spec=spec, device=where)
    variants = spec.variants()
    weights = _job_weights(spec, store) if (compute and progress is not None) else {}
    units = sum(weights.values()) if weights else len(variants) * (len(spec.methods) + int(spec.baseline))
    work = WorkProgress(units, timed=bool(weights))  # the share of the predicted work done (engine/progress.py)

    def weight(vi: int, method: str) -> float:
        return weights.get((vi, method), 0.0) if weights else 1.0

    current = [""]  # the message of the batch under way
    last_report = [time.perf_counter()]

    def tick(message: str) -> None:
        current[0] = message
        if progress is not None:
            progress(work.between(), message)
            last_report[0] = time.perf_counter()
        if cancel is not None and cancel():
            raise SweepCancelled("sweep cancelled; finished points are cached")

    def poll(fraction: float | None) -> None:
        # Inside a batch (every solver iteration, every DP-SGD step) or while waiting for a
        # cluster: cancel at once, and report progress at most 4 times a second (a UI's progress
        # bar is also where it can stop us).
        if progress is not None and time.perf_counter() - last_report[0] >= 0.25:
            progress(work.inside(fraction), current[0])
            last_report[0] = time.perf_counter()
        if cancel is not None and cancel():
            raise SweepCancelled("sweep cancelled; finished points are cached")

    def note(message: str) -> None:
        current[0] = message

    jobs: list[_Job] = []
    #: key -> (job, position) waiting for it, for the keys of units submitted and not yet back: an
    #: executor that runs units concurrently computes a point shared by two variants once. (The
    #: local executor has every earlier unit back before it plans the next: nothing is shared.)
    inflight: dict[str, list[tuple[_Job, int]]] = {}

    def plan() -> Iterator[WorkUnit]:
        """Look every point up; yield one unit per method and variant with misses (lazily: the
        local executor computes each unit before the next variant's data are loaded)."""
        for vi, (vary_value, vspec) in enumerate(variants):
            label = "" if spec.vary is None else f" ({spec.vary} = {vary_value})"
            tick(f"loading {vspec.data.name}{label}")
            ds, _, base_problem = _variant_data(vspec)
            for method, epsilons in _jobs(vspec):
                tick(f"{get_method(method).label}{label} on {where}")  # the label: UIs show this text
                points = [_point(method, e, vspec, base_problem) for e in epsilons]
                keys = [point_key(p, ds.fingerprint) for p in points]
                hits = [store.get(k) for k in keys]
                missing = [i for i, h in enumerate(hits) if h is None]
                if not get_method(method).supports(vspec.delta):
                    result.warnings.append(f"{get_method(method).label} skipped: "
                                           f"{get_method(method).pure_unsupported_message()}")
                    missing, hits = [], [None] * len(epsilons)
                if missing and not compute:
                    raise _Miss
                job = _Job(vary_value, vspec, base_problem, method, epsilons, points, keys, ds.fingerprint, hits,
                           [i for i in missing if keys[i] not in inflight], [i for i in missing if keys[i] in inflight])
                job.weight = weight(vi, method)
                jobs.append(job)
                for i in job.shared:
                    inflight[keys[i]].append((job, i))
                missing = job.missing
                if not missing:
                    work.finish(job.weight)
                    continue
                work.start_unit(job.weight)
                for i in missing:
                    inflight[keys[i]] = []
                yield WorkUnit(index=len(jobs) - 1, spec_json=vspec.to_json(), method=method,
                               epsilons=tuple(epsilons[i] for i in missing), points=tuple(points[i] for i in missing),
                               fingerprint=ds.fingerprint, schema=SCHEMA_VERSION, label=f"{method}{label}")

    for outcome in executor.run(plan(), execute_unit, poll, note):
        job = jobs[outcome.index]
        if [k for k, _ in outcome.results] != [job.keys[i] for i in job.missing]:
            raise ClusterError(f"{job.method}: the executor answered for other points than it was given")
        result.warnings.extend(outcome.warnings)
        for i, (key, item) in zip(job.missing, outcome.results):
            if item is None:
                continue
            # Only the driver writes; each point is stored whole, with its identity (results export).
            item = dict(item, point=job.points[i], data=job.fingerprint)
            # Another process holding the cache's write lock: the wait shows as progress and can be cancelled.
            store.put(key, item, on_wait=lambda message: (note(message), poll(None)))
            job.hits[i] = item
            result.computed += 1
        for key, item in outcome.results:
            for other, i in inflight.pop(key, []):
                other.hits[i] = None if item is None else job.hits[job.keys.index(key)]
        work.finish(job.weight)
        if executor.concurrent:
            poll(None)  # progress (at most 4 times a second) and cancel, as units come back

    for job in jobs:
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
    if progress is not None:
        progress(1.0, "done")
    result.seconds = time.perf_counter() - start
    return result


def _context(ds: Dataset, problem: Problem, seed: int, device, poll) -> TrainContext:  # noqa: ANN001
    """The training context of ``ds`` for ``problem``, with this call's ``poll``.

    One context per data set, kept across variants and across calls in this process (or worker):
    what depends only on the data (non-private solves, teacher votes) is trained once, e.g. moving
    the epsilon slider re-draws noise but re-trains nothing.
    """
    key = (ds.fingerprint, seed, str(device))
    with _CONTEXTS_LOCK:
        known = _CONTEXTS.get(key)
    fresh = TrainContext.from_dataset(ds, problem, seed, device) if known is None else known.with_problem(problem)
    with _CONTEXTS_LOCK:
        _CONTEXTS.clear()  # keep one data set on the device at a time (N = 1e6 is 3 GB)
        _CONTEXTS[key] = fresh  # stored without a poll: it must not keep this call's callbacks
    mine = fresh.with_problem(problem)  # same data and solves, this call's progress and cancel
    mine.poll = poll
    return mine


def _secure_context(ds: Dataset, problem: Problem, device: torch.device, poll: Callable[[float | None], None] | None
                    ) -> TrainContext:
    """A training context of ``ds`` whose every generator derives from a fresh :func:`~privcore.device.secure_seed`.

    Kept nowhere (not in the process's context memo): the secret seed lives only as long as this
    release, and nothing data-only is shared with another context's seed.
    """
    ctx = TrainContext.from_dataset(ds, problem, _device.secure_seed(), device)
    ctx.poll = poll
    return ctx


def execute_unit(unit: WorkUnit, poll: Callable[[float | None], None] | None = None) -> UnitOutcome:
    """Compute one unit where it runs (this process, or a Dask worker) and return plain dicts.

    Stores nothing. The data set is loaded here (memoised) and must have the fingerprint the
    driver planned with; the points are recomputed here and must be the driver's, so a worker
    with other data or other code refuses the unit instead of answering for the wrong key.
    """
    t0 = time.perf_counter()
    if unit.schema != SCHEMA_VERSION:
        raise ClusterError(f"this worker's privcore writes cache schema {SCHEMA_VERSION}, the driver's "
                           f"{unit.schema}: install the same privcore version on the driver and the workers")
    vspec = SweepSpec.from_json(unit.spec_json)
    device = resolve_device(vspec.device)
    ds, fixed_lam, base_problem = _variant_data(vspec)
    if ds.fingerprint != unit.fingerprint:
        raise ClusterError(f"{unit.label}: the data set loaded here differs from the driver's (fingerprint "
                           f"{ds.fingerprint[:12]} vs {unit.fingerprint[:12]}); give the workers the same data")
    points = [_point(unit.method, e, vspec, base_problem) for e in unit.epsilons]
    if points != list(unit.points):
        raise ClusterError(f"{unit.label}: this worker's privcore describes the points differently from the "
                           "driver's: install the same privcore version on both")
    keys = [point_key(p, ds.fingerprint) for p in points]
    warnings: list[str] = []
    budgets = [PrivacyBudget(e, vspec.delta) for e in unit.epsilons]
    try:
        if vspec.secure_noise:
            make = lambda problem: _secure_context(ds, problem, device, poll)  # noqa: E731
        else:
            make = lambda problem: _context(ds, problem, vspec.seed, device, poll)  # noqa: E731
        fresh = _compute(unit.method, ds, vspec, budgets, fixed_lam, make, device, poll)
    except (CalibrationError, SolverCertificationError) as err:
        warnings.append(f"{unit.method}: {err}")
        fresh = [None] * len(budgets)
    except ArithmeticError as err:  # an accountant's numerical limit ("math range error" alone said nothing)
        eps = ", ".join(f"{e:g}" for e in unit.epsilons)
        warnings.append(f"{unit.method}: cannot be calibrated at epsilon {eps}: its accountant reached a numerical "
                        f"limit ({err}); choose a smaller epsilon")
        fresh = [None] * len(budgets)
    seconds = time.perf_counter() - t0
    for item in fresh:
        if item is not None:
            item["seconds"] = seconds / len(budgets)
    return UnitOutcome(index=unit.index, results=list(zip(keys, fresh)), warnings=warnings, seconds=seconds,
                       where=str(device))


def _compute(method: str, ds: Dataset, spec: SweepSpec, budgets: list[PrivacyBudget], fixed_lam: float,
             context: Callable[[Problem], TrainContext], device: torch.device,
             poll: Callable[[float | None], None] | None = None) -> list[dict[str, Any] | None]:
    """Evaluate the missing points of one method in one batch (per chosen lam when auto).

    With ``spec.secure_noise`` each budget is its own batch with its own secret seed: the common
    random numbers that make exploratory curves smooth would let two published rows of different
    epsilons be combined (theta + s_1 Z and theta + s_2 Z give theta)."""
    if spec.secure_noise and len(budgets) > 1:
        return [r for b in budgets for r in _compute(method, ds, spec, [b], fixed_lam, context, device, poll)]
    dev = str(device)
    auto = spec.lam == "auto" and "lam" in get_method(method).uses and get_method(method).family != "baseline"
    if auto:  # a private choice, paid for out of each budget (privcore.engine.tuning)
        lams = choose_lams(method, ds, spec, budgets, device, lambda d, lam: _problem(d, spec, lam), poll,
                           noise_seed=_device.secure_seed() if spec.secure_noise else None)
        budgets = [release_budget(b) for b in budgets]
    else:
        lams = [fixed_lam] * len(budgets)
    out: list[dict[str, Any] | None] = [None] * len(budgets)
    for lam in sorted(set(lams)):
        idx = [i for i, chosen in enumerate(lams) if chosen == lam]
        ctx = context(_problem(ds, spec, lam))
        scales, acc, answered, among, extras = _evaluate(method, ctx, [budgets[i] for i in idx], spec.accounting,
                                                         spec.repeats)
        for j, i in enumerate(idx):
            # The largest certified gradient norm of the solves this release used (theta*, the
            # perturbed problems); None for methods that release no minimiser (DP-SGD, S&A).
            grad = ctx.grad_used or None
            scale = scales[j] if scales[j].noise != "none" else None  # the baseline stores no noise scale
            note = "; ".join(n for n in (LAM_AUTO_NOTE if auto else "", SECURE_NOTE if spec.secure_noise else "") if n)
            out[i] = _stored(acc[j], scale, 0.0, dev, lam, note, grad)
            if answered is not None:
                out[i].update(answered_fraction=float(answered[j].mean()), accuracy_answered=float(among[j].mean()),
                              accuracy_answered_std=float(among[j].std(ddof=1)) if among[j].size > 1 else 0.0)
            out[i].update({k: float(v) for k, v in extras[j].items() if k in EXTRA_RESULT_KEYS})
    return out
