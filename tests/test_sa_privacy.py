"""Exact privacy of subsample-and-aggregate's vote sampler, by enumeration.

One query releases label y with probability prop. to exp(beta * votes_y). Changing one training
example moves at most one teacher's vote from a class a to a class b. We enumerate every vote
histogram of T teachers over C classes (all compositions of T into C non-negative parts) and every
such move, compute both output distributions exactly (float64, log-sum-exp) and measure:

* the worst log-probability ratio (pure-DP epsilon of one query): at most 2 beta, and close to
  2 beta for some histogram when beta * T is large: the factor 2 of the SPEC correction is real;
* the range of the privacy loss (bounded-range property, width <= 2 beta);
* Renyi divergences (the beta^2 / 2 zCDP claim behind the delta > 0 calibration);
* the exact delta of B repeated queries for the paper's calibration (a lower bound on its true delta).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
import pytest
from scipy.special import logsumexp

from privcore import calibrate
from privcore.accounting.bounded_range import br_composition_delta
from privcore.types import PrivacyBudget, Problem

T_RANGE = range(2, 7)
C_RANGE = range(2, 5)


@lru_cache(maxsize=None)
def neighbour_pairs(t: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """All (histogram, neighbour) pairs: every composition of t into c parts, every vote move a -> b."""
    hists = [h for h in itertools.product(range(t + 1), repeat=c) if sum(h) == t]
    # Sanity: the number of weak compositions is C(t + c - 1, c - 1).
    assert len(hists) == math.comb(t + c - 1, c - 1)
    left, right = [], []
    for h in hists:
        for a in range(c):
            if h[a] == 0:
                continue
            for b in range(c):
                if b == a:
                    continue
                h2 = list(h)
                h2[a] -= 1
                h2[b] += 1
                left.append(h)
                right.append(h2)
    return np.array(left, dtype=np.float64), np.array(right, dtype=np.float64)


def log_probs(hists: np.ndarray, beta: float) -> np.ndarray:
    s = beta * hists
    return s - logsumexp(s, axis=1, keepdims=True)


def privacy_losses(t: int, c: int, beta: float) -> np.ndarray:
    """log P(y | D) - log P(y | D') for every neighbouring pair (rows) and output y (columns)."""
    v, w = neighbour_pairs(t, c)
    return log_probs(v, beta) - log_probs(w, beta)


def worst_ratio(beta: float, ts=T_RANGE, cs=C_RANGE) -> float:
    """Largest |log P(y|D) / P(y|D')| over all T, C, histograms, moves and outputs."""
    return max(float(np.abs(privacy_losses(t, c, beta)).max()) for t in ts for c in cs)


BETAS = [1e-3, 0.01, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0]


def test_enumeration_covers_both_directions():
    # Every move has its reverse in the list, so max |loss| = max loss.
    for t in T_RANGE:
        for c in C_RANGE:
            v, w = neighbour_pairs(t, c)
            fwd = {(tuple(a), tuple(b)) for a, b in zip(v, w)}
            assert {(b, a) for a, b in fwd} == fwd


@pytest.mark.parametrize("beta", BETAS)
def test_one_query_is_2beta_dp_and_2beta_bounded_range(beta):
    for t in T_RANGE:
        for c in C_RANGE:
            loss = privacy_losses(t, c, beta)
            assert np.abs(loss).max() <= 2 * beta + 1e-12
            width = loss.max(axis=1) - loss.min(axis=1)
            assert width.max() <= 2 * beta + 1e-12
    # ... and strictly more than beta: the paper's claim (beta-DP) is false for every beta > 0.
    assert worst_ratio(beta) > beta * (1 + 1e-4)


@pytest.mark.parametrize("beta", [1.0, 2.0, 5.0])
def test_factor_two_is_reached(beta):
    """With beta * T large, one histogram (T - 1 votes on b, 1 on a) gets within 5 % of 2 beta."""
    worst = float(np.abs(privacy_losses(6, 2, beta)).max())
    assert worst >= 1.9 * beta
    assert worst <= 2 * beta + 1e-12


def test_worst_ratio_grows_towards_two_beta_with_t():
    beta = 0.5
    ratios = [float(np.abs(privacy_losses(t, 3, beta)).max()) / beta for t in T_RANGE]
    assert all(x < y for x, y in zip(ratios, ratios[1:])), ratios
    assert ratios[0] > 1.0 and ratios[-1] < 2.0
    # Closed form of the extreme pair (1, T-1) -> (0, T) at C = 2, output a:
    # beta + log((1 + e^{beta T}) / (e^beta + e^{beta (T-1)})).
    t = 40
    closed = beta + math.log((1 + math.exp(beta * t)) / (math.exp(beta) + math.exp(beta * (t - 1))))
    v = np.array([[1.0, t - 1.0]])
    w = np.array([[0.0, float(t)]])
    assert (log_probs(v, beta) - log_probs(w, beta))[0, 0] == pytest.approx(closed, rel=1e-12)
    assert closed > 1.99 * beta


@pytest.mark.parametrize("eps", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("budget", [1, 2, 5, 10])
def test_pure_dp_corrected_meets_and_paper_exceeds(eps, budget):
    """delta = 0: B queries of a pure-DP mechanism compose to B times the worst one-query ratio
    (the same worst output repeated), so B * worst ratio is the exact total epsilon."""
    pb = Problem(budget=budget)
    corrected = calibrate("subsample_aggregate", PrivacyBudget(eps, 0.0), pb, "corrected")
    paper = calibrate("subsample_aggregate", PrivacyBudget(eps, 0.0), pb, "paper")
    tight = calibrate("subsample_aggregate", PrivacyBudget(eps, 0.0), pb, "tight")
    assert corrected.beta == pytest.approx(eps / (2 * budget), rel=1e-15)
    assert paper.beta == pytest.approx(eps / budget, rel=1e-15)
    assert tight.beta <= corrected.beta * (1 + 1e-15)
    assert worst_ratio(corrected.beta) * budget <= eps * (1 + 1e-12)
    assert worst_ratio(tight.beta) * budget <= eps * (1 + 1e-12)
    assert worst_ratio(paper.beta) * budget > eps * 1.05
    # The reported per-query epsilon is the true (2 beta) one, not the paper's beta.
    assert corrected.per_query_epsilon == pytest.approx(2 * corrected.beta)
    assert worst_ratio(corrected.beta) <= corrected.per_query_epsilon + 1e-12


@pytest.mark.parametrize("beta", [0.05, 0.3, 1.0, 3.0])
def test_renyi_divergence_within_zcdp_bound(beta):
    """The delta > 0 calibration rests on: the vote sampler is (beta^2 / 2)-zCDP, i.e.
    D_alpha(P || P') <= alpha beta^2 / 2 for every alpha > 1 and neighbouring pair."""
    rho = beta * beta / 2
    alphas = np.array([1.01, 1.1, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 100.0])
    for t in T_RANGE:
        for c in C_RANGE:
            v, w = neighbour_pairs(t, c)
            lp, lq = log_probs(v, beta), log_probs(w, beta)
            for alpha in alphas:
                d = logsumexp(alpha * lp + (1 - alpha) * lq, axis=1) / (alpha - 1)
                assert d.max() <= alpha * rho * (1 + 1e-9) + 1e-14, (t, c, alpha)


def exact_delta_repeated(v: np.ndarray, w: np.ndarray, beta: float, budget: int, eps: float) -> float:
    """Exact delta(eps) of `budget` independent queries all on histogram v vs w (a lower bound on
    the worst case over all query sequences): sum over output tuples of (P - e^eps Q)_+."""
    lp, lq = log_probs(v[None], beta)[0], log_probs(w[None], beta)[0]
    total = 0.0
    for ys in itertools.product(range(len(v)), repeat=budget):
        a = sum(lp[y] for y in ys)
        b = sum(lq[y] for y in ys)
        total += max(0.0, math.exp(a) - math.exp(eps + b))
    return total


def worst_exact_delta(beta: float, budget: int, eps: float) -> float:
    out = 0.0
    for t in (2, 4, 6):
        for c in (2, 3):
            v, w = neighbour_pairs(t, c)
            for a, b in zip(v, w):
                out = max(out, exact_delta_repeated(a, b, beta, budget, eps), exact_delta_repeated(b, a, beta, budget, eps))
    return out


@pytest.mark.parametrize("eps,delta,budget", [(1.0, 1e-5, 1), (2.0, 1e-6, 2), (1.0, 1e-3, 3)])
def test_approx_dp_paper_too_optimistic_corrected_meets(eps, delta, budget):
    pb = Problem(budget=budget)
    paper = calibrate("subsample_aggregate", PrivacyBudget(eps, delta), pb, "paper")
    corrected = calibrate("subsample_aggregate", PrivacyBudget(eps, delta), pb, "corrected")
    assert paper.beta == pytest.approx(eps / budget)  # the eps/B branch wins at small B
    assert worst_exact_delta(paper.beta, budget, eps) > delta
    # corrected (pure branch eps/(2B) wins here): the exact delta of these sequences is 0.
    assert corrected.beta == pytest.approx(eps / (2 * budget))
    assert worst_exact_delta(corrected.beta, budget, eps) <= delta


EPS_DELTA_B = [(eps, delta, b) for eps in (0.1, 1.0, 4.0) for delta in (1e-10, 1e-5, 1e-3) for b in (1, 10, 100, 1000)]


@pytest.mark.parametrize("eps,delta,budget", EPS_DELTA_B)
def test_approx_dp_corrected_satisfies_zcdp_and_tight_is_larger(eps, delta, budget):
    pb = Problem(budget=budget)
    corrected = calibrate("subsample_aggregate", PrivacyBudget(eps, delta), pb, "corrected").beta
    tight = calibrate("subsample_aggregate", PrivacyBudget(eps, delta), pb, "tight").beta
    paper = calibrate("subsample_aggregate", PrivacyBudget(eps, delta), pb, "paper").beta
    rho = budget * corrected ** 2 / 2
    zcdp_eps = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    pure_eps = 2 * corrected * budget
    # Either branch: the guarantee it relies on meets the target.
    assert min(zcdp_eps, pure_eps) <= eps * (1 + 1e-12)
    # and corrected is the larger of the two branches (not needlessly small).
    beta_zcdp = math.sqrt(2 / budget) * (math.sqrt(math.log(1 / delta) + eps) - math.sqrt(math.log(1 / delta)))
    assert corrected == pytest.approx(max(eps / (2 * budget), beta_zcdp), rel=1e-9)
    assert paper == pytest.approx(max(eps / budget, beta_zcdp), rel=1e-9)
    assert tight >= corrected * (1 - 1e-12)
    # tight stays within its target under the optimal BR composition (each query 2 beta-BR).
    assert br_composition_delta(2 * tight, budget, eps) <= delta * (1 + 1e-9)


def test_paper_delta_note_states_the_delta_really_reached():
    from privcore import calibrate
    from privcore.types import PrivacyBudget, Problem

    small = calibrate("subsample_aggregate", PrivacyBudget(1.0, 1e-5), Problem(budget=10), "paper")
    assert "delta = 0.000102" in small.notes[0] and "10.2 times" in small.notes[0]
    large = calibrate("subsample_aggregate", PrivacyBudget(1.0, 1e-5), Problem(budget=100), "paper")
    assert "target holds" in large.notes[0]
