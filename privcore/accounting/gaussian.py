"""The analytic Gaussian mechanism (Balle and Wang, ICML 2018), in float64 with log-space tails.

Theorem 8 of Balle and Wang: a Gaussian mechanism with L2 sensitivity Delta and std sigma is
(epsilon, delta)-DP if and only if

    Phi(Delta/(2 sigma) - epsilon sigma/Delta) - e^epsilon Phi(-Delta/(2 sigma) - epsilon sigma/Delta) <= delta.

The left side decreases in sigma and in epsilon, so both inverses are bisections. We solve them
directly (their Algorithm 1 is a reparametrisation of the same equation). The paper's Algorithm 2
drops alpha in its second branch and its code evaluates Phi in float32, which misses sigma by up to
about 20 % at small delta, on the unsafe side; everything here is float64 with log-space tails.

Standard library only (``math.erfc`` and an asymptotic series for the far tail; see
:func:`log_ndtr`): a Gaussian calibration imports neither scipy nor dp_accounting, so the CLI starts
light. tests/accounting/test_scipy_free.py checks :func:`log_ndtr` against
``scipy.special.log_ndtr`` and every sigma against an independent high-precision computation.
"""

from __future__ import annotations

import math
import numbers

from ..validation import check_real, fmt_value, memoized

__all__ = ["log_ndtr", "gaussian_delta", "analytic_gaussian_sigma", "analytic_gaussian_epsilon", "classical_gaussian_sigma"]


_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def log_ndtr(x: float) -> float:
    """log Phi(x), the log of the standard normal CDF, in float64 with full relative precision.

    x > -20: ``math.erfc`` (relative error of a few ulp wherever it does not underflow, which is
    below x = -37), as log(erfc(-x/sqrt 2)/2), or log1p(-erfc(x/sqrt 2)/2) for x > 0 so that
    Phi near 1 keeps its small complement. x <= -20: the asymptotic (Mills ratio) series
    log Phi(x) = -x^2/2 - log(-x) - log sqrt(2 pi) + log(1 - 1/x^2 + 3/x^4 - 15/x^6 + ...),
    summed while its terms fall (they do up to the (x^2/2)-th, far past the 1e-17 reached at
    x = -20 after ten terms).
    """
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"x must be a real number, got {fmt_value(x)} ({type(x).__name__})")
    try:
        x = float(x)
    except OverflowError:  # an integer beyond float range: Phi is 0 or 1 to every digit
        x = math.inf if x > 0 else -math.inf
    if math.isnan(x):
        return math.nan
    if x > 0.0:
        return math.log1p(-0.5 * math.erfc(x / math.sqrt(2.0)))
    if x > -20.0:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2.0)))
    if x == -math.inf:
        return -math.inf
    inv = 1.0 / (x * x)
    term, total, n = 1.0, 1.0, 1
    while True:
        nxt = -term * (2 * n - 1) * inv
        if abs(nxt) >= abs(term) or abs(nxt) < 1e-18:
            break
        total += nxt
        term, n = nxt, n + 1
    return -0.5 * x * x - math.log(-x) - _LOG_SQRT_2PI + math.log(total)


def gaussian_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """Smallest delta for which N(0, sigma^2) noise at L2 ``sensitivity`` is (epsilon, delta)-DP.

    Implements the left side of Balle and Wang (2018), Theorem 8. Both terms are evaluated as
    exp(log Phi(.)) so that tails down to 1e-300 keep full relative precision.
    """
    sigma = check_real("sigma", sigma, low=0.0)
    epsilon = check_real("epsilon", epsilon, low=0.0)
    sensitivity = check_real("sensitivity", sensitivity, low=0.0, low_open=True)
    if sigma == 0:
        return 1.0
    ratio = sensitivity / sigma
    a = ratio / 2.0 - epsilon / ratio
    b = -ratio / 2.0 - epsilon / ratio
    first = math.exp(float(log_ndtr(a)))
    second = math.exp(min(float(epsilon + log_ndtr(b)), 700.0))
    return max(first - second, 0.0)


#: Rounding allowance of :func:`_delta_upper`, in units of float64's 2^-53 (generous: the terms need a few).
_ROUNDING_UNITS = 64.0


def _delta_upper(sigma: float, epsilon: float, sensitivity: float = 1.0) -> float:
    """:func:`gaussian_delta` plus a bound on its float64 rounding error: never below the exact Theorem 8 delta.

    Each term exp(l) (l = log Phi(a), or epsilon + log Phi(b)) is off by a few ulp of l and by the rounding of
    its argument times d log Phi / dx (about |x| in the lower tail), relative to the term; the difference of
    two nearly equal terms (tiny epsilon) keeps their absolute errors. So the allowance is 64 u (1 + |l| + x^2)
    per term, u = 2^-53. Without it sigma came out up to about 5e-6 relative too small at epsilon = 1e-8, delta =
    1e-100 (the delta reached was 1.002e-100, against 80-digit arithmetic, bench/bench_agm_rounding.py; an independent attack found it)."""
    if sigma == 0:
        return 1.0
    ratio = sensitivity / sigma
    a = ratio / 2.0 - epsilon / ratio
    b = -ratio / 2.0 - epsilon / ratio
    la = float(log_ndtr(a))
    lb = min(float(epsilon + log_ndtr(b)), 700.0)
    first, second = math.exp(la), math.exp(lb)
    terms = ((first, la, a), (second, lb, b))  # a term that is exactly 0 (an infinite argument) needs none
    slack = _ROUNDING_UNITS * 2.0 ** -53 * sum(v * (1.0 + abs(lv) + x * x) for v, lv, x in terms if v > 0.0)
    return min(max(first - second, 0.0) + slack, 1.0)


