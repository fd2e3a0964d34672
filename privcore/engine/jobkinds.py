"""The kinds of job, one protocol: a sweep, a leakage measurement and a deep run.

Each kind is a frozen spec with ``key`` (its identity) and ``to_json``, and a :class:`JobKind` entry
saying how to run it (``run(spec, progress=, cancel=, cache=, executor=)``: typed rows, progress as
``(fraction, message)``, :class:`privcore.jobs.JobCancelled` on cancel, finished work cached), how long
it will take (``estimate(spec)``: predicted seconds of what is not cached, or None) and what the
cache already holds (``cached(spec)``: the result when nothing is left to compute, else None).
Every kind runs in this process or on a Dask cluster through one seam, :mod:`privcore.engine.executor`:
its runner turns its work into units with an ``index``, a ``method`` and optional worker ``resources``
and a module-level work function, and only the driver writes the cache.

How to add a kind: write its spec (frozen, validated, ``key``/``to_json``), its runner taking the
arguments above and sending its work through ``executor.run(units, work, poll, note)``, and one
:class:`JobKind` line in :data:`KINDS`. The dashboard's runner (``ui.progress.run_jobs``) and the
command line's scaffold (:mod:`privcore.cli_jobs`) then take it as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..jobs import JobCancelled

__all__ = ["JobKind", "KINDS", "kind_of", "run_job", "estimate_job", "cached_job", "JobCancelled"]


@dataclass(frozen=True)
class JobKind:
    """How to run, price and read back one kind of job (see the module docstring)."""

    name: str
    spec_type: Callable[[], type]
    run: Callable[..., Any]
    estimate: Callable[[Any], float | None]
    cached: Callable[[Any], Any]


def _sweep_type() -> type:
    from .specs import SweepSpec

    return SweepSpec


def _sweep_run(spec: Any, **kw: Any) -> Any:
    from .runner import run_sweep

    return run_sweep(spec, **kw)


def _sweep_estimate(spec: Any) -> float | None:
    from .cost import estimate_spec

    try:
        return float(estimate_spec(spec).seconds)
    except (ValueError, TypeError, RuntimeError, OSError):
        return None


def _sweep_cached(spec: Any) -> Any:
    from .runner import read_cached

    return read_cached(spec)


def _leakage_type() -> type:
    from ..leakage.spec import LeakageSpec

    return LeakageSpec


def _leakage_run(spec: Any, **kw: Any) -> Any:
    from ..leakage.run import run_leakage

    return run_leakage(spec, **kw)


def _leakage_estimate(spec: Any) -> float | None:
    from ..leakage.cost import estimate_seconds
    from ..leakage.run import is_cached
    from . import cost
    from .specs import SweepSpec

    try:
        if is_cached(spec):
            return 0.0
        return float(estimate_seconds([spec], cost.data_sizes(SweepSpec(data=spec.data, seed=spec.seed))))
    except (ValueError, TypeError, RuntimeError, OSError):
        return None


def _leakage_cached(spec: Any) -> Any:
    from ..leakage.run import cached_result

    return cached_result(spec)


def _deep_type() -> type:
    from ..deep.spec import DeepSpec

    return DeepSpec


def _deep_run(spec: Any, **kw: Any) -> Any:
    from ..deep.run import run_deep

    return run_deep(spec, **kw)


def _deep_estimate(spec: Any) -> float | None:
    return None  # no time model for image models yet (the deep page states the work instead)


def _deep_cached(spec: Any) -> Any:
    from ..deep.run import cached_rows

    rows, missing = cached_rows(spec)
    return rows if missing == 0 else None


KINDS: dict[str, JobKind] = {
    "sweep": JobKind("sweep", _sweep_type, _sweep_run, _sweep_estimate, _sweep_cached),
    "leakage": JobKind("leakage", _leakage_type, _leakage_run, _leakage_estimate, _leakage_cached),
    "deep": JobKind("deep", _deep_type, _deep_run, _deep_estimate, _deep_cached),
}


def kind_of(spec: Any) -> JobKind:
    """The :class:`JobKind` of ``spec``; TypeError naming the kinds when it is none of them."""
    for kind in KINDS.values():
        if isinstance(spec, kind.spec_type()):
            return kind
    raise TypeError(f"spec must be a SweepSpec, LeakageSpec or DeepSpec, got {type(spec).__name__}")


def run_job(spec: Any, **kw: Any) -> Any:
    """Run ``spec`` by its kind (keywords: progress, cancel, cache, use_cache, executor)."""
    return kind_of(spec).run(spec, **kw)


def estimate_job(spec: Any) -> float | None:
    """Predicted seconds of what ``spec`` would compute now, or None when its kind cannot say."""
    return kind_of(spec).estimate(spec)


def cached_job(spec: Any) -> Any:
    """``spec``'s result when the cache holds all of it (nothing trained), else None."""
    return kind_of(spec).cached(spec)
