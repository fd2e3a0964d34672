"""PATE's data-dependent accounting of Confident-GNMax (Papernot et al., ICLR 2018), NOT a guarantee.

The guarantee of :class:`privcore.methods.confident_gnmax.ConfidentGNMax` is data-independent
(:mod:`privcore.accounting.pate`, every query pays ``alpha/sigma_2^2 + alpha/(2 sigma_1^2)``). PATE
also reports a *data-dependent* epsilon: when the teachers agree, the noisy argmax almost surely
returns the plurality, and Renyi DP at *this* data set is much smaller. This module computes that
number so it can be shown beside the guarantee. What it assumes, plainly:

* it is a bound on the privacy loss at the data set actually used, not for all data sets: the
  number is itself a function of the private votes, so showing it (a table, the CLI's rows, a log)
  is a release of private information that no guarantee covers; publishing it privately needs the
  smooth sensitivity step below (whose cost is added to :attr:`DataDependent.epsilon_published`);
* like PATE's own analysis, the GNMax answer is charged only on queries that passed the check
  (their transcripts), and the check's cost is also data-dependent.

Per query, with votes ``n`` (plurality ``i*``) and GNMax noise N(0, sigma^2) per count:

* ``q <= sum_{i != i*} Pr[N(0, 2 sigma^2) >= n_i* - n_i]`` (union bound, Papernot et al. Prop. 7),
  capped at 1 - 1/C (the plurality is the likeliest noisy argmax);
* Theorem 6 there: a mechanism that is (mu_1, eps_1)- and (mu_2, eps_2)-RDP with
  ``Pr[M(D) != o*] <= q`` is (lambda, e)-RDP at D for lambda <= mu_1, with
  ``e = log((1-q) A^(lambda-1) + q B^(lambda-1)) / (lambda-1)``,
  ``A = (1-q) / (1 - (q e^eps_2)^((mu_2-1)/mu_2))``, ``B = e^eps_1 / q^(1/(mu_1-1))``, valid when
  ``log q <= (mu_2-1) eps_2 - mu_2 log(mu_1/(mu_1-1) * mu_2/(mu_2-1))``. For GNMax eps_i = mu_i/sigma^2,
  with ``mu_2 = sigma sqrt(-log q)``, ``mu_1 = mu_2 + 1`` (their Proposition 10). Where the condition fails
  or the bound exceeds ``lambda/sigma^2``, the data-independent value is used: above the crossover
  ``q_0(sigma, lambda)`` the cost is always the data-independent one (so the cost is non-decreasing in q;
  ``tests/accounting/test_pate_dd.py`` checks this on a grid).
* The threshold check is a Gaussian mechanism of sensitivity 1 (RDP lambda/(2 sigma_1^2)) with two
  outcomes: the same bound with ``q = min(Pr[answered], Pr[not answered])`` and sigma sqrt(2).

Smooth sensitivity (Nissim, Raskhodnikova, Smith 2007; PATE 2018 Section B): one replaced training
example changes one teacher; within distance d every gap ``n_i* - n_i`` moves by at most 2d, so the
union bound lies between ``q_lo(d) = sum sf(g_i + 2d)`` and ``q_hi(d) = sum sf(max(g_i - 2d, 0))``
(the plurality may change; both bounds still hold, see :func:`gnmax_logq_range`), and the local
sensitivity at distance d is at most ``f(q_hi(d+1)) - f(q_lo(d+1))`` with f the non-decreasing cost.
The beta-smooth sensitivity is ``max_d e^(-beta d) LS_d`` over every distance d (a coarse grid of
distances would not be beta-smooth), summed over the charged queries.
Publishing the RDP at order lambda with Gaussian noise scaled by it (GNSS) costs
``lambda e^(2 beta)/sigma_s^2 + (beta lambda - log(1 - 2 lambda beta)/2)/(lambda - 1)`` more
(Papernot et al. 2018, Theorem 23); the published number is shifted up by 2 sigma_s SS so that it
exceeds the true data-dependent cost with probability 97.7%.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import log_ndtr, logsumexp

from ..validation import check_real

__all__ = ["ORDERS", "gnmax_logq", "gnmax_logq_range", "dd_rdp", "crossover_logq", "threshold_rdp",
           "gnss_rdp", "DataDependent", "confident_gnmax_data_dependent", "rdp_to_epsilon"]

#: Renyi orders searched (as PATE's analyses: a grid; every order gives a valid conversion).
ORDERS: tuple[float, ...] = tuple(np.concatenate([np.linspace(1.25, 10.0, 15), np.arange(12.0, 41.0, 2.0),
                                                  np.arange(45.0, 101.0, 5.0), np.arange(120.0, 501.0, 40.0)]).tolist())
#: Smooth-sensitivity parameters: beta = SS_BETA_FACTOR / lambda (GNSS needs 2 lambda beta < 1) and
#: the GNSS noise sigma_s (data-independent constants, as they must be).
SS_BETA_FACTOR: float = 0.4
SS_SIGMA: float = 5.0
SS_SHIFT: float = 2.0


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - e^x) for x <= 0 (accurate near 0 and for very negative x)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.where(x > -0.693, np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def gnmax_logq(votes: np.ndarray, sigma: float) -> np.ndarray:
    """log of the union bound on Pr[GNMax answer != plurality], per row of votes [..., C] (capped at 1 - 1/C)."""
    v = np.asarray(votes, dtype=np.float64)
    c = v.shape[-1]
    top = v.max(axis=-1, keepdims=True)
    gaps = top - v
    # drop one plurality entry (the first maximal count): the others are i != i*
    first = (v == top).cumsum(axis=-1) == 1
    terms = np.where(first & (v == top), -np.inf, log_ndtr(-gaps / (math.sqrt(2.0) * sigma)))
    return np.minimum(logsumexp(terms, axis=-1), math.log(1.0 - 1.0 / c))


def gnmax_logq_range(votes: np.ndarray, sigma: float, dist: int) -> tuple[np.ndarray, np.ndarray]:
    """(log q_lo, log q_hi): bounds on :func:`gnmax_logq` over every histogram within ``dist`` teachers.

    Let g_i = n_i* - n_i (i != i*). On D' within d, with plurality j*: each gap n'_j* - n'_l is at
    least n'_i* - n'_l >= g_l - 2d (l != i*) or 0 (l = i*), and at most g_l + 2d (l != i*) or 2d
    (l = i*; and then g_j* <= 2d). Summing sf over l != j* gives the bounds with gaps g_l +- 2d.
    """
    return _range_from_gaps(_masked_gaps(votes), sigma, dist)


def _masked_gaps(votes: np.ndarray) -> np.ndarray:
    """g_i = n_i* - n_i per row, +inf at the plurality i* (its term drops out of every sum)."""
    v = np.asarray(votes, dtype=np.float64)
    top = v.max(axis=-1, keepdims=True)
    first = ((v == top).cumsum(axis=-1) == 1) & (v == top)
    return np.where(first, np.inf, top - v)


def _range_from_gaps(gaps: np.ndarray, sigma: float, dist: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gnmax_logq_range` from :func:`_masked_gaps` (the smooth-sensitivity loop reuses them)."""
    s = math.sqrt(2.0) * sigma
    cap = math.log(1.0 - 1.0 / gaps.shape[-1])
    lo = log_ndtr(-(gaps + 2 * dist) / s)
    hi = log_ndtr(-np.maximum(gaps - 2 * dist, 0.0) / s)
    return np.minimum(_logsumexp_last(lo), cap), np.minimum(_logsumexp_last(hi), cap)


