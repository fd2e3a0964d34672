"""One variant of a sweep: its data set and base :class:`~privcore.types.Problem`.

The driver's plan (:mod:`privcore.engine.plan`) and the unit computed on a worker
(:mod:`privcore.engine.units`) load a variant the same way, here: the worker checks that what it
loaded has the fingerprint and problem the driver planned with.
"""

from __future__ import annotations

from .. import knobs, limits
from ..data import Dataset, load_dataset
from ..types import Problem
from .specs import SweepSpec

__all__ = ["variant_data", "base_problem"]


def base_problem(ds: Dataset, spec: SweepSpec, lam: float) -> Problem:
    """The :class:`Problem` of ``spec`` on ``ds`` at ``lam``."""
    return Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=lam, budget=spec.budget,
                   teachers=spec.teachers, batch_size=spec.batch_size, epochs=spec.epochs,
                   clip=spec.clip, learning_rate=spec.learning_rate)


def variant_data(vspec: SweepSpec) -> tuple[Dataset, float, Problem]:
    """The data set of one variant (memoised by the loader), its fixed lam and its base problem.

    Refuses more features than :func:`privcore.limits.max_features` (the solver diagonalises a D x D
    matrix: 10,000 features took over 12 minutes, uncancellable)."""
    d = vspec.data
    ds = load_dataset(d.name, seed=vspec.seed, **d.load_kwargs())
    limits.check_features(ds.dim)
    fixed_lam = knobs.fixed_lam(vspec.lam)
    return ds, fixed_lam, base_problem(ds, vspec, fixed_lam)
