"""Composition of B per-query releases into one (epsilon, delta) guarantee.

Used by the prediction methods, whose guarantee covers B predictions. Three levels:
basic composition (Dwork and Roth, Thm 3.16), the zCDP-form advanced composition the paper uses
(its Eqs. 48-51), and exact composition of Gaussians (B Gaussian releases with std sigma at L2
sensitivity Delta are one Gaussian release with std sigma / sqrt(B); Dong, Roth and Su 2019, GDP).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..validation import check_int, check_real, memoized
from .gaussian import analytic_gaussian_sigma

__all__ = [
    "basic_per_query",
    "advanced_composition_epsilon",
    "zcdp_per_query_epsilon",
    "AdvancedGaussian",
    "advanced_gaussian_sigma",
    "exact_gaussian_sigma",
]


def basic_per_query(epsilon: float, delta: float, budget: int) -> tuple[float, float]:
    """Per-query (epsilon/B, delta/B) so that B queries compose to (epsilon, delta) (basic composition)."""
    epsilon = check_real("epsilon", epsilon, low=0.0, low_open=True)
    delta = check_real("delta", delta, low=0.0, high=1.0, high_open=True)
    check_int("budget", budget, low=1)
    return epsilon / budget, delta / budget


def advanced_composition_epsilon(eps0: float, budget: int, delta_prime: float) -> float:
    """Total epsilon of B eps0-DP mechanisms, advanced composition (Dwork, Rothblum, Vadhan 2010).

    epsilon = sqrt(2 B ln(1/delta')) eps0 + B eps0 (e^eps0 - 1), with total delta' (+ B delta0).
    Infinite (no finite bound) where e^eps0 overflows float64 (eps0 above about 709).
    """
    eps0 = check_real("eps0", eps0, low=0.0)
    check_int("budget", budget, low=1)
    delta_prime = check_real("delta_prime", delta_prime, low=0.0, high=1.0, low_open=True, high_open=True)
    try:  # -log(delta'): 1/delta' overflows for a subnormal delta'
        return math.sqrt(-2.0 * budget * math.log(delta_prime)) * eps0 + budget * eps0 * math.expm1(eps0)
    except OverflowError:  # e^eps0 beyond float range: no finite bound
        return math.inf


def zcdp_per_query_epsilon(epsilon: float, delta_prime: float, budget: int) -> float:
    """Largest per-query eps* with B eps*^2/2 + eps* sqrt(2 B ln(1/delta')) <= epsilon.

    eps* = sqrt(2/B) (sqrt(ln(1/delta') + epsilon) - sqrt(ln(1/delta'))) (the paper's Eq. 51).
    Valid because an eps*-DP mechanism is eps*^2/2-zCDP (Bun and Steinke 2016, Prop. 1.4), B of
    them are B eps*^2/2-zCDP, and rho-zCDP implies (rho + 2 sqrt(rho ln(1/delta')), delta')-DP.
    """
    epsilon = check_real("epsilon", epsilon, low=0.0, low_open=True)
    delta_prime = check_real("delta_prime", delta_prime, low=0.0, high=1.0, low_open=True, high_open=True)
    check_int("budget", budget, low=1)
    log_term = -math.log(delta_prime)
    # Written as a difference quotient to avoid cancellation when epsilon << ln(1/delta').
    return math.sqrt(2.0 / budget) * epsilon / (math.sqrt(log_term + epsilon) + math.sqrt(log_term))


@dataclass(frozen=True)
class AdvancedGaussian:
    """Result of the delta' search for Gaussian prediction sensitivity (SPEC method 4)."""

    sigma: float
    per_query_epsilon: float
    per_query_delta: float
    delta_prime: float
    branch: str  # "basic" or "advanced"


@memoized(maxsize=4096)
def advanced_gaussian_sigma(epsilon: float, delta: float, budget: int, sensitivity: float) -> AdvancedGaussian:
    """sigma = min(sigma_basic, min over delta' of sigma_adv(delta')) for B Gaussian queries.

    sigma_basic: analytic Gaussian at (eps/B, delta/B). sigma_adv: per-query eps* from
    :func:`zcdp_per_query_epsilon` at delta', delta* = (delta - delta')/B, analytic Gaussian at
    (eps*, delta*). Paper Algorithm 7 / Theorem 6. Every delta' in (0, delta) gives a valid
    guarantee, so an imperfect search can only add noise, never remove privacy. We scan delta'/delta
    on a log grid and refine around the best point with a golden-section search.
    """
    eps = check_real("epsilon", epsilon, low=0.0, low_open=True)
    dlt = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    b = check_int("budget", budget, low=1)
    basic = analytic_gaussian_sigma(eps / b, dlt / b, sensitivity)
    best = AdvancedGaussian(basic, eps / b, dlt / b, 0.0, "basic")

    def sigma_at(log_frac: float) -> tuple[float, float, float, float]:
        dprime = dlt * math.exp(log_frac)
        eps_star = zcdp_per_query_epsilon(eps, dprime, b)
        delta_star = (dlt - dprime) / b
        return analytic_gaussian_sigma(eps_star, delta_star, sensitivity), eps_star, delta_star, dprime

    # delta' = delta * frac with frac in (0, 1): log grid from 1e-12 to 1 - 1e-9.
    grid = np.log(np.concatenate([np.logspace(-12, -0.05, 60), 1.0 - np.logspace(-9, -1.0, 20)]))
    values = [sigma_at(float(g))[0] for g in grid]
    i = int(np.argmin(values))
    lo, hi = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, len(grid) - 1)])
    phi = (math.sqrt(5.0) - 1.0) / 2.0
    for _ in range(40):
        m1, m2 = hi - phi * (hi - lo), lo + phi * (hi - lo)
        if sigma_at(m1)[0] <= sigma_at(m2)[0]:
            hi = m2
        else:
            lo = m1
    candidates = [sigma_at(float(grid[i])), sigma_at(0.5 * (lo + hi))]
    sig, eps_star, delta_star, dprime = min(candidates, key=lambda c: c[0])
    if sig < best.sigma:
        best = AdvancedGaussian(sig, eps_star, delta_star, dprime, "advanced")
    return best


def exact_gaussian_sigma(epsilon: float, delta: float, budget: int, sensitivity: float) -> float:
    """Per-query sigma so that B Gaussian releases at L2 ``sensitivity`` are exactly (epsilon, delta)-DP.

    B releases with std sigma compose into one Gaussian mechanism with sensitivity Delta sqrt(B)
    (equivalently std sigma / sqrt(B) at sensitivity Delta: mu-GDP composes as sqrt(B) mu;
    Dong, Roth and Su 2019, Cor. 3.3), so sigma = sqrt(B) * analytic_gaussian_sigma(eps, delta, Delta).
    This is tight: no smaller sigma meets (epsilon, delta) for the worst-case pair of datasets.
    """
    b = check_int("budget", budget, low=1)
    sigma = math.sqrt(b) * analytic_gaussian_sigma(epsilon, delta, sensitivity)
    if not math.isfinite(sigma):
        raise ValueError(f"budget={b} and sensitivity={sensitivity!r}: the noise scale overflows float64 (above 1.8e308)")
    return sigma
