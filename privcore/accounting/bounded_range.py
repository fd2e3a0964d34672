"""Privacy accounting for compositions of bounded-range (BR) mechanisms.

(Over 400 lines: the optimal-composition bound and its rigorous tail bounds and rounding margins
are one numerical argument; they are kept together so the proof can be read in one place.)

Context: subsample-and-aggregate answers each of ``B`` queries with the exponential mechanism
``P[y] ~ exp(beta * votes_y)`` over the votes of ``T`` teachers trained on disjoint data. Changing
one training example moves one teacher's vote from a class ``a`` to a class ``b``, so the log
ratio of output probabilities of one query ranges over an interval of width ``2 * beta``: each query
is ``eps0``-bounded-range with ``eps0 = 2 * beta`` (and therefore also ``2 * beta``-DP).

Two calibrations of ``beta`` for a target ``(epsilon, delta)`` over ``B`` queries are provided:

* :func:`zcdp_beta` -- an ``eps0``-BR mechanism is ``eps0**2 / 8``-zCDP (Cesar & Rogers, ALT 2021,
  "Bounding, Concentrating, and Truncating"), zCDP composes additively, and
  ``rho``-zCDP implies ``(rho + 2*sqrt(rho*ln(1/delta)), delta)``-DP (Bun & Steinke 2016,
  Proposition 1.3). Closed form, slightly conservative.
* :func:`optimal_beta` -- the exact (optimal) privacy curve of the ``k``-fold *non-adaptive*
  composition of ``eps0``-BR mechanisms from Dong, Durfee & Rogers (ICML 2020), "Optimal
  Differential Privacy Composition for Exponential Mechanisms", Theorem 3 (numbering of the
  arXiv version 1909.13830), implemented by :func:`br_composition_delta`.

Sources: the formula below was reconstructed from the generalised-randomized-response reduction
and checked against (i) brute-force enumeration of the product distributions (tests), (ii) the
form of Theorem 3 as implemented in google-research ``dp_multiq/ind_exp.py`` (same ``t_l`` and
binomial sum), and (iii) the derivative argument below. The stored copy of the paper available
while writing this was limited to its abstract and contents, so section/lemma numbers beyond
"Theorem 3" are not quoted.

The DDR 2020 curve (Theorem 3), in the notation used throughout this module
------------------------------------------------------------------------------
The worst-case pair of output distributions of one ``a``-BR mechanism (``a = eps0``) is a
generalised randomized response with two outcomes, "high" and "low", whose privacy losses
``log(P/Q)`` are ``u`` and ``u - a`` for an offset ``u in [0, a]`` (in the ``t in [0, 1]``
parametrisation of :func:`grr_product_delta`, ``t = 1 - u / a``: losses ``(1 - t) a`` and
``-t a``). Normalising both distributions forces::

    P(low) = r(u) = (e^u - 1) / (e^a - 1),      Q(low) = s(u) = (1 - e^-u) / (1 - e^-a),
    P(high) = 1 - r(u),                          Q(high) = 1 - s(u) = e^-u P(high).

For the homogeneous non-adaptive composition the worst case is the ``k``-fold product with one
common ``u`` (the reduction behind DDR 2020 Theorem 3; a test checks on a grid for ``k <= 3``
that heterogeneous offsets ``u_1 .. u_k`` do no worse). With ``X`` the number of "low" outcomes
the total loss is ``L = k u - X a`` and, for a target ``epsilon = g``::

    delta(u) = E_P[(1 - e^{g - L})_+]
             = sum_{i : k u - i a > g} C(k, i) r^i (1 - r)^{k-i} (1 - e^{g - k u + i a}),
    delta_opt(g) = max_{u in [0, a]} delta(u).

Why the maximisation over ``u`` reduces to finitely many points (the form of DDR's Theorem 3):
the positive terms are always a prefix ``i <= l``, so ``delta(u) = max(0, max_l S_l(u))`` with
``S_l(u) = P_u(X <= l) - e^g Q_u(X <= l)``. Differentiating with
``d/dp P(Bin(k,p) <= l) = -k C(k-1, l) p^l (1-p)^{k-1-l}`` and the identities ``r = e^{u-a} s``,
``1 - r = e^u (1 - s)`` gives::

    dS_l/du = k / (e^a - 1) * C(k-1, l) s^l (1-s)^{k-1-l} * (e^{g + a - u} - e^{k u - l a}),

which is positive for ``u < u_l`` and negative after, ``u_l = (g + (l + 1) a) / (k + 1)``. So each
``S_l`` is unimodal in ``u`` with its maximum at ``u_l`` clipped to ``[0, a]``, and::

    delta_opt(g) = max_{0 <= l < k - g/a} S_l(u_l)        (DDR 2020, Theorem 3)

(``l >= k - g/a`` puts ``u_l`` at or beyond ``a``, where both distributions are a point mass at
``L = 0`` and ``S_l <= 0``). No continuous optimisation over ``u`` remains; only the integer ``l``.

Numerics
--------
* Every ``S_l(u_l)`` is evaluated as the positive-term sum ``delta(u_l)`` in log space (log
  binomial coefficients via ``gammaln``, ``log1p``/``expm1`` for the probabilities and for the
  factor ``1 - e^{g-L}``, log-sum-exp) over a window around the dominant term (12 binomial
  standard deviations plus 50 terms each side). The cut-off tails are replaced by *rigorous*
  geometric upper bounds: the binomial pmf is log-concave, so beyond the window consecutive terms
  shrink at least by the ratio at the window edge, and the factor ``1 - e^{g-L}`` is at most 1.
  Nothing leaves the log domain before the final ``exp`` of a number ``<= 0``, so this is stable
  for ``k`` of 100,000 and more (cost ``O(sqrt(k))`` per evaluation).
* The maximisation over the integer ``l`` (from ``0`` to ``ceil(k - g/a) - 1``): a cheap screen
  ``P(X <= l) - e^g Q(X <= l)`` with ``scipy.special.bdtr`` (every ``l`` when there are at most
  512, else grids of 65 points shrinking ~32x per round) gives a start; then, on the accurate
  log-space values, a doubling-step bracket, an integer golden-section search and a final
  neighbour check. This finds the global maximum when ``l -> S_l(u_l)`` is unimodal, which held in
  every case examined (tests compare with exhaustive enumeration of all ``l`` and with a dense grid
  over ``t``). Unimodality in ``l`` is not proved here -- it is the one assumption of the search.
* Every value returned is inflated by a relative rounding margin of ``16 * 2^-52`` times the size of
  the largest log-space quantity involved (~1e-13 for k = 10, ~1e-8 for k = 100,000; the observed
  rounding error is ~50x smaller), so together with the tail bounds the result is an upper bound
  on the exact ``delta_opt``, never an optimistic value.

Caveat: the optimal curve is for *non-adaptive* composition (the ``B`` queries fixed before any
answer is released). DDR 2020 show that adaptively chosen BR mechanisms can lose more privacy;
for adaptively chosen queries use :func:`zcdp_beta`, which holds adaptively.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from privcore.validation import check_int, check_real

__all__ = [
    "zcdp_beta",
    "br_composition_delta",
    "br_composition_epsilon",
    "optimal_beta",
    "grr_product_delta",
]

_EPS_MACH = float(np.finfo(np.float64).eps)

# Candidate counts up to this size are screened exhaustively (one vectorised bdtr call).
_EXHAUSTIVE_SCREEN = 512
# Points per round of the shrinking-grid screen; each round shrinks the bracket ~32x.
_GRID_POINTS = 65
# Half-width of the log-space window, in binomial standard deviations (plus a constant): terms
# 12 sd from the mode are below e^-70 of it, and the cut tails are bounded rigorously anyway.
_WINDOW_SD = 12.0
_WINDOW_PAD = 50
# Relative stopping tolerance of the bisections on log(beta) and on epsilon.
_BETA_LOG_TOL = 1e-7
_EPS_REL_TOL = 1e-10


class ParameterError(TypeError, ValueError):
    """Invalid parameter *type* (e.g. a bool budget).

    ``privcore.validation`` raises ``TypeError`` for a value of the wrong kind; this module's
    contract is that every invalid input raises ``ValueError``. Subclassing both keeps the shared
    message and satisfies either ``except`` clause.
    """


def _real(name: str, value: Any, **bounds: Any) -> float:
    try:
        return check_real(name, value, **bounds)
    except ValueError:
        raise
    except TypeError as exc:
        raise ParameterError(str(exc)) from None


def _int(name: str, value: Any, *, low: int) -> int:
    try:
        return check_int(name, value, low=low)
    except ValueError:
        raise
    except TypeError as exc:
        raise ParameterError(str(exc)) from None


# --------------------------------------------------------------------------------------------
# zCDP calibration
# --------------------------------------------------------------------------------------------


def zcdp_beta(epsilon: float, delta: float, budget: int) -> float:
    """Inverse temperature from the zCDP analysis of ``budget`` exponential-mechanism queries.

    An ``eps0``-bounded-range mechanism is ``eps0**2 / 8``-zCDP (Cesar & Rogers, ALT 2021);
    with ``eps0 = 2 beta`` and ``B`` queries, ``rho = B beta**2 / 2``. ``rho``-zCDP implies
    ``(rho + 2 sqrt(rho ln(1/delta)), delta)``-DP (Bun & Steinke 2016, Proposition 1.3). Solving
    ``epsilon = rho + 2 sqrt(rho ln(1/delta))`` for ``sqrt(rho)`` gives
    ``sqrt(rho) = sqrt(ln(1/delta) + epsilon) - sqrt(ln(1/delta))`` and so::

        beta'' = sqrt(2 / B) * (sqrt(ln(1/delta) + epsilon) - sqrt(ln(1/delta))).

    Valid for adaptively chosen queries too. ``delta`` must lie in ``(0, 1)``.
    """
    epsilon = _real("epsilon", epsilon, low=0.0, low_open=True)
    delta = _real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    budget = _int("budget", budget, low=1)
    log_inv_delta = -math.log(delta)
    # sqrt(x + eps) - sqrt(x) written without the cancellation that hurts for eps << x.
    sqrt_rho = epsilon / (math.sqrt(log_inv_delta + epsilon) + math.sqrt(log_inv_delta))
    return math.sqrt(2.0 / budget) * sqrt_rho


# --------------------------------------------------------------------------------------------
# Generalised randomized response (one BR mechanism's worst case) and its k-fold product
# --------------------------------------------------------------------------------------------


def _log_expm1(x: float) -> float:
    """log(e^x - 1) for x > 0 without overflow for large x or cancellation for small x."""
    if x > 1.0:
        return x + math.log1p(-math.exp(-x))
    return math.log(math.expm1(x))


def _grr_log_probs(a: float, u: float) -> tuple[float, float]:
    """(log P(high), log P(low)) under the first distribution, for 0 < u < a.

    P(low) = (e^u - 1)/(e^a - 1) and P(high) = (e^a - e^u)/(e^a - 1) = e^a (1 - e^{u-a})/(e^a - 1);
    written through log-expm1 so that a up to ~1e300 and u close to 0 or a keep full precision.
    """
    log_den = _log_expm1(a)
    log_low = _log_expm1(u) - log_den
    log_high = a + math.log(-math.expm1(u - a)) - log_den
    return log_high, log_low


def _log_binom_pmf(k: int, i: np.ndarray, log_high: float, log_low: float) -> np.ndarray:
    from scipy.special import gammaln
    return (
        gammaln(k + 1.0)
        - gammaln(i + 1.0)
        - gammaln(k - i + 1.0)
        + (k - i) * log_high
        + i * log_low
    )


def _log_delta_at(a: float, k: int, g: float, u: float) -> tuple[float, float]:
    """Upper bound on log delta(u) for the k-fold product, plus its relative rounding margin.

    delta(u) = sum over i (number of "low" outcomes) with L_i = k u - i a > g of
    P(X = i) (1 - e^{g - L_i}), X ~ Bin(k, r(u)). Terms are summed in log space over a window around
    the dominant one; the cut-off tails are replaced by geometric upper bounds (see module doc).
    Returns (-inf, 0) when delta(u) = 0.
    """
    from scipy.special import gammaln
    if not (0.0 < u < a):
        # u = 0: every outcome is "high" with loss 0; u = a: every outcome is "low" with loss 0.
        return -math.inf, 0.0
    excess = k * u - g  # L_i - g = excess - i a
    if excess <= 0.0:
        return -math.inf, 0.0
    i_max = min(k, math.ceil(excess / a) - 1)  # last i with excess - i a > 0 (up to rounding)
    if i_max < 0:
        return -math.inf, 0.0
    log_high, log_low = _grr_log_probs(a, u)
    r = math.exp(log_low)
    mode = min(k, max(0, math.floor((k + 1) * r)))
    sd = math.sqrt(k * r * (1.0 - r))
    half = int(_WINDOW_SD * sd) + _WINDOW_PAD
    centre = min(i_max, mode)  # the largest pmf value among the admissible i
    i_lo = max(0, centre - half)
    i_hi = min(i_max, centre + half)
    i = np.arange(i_lo, i_hi + 1, dtype=np.float64)
    x = excess - i * a
    keep = x > 0.0
    i, x = i[keep], x[keep]
    if i.size == 0:
        return -math.inf, 0.0
    log_pmf = _log_binom_pmf(k, i, log_high, log_low)
    log_terms = log_pmf + np.log(-np.expm1(-x))  # log P(X=i) + log(1 - e^{g - L_i})
    extra: list[float] = []
    # Lower tail i < i_lo: i_lo <= mode - 50, so the pmf ratio p(i-1)/p(i) = i(1-r)/((k-i+1) r) is
    # < 1 there and increasing in i; the tail is at most p(i_lo) * rho / (1 - rho) (factor <= 1).
    if i_lo > 0:
        log_rho = math.log(i_lo) + log_high - math.log(k - i_lo + 1) - log_low
        if log_rho < 0.0:
            lp = float(_log_binom_pmf(k, np.array([float(i_lo)]), log_high, log_low)[0])
            extra.append(lp + log_rho - math.log(-math.expm1(log_rho)))
        else:  # cannot happen for the chosen window; fall back to the trivial bound.
            extra.append(0.0)
    # Upper tail i_hi < i <= i_max: i_hi >= mode + 50, ratio p(i+1)/p(i) = (k-i) r/((i+1)(1-r)) < 1
    # and decreasing in i; tail at most p(i_hi) * rho / (1 - rho).
    if i_hi < i_max:
        log_rho = math.log(k - i_hi) + log_low - math.log(i_hi + 1) - log_high
        if log_rho < 0.0:
            lp = float(_log_binom_pmf(k, np.array([float(i_hi)]), log_high, log_low)[0])
            extra.append(lp + log_rho - math.log(-math.expm1(log_rho)))
        else:
            extra.append(0.0)
    all_terms = np.concatenate([log_terms, np.asarray(extra)]) if extra else log_terms
    top = float(np.max(all_terms))
    if top == -math.inf:
        return -math.inf, 0.0
    log_delta = top + math.log(float(np.sum(np.exp(all_terms - top))))
    # Rounding: each log term is a sum of a few quantities of magnitude up to `scale`, each with
    # relative error ~eps; exp turns an absolute error e into a relative error ~e.
    scale = (
        3.0 * float(gammaln(k + 1.0))
        + float(np.max((k - i) * abs(log_high) + i * abs(log_low)))
        + abs(top)
        + 1.0
    )
    return min(log_delta, 0.0), 16.0 * _EPS_MACH * scale


def _peak_offsets(a: float, k: int, g: float, ells: np.ndarray) -> np.ndarray:
    """u_l = (g + (l + 1) a) / (k + 1): the maximiser of S_l over u (DDR 2020, Theorem 3)."""
    return (g + (ells + 1.0) * a) / (k + 1.0)


def _screen(a: float, k: int, g: float, ells: np.ndarray) -> np.ndarray:
    """Fast approximate S_l(u_l) = P(X <= l) - e^g Q(X <= l), vectorised over l.

    Only used to locate the maximising l; its cancellation error never reaches the result.
    """
    from scipy.special import bdtr
    u = _peak_offsets(a, k, g, ells)
    log_den = _log_expm1(a)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        log_r = np.where(u > 1.0, u + np.log1p(-np.exp(-u)), np.log(np.expm1(u))) - log_den
        r = np.exp(log_r)
        s = np.exp(log_r + a - u)  # Q(low) = e^{a-u} P(low)
        f_p = bdtr(ells, k, np.clip(r, 0.0, 1.0))
        f_q = bdtr(ells, k, np.clip(s, 0.0, 1.0))
        out = f_p - np.exp(g + np.log(f_q))  # e^g F_Q without overflowing e^g
    return np.where(np.isfinite(out), out, -np.inf)


def _grid_argmax(f: Callable[[np.ndarray], np.ndarray], lo: int, hi: int) -> tuple[int, float]:
    """argmax of f over the integers in [lo, hi]: dense grids shrinking ~32x per round.

    Exact for unimodal f; every integer is examined once the bracket has <= 65 of them.
    """
    while hi - lo > _GRID_POINTS:
        ells = np.unique(np.round(np.linspace(lo, hi, _GRID_POINTS)))
        j = int(np.argmax(f(ells)))
        # Under unimodality the maximiser lies between the grid neighbours of the best grid point.
        lo = int(ells[max(j - 1, 0)])
        hi = int(ells[min(j + 1, ells.size - 1)])
    ells = np.arange(lo, hi + 1, dtype=np.float64)
    vals = f(ells)
    j = int(np.argmax(vals))
    return lo + j, float(vals[j])


def _log_delta_opt(a: float, k: int, g: float) -> tuple[float, float]:
    """(log of max_l S_l(u_l), relative margin) -- DDR 2020 Theorem 3 evaluated in log space."""
    if g >= k * a:
        return -math.inf, 0.0  # the loss never exceeds k a: pure composition is exact here
    n = min(k, math.ceil(k - g / a))  # admissible l: 0 <= l < k - g/a
    if n <= 0:
        return -math.inf, 0.0

    cache: dict[int, tuple[float, float]] = {}

    def f(ell: int) -> float:
        """Accurate log S_l(u_l) (log-space sum with rigorous tail bounds), memoised."""
        if ell not in cache:
            u = min(float(_peak_offsets(a, k, g, np.array([float(ell)]))[0]), a)
            cache[ell] = _log_delta_at(a, k, g, u)
        return cache[ell][0]

    # 1. Fast screen for a starting point near the maximiser.
    if n <= _EXHAUSTIVE_SCREEN:
        # Few candidates: screen every l (one vectorised call), no unimodality needed to start.
        vals = _screen(a, k, g, np.arange(n, dtype=np.float64))
        start = int(np.argmax(vals))
        screened = float(vals[start])
    else:
        start, screened = _grid_argmax(lambda e: _screen(a, k, g, e), 0, n - 1)

    # 2. Bracket the maximiser of the accurate values: gallop away from the start in the uphill
    #    direction with doubling steps. If the screen underflowed (delta below ~1e-300) or is pure
    #    rounding noise, search the whole range instead.
    if screened > 0.0:
        lo = hi = start
        for direction in (1, -1):
            nb = start + direction
            if 0 <= nb < n and f(nb) > f(start):
                prev, cur, step = start, nb, 1
                while True:
                    step *= 2
                    nxt = min(max(cur + direction * step, 0), n - 1)
                    if nxt == cur or f(nxt) <= f(cur):
                        break
                    prev, cur = cur, nxt
                lo, hi = min(prev, nxt), max(prev, nxt)
                break
    else:
        lo, hi = 0, n - 1

    # 3. Golden-section search on the integers of the bracket (exact for unimodal l -> S_l(u_l)).
    while hi - lo > 3:
        m1 = lo + int(round(0.381966 * (hi - lo)))
        m2 = lo + int(round(0.618034 * (hi - lo)))
        if m2 <= m1:
            m2 = m1 + 1
        f1, f2 = f(m1), f(m2)
        if f1 < f2:
            lo = m1 + 1
        elif f1 > f2:
            hi = m2 - 1
        else:
            lo, hi = m1, m2
    ell = max(range(lo, hi + 1), key=f)

    # 4. Polish: step to a better neighbour while there is one (guards against rounding plateaus).
    for _ in range(n):
        left = f(ell - 1) if ell > 0 else -math.inf
        right = f(ell + 1) if ell + 1 < n else -math.inf
        if max(left, right) <= f(ell):
            break
        ell = ell - 1 if left > right else ell + 1

    # The maximum of every value computed (all are valid lower bounds of the optimum, each an
    # upper bound of its own S_l(u_l)); with unimodality this is the optimum itself.
    return max(cache.values(), key=lambda v: v[0])


def br_composition_delta(eps0: float, k: int, epsilon: float) -> float:
    """Optimal delta(epsilon) of the k-fold non-adaptive composition of eps0-BR mechanisms.

    Implements Dong, Durfee & Rogers (ICML 2020), Theorem 3 (arXiv:1909.13830 numbering)::

        delta = max_{0 <= l < k - epsilon/eps0}
                    sum_{i=0}^{l} C(k, i) r^i (1 - r)^{k-i} (1 - e^{epsilon - k u + i eps0}),
        u = u_l = (epsilon + (l + 1) eps0) / (k + 1),   r = (e^u - 1) / (e^eps0 - 1),

    i.e. ``max_u E_P[(1 - e^{epsilon - L})_+]`` over the product of k generalised randomized
    responses with losses ``u`` and ``u - eps0``; see the module docstring for why the maximum
    over ``u`` is attained at one of these ``u``. Returns 0 for ``epsilon >= k * eps0``.

    The value is an upper bound on the exact one (rigorous tail bounds plus a relative rounding
    margin, ~1e-8 at k = 100,000); the maximisation over ``l`` relies on the numerically verified
    unimodality of ``l -> S_l(u_l)`` (see module docstring).
    """
    eps0 = _real("eps0", eps0, low=0.0, low_open=True)
    k = _int("k", k, low=1)
    epsilon = _real("epsilon", epsilon, low=0.0, low_open=True)
    return _delta_opt(eps0, k, epsilon)


def _delta_opt(a: float, k: int, g: float) -> float:
    log_delta, margin = _log_delta_opt(a, k, g)
    if log_delta == -math.inf:
        return 0.0
    return min(1.0, math.exp(log_delta) * (1.0 + margin))


def grr_product_delta(eps0: float, k: int, epsilon: float, t: float) -> float:
    """delta(epsilon) of the k-fold product of one generalised randomized response pair.

    The pair has privacy losses ``(1 - t) eps0`` and ``-t eps0`` (``t`` in ``[0, 1]``); this is the
    quantity maximised over ``t`` in DDR 2020 Theorem 3, ``E_P[(1 - e^{epsilon - L})_+]``, evaluated
    with the same log-space sum (and the same upward rounding margin) as
    :func:`br_composition_delta`. Exposed for testing and plotting.
    """
    eps0 = _real("eps0", eps0, low=0.0, low_open=True)
    k = _int("k", k, low=1)
    epsilon = _real("epsilon", epsilon, low=0.0, low_open=True)
    t = _real("t", t, low=0.0, high=1.0)
    if not math.isfinite(k * eps0):
        raise ValueError(f"eps0={eps0!r} with k={k}: the composed privacy loss k * eps0 overflows float64")
    log_delta, margin = _log_delta_at(eps0, k, epsilon, (1.0 - t) * eps0)
    if log_delta == -math.inf:
        return 0.0
    return min(1.0, math.exp(log_delta) * (1.0 + margin))


def br_composition_epsilon(eps0: float, k: int, delta: float) -> float:
    """Smallest epsilon with :func:`br_composition_delta` ``(eps0, k, epsilon) <= delta``.

    Bisection on epsilon (delta_opt is non-increasing in epsilon); returns the upper end of the
    final bracket, so the returned epsilon always satisfies the inequality. ``delta = 0`` gives
    the pure composition ``k * eps0``, which is tight for BR mechanisms. Returns 0.0 if even
    epsilon = 0 meets ``delta`` (delta at least the total-variation worst case).
    """
    eps0 = _real("eps0", eps0, low=0.0, low_open=True)
    k = _int("k", k, low=1)
    delta = _real("delta", delta, low=0.0, high=1.0, high_open=True)
    pure = k * eps0
    if delta == 0.0:
        return pure
    if _delta_opt(eps0, k, 0.0) <= delta:
        return 0.0
    # Start from the zCDP bound (valid, so delta_opt <= delta there) when it beats k * eps0.
    rho = k * eps0 * eps0 / 8.0
    hi = min(pure, rho + 2.0 * math.sqrt(rho * -math.log(delta)))
    if _delta_opt(eps0, k, hi) > delta:  # only the rounding margin could cause this
        hi = pure
    lo = 0.0
    while hi - lo > _EPS_REL_TOL * hi:
        mid = 0.5 * (lo + hi)
        if _delta_opt(eps0, k, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


#: Largest B for :func:`optimal_beta` (its cost grows with sqrt(B); about 0.4 s at 1e7).
MAX_OPTIMAL_BUDGET = 10_000_000


def optimal_beta(epsilon: float, delta: float, budget: int) -> float:
    """Largest beta such that ``budget`` queries, each ``(2 beta)``-BR, are (epsilon, delta)-DP.

    Uses the optimal non-adaptive composition of Dong, Durfee & Rogers (ICML 2020), Theorem 3
    (:func:`br_composition_delta`): ``delta_opt(2 beta, B, epsilon)`` is non-decreasing in beta, so
    bisection on ``log beta`` applies. The bracket starts at ``max(zcdp_beta, epsilon / (2 B))`` --
    both are valid (the zCDP bound upper-bounds the exact curve; pure composition gives delta = 0)
    -- so the result is never below either. Returns the lower end of the final bracket (relative
    width 1e-7) after re-checking ``br_composition_delta(2 beta, budget, epsilon) <= delta``.

    ``delta == 0`` returns ``epsilon / (2 budget)``: pure composition of (2 beta)-DP mechanisms is
    tight for BR mechanisms. Assumes the queries are fixed in advance (non-adaptive); see the module
    docstring.
    """
    epsilon = _real("epsilon", epsilon, low=0.0, low_open=True)
    delta = _real("delta", delta, low=0.0, high=1.0, high_open=True)
    budget = _int("budget", budget, low=1)
    pure = epsilon / (2.0 * budget)
    if delta == 0.0:
        return pure
    if budget > MAX_OPTIMAL_BUDGET:
        from privcore.types import CalibrationError

        raise CalibrationError(
            f"tight (optimal bounded-range) composition is limited to B <= {MAX_OPTIMAL_BUDGET:,} queries, got "
            f"B = {budget:,}: its cost grows with sqrt(B) (about 0.4 s at B = 1e7, minutes at B = 1e12). "
            "Use accounting 'corrected' (zCDP), which is valid for any B")

    def ok(beta: float) -> bool:
        return _delta_opt(2.0 * beta, budget, epsilon) <= delta

    lo = max(pure, zcdp_beta(epsilon, delta, budget))
    if not ok(lo):  # cannot happen mathematically; guard against a numerical surprise
        while not ok(lo):
            lo *= 0.5
            if lo < pure * 1e-6:
                raise RuntimeError("optimal_beta: no feasible inverse temperature found")
    # Gallop upwards (factors 2, 4, 16, 256, ...) until the target is exceeded. The zCDP start can
    # be far too small (tiny epsilon, where delta is essentially a total-variation budget).
    factor = 2.0
    hi = lo * factor
    while ok(hi):
        lo = hi
        factor = min(factor * factor, 1e100)
        hi = lo * factor
        if not math.isfinite(hi):
            raise RuntimeError("optimal_beta: delta target is never exceeded")
    # Bisection on log(beta). lo and hi are kept as the exact floats that were tested, so the
    # invariant ok(lo) and not ok(hi) holds for the returned value itself (no exp/log round trip).
    while math.log(hi / lo) > _BETA_LOG_TOL:
        mid = math.sqrt(lo) * math.sqrt(hi)  # geometric midpoint, no overflow of lo * hi
        if not lo < mid < hi:
            break
        if ok(mid):
            lo = mid
        else:
            hi = mid
    beta = lo
    # Final re-check through the public function (same computation; defensive).
    for _ in range(64):
        if br_composition_delta(2.0 * beta, budget, epsilon) <= delta:
            return beta
        beta = math.nextafter(beta, 0.0) * (1.0 - 1e-12)
    raise RuntimeError("optimal_beta: final re-check failed")
