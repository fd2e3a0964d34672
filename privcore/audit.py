"""Empirical privacy audits: a statistical lower bound on the epsilon a mechanism really spends.

The auditor plays the attacker of the DP definition (Jagielski, Ullman and Oprea 2020, "Auditing
differentially private machine learning: how private is private SGD?"; Nasr, Song, Thakurta,
Papernot and Carlini 2021, "Adversary instantiation: lower bounds for differentially private
machine learning"). It runs the mechanism many times on two neighbouring data sets D and D', turns
every output into one real score, and looks for an event S = {score > t} (or its complement) whose
probabilities violate what (epsilon, delta)-DP allows:

    P[M(D) in S] <= e^eps P[M(D') in S] + delta   and the same with D and D' swapped.

With the rates estimated from n0 and n1 independent runs, Clopper-Pearson intervals (Clopper and
Pearson 1934, exact binomial) turn any such event into a bound that holds with probability at
least 1 - alpha:

    eps >= ln((TPR_lo - delta) / FPR_hi),

where TPR is the event's rate in the numerator world and FPR its rate in the other; TPR_lo and
FPR_hi are the ends of the two-sided (1 - alpha) Clopper-Pearson intervals, so each end fails with
probability at most alpha / 2 and both hold together with probability at least 1 - alpha.

Choosing the event on the same samples that estimate its rates would overfit (the best of many
thresholds looks better than it is). :func:`audit` therefore splits each sample: the first
``select_fraction`` picks the threshold and the direction of the test (four candidates per
threshold: the event above or below it, with D or D' in the numerator), the rest evaluates that
single choice. The result is a valid lower bound however the choice was made, provided the runs are
independent and identically distributed within each sample.

Pure numpy/scipy: the mechanisms and their scores live with the tests (tests/audit_canaries.py: worst-case neighbours per method).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["AuditResult", "audit", "clopper_pearson", "epsilon_lower_bound"]

#: At most this many candidate thresholds (quantiles of the pooled selection scores) are tried.
MAX_THRESHOLDS = 2000


@dataclass(frozen=True)
class AuditResult:
    """Outcome of one audit.

    eps_lower: the epsilon lower bound (>= 0) that holds with probability >= 1 - alpha.
    threshold, direction: the event, "above" (score > threshold) or "below" (score <= threshold).
    numerator: which sample's rate is the TPR ("D" or "D'"; the other's is the FPR).
    tpr, fpr: the event's empirical rates on the evaluation halves.
    samples: (n0, n1) evaluation runs under D and D' (the selection runs are not counted).
    alpha, delta: confidence level 1 - alpha; the delta subtracted from the TPR.
    """

    eps_lower: float
    threshold: float
    tpr: float
    fpr: float
    samples: tuple[int, int]
    direction: str = "above"
    numerator: str = "D'"
    alpha: float = 0.05
    delta: float = 0.0


def clopper_pearson(k: np.ndarray | int, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided (1 - alpha) Clopper-Pearson interval (lo, hi) for k successes out of n.

    lo = Beta(alpha/2; k, n - k + 1) quantile (0 when k = 0), hi = Beta(1 - alpha/2; k + 1, n - k)
    quantile (1 when k = n). Vectorised over k.
    """
    from scipy.special import betaincinv

    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n!r}")
    k = np.asarray(k, dtype=np.float64)
    if np.any((k < 0) | (k > n)):
        raise ValueError(f"k must lie in [0, n = {n}]")
    with np.errstate(all="ignore"):
        lo = np.where(k > 0, betaincinv(k, n - k + 1.0, alpha / 2.0), 0.0)
        hi = np.where(k < n, betaincinv(k + 1.0, n - k, 1.0 - alpha / 2.0), 1.0)
    return lo, hi


