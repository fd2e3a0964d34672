"""Does an imported result agree with its own point? (``results import``, :mod:`~privcore.engine.cli_results`)

A results file is where a colleague's mistake or a hostile edit comes in, and a record whose key is
right can still contradict itself: one accuracy for a point of 4 repetitions, the noise of ε = 1000
under a point at ε = 1, a private point without noise, a scale naming another method. Each record's
value is checked against its point:

* ``accuracies`` has one entry per repetition (``point.repeats``); ``lam`` is the point's (fixed λ);
* a private point at finite ε has noise; its scale names the point's method, ε, δ (with λ = auto,
  the share the private choice of λ leaves to the release) and accounting; the baseline and
  ε = ∞ have none;
* the noise is this privcore's calibration of the point. A results file does not carry the data
  set's shape (N, D, C), so the method is calibrated for four shapes: every scale number that is the
  same for all (or the same multiple of the sensitivity) must be the stored one, to a relative 10⁻⁶
  (calibrations agree far closer than that across machines; a wrong ε moves them by far more); a
  number that depends on C alone (loss perturbation's noise) must be given by some C up to 64.
  DP-SGD's noise multiplier depends on N itself: there, σ = multiplier × clip is what is checked.

What no check can tell is whether the accuracies are true: import files you trust.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

__all__ = ["check_against_point"]

_CORE_SCALE_NUMBERS = ("sigma", "beta", "rho", "noise_multiplier", "per_query_epsilon", "per_query_delta",
                       "sensitivity", "solver_tolerance", "output_scale")


def _scale_numbers() -> tuple[str, ...]:
    """Every number a stored scale may hold: the common ones and the registered methods' own."""
    from ..methods.fields import declared_scale_fields

    return _CORE_SCALE_NUMBERS + tuple(f.name for f in declared_scale_fields())
_RTOL = 1e-6
#: The data shapes (N, D, C) a calibration is done for: what differs between them depends on the
#: data set, which a results file does not name; what agrees is determined by the point.
_BASE, _OTHER_N, _OTHER_D, _OTHER_C = (200_000, 24, 3), (700_000, 24, 3), (200_000, 96, 3), (200_000, 24, 10)
#: Numbers of classes tried for a number that depends on C alone (loss perturbation's noise): every
#: bundled data set has at most 10; beyond this such numbers are not checked.
_MAX_CLASSES = 64
#: DP-SGD's noise multiplier depends on N (steps = epochs N / batch) and each calibration runs an
#: accountant for seconds: its scale is checked for std = multiplier × clip instead.
_NOT_RECALIBRATED = ("dpsgd",)


def _number(value: Any) -> float | None:
    """A stored number ("inf" included) as a float; None when it is not one."""
    if value == "inf":
        return math.inf
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _close(a: float, b: float) -> bool:
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= _RTOL * max(abs(a), abs(b))


def _fmt(value: Any) -> str:
    return "∞" if value in ("inf", math.inf) else f"{value:.6g}" if isinstance(value, float) else str(value)[:40]


@lru_cache(maxsize=4096)
def _calibrated(method: str, epsilon: float, delta: float, accounting: str, fields: tuple[tuple[str, Any], ...],
                shape: tuple[int, int, int]) -> dict[str, Any] | str:
    """The method's scale (``to_dict``) for the data shape (N, D, C), or why it cannot be calibrated."""
    from ..methods import get_method
    from ..types import PrivacyBudget, Problem

    n, dim, classes = shape
    try:
        problem = Problem(n=n, dim=dim, classes=classes, **dict(fields))
        return get_method(method).calibrate(PrivacyBudget(epsilon, delta), problem, accounting).to_dict()
    except (TypeError, ValueError) as err:
        return str(err).splitlines()[0][:120]


_LAST_CLASSES = [3]  # the number of classes the last search found: records of one file share a data set


def _point_numbers(point: dict[str, Any]) -> tuple[float, float, str] | str:
    from ..types import ACCOUNTING_MODES

    eps, delta = _number(point.get("epsilon")), _number(point.get("delta"))
    if eps is None or not eps > 0:
        return "point.epsilon: not a number > 0 or 'inf'"
    if delta is None or not 0 <= delta < 1:
        return "point.delta: not a number in [0, 1)"
    if point.get("accounting") not in ACCOUNTING_MODES:
        return f"point.accounting: not one of {', '.join(ACCOUNTING_MODES)}"
    return eps, delta, point["accounting"]


