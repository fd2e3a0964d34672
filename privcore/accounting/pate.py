"""Accounting for the teacher-vote aggregators beyond the paper: (Confident-)GNMax and sparse vector.

Neighbouring data sets differ by *replacing* one training example. The teachers are trained on
disjoint parts, so one replaced example changes at most one teacher, and that teacher's vote on any
query moves from a class ``a`` to a class ``b``: the vote histogram ``n`` changes by -1 and +1 (L2
sensitivity sqrt(2)) and its maximum ``max_j n_j`` by at most 1 (each count moves by at most 1).

Confident-GNMax (Papernot et al., ICLR 2018), per query:

    check:  max_j n_j + N(0, sigma_1^2) >= threshold ?   (else abstain)
    answer: argmax_j (n_j + N(0, sigma_2^2))

Both are post-processing of one Gaussian mechanism on ``(max n / sigma_1, n / sigma_2)`` with unit
noise, whose L2 sensitivity is at most ``mu_q = sqrt(1 / sigma_1^2 + 2 / sigma_2^2)``. Data-independent
accounting pays both parts on *every* query (whether a query is answered depends on the data).
Per query this is ``rho_q = mu_q^2 / 2``-zCDP, i.e. RDP ``alpha * rho_q`` at every order: exactly
PATE's ``alpha / sigma_2^2`` for GNMax plus ``alpha / (2 sigma_1^2)`` for the threshold
(``compute_rdp_data_independent_threshold`` in tensorflow/privacy research/pate_2018, which uses
sensitivity 1 for the max, as here). B queries give ``rho = B rho_q`` (adaptive composition).

Converting to (epsilon, delta):
  paper      rho + 2 sqrt(rho ln(1/delta))  (the standard RDP conversion at the best order;
             what PATE's code computes on its grid of orders)
  corrected  min over alpha of  alpha rho + ln((alpha - 1)/alpha) - (ln delta + ln alpha)/(alpha - 1)
             (Balle et al. 2020 / Canonne, Kamath, Steinke 2020; the conversion of dp_accounting)
  tight      exact: B Gaussian mechanisms of sensitivity mu_q at unit noise compose into one Gaussian
             mechanism with mu = sqrt(B) mu_q (Dong, Roth, Su 2019, adaptive too), which is
             (epsilon, delta)-DP iff the analytic Gaussian condition (Balle and Wang 2018) holds.
All three are data-independent and sound; the data-dependent analysis of Papernot et al. (2018),
which charges answered queries by how unanimous the teachers are and needs smooth sensitivity to
publish the resulting epsilon, is not implemented (its epsilon is itself a function of the data).

Sparse vector (Bassily, Thakkar, Thakurta, NeurIPS 2018), per stream of B queries: see
:func:`svt_calibration`.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:  # pragma: no cover - imported where used (start-up stays light)
    import torch

from ..validation import check_choice, check_int, check_real, fmt_value, memoized
from .bounded_range import zcdp_beta
from .gaussian import analytic_gaussian_sigma

__all__ = [
    "GNMAX_THRESHOLD_FRACTION", "GNMAX_SIGMA_RATIO", "gnmax_query_mu", "zcdp_epsilon", "zcdp_rho",
    "gnmax_sigmas", "gnmax_epsilon", "GNMaxScales", "SVTScales", "svt_calibration", "distance_to_instability",
]

#: PATE 2018's MNIST configuration (250 teachers, threshold 200, sigma_1 = 150, sigma_2 = 40),
#: taken as published, not tuned here: threshold = 0.8 T and sigma_1 = 3.75 sigma_2.
GNMAX_THRESHOLD_FRACTION: float = 200.0 / 250.0
GNMAX_SIGMA_RATIO: float = 150.0 / 40.0


def gnmax_query_mu(sigma_vote: float, sigma_check: float | None) -> float:
    """Per-query Gaussian sensitivity-to-noise ratio mu_q = sqrt(2 / sigma_2^2 + 1 / sigma_1^2).

    ``sigma_check = None`` is plain GNMax (no threshold check): mu_q = sqrt(2) / sigma_2.
    """
    s2 = check_real("sigma_vote", sigma_vote, low=0.0, low_open=True)
    s1 = None if sigma_check is None else check_real("sigma_check", sigma_check, low=0.0, low_open=True)
    # (1/s)^2, not 1/s^2: s^2 overflows for s near 1e308 (mu is then 0, to every digit).
    mu2 = 2.0 * (1.0 / s2) ** 2 + (0.0 if s1 is None else (1.0 / s1) ** 2)
    if not math.isfinite(mu2):
        small = "sigma_vote" if s1 is None or s2 <= s1 else "sigma_check"
        raise ValueError(f"{small}={fmt_value(s2 if small == 'sigma_vote' else s1)} is too small: "
                         "the noise protects nothing (its ratio to the sensitivity overflows)")
    return math.sqrt(mu2)


def _improved_epsilon(rho: float, delta: float) -> float:
    """min over alpha > 1 of alpha rho + ln((a-1)/a) - (ln delta + ln a)/(a-1): any alpha is a valid bound."""
    log_delta = math.log(delta)

    def f(log_am1: float) -> float:
        a = 1.0 + math.exp(log_am1)
        return a * rho + math.log((a - 1.0) / a) - (log_delta + math.log(a)) / (a - 1.0)

    best = _golden_min(f, -12.0, 14.0, 1e-10)
    return max(0.0, min(best, f(math.log(max(math.sqrt(-log_delta / rho), 1e-5)))))


def _golden_min(f: Callable[[float], float], lo: float, hi: float, xtol: float) -> float:
    """Smallest value of ``f`` met by a golden-section search on [lo, hi] (standard library only,
    so a PATE calibration imports no scipy: issue 16). Every value returned is f at some point,
    so here any result is a valid epsilon bound; unimodality only makes it the best one."""
    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    best = min(fc, fd, f(lo), f(hi))
    while b - a > xtol:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
        best = min(best, fc, fd)
    return best


def zcdp_epsilon(rho: float, delta: float, conversion: str = "improved") -> float:
    """Epsilon at ``delta`` of a mechanism with RDP alpha * rho at every order alpha > 1.

    ``conversion``: "standard" (rho + 2 sqrt(rho ln 1/delta), Bun and Steinke 2016) or "improved"
    (Balle et al. 2020, minimised numerically over alpha; never larger than the standard one up to
    the optimiser's tolerance, and always a valid bound since every alpha gives one).
    """
    rho = check_real("rho", rho, low=0.0)
    delta = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    if rho == 0.0:
        return 0.0
    standard = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
    if conversion == "standard":
        return standard
    check_choice("conversion", conversion, ("standard", "improved"))
    return min(standard, _improved_epsilon(rho, delta))


@memoized(maxsize=4096)
def zcdp_rho(epsilon: float, delta: float, conversion: str = "improved") -> float:
    """The largest rho (to 1e-10 relative, rounded down) whose :func:`zcdp_epsilon` is <= epsilon."""
    # Up to 1e100: the doubling search below reaches rho ~ epsilon, and 2 rho must stay finite.
    eps = check_real("epsilon", epsilon, low=0.0, low_open=True, high=1e100)
    dlt = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    check_choice("conversion", conversion, ("standard", "improved"))
    # The standard conversion inverts in closed form; it is a lower bound on the answer. Written as
    # eps / (sqrt(L + eps) + sqrt(L)) (not sqrt(L + eps) - sqrt(L)), so a tiny epsilon does not cancel to 0.
    log_inv = -math.log(dlt)  # not log(1/delta): 1/delta overflows for a subnormal delta
    lo = (eps / (math.sqrt(log_inv + eps) + math.sqrt(log_inv))) ** 2
    if conversion == "standard":
        if not lo > 0.0:  # rho underflows: no noise scale is representable
            raise ValueError(f"epsilon must be at least about 1e-150 for the paper's accounting, got {eps:g}")
        return lo * (1.0 - 1e-12)
    if not lo > 0.0:  # start the doubling below from the smallest normal rho (doubling 0 would never end)
        lo = sys.float_info.min
        if zcdp_epsilon(lo, dlt, conversion) > eps:
            raise ValueError(f"epsilon must be at least about 1e-150 at delta = {dlt:g}, got {eps:g}")
    hi = lo * 2.0
    while zcdp_epsilon(hi, dlt, conversion) <= eps:
        lo, hi = hi, hi * 2.0
    while hi - lo > 1e-10 * hi:
        mid = 0.5 * (lo + hi)
        if zcdp_epsilon(mid, dlt, conversion) <= eps:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(frozen=True)
class GNMaxScales:
    """Noise of one (Confident-)GNMax calibration: vote noise sigma_2, check noise sigma_1 (None: no check)."""

    sigma_vote: float
    sigma_check: float | None
    rho_per_query: float  # zCDP of one query (its RDP is alpha * this at every order)
    formula: str


def gnmax_sigmas(epsilon: float, delta: float, budget: int, accounting: str,
                 ratio: float | None = GNMAX_SIGMA_RATIO) -> GNMaxScales:
    """sigma_2 (and sigma_1 = ratio * sigma_2, unless ``ratio`` is None) so that ``budget`` queries meet (eps, delta).

    See the module docstring for the three accounting modes. Every query is charged (data-independent).
    """
    eps = check_real("epsilon", epsilon, low=0.0, low_open=True)
    dlt = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    b = check_int("budget", budget, low=1)
    # mu_q^2 = c / sigma_2^2 with c = 2 + 1/ratio^2 (rho_q = mu_q^2 / 2).
    c = 2.0 + (0.0 if ratio is None else 1.0 / ratio ** 2)
    if accounting == "tight":
        mu = 1.0 / analytic_gaussian_sigma(eps, dlt, 1.0)  # the largest mu-GDP meeting (eps, delta)
        sigma2 = math.sqrt(c * b) / mu
        formula = "mu = 1/analytic Gaussian sigma(eps, delta, 1); sigma_2 = sqrt(B (2 + 1/r^2)) / mu (exact Gaussian composition)"
    elif accounting in ("paper", "corrected"):
        conv = "standard" if accounting == "paper" else "improved"
        rho = zcdp_rho(eps, dlt, conv)
        sigma2 = math.sqrt(c * b / (2.0 * rho))
        formula = (f"rho = B (1/sigma_2^2 + 1/(2 sigma_1^2)) with RDP -> (eps, delta) by the {conv} conversion")
    else:
        raise ValueError(f"accounting must be paper, corrected or tight, got {accounting!r}")
    if ratio is None:
        formula = formula.replace(" + 1/(2 sigma_1^2)", "").replace(" (2 + 1/r^2)", " 2")
    sigma1 = None if ratio is None else ratio * sigma2
    return GNMaxScales(sigma2, sigma1, c / (2.0 * sigma2 ** 2), formula)


def gnmax_epsilon(sigma_vote: float, sigma_check: float | None, budget: int, delta: float, accounting: str) -> float:
    """Epsilon at ``delta`` of ``budget`` (Confident-)GNMax queries under ``accounting`` (the inverse of gnmax_sigmas)."""
    mu_q = gnmax_query_mu(sigma_vote, sigma_check)
    b = check_int("budget", budget, low=1)
    check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    check_choice("accounting", accounting, ("paper", "corrected", "tight"))
    rho = b * mu_q ** 2 / 2.0
    if not math.isfinite(rho):
        raise ValueError(f"budget={b} queries at sigma_vote={fmt_value(sigma_vote)}: the privacy loss overflows")
    if rho == 0.0:  # noise beyond float range: nothing is learnt
        return 0.0
    if accounting == "tight":
        from .gaussian import analytic_gaussian_epsilon

        return analytic_gaussian_epsilon(1.0 / math.sqrt(2.0 * rho), delta, 1.0)
    return zcdp_epsilon(rho, delta, "standard" if accounting == "paper" else "improved")


# --------------------------------------------------------------------------------------------
# Sparse vector
# --------------------------------------------------------------------------------------------


def distance_to_instability(votes: "torch.Tensor") -> "torch.Tensor":
    """d = max(ceil(m / 2) - 1, 0) per row of vote counts [..., C], m = largest - second largest.

    d >= 1 iff m >= 3 iff every histogram one teacher away has the same unique plurality. One
    replaced training example moves one vote: both order statistics move by at most 1, m by at most
    2, so d moves by at most 1 (sensitivity 1 under replace-one).
    """
    import torch

    if not isinstance(votes, torch.Tensor) or votes.dim() < 1 or votes.shape[-1] < 2:
        raise TypeError(f"votes must be a tensor of vote counts [..., C] with C >= 2, got {fmt_value(votes)} "
                        f"({type(votes).__name__}{'' if not isinstance(votes, torch.Tensor) else f' of shape {list(votes.shape)}'})")
    top2 = votes.topk(2, dim=-1).values
    m = top2[..., 0] - top2[..., 1]
    return (torch.ceil(m / 2.0) - 1.0).clamp(min=0.0)


@dataclass(frozen=True)
class SVTScales:
    """One sparse-vector calibration (Lyu, Su, Li 2017, Algorithm 1, with a cap of c unstable answers).

    threshold: w; threshold_scale: Laplace scale of the one threshold draw (1/eps_1); query_scale:
    Laplace scale of each query's draw (2c/eps_2); cap: c; beta: the fallback vote's inverse
    temperature; epsilon parts: eps_svt (= eps_1 + eps_2) and eps_fallback; delta parts likewise.
    """

    threshold: float
    threshold_scale: float
    query_scale: float
    cap: int
    beta: float
    eps_svt: float
    eps_fallback: float
    delta_stability: float
    delta_fallback: float
    formula: str


def svt_calibration(epsilon: float, delta: float, budget: int, cap: int) -> SVTScales:
    """Sparse-vector aggregation over a stream of ``budget`` queries with at most ``cap`` unstable ones.

    Per query i the distance to instability d_i (sensitivity 1) is tested: stable if
    d_i + Lap(query_scale) >= w + rho with one threshold draw rho ~ Lap(threshold_scale) per stream;
    a stable query gets the teachers' plain majority (free), an unstable one a noisy vote
    (exponential mechanism, inverse temperature beta); after ``cap`` unstable queries the stream
    stops answering (abstains). Budget split: half of epsilon and half of delta to each part.

    * The pass/fail transcript: Lyu, Su, Li (2017) Algorithm 1 with c = cap: threshold noise
      Lap(1/eps_1), query noise Lap(2c/eps_2) is (eps_1 + eps_2)-DP for sensitivity-1 queries that
      need not be monotone; eps_1 : eps_2 = 1 : (2c)^(2/3) (their optimal ratio).
    * Free majorities: if every stable query has d_i >= 1 on the data set D, its majority is the
      same on any neighbour, so the whole release is a post-processing of the transcript there.
      With w = t_1 + t_2, the event "some stable query has d_i = 0" implies nu_i >= t_1 for some i or rho <= -t_2, of probability at most
      B/2 e^(-t_1/query_scale) + 1/2 e^(-t_2/threshold_scale); t_1 = query_scale ln(B/delta_s) and
      t_2 = threshold_scale ln(1/delta_s) make that delta_s (= delta/2).
    * Fallback votes: at most c exponential-mechanism answers, each 2 beta-DP and 2 beta-bounded
      range: beta = max(eps_f / (2c), zCDP beta'' at (eps_f, delta_f, c)), valid for the adaptively
      chosen unstable queries.
    The total is (eps_svt + eps_f, delta_s + delta_f) = (epsilon, delta).
    """
    eps = check_real("epsilon", epsilon, low=0.0, low_open=True)
    dlt = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    b = check_int("budget", budget, low=1)
    c = check_int("cap", cap, low=1)
    eps_svt, eps_f = eps / 2.0, eps / 2.0
    d_s, d_f = dlt / 2.0, dlt / 2.0
    if d_s == 0.0:  # 5e-324 / 2 underflows
        raise ValueError(f"delta={dlt!r} is too small to split in two: choose a delta of at least 1e-100")
    share = (2.0 * c) ** (2.0 / 3.0)
    eps1 = eps_svt / (1.0 + share)
    eps2 = eps_svt - eps1
    th_scale, q_scale = 1.0 / eps1, 2.0 * c / eps2
    # log B - log delta_s, not log(B / delta_s): the quotient overflows for a subnormal delta.
    w = q_scale * (math.log(b) - math.log(d_s)) - th_scale * math.log(d_s)
    if not math.isfinite(w):
        raise ValueError(f"epsilon={fmt_value(eps)} is too small for a sparse-vector threshold (it overflows float64)")
    beta = max(eps_f / (2.0 * c), zcdp_beta(eps_f, d_f, c))
    formula = ("stable if d + Lap(2c/eps_2) >= w + Lap(1/eps_1), w = (2c/eps_2) ln(2B/delta) + (1/eps_1) ln(2/delta); "
               "unstable: noisy vote, beta = max(eps/(4c), beta''(eps/2, delta/2, c)); eps_1 + eps_2 = eps/2")
    return SVTScales(w, th_scale, q_scale, c, beta, eps_svt, eps_f, d_s, d_f, formula)
