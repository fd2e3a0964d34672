"""Attack statistics: ROC (for log-log plots), AUC, TPR at a fixed FPR, attacker advantage, and an
empirical epsilon lower bound with Clopper-Pearson intervals.

Conventions: a *score* is higher for "member"; ``in_scores`` come from releases whose training set
held the target, ``out_scores`` from releases whose training set held a fresh example in its place
(replace-one neighbours). Everything here is plain numpy on 1-D float arrays.

The epsilon bound (Jagielski et al. 2020, Nasr et al. 2021). Any test of "member" vs "non-member"
on an (eps, delta)-DP release has FPR + e^eps FNR >= 1 - delta and FNR + e^eps FPR >= 1 - delta, so

    eps >= max( log((1 - delta - FNR) / FPR), log((1 - delta - FPR) / FNR) ).

With FPR and FNR replaced by one-sided Clopper-Pearson upper bounds (each at level alpha/2) the
result is a lower bound on the true epsilon that holds with probability >= 1 - alpha over i.i.d.
trials. The threshold is chosen on one half of the trials and the bound evaluated on the other half,
so choosing it does not bias the bound.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ..tradeoff import dp_max_tpr, gaussian_mu, gaussian_tradeoff_tpr

__all__ = ["Roc", "EpsilonBound", "roc", "auc", "tpr_at_fpr", "advantage", "clopper_pearson",
           "epsilon_from_rates", "epsilon_lower_bound", "dp_region_tpr", "gaussian_tradeoff_tpr",
           "gaussian_mu", "FPR_GRID"]

#: The FPR grid a stored ROC is sampled on (log-spaced, 1e-4 .. 1): enough for a log-log plot.
FPR_GRID: tuple[float, ...] = tuple(float(v) for v in np.unique(np.concatenate(
    [np.logspace(-4, 0, 81), [1e-3, 1e-2, 0.1, 0.5]])))


def _rate(name: str, value: object, *, high_open: bool = False) -> float:
    """A rate (or delta) in [0, 1] ([0, 1) with ``high_open``), as a float; ValueError naming it otherwise
    (a negative FPR gave an infinite epsilon, a NaN one 0)."""
    top = "1)" if high_open else "1]"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) \
            or not (0.0 <= float(value) < 1.0 if high_open else 0.0 <= float(value) <= 1.0):
        raise ValueError(f"{name} must be a number in [0, {top}, got {value!r}")
    return float(value)


def _scores(name: str, a: object) -> np.ndarray:
    try:
        arr = np.asarray(a, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers, got {str(a)[:40]!r}") from None
    if arr.size == 0:
        raise ValueError(f"{name} must hold at least one score")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite numbers (found NaN or infinity)")
    return arr


def _curve(in_scores: np.ndarray, out_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact ROC: (fpr, tpr) at every distinct threshold, from (0, 0) to (1, 1), FPR non-decreasing."""
    thr = np.unique(np.concatenate([in_scores, out_scores]))[::-1]  # decreasing thresholds
    # Predict "member" when score >= t.
    tp = len(in_scores) - np.searchsorted(np.sort(in_scores), thr, side="left")
    fp = len(out_scores) - np.searchsorted(np.sort(out_scores), thr, side="left")
    tpr = np.concatenate([[0.0], tp / len(in_scores)])
    fpr = np.concatenate([[0.0], fp / len(out_scores)])
    return fpr, tpr


@dataclass(frozen=True)
class Roc:
    """An ROC curve sampled on :data:`FPR_GRID` (tpr[i] = best TPR at FPR <= fpr[i]) plus its summaries."""

    fpr: tuple[float, ...]
    tpr: tuple[float, ...]
    auc: float
    tpr_at_0_1: float  # TPR at FPR <= 0.1 %
    tpr_at_1: float    # TPR at FPR <= 1 %
    advantage: float   # max TPR - FPR (Yeom et al.'s membership advantage)
    n_in: int
    n_out: int

    def to_dict(self) -> dict:
        out = asdict(self)
        out["fpr"], out["tpr"] = list(self.fpr), list(self.tpr)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "Roc":
        return cls(**{**d, "fpr": tuple(d["fpr"]), "tpr": tuple(d["tpr"])})


def roc(in_scores: object, out_scores: object) -> Roc:
    """ROC, AUC, TPR at 0.1 % and 1 % FPR and advantage of a score (higher = member)."""
    a, b = _scores("in_scores", in_scores), _scores("out_scores", out_scores)
    fpr, tpr = _curve(a, b)
    grid = np.asarray(FPR_GRID)
    sampled = np.array([tpr[fpr <= g + 1e-12].max() for g in grid])
    return Roc(tuple(float(v) for v in grid), tuple(float(v) for v in sampled), auc(a, b),
               tpr_at_fpr(a, b, 1e-3), tpr_at_fpr(a, b, 1e-2), advantage(a, b), int(a.size), int(b.size))


def auc(in_scores: object, out_scores: object) -> float:
    """Area under the ROC: P(in > out) + P(in == out) / 2 (Mann-Whitney, ties count half)."""
    a, b = _scores("in_scores", in_scores), _scores("out_scores", out_scores)
    both = np.concatenate([a, b])
    order = np.argsort(both, kind="mergesort")
    ranks = np.empty(both.size, dtype=np.float64)
    sorted_vals = both[order]
    # average ranks of ties
    _, start, counts = np.unique(sorted_vals, return_index=True, return_counts=True)
    avg = start + (counts + 1) / 2.0
    ranks[order] = np.repeat(avg, counts)
    return float((ranks[: a.size].sum() - a.size * (a.size + 1) / 2.0) / (a.size * b.size))