def check_against_point(point: dict[str, Any], value: dict[str, Any]) -> str | None:
    """None when ``value`` (a stored result that passed ``check_result``) agrees with ``point``;
    else 'field: why', the field named as in the record (``value.scale.sigma``, ``point.repeats``)."""
    from ..methods import BASELINE, get_method

    method = point.get("method")
    repeats = point.get("repeats")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        return "point.repeats: not an integer >= 1"
    if len(value["accuracies"]) != repeats:
        return (f"value.accuracies: {len(value['accuracies'])} accuracies for a point of {repeats} "
                f"repetition{'s' if repeats != 1 else ''}")
    numbers = _point_numbers(point)
    if isinstance(numbers, str):
        return numbers
    eps, delta, accounting = numbers
    scale = value["scale"]
    noise = scale.get("noise")
    m = BASELINE if method == BASELINE.name else get_method(method)
    uses = m.uses
    if "lam" in uses and _number(point.get("lam")) is not None and not _close(float(point["lam"]), float(value["lam"])):
        return f"value.lam: {_fmt(value['lam'])}, the point's λ is {_fmt(point['lam'])}"
    if method == BASELINE.name or math.isinf(eps):
        if noise != "none":
            what = "the non-private baseline" if method == BASELINE.name else "a point at ε = ∞"
            return f"value.scale.noise: {noise!r} for {what}, which adds no noise"
        return None
    if noise == "none":
        return f"value.scale.noise: 'none' (no noise) for a private point ({method} at ε = {_fmt(eps)})"
    for name, want in (("method", method), ("accounting", accounting)):
        if scale.get(name) != want:
            return f"value.scale.{name}: {str(scale.get(name))[:40]!r}, the point's is {want!r}"
    missing = [name for name in uses if name not in point]
    if missing:
        return f"point.{missing[0]}: missing ({method} depends on it)"
    # the release gets what the private choice of λ leaves (privcore.engine.tuning), as the runner splits it
    # (engine/units.py): a method whose queries are coupled runs at the stand-in λ with the whole budget
    auto = point.get("lam") == "auto" and "lam" in uses and not m.couples_queries
    if auto:
        from ..types import PrivacyBudget
        from .tuning import release_budget

        left = release_budget(PrivacyBudget(eps, delta))
        eps, delta = left.epsilon, left.delta
    for name, want in (("epsilon", eps), ("delta", delta)):
        got = _number(scale.get(name))
        if got is None or not _close(got, want):
            whose = "the release's share of the point's (λ = auto)" if auto else "the point's"
            return f"value.scale.{name}: {_fmt(scale.get(name))}, {whose} is {_fmt(want)}"
    if method in _NOT_RECALIBRATED:
        return _dpsgd_scale(scale, point)
    fields = tuple((name, value["lam"] if name == "lam" and point[name] == "auto" else point[name]) for name in uses)
    try:
        at = [_calibrated(method, eps, delta, accounting, fields, shape) for shape in (_BASE, _OTHER_N, _OTHER_D, _OTHER_C)]
    except TypeError:  # an unhashable field cannot come from a checked point; refused all the same
        return "point: a setting is not a plain value"
    failed = next((r for r in at if isinstance(r, str)), None)
    if failed is not None:
        return f"point: this privcore cannot calibrate it ({failed})"
    problem = _compare_scale(scale, at, lambda c: _calibrated(method, eps, delta, accounting, fields, _BASE[:2] + (c,)))
    return problem or _nonzero_noise(scale)


def _dpsgd_scale(scale: dict[str, Any], point: dict[str, Any]) -> str | None:
    """DP-SGD adds Gaussian noise of std = noise multiplier × clip (the multiplier itself depends on N)."""
    if scale.get("noise") != "gaussian":
        return f"value.scale.noise: {str(scale.get('noise'))[:40]!r}, DP-SGD adds 'gaussian'"
    sigma, multiplier, clip = (_number(scale.get("sigma")), _number(scale.get("noise_multiplier")),
                               _number(point.get("clip")))
    if multiplier is None or not 0 < multiplier < math.inf:
        return f"value.scale.noise_multiplier: {_fmt(scale.get('noise_multiplier'))}, not a finite number > 0"
    if sigma is None or clip is None or not _close(sigma, multiplier * clip):
        return (f"value.scale.sigma: {_fmt(scale.get('sigma'))}, the noise multiplier {_fmt(multiplier)} × clip "
                f"{_fmt(point.get('clip'))} gives {_fmt(multiplier * (clip or 0.0))}")
    return _nonzero_noise(scale)


