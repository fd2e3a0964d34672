"""One unit of a sweep's work, computed where it runs (this process or a Dask worker): plain dicts back.

:func:`execute_unit` is the executor's work function (:mod:`privcore.engine.executor`): it loads the
unit's data set (memoised), checks it and the points' keys against what the driver planned
(:mod:`privcore.engine.plan`), asks the method to calibrate and evaluate every missing epsilon x
repetition in one batch (per chosen lambda when lambda = auto) and returns (key, plain dict) pairs.
It stores nothing: only the driver writes the cache (:mod:`privcore.engine.runner`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..certify import SolverCertificationError
from ..data import Dataset
from .. import device as _device
from ..device import resolve_device
from ..methods import get_method
from ..types import CalibrationError, NoiseScale, PrivacyBudget, Problem
from . import context as _contexts
from .cache import SCHEMA_VERSION, point_key
from .cluster_health import ClusterError
from .work import UnitOutcome, WorkUnit
from .variant import base_problem, variant_data
from .specs import SweepSpec
from .tuning import LAM_AUTO_COUPLED_NOTE, LAM_AUTO_NOTE, choose_lams, release_budget

if TYPE_CHECKING:
    import torch
    from ..context import TrainContext

__all__ = ["execute_unit", "SECURE_NOTE"]

#: The note of a row whose noise came from the operating system's entropy (``secure_noise``).
SECURE_NOTE = ("noise from the operating system's entropy (secure_noise): a fresh secret seed per epsilon, never "
               "shown or stored; the spec's seed fixed only the data splits, so these numbers cannot be reproduced")

def _stored(acc: np.ndarray, scale: NoiseScale | None, seconds: float, device: str, lam: float, note: str = "",
            grad_norm: float | None = None) -> dict[str, Any]:
    return {"accuracies": [float(a) for a in acc], "accuracy_mean": float(acc.mean()),
            "accuracy_std": float(acc.std(ddof=1)) if acc.size > 1 else 0.0, "seconds": seconds, "device": device,
            "lam": lam, "scale": scale.to_dict() if scale is not None else {"noise": "none"}, "note": note,
            "solver_grad_norm": grad_norm}


def _evaluate(method: str, ctx: TrainContext, budgets: list[PrivacyBudget], accounting: str,
              repeats: int) -> tuple[list[NoiseScale], np.ndarray, list[dict[str, float]]]:
    """Scales, accuracies [E, R] and the method's measured result fields per scale (:meth:`Method.measure`)."""
    m = get_method(method)
    scales = [m.calibrate(b, ctx.problem, accounting) for b in budgets]
    acc, extras = m.measure(ctx, scales, repeats)
    return scales, acc, extras


def _measured(method: str, values: dict[str, Any]) -> dict[str, float]:
    """``values`` of the method's measured result fields as stored numbers; ValueError naming an
    undeclared or out-of-range one (a method's outputs are stored only as it declares them)."""
    from ..methods.fields import check_field_value

    declared = {f.name: f for f in get_method(method).result_fields if not f.on_scale}
    unknown = sorted(set(values) - set(declared))
    if unknown:
        raise ValueError(f"{method} measured {', '.join(unknown)}, which its result_fields do not declare")
    return {name: check_field_value(declared[name], v) for name, v in values.items() if v is not None}


def execute_unit(unit: WorkUnit, poll: Callable[[float | None], None] | None = None) -> UnitOutcome:
    """Compute one unit where it runs (this process, or a Dask worker) and return plain dicts.

    Stores nothing and plans nothing: the unit carries its variant's settings, problem, points and
    keys. The data set is loaded here (memoised) and must have the fingerprint and sizes the driver
    planned with, and the points must have the driver's keys, so a worker with other data or other
    code refuses the unit instead of answering for the wrong key.
    """
    t0 = time.perf_counter()
    if unit.schema != SCHEMA_VERSION:
        raise ClusterError(f"this worker's privcore writes cache schema {SCHEMA_VERSION}, the driver's "
                           f"{unit.schema}: install the same privcore version on the driver and the workers")
    vspec = unit.spec
    device = resolve_device(vspec.device)
    ds, fixed_lam, problem = variant_data(vspec)
    if ds.fingerprint != unit.fingerprint or problem != unit.problem:
        raise ClusterError(f"{unit.label}: the data set loaded here differs from the driver's (fingerprint "
                           f"{ds.fingerprint[:12]} vs {unit.fingerprint[:12]}); give the workers the same data")
    keys = [point_key(p, ds.fingerprint) for p in unit.points]
    if keys != list(unit.keys) or len(keys) != len(unit.epsilons):
        raise ClusterError(f"{unit.label}: this worker's privcore describes the points differently from the "
                           "driver's: install the same privcore version on both")
    warnings: list[str] = []
    budgets = [PrivacyBudget(e, vspec.delta) for e in unit.epsilons]
    try:
        if vspec.secure_noise:
            make = lambda problem: _contexts.secure_context(ds, problem, device, poll)  # noqa: E731
        else:
            make = lambda problem: _contexts.context_for(ds, problem, vspec.seed, device, poll)  # noqa: E731
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
    m = get_method(method)
    auto = spec.lam == "auto" and "lam" in m.uses and m.family != "baseline" and not m.couples_queries
    coupled = spec.lam == "auto" and "lam" in m.uses and m.couples_queries  # runs at the stand-in, whole budget
    if auto:  # a private choice, paid for out of each budget (privcore.engine.tuning)
        lams = choose_lams(method, ds, spec, budgets, device, lambda d, lam: base_problem(d, spec, lam), poll,
                           noise_seed=_device.secure_seed() if spec.secure_noise else None)
        budgets = [release_budget(b) for b in budgets]
    else:
        lams = [fixed_lam] * len(budgets)
    out: list[dict[str, Any] | None] = [None] * len(budgets)
    for lam in sorted(set(lams)):
        idx = [i for i, chosen in enumerate(lams) if chosen == lam]
        ctx = context(base_problem(ds, spec, lam))
        scales, acc, extras = _evaluate(method, ctx, [budgets[i] for i in idx], spec.accounting, spec.repeats)
        for j, i in enumerate(idx):
            # The largest certified gradient norm of the solves this release used (theta*, the
            # perturbed problems); None for methods that release no minimiser (DP-SGD, S&A).
            grad = ctx.grad_used or None
            scale = scales[j] if scales[j].noise != "none" else None  # the baseline stores no noise scale
            auto_note = LAM_AUTO_NOTE if auto else (LAM_AUTO_COUPLED_NOTE if coupled else "")
            note = "; ".join(n for n in (auto_note, SECURE_NOTE if spec.secure_noise else "") if n)
            out[i] = _stored(acc[j], scale, 0.0, dev, lam, note, grad)
            out[i].update(_measured(method, extras[j]))  # the method's own result fields, as it declares them
    return out
