"""PATE's data-dependent accounting (privcore/accounting/pate_dd.py): labelled, never the guarantee.

Independent checks: hand-computed union bounds, Theorem 6 evaluated directly from its formula in
the test, exact Renyi divergences of two-class GNMax on every neighbour (the bound must cover
them), enumeration of every histogram within distance d (the smooth-sensitivity range), and the
data-dependent epsilon never above the data-independent one (equal at the worst q).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import norm

from privcore.accounting.pate import gnmax_epsilon
from privcore.accounting.pate_dd import (
    ORDERS,
    confident_gnmax_data_dependent,
    _local_sensitivity_gnmax,
    _local_sensitivity_threshold,
    _theorem6,
    crossover_logq,
    dd_rdp,
    gnmax_logq,
    gnmax_logq_range,
    gnss_rdp,
    rdp_to_epsilon,
    threshold_rdp,
)


def test_union_bound_hand_checked():
    # votes (10, 0), sigma 1: q <= Pr[N(0, 2) >= 10] = erfc(5)/2 = 7.6873e-12
    assert math.exp(float(gnmax_logq(np.array([10.0, 0.0]), 1.0))) == pytest.approx(0.5 * math.erfc(5.0), rel=1e-9)
    # three classes, gaps 4 and 6 at sigma 2: erfc(1)/2 + erfc(1.5)/2
    want = 0.5 * math.erfc(1.0) + 0.5 * math.erfc(1.5)
    assert math.exp(float(gnmax_logq(np.array([2.0, 6.0, 0.0]), 2.0))) == pytest.approx(want, rel=1e-9)
    # all tied: the union bound (3 x 1/2) is capped at 1 - 1/C
    assert math.exp(float(gnmax_logq(np.array([5.0, 5.0, 5.0, 5.0]), 3.0))) == pytest.approx(0.75)


def _theorem6_direct(q: float, sigma: float, lam: float) -> float:
    """Papernot et al. (2018) Theorem 6, with mu_2 = sigma sqrt(log 1/q), mu_1 = mu_2 + 1, written out plainly."""
    mu2 = sigma * math.sqrt(math.log(1.0 / q))
    mu1 = mu2 + 1.0
    e1, e2 = mu1 / sigma ** 2, mu2 / sigma ** 2
    a = (1.0 - q) / (1.0 - (q * math.exp(e2)) ** ((mu2 - 1.0) / mu2))
    b = math.exp(e1) / q ** (1.0 / (mu1 - 1.0))
    return math.log((1.0 - q) * a ** (lam - 1.0) + q * b ** (lam - 1.0)) / (lam - 1.0)


@pytest.mark.parametrize("sigma,lam,q", [(10.0, 5.0, 1e-8), (40.0, 20.0, 1e-30), (5.0, 2.0, 1e-4)])
def test_theorem6_against_its_formula(sigma, lam, q):
    got = float(dd_rdp(np.array(math.log(q)), sigma, lam))
    assert math.log(q) < crossover_logq(sigma, lam)  # in the data-dependent range
    assert got == pytest.approx(min(_theorem6_direct(q, sigma, lam), lam / sigma ** 2), rel=1e-9)
    assert got < lam / sigma ** 2


@pytest.mark.parametrize("sigma", [2.0, 10.0, 40.0, 150.0])
@pytest.mark.parametrize("lam", [1.5, 4.0, 20.0, 100.0])
def test_bounded_by_data_independent_equal_at_worst_and_non_decreasing(sigma, lam):
    indep = lam / sigma ** 2
    logq = -np.logspace(-4, 5, 4000)[::-1] * 1.0  # log q from -1e5 up to -1e-4, increasing
    f = dd_rdp(logq, sigma, lam)
    assert np.all(f <= indep * (1 + 1e-12)) and np.all(f >= 0)
    assert np.all(np.diff(f) >= -1e-12 * indep)  # non-decreasing in q (what the smooth sensitivity needs)
    assert float(dd_rdp(np.array(math.log(0.5)), sigma, lam)) == pytest.approx(indep)  # the worst q
    assert float(dd_rdp(np.array(-np.inf), sigma, lam)) == 0.0


def _bernoulli_renyi(x: float, y: float, lam: float) -> float:
    """D_lam(Bern(Phi(x)) || Bern(Phi(y))) in log space (Phi(-x) = 1 - Phi(x) without cancellation)."""
    a = lam * norm.logcdf(x) + (1 - lam) * norm.logcdf(y)
    b = lam * norm.logcdf(-x) + (1 - lam) * norm.logcdf(-y)
    return float(np.logaddexp(a, b)) / (lam - 1)


@pytest.mark.parametrize("sigma,teachers", [(3.0, 40), (6.0, 60)])
def test_two_class_gnmax_exact_divergences_are_covered(sigma, teachers):
    """Two classes: Pr[answer 0] = Phi((n_0 - n_1) / (sqrt 2 sigma)) exactly; every neighbour (one vote moved)."""
    def p0(n0):
        return norm.cdf((2 * n0 - teachers) / (math.sqrt(2) * sigma))

    checked = 0
    for n0 in range(teachers // 2 + 1, teachers + 1):
        logq = float(gnmax_logq(np.array([n0, teachers - n0], dtype=float), sigma))
        for lam in (2.0, 5.0, 12.0):
            bound = float(dd_rdp(np.array(logq), sigma, lam))
            for m0 in (n0 - 1, n0 + 1):
                if 0 <= m0 <= teachers:
                    d = _bernoulli_renyi(p0(n0), p0(m0), lam)
                    assert d <= bound * (1 + 1e-9) + 1e-15, (n0, m0, lam, d, bound)
                    checked += 1
    assert checked > 50


def test_threshold_cost_two_outcomes():
    s1 = 20.0
    # p = 1/2 (top count at the threshold): the worst case, data-independent lambda / (2 s1^2)
    assert float(threshold_rdp(np.array(math.log(0.5)), s1, 8.0)) == pytest.approx(8.0 / (2 * s1 ** 2))
    # far above the threshold: nearly free; symmetric in answered / not answered
    hi = float(threshold_rdp(np.array(norm.logcdf(10.0)), s1, 8.0))
    lo = float(threshold_rdp(np.array(norm.logcdf(-10.0)), s1, 8.0))
    assert hi == pytest.approx(lo, rel=1e-6) and hi < 1e-3 * 8.0 / (2 * s1 ** 2)


def _histograms(teachers, classes):
    for cut in itertools.combinations(range(teachers + classes - 1), classes - 1):
        parts, prev = [], -1
        for c in cut + (teachers + classes - 1,):
            parts.append(c - prev - 1)
            prev = c
        yield np.array(parts, dtype=float)


@pytest.mark.parametrize("sigma", [0.7, 2.0])
def test_logq_range_covers_every_histogram_within_distance(sigma):
    teachers, classes = 9, 3
    all_h = list(_histograms(teachers, classes))
    for h in ([6.0, 2.0, 1.0], [9.0, 0.0, 0.0], [4.0, 4.0, 1.0]):
        h = np.array(h)
        for d in range(0, 6):
            lo, hi = gnmax_logq_range(h, sigma, d)
            for g in all_h:
                if np.maximum(g - h, 0).sum() <= d:  # teachers changed
                    lq = float(gnmax_logq(g, sigma))
                    assert float(lo) - 1e-12 <= lq <= float(hi) + 1e-12, (h, g, d)


def test_gnss_cost_hand_checked_and_range():
    want = 10 * math.exp(0.02) / 25 + (0.1 - 0.5 * math.log(1 - 0.2)) / 9
    assert gnss_rdp(0.01, 5.0, 10.0) == pytest.approx(want)
    with pytest.raises(ValueError, match="order must be in"):
        gnss_rdp(0.1, 5.0, 6.0)


def _votes(seed, queries, teachers, classes, agreement):
    rng = np.random.default_rng(seed)
    return np.stack([rng.multinomial(teachers, rng.dirichlet(np.full(classes, agreement))) for _ in range(queries)]).astype(float)


@pytest.mark.parametrize("sigma,budget", [(3.0, 10), (30.0, 100), (150.0, 1000)])
def test_data_dependent_never_exceeds_data_independent(sigma, budget):
    votes = _votes(0, 300, 100, 10, 0.2)
    s1 = 3.75 * sigma
    rng = np.random.default_rng(1)
    answered = votes.max(1) + s1 * rng.standard_normal((3, 300)) >= 80.0
    dd = confident_gnmax_data_dependent(votes, answered, sigma, s1, 80.0, budget, 1e-5)
    assert 0.0 <= dd.epsilon <= dd.epsilon_independent
    # the data-independent value on the grid of orders is the guarantee's, up to the grid
    want = gnmax_epsilon(sigma, s1, budget, 1e-5, "corrected")
    assert want * (1 - 1e-6) <= dd.epsilon_independent <= want * 1.02
    assert dd.smooth_sensitivity >= 0.0 and dd.epsilon_published >= dd.epsilon


def test_equal_to_data_independent_at_the_worst_votes():
    # every query tied over all classes, top count exactly at the threshold: q is at its worst in both parts
    votes = np.full((50, 4), 10.0)
    dd = confident_gnmax_data_dependent(votes, np.ones((2, 50), bool), 5.0, 18.75, 10.0, 20, 1e-5)
    assert dd.epsilon == pytest.approx(dd.epsilon_independent, rel=1e-9)
    rdp = [20 * (a / 25.0 + a / (2 * 18.75 ** 2)) for a in ORDERS]
    assert dd.epsilon == pytest.approx(rdp_to_epsilon(np.array(rdp), 1e-5)[0], rel=1e-9)


def test_unanimous_teachers_cost_less_and_abstentions_cost_only_the_check():
    votes = np.zeros((40, 10))
    votes[:, 3] = 100.0  # unanimous
    dd = confident_gnmax_data_dependent(votes, np.ones((1, 40), bool), 10.0, 37.5, 80.0, 100, 1e-5)
    assert dd.epsilon < 0.5 * dd.epsilon_independent
    none = confident_gnmax_data_dependent(votes, np.zeros((1, 40), bool), 10.0, 37.5, 80.0, 100, 1e-5)
    assert none.epsilon <= dd.epsilon


def test_bad_inputs():
    with pytest.raises(ValueError, match="answered must have one column per query"):
        confident_gnmax_data_dependent(np.ones((3, 2)), np.ones((1, 4), bool), 1.0, 2.0, 1.0, 5, 1e-5)
    with pytest.raises(ValueError, match="delta"):
        confident_gnmax_data_dependent(np.ones((3, 2)), np.ones((1, 3), bool), 1.0, 2.0, 1.0, 5, 0.0)
    with pytest.raises(ValueError, match="order"):
        dd_rdp(np.array(-1.0), 1.0, 1.0)


# ---------------------------------------------------------------- review: the smooth sensitivity itself


def _neighbours(h):
    """Histograms one teacher away (one vote moved from class a to class b)."""
    for a in range(len(h)):
        for b in range(len(h)):
            if a != b and h[a] > 0:
                g = list(h)
                g[a] -= 1
                g[b] += 1
                yield tuple(g)


def _exact_cost(h, sigma, lam):
    return float(dd_rdp(np.array(float(gnmax_logq(np.array(h, dtype=float), sigma))), sigma, lam))


@pytest.mark.parametrize("teachers,classes,sigma,lam", [(8, 3, 1.0, 4.0), (7, 4, 1.0, 3.0)])
def test_gnmax_smooth_sensitivity_covers_the_exact_one_by_enumeration(teachers, classes, sigma, lam):
    """Independent: every histogram's exact local sensitivity (max over its neighbours), the max of
    it within distance d, weighted by e^(-beta d): the method's bound must be at least that."""
    hs = [tuple(int(v) for v in h) for h in _histograms(teachers, classes)]
    cost = {h: _exact_cost(h, sigma, lam) for h in hs}
    ls = {h: max(abs(cost[h] - cost[g]) for g in _neighbours(h)) for h in hs}
    beta = 0.4 / lam
    for h in hs[::4]:
        exact = max(math.exp(-beta * d) * max(ls[g] for g in hs if sum(max(x - y, 0) for x, y in zip(g, h)) <= d)
                    for d in range(teachers + 1))
        got = float(_local_sensitivity_gnmax(np.array([h], dtype=float), sigma, lam, beta, teachers)[0])
        assert exact <= got * (1 + 1e-12) + 1e-15, (h, exact, got)