def _same(refs: list[float | None]) -> bool:
    return all(r is not None for r in refs) and all(_close(r, refs[0]) for r in refs)


def _compare_scale(scale: dict[str, Any], at: list[dict[str, Any]], with_classes: Any) -> str | None:
    """Compare ``scale`` with the calibrations ``at`` the four data shapes; ``with_classes(c)`` is the
    calibration at the base shape with ``c`` classes."""
    base = at[0]
    if scale.get("noise") != base["noise"]:
        return f"value.scale.noise: {str(scale.get('noise'))[:40]!r}, this method's calibration adds {base['noise']!r}"
    numbers = _scale_numbers()
    stored = {name: _number(scale.get(name)) for name in numbers}
    sens = [_number(r.get("sensitivity")) for r in at]
    by_classes: list[str] = []
    for name in numbers:
        ref = [_number(r.get(name)) for r in at]
        got = stored[name]
        if all(r is None for r in ref):
            if scale.get(name) is not None:
                return f"value.scale.{name}: {_fmt(scale.get(name))}, this method's calibration has none"
            continue
        if got is None:
            return f"value.scale.{name}: missing, this method's calibration sets it"
        if _same(ref):
            if not _close(got, ref[0]):
                return f"value.scale.{name}: {_fmt(got)}, the calibration of this point gives {_fmt(ref[0])}"
        elif _same(ref[:3]):  # depends on the number of classes alone
            by_classes.append(name)
        elif stored["sensitivity"] and all(sens) and not any(math.isinf(x) for x in (*ref, *sens, got)):
            ratios = [r / s for r, s in zip(ref, sens)]  # a fixed multiple of the sensitivity is the point's
            if _same(ratios) and not _close(got / stored["sensitivity"], ratios[0]):
                return (f"value.scale.{name}: {_fmt(got)} is {_fmt(got / stored['sensitivity'])} × the sensitivity, "
                        f"the calibration of this point gives {_fmt(ratios[0])} ×")
    if by_classes:
        return _fit_classes(stored, by_classes, with_classes)
    return None


def _fit_classes(stored: dict[str, float | None], names: list[str], with_classes: Any) -> str | None:
    """Numbers that depend on the number of classes C alone must all be given by one C up to
    :data:`_MAX_CLASSES`, or exceed what C = :data:`_MAX_CLASSES` + 1 gives (more classes, more noise:
    not checked further, and never less noise than that)."""
    tried = [_LAST_CLASSES[0]] + [c for c in range(2, _MAX_CLASSES + 1) if c != _LAST_CLASSES[0]]
    for c in tried:
        ref = with_classes(c)
        if isinstance(ref, dict) and all(_number(ref.get(n)) is not None and _close(stored[n], _number(ref.get(n)))
                                         for n in names):
            _LAST_CLASSES[0] = c
            return None
    beyond = with_classes(_MAX_CLASSES + 1)
    if isinstance(beyond, dict) and all(_number(beyond.get(n)) is not None and stored[n] > _number(beyond.get(n))
                                        for n in names):
        return None
    return (f"value.scale.{names[0]}: {_fmt(stored[names[0]])}, no number of classes up to {_MAX_CLASSES} gives it "
            "in the calibration of this point")


def _nonzero_noise(scale: dict[str, Any]) -> str | None:
    """A private scale must add noise: a Gaussian std > 0; a Laplace-like inverse scale below ∞."""
    noise = scale["noise"]
    if noise == "gaussian":
        sigma = _number(scale.get("sigma"))
        if sigma is None or not 0 < sigma < math.inf:
            return f"value.scale.sigma: {_fmt(scale.get('sigma'))}, a Gaussian scale needs a finite std > 0"
    elif noise in ("laplace_like", "exponential_mechanism"):
        beta = _number(scale.get("beta"))
        if beta is None or math.isinf(beta) or (noise == "laplace_like" and beta <= 0):
            return f"value.scale.beta: {_fmt(scale.get('beta'))}, no noise at this inverse scale"
    return None