def _bisect_decreasing(f, target: float, lo: float, hi: float, rel_tol: float = 1e-12) -> float:
    """Smallest x in [lo, hi] with f(x) <= target for decreasing f; returns the safe (upper) end."""
    while hi - lo > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        if f(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def _overflow_check(value: float, **given: float) -> float:
    """``value`` if finite, else a refusal naming the arguments that made the noise scale overflow."""
    if not math.isfinite(value):
        names = " and ".join(f"{k}={fmt_value(v)}" for k, v in given.items())
        raise ValueError(f"{names}: the noise scale overflows float64 (above 1.8e308)")
    return value


@memoized(maxsize=4096)
def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest std sigma of i.i.d. Gaussian noise making an L2-``sensitivity`` query (epsilon, delta)-DP.

    Inverse of :func:`gaussian_delta` in sigma (Balle and Wang 2018, Theorem 8 / Algorithm 1).
    Example: sensitivity 1, (1, 1e-5) gives sigma = 3.7306 (the classical bound gives 4.8448).
    The returned sigma is the upper end of the final bisection bracket: never below the exact value.
    """
    eps = check_real("epsilon", epsilon, low=0.0, low_open=True)
    dlt = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    sens = check_real("sensitivity", sensitivity, low=0.0, low_open=True)
    # sigma scales linearly with the sensitivity: solve at sensitivity 1 and rescale.
    f = lambda s: _delta_upper(s, eps)  # noqa: E731
    lo, hi = 1e-6, 1.0
    while f(hi) > dlt:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            raise ValueError(f"delta={dlt!r} is too small for epsilon={eps!r}: no finite sigma found")
    while f(lo) <= dlt and lo > 1e-300:
        lo /= 2.0
    # The two Phi terms nearly cancel at tiny epsilon, so float64 can misjudge delta by ~1e-9
    # relative there (checked against 60-digit arithmetic); a 1e-8 relative margin on sigma (worth ~2e-7 relative in delta) keeps
    # the result on the safe side at a negligible cost in noise.
    return _overflow_check(sens * _bisect_decreasing(f, dlt, lo, hi) * (1.0 + 1e-8), sensitivity=sens)


def analytic_gaussian_epsilon(sigma: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest epsilon for which N(0, sigma^2) at L2 ``sensitivity`` is (epsilon, delta)-DP.

    The other inverse of Balle and Wang (2018), Theorem 8; used for reported epsilons (prediction
    sensitivity's per-query epsilon, PATE's ``tight`` epsilon), so it rounds up: at small epsilon the
    two Phi terms nearly cancel and float64 misjudges delta by up to ~1e-10 relative (checked
    against 60-digit arithmetic), so the bisection's upper end is raised by 1e-8 relative, worth
    far more than that in delta (delta falls at least as fast as epsilon rises there).
    """
    sig = check_real("sigma", sigma, low=0.0, low_open=True)
    dlt = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    sens = check_real("sensitivity", sensitivity, low=0.0, low_open=True)
    f = lambda e: _delta_upper(sig, e, sens)  # noqa: E731
    if f(0.0) <= dlt:
        return 0.0
    hi = 1.0
    while f(hi) > dlt:
        hi *= 2.0
        if hi > 1e12:  # sigma far below the sensitivity: no guarantee worth a number
            raise ValueError(f"sigma={fmt_value(sig)} is too small for sensitivity {fmt_value(sens)} at "
                             f"delta={fmt_value(dlt)}: epsilon would exceed 1e12")
    return _bisect_decreasing(f, dlt, 0.0, hi) * (1.0 + 1e-8)


def classical_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Classical bound sigma = Delta sqrt(2 ln(1.25/delta)) / epsilon (Dwork and Roth, Thm A.1).

    Valid only for epsilon < 1; shown for comparison in teaching views.
    """
    epsilon = check_real("epsilon", epsilon, low=0.0, low_open=True)
    delta = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    sensitivity = check_real("sensitivity", sensitivity, low=0.0, low_open=True)
    # log(1.25) - log(delta): 1.25 / delta overflows for a subnormal delta.
    sigma = sensitivity * math.sqrt(2.0 * (math.log(1.25) - math.log(delta))) / epsilon
    return _overflow_check(sigma, epsilon=epsilon, sensitivity=sensitivity)
