"""The plan of a sweep: made once, read by the time estimate, the runner, ``read_cached`` and the executor.

:func:`make_plan` loads each variant's data set (memoised by the loader) for its fingerprint and base
:class:`~privcore.types.Problem`, names every point (:func:`point_identity`: only the settings the
method's result depends on), keys it (:func:`~privcore.engine.cache.point_key`) and looks it up in the
result cache. A :class:`SweepPlan` holds that, per (variant, method) :class:`PlannedJob`: the points,
keys, cache hits and which positions its unit computes, plus the pieces of work the process's live
training contexts already hold (the time model's ``warm`` input). Nothing here trains.

The cost model (:mod:`privcore.engine.cost`) prices a plan, the runner (:mod:`privcore.engine.runner`)
turns its jobs with misses into :class:`~privcore.engine.work.WorkUnit` values that carry their
points and keys (a worker loads the data and computes; it plans nothing), and ``read_cached`` is a plan
without misses. A point two variants share (a training method across B) is computed once, by the
first job that needs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ..data import Dataset
from ..methods import BASELINE, get_method
from ..types import Problem
from .cache import ResultCache, point_key
from .specs import SweepSpec
from .variant import variant_data

__all__ = ["PlannedJob", "SweepPlan", "make_plan", "point_identity", "variant_jobs"]


def point_identity(method: str, eps: float, spec: SweepSpec, problem: Problem) -> dict[str, Any]:
    """The cache identity of one point: only the settings the method's result depends on, and the version
    of the method's code (:mod:`privcore.methods.source`: editing a method re-keys its own points)."""
    entry = get_method(method)
    uses = entry.uses
    point = {"method": method, "epsilon": "inf" if math.isinf(eps) else eps, "delta": spec.delta,
             "accounting": spec.accounting, "repeats": spec.repeats, "seed": spec.seed, "code": entry.code_version}
    for name in uses:
        point[name] = spec.lam if name == "lam" and spec.lam == "auto" else getattr(problem, name)
    return point


def variant_jobs(vspec: SweepSpec) -> list[tuple[str, list[float]]]:
    """(method, epsilons) batches of one variant, the non-private baseline last."""
    jobs = [(m, list(vspec.epsilons)) for m in vspec.methods]
    if vspec.baseline:
        jobs.append((BASELINE.name, [math.inf]))
    return jobs


@dataclass
class PlannedJob:
    """One method in one variant: its points, keys, what the cache held and what its unit computes."""

    variant: int
    vary_value: Any
    vspec: SweepSpec
    problem: Problem
    method: str
    epsilons: list[float]
    points: list[dict[str, Any]]
    keys: list[str]
    fingerprint: str
    hits: list[dict[str, Any] | None]
    missing: list[int]  # positions computed by this job's unit
    shared: list[int] = field(default_factory=list)  # positions computed by an earlier job of the plan
    warning: str = ""  # why the method is skipped (no guarantee at this delta); reported when run
    label: str = ""  # " (B = 10)": the varied value, for messages


@dataclass
class SweepPlan:
    """Every job of a sweep in the runner's order, and the work the process already holds.

    ``warm``: variant index -> the shared pieces of work (``("ctx", "eig")``, a non-private solve, the
    teachers, lambda = auto's ones under ``"auto"``) that this process's live training contexts hold,
    so the time model does not price them again. ``complete``: False when a read-only plan stopped at
    its first miss (``make_plan(..., stop_at_miss=True)``)."""

    spec: SweepSpec
    jobs: list[PlannedJob] = field(default_factory=list)
    warm: dict[int, set] = field(default_factory=dict)
    complete: bool = True
    #: The result cache the plan looked the points up in (the run stores into it).
    cache: ResultCache | None = field(default=None, repr=False)
    #: The time model's estimate of the plan, once made (:func:`privcore.engine.cost.estimate_plan`):
    #: the page's "about N s" and the run's progress weights are one estimate.
    estimate: Any = field(default=None, repr=False)
    #: key -> (job index, position) of the later jobs that take that point from an earlier job's unit.
    waiting: dict[str, list[tuple[int, int]]] = field(default_factory=dict, repr=False)

    def missing(self) -> dict[tuple[int, str], int]:
        """(variant index, method) -> how many points its unit computes (the cost model's input)."""
        return {(j.variant, j.method): len(j.missing) for j in self.jobs}

    def all_cached(self) -> bool:
        """Whether nothing is left to compute."""
        return self.complete and not any(j.missing for j in self.jobs)



def _held(ds: Dataset, vspec: SweepSpec) -> set:
    """The shared pieces of work this process's live contexts hold for ``ds`` (see :attr:`SweepPlan.warm`)."""
    from ..device import resolve_device
    from . import context, tuning

    held: set = set()
    if vspec.secure_noise:  # a secure run trains in fresh contexts of its own
        return held
    device = str(resolve_device(vspec.device))
    for live, kind, prefix in ((context.live_context(ds.fingerprint, vspec.seed, device), "ctx", ()),
                               (tuning.live_selection_context(ds.fingerprint, vspec.seed, device), "auto", ("auto",))):
        if live is None:
            continue
        held.add((kind, "data"))
        for piece in live.held_pieces():
            held.add((kind, "eig") if piece == ("eig",) else prefix + piece)
    return held


def make_plan(spec: SweepSpec, cache: ResultCache | None = None, *, tick: Callable[[str], None] | None = None,
              stop_at_miss: bool = False) -> SweepPlan:
    """The plan of ``spec`` against ``cache`` (default: the results cache; a disabled cache or a secure
    spec finds nothing). ``tick(message)`` is called before each variant's data are loaded (a runner's
    progress and cancel); ``stop_at_miss`` ends at the first point to compute (``complete`` False)."""
    if not isinstance(spec, SweepSpec):
        raise TypeError(f"spec must be a SweepSpec, got {type(spec).__name__}")
    store = cache if cache is not None else ResultCache()
    lookup = store.enabled and not spec.secure_noise
    plan = SweepPlan(spec, cache=store)
    planned: set[str] = set()
    for vi, (vary_value, vspec) in enumerate(spec.variants()):
        label = "" if spec.vary is None else f" ({spec.vary} = {vary_value})"
        if tick is not None:
            tick(f"loading {vspec.data.name}{label}")
        ds, _, problem = variant_data(vspec)
        for method, epsilons in variant_jobs(vspec):
            m = get_method(method)
            points = [point_identity(method, e, vspec, problem) for e in epsilons]
            keys = [point_key(p, ds.fingerprint) for p in points]
            hits = [store.get(k) if lookup else None for k in keys]
            todo = [i for i, h in enumerate(hits) if h is None]
            warning = ""
            if not m.supports(vspec.delta):
                warning = f"{m.label} skipped: {m.pure_unsupported_message()}"
                todo, hits = [], [None] * len(epsilons)
            if todo and stop_at_miss:
                plan.complete = False
                return plan
            # Without a cache an earlier unit's point is computed again (as a run one unit at a time did).
            shared = [i for i in todo if lookup and keys[i] in planned]
            missing = [i for i in todo if i not in shared]
            planned.update(keys[i] for i in missing)
            for i in shared:
                plan.waiting.setdefault(keys[i], []).append((len(plan.jobs), i))
            plan.jobs.append(PlannedJob(vi, vary_value, vspec, problem, method, list(epsilons), points, keys,
                                        ds.fingerprint, hits, missing, shared, warning, label))
        held = _held(ds, vspec)
        if held:
            plan.warm[vi] = held
    return plan