@pytest.mark.parametrize("teachers,classes,sigma,lam", [(40, 2, 3.0, 6.0), (30, 3, 2.0, 4.0), (60, 2, 5.0, 20.0)])
def test_smooth_sensitivity_is_beta_smooth(teachers, classes, sigma, lam):
    """GNSS (Theorem 23) needs SS(D) <= e^beta SS(D') for every neighbour: checked on every histogram."""
    hs = [tuple(int(v) for v in h) for h in _histograms(teachers, classes)]
    index = {h: i for i, h in enumerate(hs)}
    beta = 0.4 / lam
    ss = _local_sensitivity_gnmax(np.array(hs, dtype=float), sigma, lam, beta, teachers)
    top = np.array(hs).max(axis=1)
    ss_check = _local_sensitivity_threshold(top, teachers, 0.7 * teachers, 3.75 * sigma, lam, beta)
    for s in (ss, ss_check):
        ratio = max(s[i] / s[index[g]] for i, h in enumerate(hs) for g in _neighbours(h) if s[index[g]] > 0)
        assert ratio <= math.exp(beta) * (1 + 1e-9), ratio


def _gnmax_output_probs(h, sigma):
    """Exact Pr[argmax_i (h_i + N(0, sigma^2)) = i] by quadrature (no union bound)."""
    x = np.linspace(min(h) - 12 * sigma, max(h) + 12 * sigma, 20001)
    out = []
    for i in range(len(h)):
        f = norm.pdf(x, h[i], sigma)
        for j in range(len(h)):
            if j != i:
                f = f * norm.cdf(x, h[j], sigma)
        out.append(f.sum())
    p = np.array(out)
    return p / p.sum()