def epsilon_lower_bound(k_num: np.ndarray | int, n_num: int, k_den: np.ndarray | int, n_den: int,
                        alpha: float, delta: float = 0.0) -> np.ndarray:
    """ln((TPR_lo - delta) / FPR_hi) from counts, floored at 0 (vectorised over the counts).

    ``k_num`` of ``n_num`` runs in the numerator world and ``k_den`` of ``n_den`` in the other
    fell in the event; the Clopper-Pearson ends are taken at level 1 - alpha (two-sided).
    """
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    tpr_lo, _ = clopper_pearson(k_num, n_num, alpha)
    _, fpr_hi = clopper_pearson(k_den, n_den, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.log(np.maximum(tpr_lo - delta, 0.0) / fpr_hi)
    return np.maximum(np.nan_to_num(eps, nan=0.0, neginf=0.0), 0.0)


def _counts_above(sorted_scores: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Number of scores strictly above each threshold."""
    return sorted_scores.size - np.searchsorted(sorted_scores, thresholds, side="right")


def _candidates(n0: int, n1: int, k0: np.ndarray, k1: np.ndarray) -> list[tuple[str, str, np.ndarray, np.ndarray, int, int]]:
    """The four tests per threshold: (direction, numerator, k_num, k_den, n_num, n_den)."""
    return [("above", "D'", k1, k0, n1, n0), ("above", "D", k0, k1, n0, n1),
            ("below", "D'", n1 - k1, n0 - k0, n1, n0), ("below", "D", n0 - k0, n1 - k1, n0, n1)]


def audit(scores_d: np.ndarray, scores_d_prime: np.ndarray, delta: float = 0.0, alpha: float = 0.05,
          select_fraction: float = 0.5, select_alpha: float | None = None) -> AuditResult:
    """Clopper-Pearson lower bound on epsilon from scores of independent runs on D and D'.

    The first ``select_fraction`` of each sample chooses the threshold and the direction that
    maximise the bound there, computed at the stricter level ``select_alpha`` (default alpha / 100:
    it steers the choice away from far-tail thresholds whose few hits are mostly luck, which makes
    the result less variable; any choice keeps the bound valid). The rest evaluates that one test.
    The samples must be i.i.d. and their order independent of their values (e.g. runs in the order
    they were drawn).
    """
    s0 = np.asarray(scores_d, dtype=np.float64).ravel()
    s1 = np.asarray(scores_d_prime, dtype=np.float64).ravel()
    if not 0.0 < select_fraction < 1.0:
        raise ValueError(f"select_fraction must be in (0, 1), got {select_fraction!r}")
    if not (np.all(np.isfinite(s0)) and np.all(np.isfinite(s1))):
        raise ValueError("scores must be finite")
    select_alpha = alpha / 100.0 if select_alpha is None else select_alpha
    m0, m1 = int(s0.size * select_fraction), int(s1.size * select_fraction)
    if min(m0, m1, s0.size - m0, s1.size - m1) < 1:
        raise ValueError(f"too few samples to split: {s0.size} and {s1.size}")
    sel0, sel1 = np.sort(s0[:m0]), np.sort(s1[:m1])
    ev0, ev1 = np.sort(s0[m0:]), np.sort(s1[m1:])

    pooled = np.unique(np.concatenate([sel0, sel1]))
    if pooled.size > MAX_THRESHOLDS:
        pooled = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, MAX_THRESHOLDS)))
    k0, k1 = _counts_above(sel0, pooled), _counts_above(sel1, pooled)
    best = (-1.0, 0, 0)
    for c, (_, _, k_num, k_den, n_num, n_den) in enumerate(_candidates(m0, m1, k0, k1)):
        eps = epsilon_lower_bound(k_num, n_num, k_den, n_den, select_alpha, delta)
        i = int(np.argmax(eps))
        if eps[i] > best[0]:
            best = (float(eps[i]), c, i)
    _, c, i = best
    t = float(pooled[i])
    n0, n1 = ev0.size, ev1.size
    e0, e1 = _counts_above(ev0, np.array([t])), _counts_above(ev1, np.array([t]))
    direction, numerator, k_num, k_den, n_num, n_den = _candidates(n0, n1, e0, e1)[c]
    eps = float(epsilon_lower_bound(k_num, n_num, k_den, n_den, alpha, delta)[0])
    return AuditResult(eps_lower=eps, threshold=t, tpr=float(k_num[0]) / n_num, fpr=float(k_den[0]) / n_den,
                       samples=(n0, n1), direction=direction, numerator=numerator, alpha=alpha, delta=delta)