def _logsumexp_last(x: np.ndarray) -> np.ndarray:
    """log sum exp over the last axis (-inf entries allowed; all -inf gives -inf); plain numpy, as
    the smooth-sensitivity loop calls it once per distance."""
    top = x.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return top[..., 0] + np.log(np.exp(x - top).sum(axis=-1))


def _theorem6(logq: np.ndarray, sigma: float, order: float) -> tuple[np.ndarray, np.ndarray]:
    """(bound, valid) of Theorem 6 with mu_2 = sigma sqrt(-log q), mu_1 = mu_2 + 1, eps_i = mu_i / sigma^2."""
    logq = np.asarray(logq, dtype=np.float64)
    with np.errstate(all="ignore"):
        mu2 = sigma * np.sqrt(-logq)
        mu1 = mu2 + 1.0
        eps1, eps2 = mu1 / sigma ** 2, mu2 / sigma ** 2
        valid = (mu2 > 1.0) & (mu1 >= order) & (
            logq <= (mu2 - 1.0) * eps2 - mu2 * (np.log(mu1 / (mu1 - 1.0)) + np.log(mu2 / (mu2 - 1.0))))
        log1q = _log1mexp(logq)
        inner = (logq + eps2) * (1.0 - 1.0 / mu2)
        valid &= inner < 0
        log_a = (order - 1.0) * (log1q - _log1mexp(np.minimum(inner, -1e-300)))
        log_b = (order - 1.0) * (eps1 - logq / (mu1 - 1.0))
        bound = np.logaddexp(log1q + log_a, logq + log_b) / (order - 1.0)
    return np.where(valid, bound, np.inf), valid


