"""The hypothesis-testing view of differential privacy: one implementation, used by privcore and the pages.

An (epsilon, delta)-DP release lets no test tell a data set from a neighbour better than the region
TPR <= e^eps FPR + delta and, applied to the complementary test, 1 - FPR <= e^eps (1 - TPR) + delta
(Kairouz, Oh and Viswanath 2015); the same with the data sets swapped gives the region's lower edge
(:func:`dp_region`). The Gaussian mechanism with mu = sensitivity / sigma has the trade-off curve
TPR = Phi(Phi^-1(FPR) + mu) (mu-GDP, Dong, Roth and Su 2019; :func:`gaussian_tradeoff_tpr`), and the mu
that is exactly (epsilon, delta)-DP comes from the analytic Gaussian calibration (:func:`gaussian_mu`).

Used by :func:`privcore.inverse.max_true_positive_rate` (the risk line), the leakage audit's charts
(:mod:`privcore.leakage.stats`) and the Learn page's figure (``ui/teaching.py``). e^eps is never formed
where it would overflow (epsilon up to infinity is accepted).
"""

from __future__ import annotations

import math

import numpy as np

from .validation import check_real

__all__ = ["dp_region", "dp_max_tpr", "gaussian_mu", "gaussian_tradeoff_tpr"]


def _fpr(fpr: object, name: str) -> np.ndarray:
    x = np.asarray(fpr, dtype=np.float64)
    if x.size and (not np.all(np.isfinite(x)) or x.min() < 0.0 or x.max() > 1.0):
        bad = x[~(np.isfinite(x) & (x >= 0.0) & (x <= 1.0))].flat[0]
        raise ValueError(f"{name} must be in [0, 1], got {float(bad)!r}")  # 2.0, not np.float64(2.0)
    return x


def dp_region(epsilon: float, delta: float, fpr: object, *, name: str = "false-positive rate"
              ) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper): the true-positive rates any test may reach at each false-positive rate in
    ``fpr`` against an (epsilon, delta)-DP release. Upper: min(1, e^eps FPR + delta,
    1 - e^-eps (1 - delta - FPR)), never below FPR (guessing); lower: its mirror,
    max(0, e^-eps (FPR - delta), 1 - delta - e^eps (1 - FPR))."""
    eps = check_real("epsilon", epsilon, low=0.0, allow_inf=True)
    dlt = check_real("delta", delta, low=0.0, high=1.0)
    x = _fpr(fpr, name)
    if math.isinf(eps):
        return np.zeros_like(x), np.ones_like(x)
    with np.errstate(divide="ignore"):
        # e^eps x as exp(eps + ln x): at eps >= 710 e^eps alone overflows although the bound is simply 1.
        log_first = eps + np.log(x)
        log_mirror = eps + np.log1p(-x)
    first = np.where(log_first >= 0.0, 1.0, np.exp(np.minimum(log_first, 0.0)) + dlt)
    upper = np.maximum(x, np.minimum(1.0, np.minimum(first, 1.0 - math.exp(-eps) * (1.0 - dlt - x))))
    mirror = 1.0 - dlt - np.exp(np.minimum(log_mirror, 700.0))
    lower = np.maximum(0.0, np.maximum(math.exp(-eps) * (x - dlt), mirror))
    return np.clip(lower, 0.0, 1.0), np.clip(upper, 0.0, 1.0)


def dp_max_tpr(epsilon: float, delta: float, fpr: object, *, name: str = "false-positive rate") -> np.ndarray:
    """The upper edge of :func:`dp_region`: the most a test can catch at each false-positive rate."""
    return dp_region(epsilon, delta, fpr, name=name)[1]


def gaussian_mu(epsilon: float, delta: float) -> float:
    """mu of the Gaussian mechanism (sensitivity / sigma) that is exactly (epsilon, delta)-DP (delta > 0)."""
    from .accounting.gaussian import analytic_gaussian_sigma

    if delta <= 0.0:
        raise ValueError("the Gaussian trade-off curve needs delta > 0")
    return 1.0 / analytic_gaussian_sigma(epsilon, delta, 1.0)


def gaussian_tradeoff_tpr(fpr: object, mu: float) -> np.ndarray:
    """TPR of the best test against mu-GDP at each FPR: Phi(Phi^-1(FPR) + mu) (Dong, Roth, Su 2019)."""
    from scipy.special import ndtr, ndtri

    if isinstance(mu, bool) or not isinstance(mu, (int, float)) or not math.isfinite(mu) or mu < 0:
        raise ValueError(f"mu must be a finite number >= 0, got {mu!r}")
    f = np.asarray(fpr, dtype=np.float64)
    if not np.all((f >= 0.0) & (f <= 1.0)):  # NaN included
        raise ValueError("fpr must be rates in [0, 1]")
    return ndtr(ndtri(f) + mu)