@pytest.mark.parametrize("sigma", [1.0, 1.5])
def test_three_class_gnmax_exact_divergences_are_covered(sigma):
    """Three classes (the union bound is not exact): D_lam(M(D) || M(D')) on every neighbour, from
    the exact output distributions, never exceeds the data-dependent bound at D."""
    checked = 0
    for h in [(12, 0, 0), (11, 1, 0), (10, 1, 1), (9, 2, 1), (8, 4, 0)]:
        p = _gnmax_output_probs(h, sigma)
        bound = {lam: float(dd_rdp(np.array(float(gnmax_logq(np.array(h, dtype=float), sigma))), sigma, lam))
                 for lam in (2.0, 4.0, 8.0)}
        for g in _neighbours(h):
            pg = _gnmax_output_probs(g, sigma)
            for lam, b in bound.items():
                d = float(np.log(np.sum(p ** lam * pg ** (1 - lam)))) / (lam - 1)
                assert d <= b * (1 + 1e-6) + 1e-12, (h, g, lam, d, b)
                checked += 1
    assert checked > 50


def _crossover_one_by_one(sigma: float, order: float) -> float:
    """The bisection of crossover_logq for one order alone (as it was before the orders were batched)."""
    indep = order / sigma ** 2

    def good(logq: float) -> bool:
        b, ok = _theorem6(np.array(logq), sigma, order)
        return bool(ok) and float(b) < indep

    lo = -1.0
    while not good(lo) and lo > -1e7:
        lo *= 2.0
    if not good(lo):
        return -math.inf
    hi = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if good(mid) else (lo, mid)
        if hi - lo < 1e-12 * max(1.0, abs(lo)):
            break
    return lo


@pytest.mark.parametrize("sigma", [0.5, 3.0, 17.3, 60.0, 400.0])
def test_batched_crossovers_equal_one_bisection_per_order(sigma):
    got = [crossover_logq(sigma, a) for a in ORDERS] + [crossover_logq(sigma, 7.77)]  # 7.77: not in ORDERS
    want = [_crossover_one_by_one(sigma, a) for a in ORDERS] + [_crossover_one_by_one(sigma, 7.77)]
    assert any(math.isfinite(w) for w in want) or sigma < 1
    for a, g, w in zip(list(ORDERS) + [7.77], got, want):
        assert g == w or abs(g - w) <= 1e-9 * max(1.0, abs(w)), (sigma, a, g, w)