def crossover_logq(sigma: float, order: float) -> float:
    """log q_0: below it Theorem 6 applies and beats lambda/sigma^2; at and above it the cost is data-independent.

    Found by bisection on the predicate "valid and smaller than the data-independent bound", which
    holds for every q < q_0 (checked on a grid in the tests); -inf when it never holds. The orders
    of :data:`ORDERS` are bisected together, once per sigma (:func:`_crossovers`).
    """
    if order in _ORDER_INDEX:
        return float(_crossovers(float(sigma))[_ORDER_INDEX[order]])
    return float(_crossover_many(float(sigma), np.array([float(order)]))[0])


_ORDER_INDEX = {a: i for i, a in enumerate(ORDERS)}


@lru_cache(maxsize=1024)
def _crossovers(sigma: float) -> np.ndarray:
    """:func:`crossover_logq` at every order of :data:`ORDERS` (read-only)."""
    out = _crossover_many(sigma, np.array(ORDERS))
    out.setflags(write=False)
    return out


def _crossover_many(sigma: float, orders: np.ndarray) -> np.ndarray:
    """The bisection of :func:`crossover_logq` run for many orders at once, each element following the
    same steps as a bisection of its own (doubling lo from -1 down to -1e7, then at most 200 halvings,
    stopping at a relative width of 1e-12): one numpy pass per step instead of one per order."""
    indep = orders / sigma ** 2

    def good(logq: np.ndarray) -> np.ndarray:
        bound, ok = _theorem6(logq, sigma, orders)
        return ok & (bound < indep)

    lo = np.full(orders.shape, -1.0)
    found = good(lo)
    while True:
        grow = ~found & (lo > -1e7)
        if not grow.any():
            break
        lo = np.where(grow, 2.0 * lo, lo)
        found = np.where(grow, good(lo), found)
    hi = np.zeros(orders.shape)
    active = found.copy()
    for _ in range(200):
        if not active.any():
            break
        mid = 0.5 * (lo + hi)
        ok = good(mid)
        lo, hi = np.where(active & ok, mid, lo), np.where(active & ~ok, mid, hi)
        active &= ~(hi - lo < 1e-12 * np.maximum(1.0, np.abs(lo)))
    return np.where(found, lo, -math.inf)


def dd_rdp(logq: np.ndarray, sigma: float, order: float) -> np.ndarray:
    """Data-dependent RDP at ``order`` of a Gaussian-argmax mechanism (RDP order/sigma^2) given log q."""
    sigma = check_real("sigma", sigma, low=0.0, low_open=True)
    order = check_real("order", order, low=1.0, low_open=True)
    logq = np.minimum(np.asarray(logq, dtype=np.float64), 0.0)
    indep = order / sigma ** 2
    q0 = crossover_logq(sigma, order)
    bound, _ = _theorem6(np.where(logq < q0, logq, -1.0), sigma, order)
    out = np.where(logq < q0, np.minimum(bound, indep), indep)
    return np.where(np.isneginf(logq), 0.0, out)