def tpr_at_fpr(in_scores: object, out_scores: object, max_fpr: float) -> float:
    """Largest TPR of any threshold whose FPR is at most ``max_fpr`` (Carlini et al.'s metric)."""
    max_fpr = _rate("max_fpr", max_fpr)
    fpr, tpr = _curve(_scores("in_scores", in_scores), _scores("out_scores", out_scores))
    return float(tpr[fpr <= max_fpr + 1e-12].max())


def advantage(in_scores: object, out_scores: object) -> float:
    """max over thresholds of TPR - FPR (0 = no better than a coin, 1 = perfect)."""
    fpr, tpr = _curve(_scores("in_scores", in_scores), _scores("out_scores", out_scores))
    return float(max(0.0, (tpr - fpr).max()))


def clopper_pearson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Two-sided exact (Clopper-Pearson) interval for a binomial proportion, k successes of n.

    Each end alone is a one-sided bound at level alpha/2: lower = Beta(alpha/2; k, n-k+1),
    upper = Beta(1-alpha/2; k+1, n-k) (0 and 1 at k = 0 and k = n).
    """
    from scipy.special import betaincinv

    if not (isinstance(n, (int, np.integer)) and n >= 1):
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not (isinstance(k, (int, np.integer)) and 0 <= k <= n):
        raise ValueError(f"k must be an integer in [0, n={n}], got {k!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    lo = 0.0 if k == 0 else float(betaincinv(k, n - k + 1, alpha / 2.0))
    hi = 1.0 if k == n else float(betaincinv(k + 1, n - k, 1.0 - alpha / 2.0))
    return lo, hi


def epsilon_from_rates(fpr: float, fnr: float, delta: float = 0.0) -> float:
    """The smallest eps consistent with a test at (FPR, FNR) under (eps, delta)-DP (0 if none is implied)."""
    fpr, fnr, delta = _rate("fpr", fpr), _rate("fnr", fnr), _rate("delta", delta, high_open=True)
    best = 0.0
    for a, b in ((fnr, fpr), (fpr, fnr)):
        num = 1.0 - delta - a
        if num <= 0.0:
            continue
        best = max(best, math.inf if b <= 0.0 else math.log(num / b))
    return best


@dataclass(frozen=True)
class EpsilonBound:
    """Empirical epsilon from an audit: ``lower`` holds with probability >= ``confidence``.

    ``estimate`` uses the observed rates; ``upper`` the Clopper-Pearson lower ends of the rates
    (may be infinite). ``threshold`` was chosen on ``n_select`` trials per side and the rates
    counted on the other ``n_in`` / ``n_out``.
    """

    lower: float
    estimate: float
    upper: float
    confidence: float
    threshold: float
    fpr: float
    fnr: float
    n_in: int
    n_out: int
    n_select: int
    delta: float

    def to_dict(self) -> dict:
        return {k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> "EpsilonBound":
        return cls(**{k: (math.inf if v == "inf" else v) for k, v in d.items()})


def _bound_at(in_s: np.ndarray, out_s: np.ndarray, t: float, delta: float, alpha: float) -> tuple[float, float, float, int, int]:
    fp = int((out_s >= t).sum())
    fn = int((in_s < t).sum())
    _, fpr_hi = clopper_pearson(fp, out_s.size, alpha)
    _, fnr_hi = clopper_pearson(fn, in_s.size, alpha)
    fpr_lo, _ = clopper_pearson(fp, out_s.size, alpha)
    fnr_lo, _ = clopper_pearson(fn, in_s.size, alpha)
    return epsilon_from_rates(fpr_hi, fnr_hi, delta), epsilon_from_rates(fpr_lo, fnr_lo, delta), \
        epsilon_from_rates(fp / out_s.size, fn / in_s.size, delta), fp, fn


def epsilon_lower_bound(in_scores: object, out_scores: object, delta: float = 0.0, alpha: float = 0.05,
                        split: bool = True) -> EpsilonBound:
    """Empirical epsilon lower bound from i.i.d. audit trials (see the module docstring).

    With ``split`` (default) the threshold maximising the bound on the even-indexed trials is
    applied to the odd-indexed ones; without it the best threshold over all trials is taken (an
    optimistic bound: choosing it uses the same trials).
    """
    a, b = _scores("in_scores", in_scores), _scores("out_scores", out_scores)
    if not 0.0 <= delta < 1.0:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    if split and (a.size < 2 or b.size < 2):
        raise ValueError("a split bound needs at least 2 in-scores and 2 out-scores")
    sel_a, sel_b = (a[0::2], b[0::2]) if split else (a, b)
    ev_a, ev_b = (a[1::2], b[1::2]) if split else (a, b)
    candidates = np.unique(np.concatenate([sel_a, sel_b, [np.inf]]))
    best_t, best = float(candidates[-1]), -1.0
    for t in candidates:
        value = _bound_at(sel_a, sel_b, float(t), delta, alpha)[0]
        if value > best:
            best, best_t = value, float(t)
    lower, upper, estimate, fp, fn = _bound_at(ev_a, ev_b, best_t, delta, alpha)
    return EpsilonBound(lower, estimate, upper, 1.0 - alpha, best_t, fp / ev_b.size, fn / ev_a.size,
                        int(ev_a.size), int(ev_b.size), int(sel_a.size) if split else 0, float(delta))


def dp_region_tpr(fpr: object, epsilon: float, delta: float = 0.0) -> np.ndarray:
    """Largest TPR any test may reach at each FPR against an (eps, delta)-DP release:
    min(1, e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR)) (:func:`privcore.tradeoff.dp_region`). An FPR
    outside [0, 1] is an error (it was clipped into range)."""
    return dp_max_tpr(epsilon, delta, np.asarray(fpr, dtype=np.float64), name="fpr")
