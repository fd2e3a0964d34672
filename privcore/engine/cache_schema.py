"""The shape of a stored result: what :class:`~privcore.engine.cache.ResultCache` accepts on reading.

The cache folder may be shared, copied or imported, so every value read is checked here before it
is used (a bad one is a miss and is recomputed).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["check_result"]


def _finite(value: Any, *, low: float | None = None, high: float | None = None) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        v = float(value)
    except OverflowError:  # a JSON integer of hundreds of digits
        return False
    return math.isfinite(v) and (low is None or v >= low) and (high is None or v <= high)


#: The numbers every scale may hold; a method's own (its ``scale_fields``) are read from the registry.
_SCALE_NUMBERS = ("sigma", "beta", "rho", "noise_multiplier", "per_query_epsilon", "per_query_delta", "sensitivity",
                  "solver_tolerance", "output_scale")


def _check_scale(scale: Any) -> str | None:
    if not isinstance(scale, dict):
        return "scale is not an object"
    if not isinstance(scale.get("noise"), str):
        return "scale.noise is not a string"
    from ..methods.fields import declared_scale_fields

    own = {f.name: f for f in declared_scale_fields()}
    for key, value in scale.items():
        if not isinstance(key, str):
            return "scale has a non-string key"
        if key in own:
            if value == "inf" or own[key].check(value) is None:
                continue
            return f"scale.{own[key].check(value)}"
        if key in _SCALE_NUMBERS or key in ("epsilon", "delta"):
            if value is None or value == "inf" or _finite(value, low=0.0):
                continue
            return f"scale.{key} is not a finite number >= 0"
        if key == "notes":
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                return "scale.notes is not a list of strings"
        elif not (value is None or isinstance(value, str)):
            return f"scale.{key} is not a string"
    return None


def check_result(value: Any) -> str | None:
    """None when ``value`` has the shape of a stored result (see ``runner._stored``), else why not.

    Required: ``accuracies`` (non-empty list of numbers in [0, 1]), ``accuracy_mean`` in [0, 1],
    ``accuracy_std`` >= 0, ``seconds`` >= 0 (all finite), ``device`` (str), ``lam`` (finite > 0),
    ``scale`` (an object of strings and finite numbers; a method's declared scale fields in their
    range); optional ``note`` (str), ``solver_grad_norm`` (finite >= 0 or null) and the registered
    methods' measured result fields (each in its declared range, or null).
    """
    if not isinstance(value, dict):
        return f"not an object ({type(value).__name__})"
    acc = value.get("accuracies")
    if not isinstance(acc, list) or not acc or not all(_finite(a, low=0.0, high=1.0) for a in acc):
        return "accuracies is not a non-empty list of numbers in [0, 1]"
    if not _finite(value.get("accuracy_mean"), low=0.0, high=1.0):
        return "accuracy_mean is not a number in [0, 1]"
    if not _finite(value.get("accuracy_std"), low=0.0):
        return "accuracy_std is not a finite number >= 0"
    # The summary must be the repetitions' own (a one-byte edit of the stored mean came back as a wrong
    # accuracy, unnoticed): recomputed in float64, with room for the float32 sums the runner may use.
    mean = math.fsum(acc) / len(acc)
    if abs(value["accuracy_mean"] - mean) > 1e-6:
        return f"accuracy_mean {value['accuracy_mean']!r} is not the mean {mean:.9g} of its accuracies"
    std = math.sqrt(math.fsum((a - mean) ** 2 for a in acc) / (len(acc) - 1)) if len(acc) > 1 else 0.0
    if abs(value["accuracy_std"] - std) > 1e-5:
        return f"accuracy_std {value['accuracy_std']!r} is not the standard deviation {std:.9g} of its accuracies"
    if not _finite(value.get("seconds"), low=0.0):
        return "seconds is not a finite number >= 0"
    if not isinstance(value.get("device"), str) or len(value["device"]) > 200:
        return "device is not a short string"
    if not _finite(value.get("lam"), low=0.0) or value["lam"] <= 0:
        return "lam is not a finite number > 0"
    problem = _check_scale(value.get("scale"))
    if problem:
        return problem
    if not isinstance(value.get("note", ""), str):
        return "note is not a string"
    grad = value.get("solver_grad_norm")
    if grad is not None and not _finite(grad, low=0.0):
        return "solver_grad_norm is not a finite number >= 0"
    from ..methods.fields import declared_result_fields

    for f in declared_result_fields():  # the methods' own measured numbers, each in its declared range
        problem = None if f.on_scale else f.check(value.get(f.name))
        if problem:
            return problem
    return None