def threshold_rdp(log_p_answer: np.ndarray, sigma_check: float, order: float) -> np.ndarray:
    """Data-dependent RDP of the check (sensitivity 1, noise sigma_1): the two-outcome case, sigma sqrt(2)."""
    logp = np.asarray(log_p_answer, dtype=np.float64)
    logq = np.minimum(logp, _log1mexp(np.minimum(logp, -1e-300)))
    return dd_rdp(logq, math.sqrt(2.0) * sigma_check, order)


def gnss_rdp(beta: float, sigma_s: float, order: float) -> float:
    """RDP at ``order`` of releasing a value plus N(0, sigma_s^2) times its beta-smooth sensitivity (Thm 23)."""
    if not 1.0 < order < 1.0 / (2.0 * beta):
        raise ValueError(f"order must be in (1, 1/(2 beta)) = (1, {1 / (2 * beta):.4g}), got {order}")
    return order * math.exp(2.0 * beta) / sigma_s ** 2 + (beta * order - 0.5 * math.log(1.0 - 2.0 * order * beta)) / (order - 1.0)


def _conversion(orders: np.ndarray, delta: float) -> np.ndarray:
    """What RDP at each order adds to give epsilon at ``delta``: ln((a-1)/a) - (ln delta + ln a)/(a-1)
    (Balle et al. 2020; never more than PATE's ln(1/delta)/(a-1)), the conversion of ``corrected``."""
    a = np.asarray(orders, dtype=np.float64)
    return np.log((a - 1.0) / a) - (math.log(delta) + np.log(a)) / (a - 1.0)


def rdp_to_epsilon(rdp: np.ndarray, delta: float) -> tuple[float, int]:
    """(epsilon, index of the best order) of RDP values on :data:`ORDERS` (the improved conversion)."""
    eps = np.asarray(rdp, dtype=np.float64) + _conversion(np.asarray(ORDERS), delta)
    k = int(np.argmin(eps))
    return float(eps[k]), k


@dataclass(frozen=True)
class DataDependent:
    """PATE's data-dependent epsilon for B Confident-GNMax queries at these votes (not a guarantee).

    epsilon: from the data-dependent RDP (min over :data:`ORDERS`); epsilon_independent: the same
    conversion of the data-independent RDP (>= epsilon); order: the best order; smooth_sensitivity:
    beta-smooth sensitivity of the RDP at that order; epsilon_published: what publishing it with
    GNSS noise costs in total (the RDP plus the GNSS cost plus a 2 sigma_s SS shift, at that order).
    """

    epsilon: float
    epsilon_independent: float
    order: float
    smooth_sensitivity: float
    epsilon_published: float


def _local_sensitivity_gnmax(votes: np.ndarray, sigma: float, order: float, beta: float, teachers: int) -> np.ndarray:
    """An upper bound [M] on each query's beta-smooth sensitivity of the GNMax cost at ``order``.

    With B_D(d) = f(q_hi(d+1)) - f(q_lo(d+1)) >= max LS over the histograms within d of D, the value
    ``S(D) = max(max_{d < K} e^(-beta d) B_D(d), e^(-beta K) lambda/sigma^2)`` (K = 2 (T + 1) + 7/beta,
    a constant) is at least LS(D) and is beta-smooth: one moved vote shifts every gap by at most 2,
    so B_D(d) <= B_D'(d + 1), and B <= lambda/sigma^2 covers d >= K. Every distance is visited (a
    coarser grid of distances, with e^(-beta d_k) B(d_(k+1) - 1) per interval, is an upper bound
    but NOT beta-smooth, which GNSS's Theorem 23 needs; ``tests/accounting/test_pate_dd.py`` checks
    smoothness on every histogram). A query leaves the loop once e^(-beta d) lambda/sigma^2 is below
    its running maximum: nothing later can change its S.
    """
    m = votes.shape[0]
    indep = order / sigma ** 2
    cap = 2 * (teachers + 1) + math.ceil(7.0 / beta)  # the tail term is then at most e^-7 lambda/sigma^2
    best = np.full(m, math.exp(-beta * cap) * indep)
    active = np.arange(m)
    gaps = _masked_gaps(votes)
    for d in range(cap):
        weight = math.exp(-beta * d)
        active = active[weight * indep > best[active]]  # the others are final
        if active.size == 0:
            break
        lo, hi = _range_from_gaps(gaps[active], sigma, d + 1)
        ls = dd_rdp(hi, sigma, order) - dd_rdp(lo, sigma, order)
        best[active] = np.maximum(best[active], weight * ls)
    return best


