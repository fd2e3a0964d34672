"""Calibration entry point: noise scale of any method from (epsilon, delta) and a problem.

Pure and instant (no data, no training). See each method module for the formula it implements.
"""

from __future__ import annotations

from .methods import REGISTRY, get_method
from .types import CalibrationError, NoiseScale, PrivacyBudget, Problem

__all__ = ["calibrate", "calibrate_all"]


def calibrate(method: str, budget: PrivacyBudget, problem: Problem | None = None, accounting: str = "corrected") -> NoiseScale:
    """Noise scale for ``method`` meeting ``budget`` on ``problem`` under ``accounting``.

    Raises :class:`CalibrationError` when the method cannot meet the request (e.g. DP-SGD with
    delta = 0) with a message saying what would work instead.
    """
    try:
        return get_method(method).calibrate(budget, problem if problem is not None else Problem(), accounting)
    except (ArithmeticError, RecursionError):  # e.g. delta = 5e-324 leaves an accountant no room
        # The advice follows the value that is out of the ordinary (no Python error name in the message).
        if budget.epsilon > 100.0:
            advice = "choose an epsilon of at most 1e4"
        elif 0.0 < budget.delta < 1e-100:
            advice = "choose a delta of at least 1e-100"
        else:
            advice = "choose a larger epsilon or delta"
        raise CalibrationError(
            f"{method} cannot be calibrated at epsilon={budget.epsilon:g}, delta={budget.delta:g}: the accountant "
            f"hit a numerical limit; {advice}") from None


def calibrate_all(budget: PrivacyBudget, problem: Problem | None = None,
                  accounting: str = "corrected") -> dict[str, NoiseScale | CalibrationError]:
    """Calibrate every registered method; unsupported requests map to their error (not raised)."""
    out: dict[str, NoiseScale | CalibrationError] = {}
    for name in tuple(REGISTRY):
        try:
            out[name] = calibrate(name, budget, problem, accounting)
        except CalibrationError as err:
            out[name] = err
    return out