def _local_sensitivity_threshold(top: np.ndarray, teachers: int, threshold: float, sigma_check: float,
                                 order: float, beta: float) -> np.ndarray:
    """beta-smooth sensitivity [M] of the check's cost at ``order``; top: each query's largest vote count."""
    v = np.arange(teachers + 1, dtype=np.float64)
    cost = threshold_rdp(log_ndtr((v - threshold) / sigma_check), sigma_check, order)  # [T + 1]
    idx = np.clip(np.asarray(top, dtype=np.int64), 0, teachers)
    hi, lo = cost.copy(), cost.copy()
    best = np.zeros(len(idx))
    indep = order / (2.0 * sigma_check ** 2)
    for d in range(teachers + 1):
        # hi/lo: max/min of the cost over counts within d + 1 of each v
        hi = np.maximum(hi, np.maximum(np.r_[hi[1:], hi[-1]], np.r_[hi[0], hi[:-1]]))
        lo = np.minimum(lo, np.minimum(np.r_[lo[1:], lo[-1]], np.r_[lo[0], lo[:-1]]))
        weight = math.exp(-beta * d)
        best = np.maximum(best, weight * (hi[idx] - lo[idx]))
        if weight * indep <= best.min(initial=np.inf):
            break
    return best


def confident_gnmax_data_dependent(votes: np.ndarray, answered: np.ndarray, sigma_vote: float, sigma_check: float,
                                   threshold: float, budget: int, delta: float) -> DataDependent:
    """Data-dependent epsilon of B queries like these (PATE 2018; not a guarantee, see the module docstring).

    votes [M, C]: teacher vote counts per query; answered [R, M] (bool): which queries passed the
    check in each repetition. The cost of B queries is B times the mean per-query cost (over the M
    queries and R repetitions): the data-dependent epsilon of a typical stream of B such queries.
    """
    budget = int(budget)
    delta = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    full = np.asarray(votes, dtype=np.float64)
    ans = np.atleast_2d(np.asarray(answered, dtype=np.float64))
    if ans.shape[-1] != full.shape[0]:
        raise ValueError(f"answered must have one column per query ({full.shape[0]}), got shape {ans.shape}")
    teachers = int(round(full.sum(axis=1).max()))
    # Work on the distinct histograms (many queries share one when the teachers agree), weighted.
    v, inverse = np.unique(full, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    weight = np.bincount(inverse, minlength=len(v)) / full.shape[0]
    frac = np.bincount(inverse, weights=ans.mean(axis=0), minlength=len(v)) / full.shape[0]  # weight x answered
    top = v.max(axis=1)
    logq = gnmax_logq(v, sigma_vote)
    log_p = log_ndtr((top - threshold) / sigma_check)
    rdp, indep = [], []
    for a in ORDERS:
        per_query = weight * threshold_rdp(log_p, sigma_check, a) + frac * dd_rdp(logq, sigma_vote, a)
        rdp.append(budget * float(per_query.sum()))
        indep.append(budget * (a / sigma_vote ** 2 + a / (2.0 * sigma_check ** 2)))
    eps, k = rdp_to_epsilon(np.array(rdp), delta)
    eps_ind, _ = rdp_to_epsilon(np.array(indep), delta)
    order = ORDERS[k]
    beta = SS_BETA_FACTOR / order
    ss_q = (weight * _local_sensitivity_threshold(top, teachers, threshold, sigma_check, order, beta)
            + frac * _local_sensitivity_gnmax(v, sigma_vote, order, beta, teachers))
    ss = budget * float(ss_q.sum())
    published = (rdp[k] + gnss_rdp(beta, SS_SIGMA, order) + SS_SHIFT * SS_SIGMA * ss
                 + float(_conversion(np.array([order]), delta)[0]))
    return DataDependent(eps, eps_ind, order, ss, published)
